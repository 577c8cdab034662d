"""Alertmanager's configuration as code: rendered file, amtool, routing fixtures, inhibition, bad input."""

import shutil

import pytest
import yaml

from conftest import REPO, run, tree_digest
from dashgen.promtool import run_tool

ALERTMANAGER_YML = "rendered/alertmanager/alertmanager.yml"


def rendered(project) -> dict:
    return yaml.safe_load((project / ALERTMANAGER_YML).read_text())


def build(project, tmp_path, **fields):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(fields))
    return run("build", "--root", str(project), "--config", str(config))


def test_rendered_alertmanager_config_passes_amtool_check_config():
    result = run_tool("amtool", ["check-config", str(REPO / ALERTMANAGER_YML)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and "6 inhibit rules" in result.stdout


def test_missing_amtool_names_the_debian_package(project, tmp_path, monkeypatch):
    from dashgen.promtool import find_binary

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "promtool").symlink_to(find_binary("promtool"))
    monkeypatch.setenv("PATH", str(bin_dir))
    result = run("lint", "--root", str(project))
    assert result.exit_code == 1
    assert "amtool not found on PATH. Install it (Debian package prometheus-alertmanager)" in result.output


@pytest.mark.heavy
def test_lint_runs_amtool_and_fails_on_a_broken_alertmanager_file(project):
    assert run("lint", "--root", str(project)).exit_code == 0
    broken = rendered(project)
    broken["route"]["routes"][0]["receiver"] = "no-such-receiver"
    (project / ALERTMANAGER_YML).write_text(yaml.safe_dump(broken))
    result = run("lint", "--root", str(project))
    assert result.exit_code == 1
    assert 'undefined receiver "no-such-receiver"' in result.output


@pytest.mark.heavy
def test_routing_fixtures_pass_and_catch_a_changed_route(project, tmp_path):
    shutil.copytree(REPO / "tests", project / "tests", ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    # `dashgen test MODULE` runs that module's rule tests (memory's are few) and every routing fixture;
    # the whole rule suite runs in tests/compiler/test_rules.py.
    result = run("test", "memory", "--root", str(project))
    assert result.exit_code == 0, result.output
    assert "PASS    a divergence pages and reaches dashgen act" in result.output
    # Sending info to the channel breaks the fixture that says info goes nowhere, and with it `dashgen test`.
    assert build(project, tmp_path, alertmanager={"info_to_channel": True}).exit_code == 0
    failed = run("test", "memory", "--root", str(project))
    assert failed.exit_code == 1
    assert ("FAILED  info goes nowhere by default: {alertname=\"VerlRewardStagnation\", experiment=\"ppo-7b\", "
            "job=\"verl\", project=\"gsm8k\", severity=\"info\"} goes to channel; expected nowhere") in failed.output
    assert "SUCCESS" in failed.output  # the rule tests still passed: the routing alone failed the run


def test_routes_by_severity_and_groups_by_run(project):
    config = rendered(project)
    route = config["route"]
    assert route["receiver"] == "nowhere" and route["group_by"] == ["project", "experiment"]
    assert (route["group_wait"], route["group_interval"], route["repeat_interval"]) == ("30s", "5m", "4h")
    assert [(r["receiver"], r["matchers"], r.get("continue", False)) for r in route["routes"]] == [
        ("dashgen-act", ['alertname=~"VerlNaNMetrics|VerlTrainingDivergence"'], True),
        ("page", ['severity="critical"'], False),
        ("channel", ['severity="warning"'], False),
        ("nowhere", ['severity="info"'], False),
    ]
    # Placeholders until the config says where to deliver; no secret anywhere.
    assert config["receivers"][:3] == [{"name": "nowhere"}, {"name": "page"}, {"name": "channel"}]
    act = config["receivers"][3]["webhook_configs"][0]
    assert act["url"] == "http://127.0.0.1:9095/alerts"
    assert act["http_config"]["authorization"] == {"type": "Bearer", "credentials_file": "/etc/dashgen/act-token"}


def test_inhibitions_stated_next_to_the_alerts_are_rendered_and_in_the_runbook(project):
    rules = {r["source_matchers"][0]: (r["target_matchers"][0], r["equal"]) for r in rendered(project)["inhibit_rules"]}
    assert rules == {
        'alertname="VerlTrainingDivergence"': (
            'alertname=~"VerlKLSpike|VerlEntropyCollapse|VerlEntropyExplosion|VerlRewardCliff|VerlRewardCollapse"',
            ["project", "experiment"]),
        'alertname="VerlTrainingStalled"': ('alertname="VerlRewardStagnation"', ["project", "experiment"]),
        'alertname="VerlMetricsAbsent"': ('alertname=~"VerlTrainingStalled|VerlRewardStagnation"', ["job", "instance"]),
        'alertname="VerlRunCrashed"': ('alertname=~"VerlTrainingStalled|VerlMetricsAbsent"', ["job", "instance"]),
        'alertname="VerlNonFiniteStepsClose"': ('alertname=~"VerlNonFiniteSteps|VerlNonFiniteStep"',
                                                ["project", "experiment"]),
        'alertname="VerlRunDestroyed"': ('alertname="VerlImplausibleValue"', ["project", "experiment"]),
    }
    runbook = (project / "rendered" / "docs" / "alerts.md").read_text()
    assert "## Routing and inhibition" in runbook
    assert ("| [VerlTrainingDivergence](#verltrainingdivergence) | [VerlKLSpike](#verlklspike), "
            "[VerlEntropyCollapse](#verlentropycollapse), [VerlEntropyExplosion](#verlentropyexplosion), "
            "[VerlRewardCliff](#verlrewardcliff), [VerlRewardCollapse](#verlrewardcollapse) | project, experiment |"
            ) in runbook


def test_prometheus_config_points_at_alertmanager(project, tmp_path):
    assert build(project, tmp_path, alertmanager={"address": "alertmanager.internal:9093"}).exit_code == 0
    prometheus = yaml.safe_load((project / "rendered" / "prometheus" / "prometheus.yml").read_text())
    assert prometheus["alerting"] == {"alertmanagers": [{"static_configs": [{"targets": ["alertmanager.internal:9093"]}]}]}


def test_receivers_are_filled_through_the_config(project, tmp_path):
    page = {"pagerduty_configs": [{"routing_key_file": "/etc/alertmanager/pagerduty-key"}]}
    channel = {"slack_configs": [{"api_url_file": "/etc/alertmanager/slack-url", "channel": "#verl-training",
                                  "send_resolved": True}]}
    result = build(project, tmp_path, alertmanager={"page": page, "channel": channel, "group_wait": "10s"},
                   act={"address": ""})
    assert result.exit_code == 0, result.output
    config = rendered(project)
    assert config["receivers"] == [{"name": "nowhere"}, {"name": "page", **page}, {"name": "channel", **channel}]
    assert [r["receiver"] for r in config["route"]["routes"]] == ["page", "channel", "nowhere"]
    assert config["route"]["group_wait"] == "10s"
    check = run_tool("amtool", ["check-config", str(project / ALERTMANAGER_YML)])
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("fields, expected", [
    ({"alertmanager": {"page": {"slack_configs": [{"api_url": "https://hooks.slack.com/services/T0/B0/XXXX"}]}}},
     "config: alertmanager.page.slack_configs[0].api_url would put a secret into rendered/, which is committed; "
     "use api_url_file"),
    ({"alertmanager": {"channel": {"webhook_configs": [{"url": "http://x/", "http_config": {
        "authorization": {"credentials": "s3cret"}}}]}}},
     "alertmanager.channel.webhook_configs[0].http_config.authorization.credentials would put a secret"),
    ({"alertmanager": {"page": {"telegram_configs": [{"bot_token": "123:abc", "chat_id": 1}]}}},
     "Alertmanager 0.25 cannot read it from a file"),
    ({"alertmanager": {"page": {"slack_configs": {"channel": "#x"}}}},
     "alertmanager.page['slack_configs']: expected a list, got a mapping"),
    ({"alertmanager": {"page": {"name": [{"x": 1}]}}}, "alertmanager.page: 'name' is not an Alertmanager integration"),
    ({"alertmanager": {"group_wait": "soon"}}, "alertmanager.group_wait: 'soon' is not a Prometheus duration"),
    ({"alertmanager": {"address": "http://am:9093/"}}, "alertmanager.address: 'http://am:9093/' is not host:port"),
    ({"act": {"actions": {"VerlTrainingDivergense": "stop"}}}, "act.actions: 'VerlTrainingDivergense' is not an alert"),
    ({"act": {"actions": {"VerlTrainingDivergence": "reboot"}}},
     "act.actions['VerlTrainingDivergence']: 'reboot' is not one of 'log', 'stop', 'command'"),
])
def test_bad_alertmanager_config_is_refused_and_rendered_is_untouched(project, tmp_path, fields, expected):
    before = tree_digest(project / "rendered")
    result = build(project, tmp_path, **fields)
    assert result.exit_code == 1
    assert result.output.count("Error:") == 1 and expected in result.output
    assert "https://hooks.slack.com" not in (project / ALERTMANAGER_YML).read_text()
    assert tree_digest(project / "rendered") == before


INHIBITING_MODULE = '''
from dashgen.model import Alert, Inhibition, RuleGroup, Severity

def rules(config):
    return RuleGroup("extra", (Alert("VerlExtra", "verl_actor_ppo_kl{{verl}} > 1", Severity.WARNING, "KL.", "KL."),))

def inhibitions(config):
    return ({inhibitions},)
'''


@pytest.mark.parametrize("inhibition, expected", [
    ('Inhibition("VerlExtra", ("VerlKLSpik",), why="typo")',
     "alerts/zz_extra.py: inhibition by 'VerlExtra': 'VerlKLSpik' is not an alert defined in alerts/"),
    ('Inhibition("VerlTrainingDivergence", ("VerlExtra",), why="twice")',
     "inhibition by 'VerlTrainingDivergence': already stated in alerts/stability.py"),
    ('Inhibition("VerlExtra", ("VerlExtra",), why="itself")', "targets must be other alerts"),
    ('Inhibition("VerlExtra", ("VerlKLSpike",), why=" ")', "why is empty"),
    ('Inhibition("VerlExtra", ("VerlKLSpike",), why="x", equal=("run-id",))', "equal must name the labels"),
    ('"VerlKLSpike"', "alerts/zz_extra.py: inhibitions() must return a tuple of dashgen.model.Inhibition"),
])
def test_bad_inhibitions_are_refused_naming_the_module(project, inhibition, expected):
    before = tree_digest(project / "rendered")
    (project / "alerts" / "zz_extra.py").write_text(INHIBITING_MODULE.format(inhibitions=inhibition))
    result = run("build", "--root", str(project))
    assert result.exit_code == 1
    assert result.output.count("Error:") == 1 and expected in result.output
    assert tree_digest(project / "rendered") == before


def test_a_new_inhibition_is_rendered(project):
    (project / "alerts" / "zz_extra.py").write_text(INHIBITING_MODULE.format(
        inhibitions='Inhibition("VerlExtra", ("VerlKLSpike",), why="VerlExtra explains it.")'))
    assert run("build", "--root", str(project)).exit_code == 0
    assert {"source_matchers": ['alertname="VerlExtra"'], "target_matchers": ['alertname="VerlKLSpike"'],
            "equal": ["project", "experiment"]} in rendered(project)["inhibit_rules"]
