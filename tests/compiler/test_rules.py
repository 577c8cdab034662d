"""Alert rules: compiled files, promtool lint and fixtures, runbook, and rejected definitions."""

import re
import shutil

import pytest
import yaml

from conftest import REPO, run, tree_digest
from dashgen.compiler.compiled import AlertRule, CompiledAlert, CompiledGroup, RecordingRule, RuleFile
from dashgen.compiler.rule_tests.fixture_statistics import fixtures_with_statistics
from dashgen.compiler.output.targets.prometheus import panel_links
from dashgen.compiler.project import compile_project
from dashgen.compiler.rule_tests.promtool_files import files_read_by, rules_read_by, write_generated_tests
from dashgen.catalog import CATALOG
from dashgen.config import Config, duration_seconds
from dashgen.model import Alert
from dashgen.promtool import run_rule_tests
from dashgen.sources.series_arrival import logged_series

RULES = sorted((REPO / "rendered" / "rules").glob("*.yaml"))
FIXTURES = sorted((REPO / "tests" / "rules").glob("*.yaml"))


def rendered_alerts() -> dict[str, dict]:
    alerts = {}
    for path in RULES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    alerts[rule["alert"]] = rule
    return alerts


def test_every_pinned_alert_is_rendered_with_severity_summary_description_runbook():
    alerts = rendered_alerts()
    assert set(alerts) == {
        "VerlTrainingDivergence", "VerlKLSpike", "VerlEntropyCollapse", "VerlRewardCliff", "VerlRewardStagnation",
        "VerlResponseTruncation", "VerlTrainingStalled", "VerlMetricsAbsent", "VerlGPUMemoryPressure",
        "VerlGPUStraggler", "VerlBatchTokenRunaway", "VerlRolloutAborts", "VerlNaNMetrics",
        # issue 8: the run's lifecycle and the survivable single NaN step
        "VerlRunCrashed", "VerlNonFiniteStep",
        # issue 20: collapse and a vanished learning signal relative to the run, skips by rate
        "VerlResponseLengthCollapse", "VerlNoLearningSignal", "VerlNonFiniteSteps",
        # issue 27: a card larger than configured is a configuration error, not memory pressure; entropy
        # exploding and KL to the reference blowing up, judged in steps
        "VerlGPUMemoryCapacityTooLow", "VerlEntropyExplosion", "VerlReferenceKLBlowUp",
        # and an exporter that computes other step windows than the rules read
        "VerlStepWindowsNotServed",
        # issue 35: bounds no healthy run crosses, from the first line; issue 40: a lone gradient explosion
        "VerlImplausibleValue", "VerlRewardNeverPays", "VerlGradNormExplosion",
        # issue 40: the training reward rising while validation falls; a high truncation share reported once
        "VerlRewardHacking", "VerlResponseTruncationHigh",
        # issue 39: the trainer's token probabilities parting from the rollout engine's
        "VerlTrainRolloutMismatch", "VerlTrainRolloutGapBeyondGate",
        # issue 39: a signal the alerts read that stops arriving while the run goes on, or that the run's
        # framework logs by default and the run never logged
        "VerlSignalStopped", "VerlSignalNeverLogged",
        # issue 35: a zero gradient with the reward at its best is a run that has learned its data
        "VerlRewardSaturated",
        # issue 52: pages for a destroyed run (values no run comes back from, two non-finite steps close
        # together) and a loss blowing up against its own level
        "VerlRunDestroyed", "VerlNonFiniteStepsClose", "VerlLossExplosion",
        # issue 52: a reward collapsed far below its best on each of its last steps, whatever the run's age
        "VerlRewardCollapse",
        # issue 52: a high truncation share rising to nearly every response; half of them cut with a flat reward
        "VerlResponseTruncationSaturating", "VerlResponseTruncationFlatReward"}
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert rule["annotations"]["summary"] and "{{" not in rule["annotations"]["summary"]
        assert rule["annotations"]["description"]
        assert rule["annotations"]["runbook_url"].endswith(f"alerts.md#{name.lower()}")


def test_rule_files_use_only_standard_prometheus_fields():
    # What Prometheus >= 2.42 (keep_firing_for), Thanos and Mimir rulers accept, nothing else.
    for path in RULES:
        data = yaml.safe_load(path.read_text())
        assert set(data) == {"groups"}
        for group in data["groups"]:
            assert set(group) <= {"name", "interval", "rules"}
            for rule in group["rules"]:
                assert set(rule) <= {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}


def test_the_readers_table_is_rendered_as_constants_one_row_a_logged_series():
    """Issue 56: a chain of 89 label_replace(vector(1)) joined by `or` cost a cycle more than any rule
    that reads data; each row is a rule of its own, vector(1) with the row as its labels."""
    [group] = yaml.safe_load((REPO / "rendered" / "rules" / "dashgen-series-readers.yaml").read_text())["groups"]
    rows = group["rules"]
    assert {(rule["record"], rule["expr"]) for rule in rows} == {("dashgen:series_readers", "vector(1)")}
    assert sorted(rule["labels"]["series"] for rule in rows) == sorted(logged_series(CATALOG))
    assert all(rule["labels"]["key"] == CATALOG[rule["labels"]["series"]].verl_keys[0] for rule in rows)
    # A series no alert is blind without has no alerts label, as label_replace's empty value had none.
    assert all(rule["labels"].get("alerts", "x") for rule in rows)


def test_every_runbook_url_points_at_an_existing_section():
    docs = (REPO / "rendered" / "docs" / "alerts.md").read_text()
    anchors = {heading.lower() for heading in re.findall(r"^## (\w+)$", docs, flags=re.M)}
    for name, rule in rendered_alerts().items():
        assert rule["annotations"]["runbook_url"].split("#")[1] in anchors, name


@pytest.mark.heavy
def test_promtool_lint_passes():
    result = run("lint", "--root", str(REPO))
    assert result.exit_code == 0, result.output
    assert result.output.count("SUCCESS") == len(RULES) + 1  # and amtool check-config on alertmanager.yml


def _tested_alerts(compiled) -> set[str]:
    """The alerts `dashgen test` generates cases for: written with the vocabulary, not untested."""
    return {alert.name for alert in compiled if alert.condition is not None and not alert.untested.strip()}


@pytest.mark.heavy
def test_the_fixtures_and_each_alerts_cases_at_the_rule_interval_pass(tmp_path):
    """`make test`'s part of `dashgen test`: every fixture and every generated case evaluated at the
    rule interval (at 1.5 s, 60 s and 3,600 s a step). The cases at 3,600 s a step of alerts that read
    only step windows are evaluated every 5 minutes over ten days of series, in files of their own
    (`-every-5m-`): a minute of promtool's processor, most of it VerlRewardHacking's subqueries. The
    whole command, with them, is test_promtool_fixtures_pass (slow)."""
    config = Config()
    project = compile_project(REPO, config)
    fixtures = fixtures_with_statistics(FIXTURES, project.step_statistics, config.rule_interval, tmp_path / "fixtures",
                                        config.runbook_base_url, panel_links(project))
    generated = write_generated_tests(tmp_path, project.rules, project.alerts, config)
    every_rule_interval = [path for path in generated if "-every-5m-" not in path.name]
    assert 0 < len(every_rule_interval) < len(generated)
    stdout, stderr, failed = run_rule_tests([*fixtures, *every_rule_interval])
    assert not failed, stdout + stderr
    assert stdout.count("SUCCESS") == len(fixtures) + len(every_rule_interval)  # a file each, a fixture maybe several
    assert len(fixtures) > len(FIXTURES) and {path.parent.name for path in fixtures} >= {"stability-test"}
    named = {re.search(r"-(Verl\w+?)-generated-test\.yaml$", path.name).group(1) for path in every_rule_interval}
    assert named == _tested_alerts(alert.definition for alert in project.alerts)


@pytest.mark.heavy
@pytest.mark.slow  # the every-5m cases: a minute of promtool (above)
def test_promtool_fixtures_pass(tmp_path):
    result = run("test", "--root", str(REPO))
    assert result.exit_code == 0, result.output
    # The fixtures' files (a fixture whose test groups read different rules is several), the generated
    # tests of each alert written with the vocabulary, and the routing fixtures.
    config = Config()
    project = compile_project(REPO, config)
    fixture_files = fixtures_with_statistics(FIXTURES, project.step_statistics, config.rule_interval, tmp_path)
    generated = re.findall(r"/[a-z_]+-(\w+?)(-every-5m)?-generated-test\.yaml\n  SUCCESS", result.output)
    assert {name for name, _ in generated} == _tested_alerts(alert.definition for alert in project.alerts)
    # The cases at 3,600 s a step of an alert that reads only step windows are evaluated every 5m, apart.
    assert ("VerlTrainingDivergence", "-every-5m") in generated
    assert result.output.count("SUCCESS") == len(fixture_files) + len(generated) + 1


@pytest.mark.heavy
def test_every_alert_has_a_firing_case_after_its_for_and_a_silent_case():
    firing, silent = {}, set()
    for path in FIXTURES:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                name = check["alertname"]
                if check.get("exp_alerts"):
                    firing.setdefault(name, []).append(duration_seconds(check["eval_time"]))
                else:
                    silent.add(name)
    # Alerts written with the vocabulary get their firing and silent cases generated (tests/authoring/test_authoring.py).
    compiled = [alert.definition for alert in compile_project(REPO, Config()).alerts]
    generated = {alert.name for alert in compiled if alert.condition is not None}
    # An alert tested elsewhere names the test: it must exist.
    elsewhere = {alert.name: re.search(r"tests/\S+\.py", alert.untested) for alert in compiled if alert.untested}
    for name, rule in rendered_alerts().items():
        if name in generated and name not in firing:
            continue
        if name in elsewhere and name not in firing:  # else its fixtures here test it
            assert elsewhere[name] and (REPO / elsewhere[name].group(0)).is_file(), name
            continue
        assert name in firing and name in silent, name
        pending = duration_seconds(rule.get("for", "0s"))
        assert max(firing[name]) >= pending, name


@pytest.mark.heavy
@pytest.mark.slow  # every fixture against mutated rules: minutes of promtool
def test_fixtures_fail_when_the_rules_change(project, tmp_path):
    """The fixtures pin behaviour: a divergence factor of 20 no longer fires on a 10x KL jump."""
    shutil.copytree(REPO / "tests" / "rules", project / "tests" / "rules")
    config = tmp_path / "strict.yaml"
    config.write_text("stability: {divergence_kl_factor: 20}\n")
    assert run("build", "--root", str(project), "--config", str(config)).exit_code == 0
    result = run("test", "--root", str(project))
    assert result.exit_code != 0
    assert "VerlTrainingDivergence" in result.output and "FAILED" in result.output


def test_missing_promtool_names_the_install_command(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = run("lint", "--root", str(REPO))
    assert result.exit_code == 1
    assert "promtool not found" in result.output and "apt-get install" in result.output
    monkeypatch.setenv("PROMTOOL", "/nonexistent/promtool")
    result = run("test", "--root", str(REPO))
    assert result.exit_code == 1 and "$PROMTOOL is set to '/nonexistent/promtool'" in result.output


BAD_ALERT_MODULE = '''
from dashgen.model import Alert, RuleGroup, Severity

def rules(config):
    return RuleGroup("broken", (Alert({fields}),))
'''
GOOD_FIELDS = dict(name='"VerlBroken"', expr='"verl_actor_ppo_kl{verl} > 1"', severity="Severity.WARNING",
                   summary='"KL is high."', description='"KL is high."', for_='"5m"')


@pytest.mark.parametrize("change, expected", [
    ({"name": '"VerlKLSpike"'}, "alert 'VerlKLSpike': the name is already used in alerts/stability.py"),
    ({"severity": '"page"'}, "alert 'VerlBroken': severity 'page' is not one of critical, warning, info"),
    ({"severity": "None"}, "alert 'VerlBroken': severity None is not one of"),
    ({"summary": '"  "'}, "alert 'VerlBroken': summary is empty"),
    ({"for_": '"five minutes"'}, "alert 'VerlBroken': for_ = 'five minutes' is not a Prometheus duration"),
    ({"expr": '"increase(verl_critic_score_mean{verl}[30m]) < 0.01"'},
     "alert 'VerlBroken': increase() applied to gauge 'verl_critic_score_mean'"),
    ({"expr": '"verl_actor_ppo_kl{verl, gpu_index=\\"0\\"} > 1"'}, "has no label 'gpu_index'"),
])
def test_bad_alert_definitions_are_rejected_and_rendered_is_untouched(project, change, expected):
    before = tree_digest(project / "rendered")
    fields = ", ".join(f"{k}={v}" for k, v in {**GOOD_FIELDS, **change}.items())
    (project / "alerts" / "zz_broken.py").write_text(BAD_ALERT_MODULE.format(fields=fields))
    result = run("build", "--root", str(project))
    assert result.exit_code == 1
    assert result.output.count("Error:") == 1
    assert "alerts/zz_broken.py" in result.output or "alerts/stability.py" in result.output
    assert expected in result.output
    assert tree_digest(project / "rendered") == before


def test_a_valid_new_alert_module_is_rendered_into_its_own_rule_file(project):
    fields = ", ".join(f"{k}={v}" for k, v in GOOD_FIELDS.items())
    (project / "alerts" / "zz_extra.py").write_text(BAD_ALERT_MODULE.format(fields=fields))
    assert run("build", "--root", str(project)).exit_code == 0
    text = (project / "rendered" / "rules" / "zz_extra.yaml").read_text()
    assert 'expr: verl_actor_ppo_kl{job="verl"} > 1' in text
    assert "## VerlBroken" in (project / "rendered" / "docs" / "alerts.md").read_text()


def test_rendered_prometheus_config_passes_promtool_check_config():
    from dashgen.promtool import run_promtool

    result = run_promtool(["check", "config", str(REPO / "rendered" / "prometheus" / "prometheus.yml")])
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULES)} rule files found" in result.stdout


def test_a_generated_test_loads_its_rule_file_and_every_file_it_reads_through():
    def rules(name: str, *rules) -> RuleFile:
        return RuleFile(name, f"alerts/{name}.py", (CompiledGroup("g", "1m", rules),))

    def alert(name: str, expr: str) -> CompiledAlert:
        return CompiledAlert(f"alerts/{name}.py", Alert(name, expr=expr), AlertRule(name, expr, 60_000, 0), "", "")

    files = {f"{rule_file.name}.yaml": rule_file for rule_file in (
        rules("base", RecordingRule("team:loss:baseline", "avg_over_time(verl_loss[1h])", 60_000)),
        rules("held", RecordingRule("team:loss:held", "max_over_time(team:loss:baseline[1d])", 60_000)),
        rules("alert", alert("TeamLossHigh", "verl_loss > 2 * team:loss:held")),
        rules("follows", alert("TeamAfter", 'ALERTS{alertname=~"TeamLossHigh|Other"} and up')),
        rules("apart", alert("TeamApart", "up == 0")))}
    assert files_read_by("alert.yaml", files) == ["alert.yaml", "base.yaml", "held.yaml"]
    assert files_read_by("follows.yaml", files) == ["alert.yaml", "base.yaml", "follows.yaml", "held.yaml"]
    assert files_read_by("apart.yaml", files) == ["apart.yaml"]


def test_a_generated_test_loads_only_its_alert_and_the_rules_it_reads():
    def recording(name: str, expr: str) -> RecordingRule:
        return RecordingRule(name, expr, 60_000)

    def alert(name: str, expr: str) -> CompiledAlert:
        return CompiledAlert(f"alerts/{name}.py", Alert(name, expr=expr), AlertRule(name, expr, 60_000, 0), "", "")

    base = RuleFile("base", "alerts/base.py", (
        CompiledGroup("base", "1m", (recording("team:loss:baseline", "avg_over_time(verl_loss[1h])"),
                                     recording("team:loss:unread", "max(verl_loss)"),
                                     recording("team:loss:held", "max_over_time(team:loss:baseline[1d])"))),
        CompiledGroup("base-slow", "10m", (recording("team:loss:slow", "min(verl_loss)"),)),
        CompiledGroup("base-alerts", "1m", (alert("TeamBaseFirst", "team:loss:unread > 1"),
                                            alert("TeamBaseOther", "up == 0")))))
    own = RuleFile("own", "alerts/own.py", (CompiledGroup("own", "1m", (
        alert("TeamLossHigh", "verl_loss > 2 * team:loss:held"),
        alert("TeamAfter", 'ALERTS{alertname="TeamBaseFirst"} and up'))),))
    files = {"base.yaml": base, "own.yaml": own}

    def kept(cut: dict[str, RuleFile]) -> dict[str, list]:
        return {name: [(group.name, group.interval, [getattr(rule, "record", None) or rule.name for rule in group.rules])
                       for group in rule_file.groups] for name, rule_file in cut.items()}

    # team:loss:held, and team:loss:baseline it reads, in their group and order. Not the other alert
    # of its own file, nor team:loss:unread or team:loss:slow, nor the groups left empty.
    assert kept(rules_read_by("TeamLossHigh", files)) == {
        "base.yaml": [("base", "1m", ["team:loss:baseline", "team:loss:held"])],
        "own.yaml": [("own", "1m", ["TeamLossHigh"])]}
    # TeamBaseFirst's ALERTS, and team:loss:unread it reads.
    assert kept(rules_read_by("TeamAfter", files)) == {
        "base.yaml": [("base", "1m", ["team:loss:unread"]), ("base-alerts", "1m", ["TeamBaseFirst"])],
        "own.yaml": [("own", "1m", ["TeamAfter"])]}
    assert kept(rules_read_by("TeamBaseOther", files)) == {"base.yaml": [("base-alerts", "1m", ["TeamBaseOther"])]}


def test_every_paging_or_warning_alert_says_in_the_runbook_why_a_healthy_run_does_not_trip_it():
    """Issue 35: the runbook says, per alert, what it compares and why a healthy run does not trip it."""
    runbook = (REPO / "rendered" / "docs" / "alerts.md").read_text()
    sections = {part.split("\n", 1)[0]: part for part in runbook.split("\n## ")[1:]}
    for name, rule in rendered_alerts().items():
        if rule["labels"]["severity"] in ("warning", "critical"):
            assert sections[name].count("**Why a healthy run does not trip it.** ") == 1, name
