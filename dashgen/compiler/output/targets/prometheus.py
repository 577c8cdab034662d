"""What Prometheus loads: rendered/rules/<module>.yaml, a rule file per alert module (and one for
the metric source's own recordings), and rendered/prometheus/prometheus.yml, which loads them,
scrapes the run's sources and sends the alerts to Alertmanager.

`rule_file_model` is a rule file as Prometheus' YAML holds it; the files for vmalert and the
Prometheus Operator (victoriametrics.py, kubernetes.py) are made from the same model.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any, Mapping

from dashgen.compiler.output.block_yaml import rule_yaml
from dashgen.compiler.compiled import CompiledAlert, RecordingRule, RuleFile
from dashgen.compiler.output.rendering import runbook_anchor, templates
from dashgen.compiler.rules.rule_files import alert_labels
from dashgen.compiler.output.targets.alertmanager import prometheus_alerting
from dashgen.config import Config

if TYPE_CHECKING:
    from dashgen.compiler.compiled import CompiledProject
    from dashgen.compiler.dashboards.alert_panels import AlertPanel

PROMETHEUS_CONFIG = "prometheus/prometheus.yml"


def render_rule_files(project: CompiledProject) -> dict[str, str]:
    return rule_file_texts(project.rules.files, project.config, project.alert_panels)


def rule_file_texts(rule_files, config: Config, panels: Mapping[str, AlertPanel] | None = None) -> dict[str, str]:
    """Each rule file's text (path under rendered/ -> text); `panels`: the panel each alert links to."""
    return {rule_file.path: rule_file_header(rule_file) + rule_yaml(rule_file_model(rule_file, config, panels))
            for rule_file in rule_files}


def rule_file_header(rule_file: RuleFile) -> str:
    return f"# Rendered by `dashgen build` from {rule_file.origin}; do not edit.\n"


def rule_file_model(rule_file: RuleFile, config: Config,
                    panels: Mapping[str, AlertPanel] | None = None) -> dict[str, Any]:
    """The file's groups as Prometheus' rule file YAML holds them (a new object at each call)."""
    return {"groups": [{"name": group.name, "interval": group.interval,
                        "rules": [_rule_model(rule, config, panels or {}) for rule in group.rules]}
                       for group in rule_file.groups]}


def panel_annotations(name: str, config: Config, panels: Mapping[str, AlertPanel]) -> dict[str, str]:
    """The annotations that link an alert to the panel showing its signal: Grafana's convention
    (`__dashboardUid__`, `__panelId__`), and the panel's address where Grafana's is configured."""
    panel = panels.get(name)
    if panel is None:
        return {}
    links = {"__dashboardUid__": panel.uid, "__panelId__": str(panel.panel_id)}
    if config.grafana_base_url:
        links["dashboard_url"] = f"{config.grafana_base_url}/d/{panel.uid}?viewPanel={panel.panel_id}"
    return links


def panel_links(project: CompiledProject) -> dict[str, dict[str, str]]:
    """Each compiled alert's panel annotations, by name (what `dashgen test`'s fixture copies expect)."""
    return {alert.name: panel_annotations(alert.name, project.config, project.alert_panels) for alert in project.alerts}


def _rule_model(rule: RecordingRule | CompiledAlert, config: Config, panels: Mapping[str, AlertPanel]) -> dict[str, Any]:
    if isinstance(rule, RecordingRule):
        return {"record": rule.record, "expr": rule.expr, **({"labels": dict(rule.labels)} if rule.labels else {})}
    alert = rule.definition
    model: dict[str, Any] = {"alert": alert.name, "expr": rule.rule.expr}
    if isinstance(alert.for_, str) and alert.for_ not in ("0s", "0m"):  # steps are in the expression
        model["for"] = alert.for_
    if alert.keep_firing_for not in ("0s", "0m"):
        model["keep_firing_for"] = alert.keep_firing_for
    model["labels"] = alert_labels(alert)
    model["annotations"] = {
        "summary": rule.summary.strip(),
        "description": textwrap.dedent(rule.description).strip(),
        "runbook_url": f"{config.runbook_base_url}#{runbook_anchor(alert.name)}",
        **panel_annotations(alert.name, config, panels),
    }
    return model


def render_prometheus_config(project: CompiledProject) -> dict[str, str]:
    return {PROMETHEUS_CONFIG: templates().get_template("prometheus.yml.j2").render(
        config=project.config, alerting=prometheus_alerting(project.config), source=project.source)}
