"""Each alert links to the panel that shows its signal: Grafana's `__dashboardUid__`/`__panelId__`
annotations in the rule files, the panel's address where Grafana's is configured, and a line in
the runbook; `dashgen test`'s fixture copies expect them without the fixtures stating them."""

import yaml

from conftest import REPO
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.output.build import render_files
from dashgen.compiler.project import compile_project
from dashgen.compiler.queries.promql import metrics_in
from dashgen.config import Config, config_from, load_config


def compiled(config: Config | None = None):
    return compile_project(REPO, config or load_config(None, REPO))


def test_each_alert_links_to_a_panel_that_reads_what_it_watches():
    project = compiled()
    panels = {(d.uid, panel["id"]): panel for d in project.dashboards for panel in iter_panels(d.model)}
    chosen = {name: panels[(link.uid, link.panel_id)]["title"] for name, link in project.alert_panels.items()}
    assert chosen["VerlKLSpike"] == chosen["VerlTrainingDivergence"] == "PPO KL (old vs new policy)"
    assert chosen["VerlEntropyCollapse"] == chosen["VerlEntropyExplosion"] == "Policy entropy"
    assert chosen["VerlRewardCliff"] == "Reward (score)"
    assert chosen["VerlReferenceKLBlowUp"] == "KL loss"
    assert chosen["VerlSignalNeverLogged"] == "Signals missing"  # it counts that alert's own firing
    assert {link.uid for link in project.alert_panels.values()} == {"verl-training"}  # the run's own dashboard
    # Alerts whose series no panel draws (the exporter's bookkeeping: run state, scrape health,
    # non-finite streaks, the step windows' info) have no link; every other alert has one.
    assert sorted(alert.name for alert in project.alerts if alert.name not in project.alert_panels) == [
        "VerlMetricsAbsent", "VerlNaNMetrics", "VerlNonFiniteStep", "VerlNonFiniteSteps", "VerlNonFiniteStepsClose",
        "VerlRunCrashed", "VerlStepWindowsNotServed"]
    for name, link in project.alert_panels.items():
        panel = panels[(link.uid, link.panel_id)]
        read = {metric for target in panel.get("targets", []) for metric in metrics_in(target.get("expr", ""))}
        assert read, name


def test_the_rule_files_carry_the_links_and_the_panel_address_with_grafanas():
    config = load_config(None, REPO)
    files = render_files(compiled())
    rules = {rule["alert"]: rule for group in yaml.safe_load(files["rules/stability.yaml"])["groups"]
             for rule in group["rules"] if "alert" in rule}
    kl_spike = rules["VerlKLSpike"]["annotations"]
    dashboard = yaml.safe_load(files["dashboards/verl-training.json"])
    panel_id = next(panel["id"] for panel in iter_panels(dashboard) if panel["title"] == "PPO KL (old vs new policy)")
    assert kl_spike["__dashboardUid__"] == "verl-training" and kl_spike["__panelId__"] == str(panel_id)
    assert "dashboard_url" not in kl_spike and not config.grafana_base_url
    with_grafana = render_files(compiled(config_from({"grafana_base_url": "https://grafana.example.org"})))
    assert (f"dashboard_url: https://grafana.example.org/d/verl-training?viewPanel={panel_id}"
            in with_grafana["rules/stability.yaml"])
    assert "**Drawn on:** verl RL training, panel PPO KL (old vs new policy)" in files["docs/alerts.md"]
