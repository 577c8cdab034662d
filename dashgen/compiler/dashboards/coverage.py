"""Which of the signals verl logs the dashboards show: `dashgen list --unused`.

A signal is a verl key the catalog reads (its first, current name; older aliases feed the
same metric), or a validation section (`val-core/...`, `val-aux/...`). It is shown when a
panel or an annotation of any dashboard queries its metric; otherwise a dashboard must say
why it leaves it out (`Dashboard.left_out`).
"""

from __future__ import annotations

import difflib
from typing import Iterable

from dashgen.catalog import VALIDATION_FAMILIES, Catalog
from dashgen.compiler.compiled import CompiledDashboard
from dashgen.compiler.queries.promql import metrics_in
from dashgen.compiler.queries.selectors import dashboard_selectors, expand_selectors
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.model import Dashboard
from dashgen.records import record


@record
class UnusedSignal:
    verl_key: str
    metric: str
    reason: str  # "" when no dashboard gives one


def verl_signals(catalog: Catalog) -> dict[str, str]:
    """verl key -> the metric it is served as, for every signal verl logs that the catalog knows."""
    signals = {metric.verl_keys[0]: name for name, metric in catalog.items() if metric.verl_keys}
    signals.update({f"{section}/...": name for section, name in VALIDATION_FAMILIES.items()})
    return signals


def queried_metrics(dashboard: Dashboard, config: Config) -> set[str]:
    """Every metric the dashboard's panels and annotations select."""
    selectors = dashboard_selectors(config)
    exprs = [q.expr for row in dashboard.rows for panel in row.panels for q in panel.queries]
    exprs += [a.expr for a in dashboard.annotations]
    return set().union(*(metrics_in(expand_selectors(expr, selectors)) for expr in exprs))


def unused_signals(dashboards: Iterable[CompiledDashboard], config: Config, catalog: Catalog) -> list[UnusedSignal]:
    """The signals no dashboard shows, in catalog order, each with the reason a dashboard gives.

    BuildError naming the module when a dashboard leaves out a key the catalog does not know."""
    signals = verl_signals(catalog)
    reasons: dict[str, str] = {}
    dashboards = list(dashboards)
    for compiled in dashboards:
        module, dashboard = compiled.module, compiled.definition
        for left_out in dashboard.left_out:
            if left_out.verl_key not in signals:
                close = difflib.get_close_matches(left_out.verl_key, list(signals), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise BuildError(f"{module}: dashboard {dashboard.uid!r} leaves out {left_out.verl_key!r}, which is "
                                 f"not a verl key of the catalog{hint}")
            reasons[left_out.verl_key] = left_out.reason
    shown = set().union(*(queried_metrics(compiled.definition, config) for compiled in dashboards))
    return [UnusedSignal(key, metric, reasons.get(key, "")) for key, metric in signals.items() if metric not in shown]
