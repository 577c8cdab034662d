"""No config or definition value can change the structure of a rendered YAML or Markdown file."""

import re

import yaml

from conftest import REPO, run

# Values the schema allows, full of YAML syntax: quoted as YAML needs, they stay plain values.
TRICKY = {
    "datasource_name": "Prom: main, #1 [x] {y} 'q' \"dq\"",
    "grafana_folder": "verl: 'team' #2 - * & !tag",
    "ray_service_discovery_file": "/tmp/ray/a, b]: c #d.json",
    "runbook_base_url": "https://x.org/a.md?q=1&r=[2]#",
}


def test_yaml_syntax_in_config_strings_stays_inside_the_values(project):
    (project / "dashgen.yaml").write_text(yaml.safe_dump(TRICKY))
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output
    rendered = project / "rendered"
    datasources = yaml.safe_load((rendered / "provisioning/datasources/prometheus.yaml").read_text())
    assert [d["name"] for d in datasources["datasources"]] == [TRICKY["datasource_name"]]
    assert datasources["datasources"][0]["url"] == "${DASHGEN_PROMETHEUS_URL}"
    providers = yaml.safe_load((rendered / "provisioning/dashboards/dashgen.yaml").read_text())
    assert providers["providers"][0]["folder"] == TRICKY["grafana_folder"]
    prometheus = yaml.safe_load((rendered / "prometheus/prometheus.yml").read_text())
    assert [job["job_name"] for job in prometheus["scrape_configs"]] == ["verl", "ray", "rollout"]
    assert prometheus["scrape_configs"][1]["file_sd_configs"] == [{"files": [TRICKY["ray_service_discovery_file"]]}]
    rules = yaml.safe_load((rendered / "rules/stability.yaml").read_text())
    urls = {rule["annotations"]["runbook_url"] for group in rules["groups"] for rule in group["rules"]
            if "alert" in rule}
    assert all(url.startswith(TRICKY["runbook_base_url"]) for url in urls)
    # `dashgen check` parses every YAML file and runs `promtool check config` on what it renders.
    checked = run("check", "--root", str(project))
    assert checked.exit_code == 0, checked.output


def test_values_that_would_inject_yaml_are_refused_by_the_schema(project):
    for text in ('exporter_address: "localhost:9464\\"]\\n      - targets: [\\"evil:1\\"]"\n',
                 'datasource_name: "Prometheus\\n    url: http://evil"\n'):
        (project / "dashgen.yaml").write_text(text)
        result = run("build", "--root", str(project))
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output


ALERT_WITH_MARKDOWN = '''
from dashgen.model import Alert, RuleGroup, Severity

def rules(config):
    return RuleGroup("markdown", (Alert(
        name="VerlPipes", severity=Severity.INFO, expr="verl_actor_ppo_kl{verl} > 1", for_="5m",
        summary="KL | grad norm\\n## Injected heading\\n* not a list", description="d"),))
'''


def test_summaries_cannot_break_the_runbook_markdown(project):
    (project / "alerts" / "zz_markdown.py").write_text(ALERT_WITH_MARKDOWN)
    result = run("build", "--root", str(project))
    assert result.exit_code == 0, result.output
    runbook = (project / "rendered" / "docs" / "alerts.md").read_text()
    alert_table = runbook.split("## Routing and inhibition")[0]  # the inhibition table has 5 columns
    rows = [line for line in alert_table.splitlines() if line.startswith("| [")]
    cells = [re.split(r"(?<!\\)\|", row)[1:-1] for row in rows]
    assert all(len(row) == 3 for row in cells), rows
    assert not any(line.startswith("## Injected") for line in runbook.splitlines())
    assert not any(line.startswith("* not a list") for line in runbook.splitlines())
    assert r"KL \| grad norm ## Injected heading \* not a list" in runbook
    # The rule file keeps the summary as written: YAML carries it faithfully.
    rules = yaml.safe_load((project / "rendered" / "rules" / "zz_markdown.yaml").read_text())
    assert rules["groups"][0]["rules"][0]["annotations"]["summary"] == \
        "KL | grad norm\n## Injected heading\n* not a list"


def test_check_validates_what_it_renders():
    import pytest

    from dashgen.compiler.output.build import render_project, validate_rendered
    from dashgen.config import Config
    from dashgen.errors import BuildError

    files = render_project(REPO, Config()).files
    validate_rendered(files)
    with pytest.raises(BuildError, match="provisioning/datasources/prometheus.yaml: the rendered file is not valid"):
        validate_rendered({**files, "provisioning/datasources/prometheus.yaml": "a: [b\n"})
    broken_rule = files["rules/memory.yaml"].replace("expr:", "exprr:", 1)
    with pytest.raises(BuildError, match="promtool check config rejects"):
        validate_rendered({**files, "rules/memory.yaml": broken_rule})
