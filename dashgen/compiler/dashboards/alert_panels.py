"""Which panel shows each alert's signal: the panel an alert's Grafana annotations (`__dashboardUid__`,
`__panelId__`) and its notifications link to, so on-call opens the graph the alert read.

A panel is chosen, in the dashboards with the most panels first (the run's own dashboard before
the comparison of runs), as the first of:
1. a panel whose threshold names the alert (it links to the alert's runbook section), or that
   counts the alert's own firing by name (`ALERTS{alertname=~"..."}`);
2. a panel that reads the series the alert's condition compares first (its primary signal);
3. a panel that reads any series the alert reads (through its recordings and the exporter's step
   windows), bookkeeping series apart.
An alert no panel reads has no link (the runbook says which).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from dashgen.catalog import STEP_STATISTIC_METRIC, Catalog
from dashgen.compiler.compiled import CompiledAlert, CompiledDashboard, CompiledRules
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.output.rendering import runbook_anchor
from dashgen.compiler.queries.promql import metrics_in
from dashgen.compiler.rules.signal_needs import alert_needs
from dashgen.conditions import Signal, comparisons
from dashgen.records import record

# Series an alert reads that say nothing of what it watches: a panel reading only these is no view of it.
BOOKKEEPING = frozenset({STEP_STATISTIC_METRIC, "ALERTS", "verl_training_global_step",
                         "verl_exporter_last_step_timestamp_seconds"})
_ALERTNAME = re.compile(r'alertname\s*(=~|=)\s*"((?:[^"\\]|\\.)*)"')


@record
class AlertPanel:
    """The panel that shows an alert's signal."""
    uid: str  # the dashboard's
    panel_id: int
    title: str


def alert_panels(rules: CompiledRules, dashboards: Iterable[CompiledDashboard]) -> dict[str, AlertPanel]:
    """Each compiled alert's panel, by alert name (alerts no panel shows are left out)."""
    panels = [(dashboard.uid, panel) for dashboard in sorted(dashboards, key=_panel_count, reverse=True)
              for panel in iter_panels(dashboard.model) if panel.get("type") != "row"]
    reads_of = {id(panel): _reads(panel) for _, panel in panels}
    needs = alert_needs(((alert.name, alert.rule.condition or alert.rule.expr) for alert in rules.alerts),
                        ((rule.record, rule.expr) for rule in rules.recording_rules), rules.catalog)
    recorded = _recorded_reads(rules)
    chosen = {}
    for alert in rules.alerts:
        series = _series(alert, needs.get(alert.name, ()), recorded) - BOOKKEEPING
        primary = _primary(alert, rules.catalog)
        anchor = f"#{runbook_anchor(alert.name)}"
        for picks in (lambda panel: any(link.get("url", "").endswith(anchor) for link in panel.get("links", []))
                      or _counts_firing(panel, alert.name),
                      lambda panel: primary in reads_of[id(panel)],
                      lambda panel: bool(series & reads_of[id(panel)])):
            found = next(((uid, panel) for uid, panel in panels if picks(panel)), None)
            if found is not None:
                chosen[alert.name] = AlertPanel(found[0], found[1]["id"], found[1]["title"])
                break
    return chosen


def _counts_firing(panel: dict, name: str) -> bool:
    """Whether a query of the panel selects the alert's own ALERTS series by its name."""
    for target in panel.get("targets", []):
        for operator, value in _ALERTNAME.findall(target.get("expr", "")):
            if (re.fullmatch(value, name) if operator == "=~" else value == name):
                return True
    return False


def _panel_count(dashboard: CompiledDashboard) -> int:
    return sum(1 for _ in iter_panels(dashboard.model))


def _reads(panel: dict) -> frozenset[str]:
    return frozenset(name for target in panel.get("targets", []) if target.get("expr")
                     for name in metrics_in(target["expr"]))


def _recorded_reads(rules: CompiledRules) -> Mapping[str, set[str]]:
    reads: dict[str, set[str]] = {}
    for rule in rules.recording_rules:
        reads.setdefault(rule.record, set()).update(metrics_in(rule.expr))
    return reads


def _series(alert: CompiledAlert, ways: tuple[frozenset[str], ...], recorded: Mapping[str, set[str]]) -> set[str]:
    """The raw series an alert reads: its selectors with recordings read through, and the logged
    series of the step windows it reads."""
    rule = alert.rule
    pending = [name for expr in (rule.expr, rule.condition, rule.sustain) if expr for name in metrics_in(expr)]
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(recorded.get(name, ()))
    return {name for name in seen if name not in recorded} | set().union(*ways)


def _primary(alert: CompiledAlert, catalog: Catalog) -> str:
    """The catalog name of the series the alert's condition compares first ('' for PromQL by hand)."""
    condition = alert.definition.condition
    if condition is None:
        return ""
    first = next(iter(comparisons(condition)), None)
    signal = getattr(first, "signal", None)
    if not isinstance(signal, Signal):
        return ""
    metric = catalog.verl_key_map().get(signal.ref)
    return metric.name if metric is not None else signal.ref
