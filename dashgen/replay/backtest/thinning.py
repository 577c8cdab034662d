"""Which samples of a series a backtest can leave out without changing any rule's result.

A backfilled series repeats one value at every scrape until the next step, and a recording one
value at every evaluation while its inputs are unchanged: over a run at 750 s a step, 50 scrapes
a step that say the same. Prometheus 2.x reads a series through windows closed at both ends: an
instant selector's lookback [t - 5m, t] and a range [t - r, t] (both shifted by any offset). A
window that holds a sample of a run of equal values still holds one once the run is thinned to
its first and last sample and one at most every D between, if D is at most the window: the
window's part of the run is then either one of its ends or an inner span at least D long. So
wherever only *which values* a window holds matters (an instant selector, min/max/last/present/
absent_over_time, changes, resets), a thinned series gives every rule the same result at every
time. A series read otherwise (a quantile, count, sum or rate over time, timestamp()) counts its
samples or their times: it is written whole.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Iterator

import promql_parser as pp

from dashgen.compiler.queries.promql import substitute_grafana_variables

# Prometheus' default lookback of an instant selector (the query servers here keep it).
LOOKBACK_MS = 5 * 60 * 1000
# Functions of a range whose result depends only on the values in it and their order, not on how
# many samples repeat them or when.
VALUE_SET_FUNCTIONS = frozenset({"min_over_time", "max_over_time", "last_over_time", "present_over_time",
                                 "absent_over_time", "changes", "resets"})
# Functions that read the time of the sample an instant selector finds.
SAMPLE_TIME_FUNCTIONS = frozenset({"timestamp"})
DENSE = 0  # a series written whole


def widest_gaps(exprs: Iterable[str]) -> dict[str, int] | None:
    """Per series name the rules read: the widest gap (ms) allowed between kept samples of a run of
    equal values (DENSE: none may be left out). None if some selector has no name: nothing is thinned."""
    gaps: dict[str, int] = {}
    for expr in exprs:
        reads = _reads(expr)
        if reads is None:
            return None
        for name, gap in reads:
            gaps[name] = min(gaps.get(name, gap), gap)
    return gaps


@lru_cache(maxsize=4096)
def _reads(expr: str) -> tuple[tuple[str, int], ...] | None:
    found = list(_selector_gaps(pp.parse(substitute_grafana_variables(expr)), None))
    if any(not name for name, _ in found):
        return None
    return tuple(found)


def _selector_gaps(node, calling: str | None) -> Iterator[tuple[str, int]]:
    """(series name, widest gap) of each selector under `node`; `calling`: the function whose
    argument `node` is, if it is one."""
    if isinstance(node, pp.VectorSelector):
        yield node.name or "", DENSE if calling in SAMPLE_TIME_FUNCTIONS else LOOKBACK_MS
    elif isinstance(node, pp.MatrixSelector):
        range_ms = round(node.range.total_seconds() * 1000)
        yield node.vector_selector.name or "", range_ms if calling in VALUE_SET_FUNCTIONS else DENSE
    elif isinstance(node, pp.Call):
        for arg in node.args:
            yield from _selector_gaps(arg, node.func.name)
    elif isinstance(node, pp.BinaryExpr):
        yield from _selector_gaps(node.lhs, None)
        yield from _selector_gaps(node.rhs, None)
    elif isinstance(node, pp.AggregateExpr):
        yield from _selector_gaps(node.expr, None)
        if isinstance(node.param, pp.Expr):
            yield from _selector_gaps(node.param, None)
    elif isinstance(node, (pp.ParenExpr, pp.UnaryExpr)):
        yield from _selector_gaps(node.expr, calling if isinstance(node, pp.ParenExpr) else None)
    elif isinstance(node, pp.SubqueryExpr):
        # The inner expression is evaluated at the subquery's steps, each an instant of its own.
        yield from _selector_gaps(node.expr, None)
    elif not isinstance(node, (pp.NumberLiteral, pp.StringLiteral)):
        found: list = []
        pp.walk(node, lambda child: found.append(child) if isinstance(child, pp.VectorSelector) else None)
        yield from ((selector.name or "", DENSE) for selector in found)


def every_nth(gap_ms: int | None, spacing_ms: int) -> int:
    """Keep every how many samples of a run, on a grid of `spacing_ms` (1: all)."""
    if not gap_ms or spacing_ms <= 0:
        return 1
    return max(1, gap_ms // spacing_ms)

