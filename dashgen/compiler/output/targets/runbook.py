"""rendered/docs/alerts.md: the runbook, one section per alert (critical first), then what cannot be
given with the metric source, the routing and inhibitions, and the dashboards; all from the
compiled project, so what it says is what the rules and Alertmanager do."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dashgen.compiler.output.rendering import markdown_text, runbook_anchor, templates
from dashgen.compiler.alerting.routing import AlertmanagerSection, severity_routes
from dashgen.compiler.rules.rule_files import compares_with_held_baseline
from dashgen.conditions import windows_in
from dashgen.model import ActSection

if TYPE_CHECKING:
    from dashgen.compiler.compiled import CompiledProject

DOCS_FILE = "docs/alerts.md"


def render_runbook(project: CompiledProject) -> dict[str, str]:
    """The runbook, for a project with alerts (available with its metric source or not)."""
    if not (project.alerts or project.unavailable):
        return {}
    text = _alerts_section(project) + _routing_section(project)
    if project.config.grafana_base_url:
        text += "\n## Dashboards\n\n" + "".join(
            f"- [{markdown_text(d.definition.title)}]({project.config.grafana_base_url}/d/{d.uid})\n"
            for d in project.dashboards)
    return {DOCS_FILE: text}


def _alerts_section(project: CompiledProject) -> str:
    ordered = sorted(project.alerts, key=lambda alert: (alert.severity.rank, alert.name))
    unavailable = sorted(project.unavailable, key=lambda alert: (alert.severity.rank, alert.name))
    return templates().get_template("alerts.md.j2").render(
        alerts=[{"module": alert.module, "alert": alert.definition, "summary": alert.summary,
                 "sustained": alert.rule.sustain is not None, "expr": alert.rule.expr,
                 "anchor": runbook_anchor(alert.name), "losses": alert.losses,
                 "windows": windows_in(alert.definition.condition, alert.definition.for_),
                 "panel": _panel_text(project, alert.name)}
                for alert in ordered],
        config=project.config, source=project.source,
        held_alerts=[alert.name for alert in ordered if compares_with_held_baseline(alert.definition)],
        unavailable=[{"module": alert.module, "alert": alert.definition, "why": alert.why,
                      "anchor": runbook_anchor(alert.name)} for alert in unavailable])


def _panel_text(project: CompiledProject, name: str) -> str:
    """Where the alert's signal is drawn, linked when Grafana's address is configured ('' if nowhere)."""
    panel = project.alert_panels.get(name)
    if panel is None:
        return ""
    title = next(d.definition.title for d in project.dashboards if d.uid == panel.uid)
    text = f"{markdown_text(title)}, panel {markdown_text(panel.title)}"
    base = project.config.grafana_base_url
    return f"[{text}]({base}/d/{panel.uid}?viewPanel={panel.panel_id})" if base else text


def _routing_section(project: CompiledProject) -> str:
    config = project.config
    act = config.section(ActSection)
    return templates().get_template("alerts-routing.md.j2").render(
        alertmanager=config.section(AlertmanagerSection), act=act, routes=severity_routes(config),
        act_alerts=sorted(act.actions),
        inhibitions=[{"module": stated.module, "inhibition": stated.inhibition} for stated in project.inhibitions],
        anchor=runbook_anchor)
