"""Every name one definition uses to refer to another is checked at build: alert names in panel
thresholds, in queries and annotations (`alertname="..."`), in inhibitions and in the config's
act.actions. A typo fails the build with the place and a "did you mean", instead of shipping a
broken runbook link or a matcher that never matches."""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Mapping

from dashgen.compiler.compiled import CompiledDashboard
from dashgen.compiler.queries.promql import equal_matchers_of, label_value
from dashgen.conditions import AnyOf, Compare
from dashgen.errors import BuildError, get_close_matches
from dashgen.model import Alert, Dashboard, Stat, Threshold, TimeSeries
from dashgen.sources.statistics_file import STEP_STATISTICS_FILE
from dashgen.sources.step_statistics import STEP_STATISTIC_LABELS, STEP_STATISTIC_METRIC, ServedStatistics, StepStatistic

# alertname="X", !="X", =~"X|Y" or !~"X|Y" (a plain alternation of names) in a PromQL selector or
# a template variable's label_values(...), in each of PromQL's string forms: "X", 'X' and `X`. Read
# as text, not parsed, so a variable's query (not PromQL) is read the same way.
_ALERTNAME_MATCHER = re.compile(r"""\balertname\s*(=~|!~|!=|=)\s*(?:"([^"\\]*)"|'([^'\\]*)'|`([^`]*)`)""")
_PLAIN_NAMES = re.compile(r"[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*")


def check_alert_name(name: str, known: Iterable[str], where: str) -> None:
    known = sorted(known)
    if name in known:
        return
    close = get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
    raise BuildError(f"{where}: {name!r} is not an alert defined in alerts/; {hint}")


def check_alertname_matchers(expr: str, known: Iterable[str], where: str) -> None:
    """Alert names matched in a query: each must be an alert (a regex other than a plain
    alternation of names is left alone)."""
    known = list(known)
    for op, *quoted in _ALERTNAME_MATCHER.findall(expr):
        value = "".join(quoted)  # the one string form that matched
        regex = op in ("=~", "!~")
        if not value or regex and not _PLAIN_NAMES.fullmatch(value):
            continue  # alertname!="" (any alert), or a regex beyond a list of names
        for name in value.split("|") if regex else (value,):
            check_alert_name(name, known, where)


def check_step_statistics_listed(expr: str, listed: ServedStatistics, where: str) -> None:
    """Each step statistic a rule reads is one the build lists, and so one `dashgen export` computes:
    a statistic written by hand that no condition's step window asks for would fire in a backtest
    (which computes what the rules read) and never live."""
    for labels in equal_matchers_of(expr, STEP_STATISTIC_METRIC):
        if (labels.get("series"), labels.get("statistic")) not in listed.by_label:
            shown = ", ".join(f"{label}={label_value(labels[label])}" for label in STEP_STATISTIC_LABELS
                              if label in labels)
            raise BuildError(f"{where}: reads {STEP_STATISTIC_METRIC}{{{shown}}}, which no condition's step window "
                             f"asks for: the build does not list it in {STEP_STATISTICS_FILE}, so the exporter "
                             f"never serves it (series and statistic must both be given with =). Write the window "
                             f"as a condition over steps(N) (docs/add-an-alert.md) instead of the series by hand")


def statistics_read(expr: str, listed: ServedStatistics) -> list[StepStatistic]:
    """The listed step statistics a compiled expression reads (check_step_statistics_listed says
    what else it may read: nothing)."""
    if STEP_STATISTIC_METRIC not in expr:
        return []
    read = (listed.by_label.get((labels.get("series"), labels.get("statistic")))
            for labels in equal_matchers_of(expr, STEP_STATISTIC_METRIC))
    return [stat for stat in read if stat is not None]


def check_dashboard_links(dashboards: Iterable[CompiledDashboard]) -> None:
    """Every link in a dashboard's header leads to a dashboard of the project."""
    dashboards = list(dashboards)
    uids = sorted(dashboard.uid for dashboard in dashboards)
    for compiled in dashboards:
        for link in compiled.definition.links:
            if link.uid not in uids:
                close = get_close_matches(link.uid, uids, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(uids)}"
                raise BuildError(f"{compiled.module}: dashboard {compiled.uid!r}: link {link.title!r} leads to uid "
                                 f"{link.uid!r}, which no dashboard in panels/ has; {hint}")


def alert_threshold(alert: Alert, where: str) -> float:
    """The number an alert compares its one signal with, for a panel threshold that names only it:
    its condition, or the one branch of an any_of that compares with a number."""
    branches = alert.condition.conditions if isinstance(alert.condition, AnyOf) else (alert.condition,)
    fixed = [c for c in branches if isinstance(c, Compare) and c.baseline is None]
    if len(fixed) == 1:
        return fixed[0].value
    raise BuildError(f"{where}: {alert.name} has no single threshold to draw (its condition is not one signal "
                     f"compared with a number); give the threshold a value: Threshold(VALUE, {alert.name!r})")


def resolve_dashboard_references(dashboard: Dashboard, alerts: Mapping[str, Alert], where: str,
                                 withdrawn: Mapping[str, str] | None = None,
                                 notices: list[str] | None = None) -> Dashboard:
    """The dashboard with every alert it names checked, and thresholds without a value given the
    value of their alert. A threshold of a default alert the project no longer defines (`withdrawn`:
    name -> the default module that defines it, an area the team replaced) is dropped, with a
    line in `notices`."""
    for annotation in dashboard.annotations:
        check_alertname_matchers(annotation.expr, alerts, f"{where}: annotation {annotation.name!r}")
    for variable in dashboard.variables:
        check_alertname_matchers(variable.query, alerts, f"{where}: variable {variable.name!r}")
    rows = []
    for row in dashboard.rows:
        panels = []
        for panel in row.panels:
            place = f"{where}: panel {panel.title!r}"
            for query in panel.queries:
                check_alertname_matchers(query.expr, alerts, place)
            if isinstance(panel, (TimeSeries, Stat)) and panel.thresholds:
                kept = []
                for threshold in panel.thresholds:
                    if threshold.alert and threshold.alert not in alerts and threshold.alert in (withdrawn or {}):
                        if notices is not None:
                            notices.append(f"{place}: dropped the threshold of {threshold.alert}: one of dashgen's "
                                           f"default {withdrawn[threshold.alert]} alerts, which this project's "
                                           f"alerts/ no longer define")
                        continue
                    kept.append(_resolved_threshold(threshold, alerts, f"{place}: threshold"))
                panel = dataclasses.replace(panel, thresholds=tuple(kept))
            panels.append(panel)
        rows.append(dataclasses.replace(row, panels=tuple(panels)))
    return dataclasses.replace(dashboard, rows=tuple(rows))


def _resolved_threshold(threshold: Threshold, alerts: Mapping[str, Alert], where: str) -> Threshold:
    if threshold.alert:
        check_alert_name(threshold.alert, alerts, where)
    if threshold.value is not None:
        return threshold
    if not threshold.alert:
        raise BuildError(f"{where}: a threshold needs a value, or an alert whose threshold it draws")
    return dataclasses.replace(threshold, value=alert_threshold(alerts[threshold.alert], where))
