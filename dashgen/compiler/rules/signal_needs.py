"""What each alert needs of a run's logged series, read from its compiled expression.

An alert can judge a run only if the run logs what one of its ways of firing reads: `a and b`
(and any arithmetic or comparison of two vectors) needs both, `a or b` either, `a unless b` only
`a`. A recording is read through to what it reads; a step window of the exporter
(`verl_step_statistic{series="..."}`) reads its series. A series that is no logged key (the
exporter's own, Prometheus', a GPU exporter's) needs nothing of the log: whether the run has it
is another alert's business (VerlMetricsAbsent, VerlStepWindowsNotServed).

The build names, for each logged series, the alerts blind without it (`dashgen:series_readers`, a
constant row per series, read by VerlSignalStopped and VerlSignalNeverLogged); a backtest and a review name the alerts that could not judge a run
(dashgen/replay/unjudged.py).
"""

from __future__ import annotations

from typing import Iterable, Mapping

import promql_parser as pp

from dashgen.catalog import STEP_STATISTIC_METRIC, Catalog
from dashgen.sources.series_arrival import logged_series

# Ways of firing, each the set of logged series it reads; (frozenset(),): it needs nothing.
Needs = tuple[frozenset[str], ...]
NOTHING: Needs = (frozenset(),)
# The most ways of firing kept of one expression (the least demanding): `and` of two `or`s multiplies them.
MAX_WAYS = 64
# Functions whose result does not need their argument's samples.
_NEED_NOTHING = frozenset({"absent", "absent_over_time", "vector", "time", "scalar"})


def _minimal(ways: Iterable[frozenset[str]]) -> Needs:
    """The ways no other way is a subset of, the least demanding first, at most MAX_WAYS."""
    ordered = sorted(set(ways), key=lambda way: (len(way), sorted(way)))
    kept: list[frozenset[str]] = []
    for way in ordered:
        if not any(other <= way for other in kept):
            kept.append(way)
    return tuple(kept[:MAX_WAYS])


def _both(left: Needs, right: Needs) -> Needs:
    return _minimal(a | b for a in left for b in right)


class _Reader:
    def __init__(self, recordings: Mapping[str, list[str]], logged: frozenset[str]):
        self.recordings = recordings
        self.logged = logged
        self._recorded: dict[str, Needs] = {}

    def expression(self, expr: str) -> Needs:
        return self._node(pp.parse(expr))

    def _node(self, node) -> Needs:
        if isinstance(node, pp.BinaryExpr):
            op = str(node.op)
            if op == "or":
                return _minimal((*self._node(node.lhs), *self._node(node.rhs)))
            if op == "unless":
                return self._node(node.lhs)
            return _both(self._node(node.lhs), self._node(node.rhs))
        if isinstance(node, pp.VectorSelector):
            return self._selected(node)
        if isinstance(node, pp.MatrixSelector):
            return self._selected(node.vector_selector)
        if isinstance(node, pp.Call):
            if node.func.name in _NEED_NOTHING:
                return NOTHING
            needs = NOTHING
            for arg in node.args:
                needs = _both(needs, self._node(arg))
            return needs
        if isinstance(node, pp.AggregateExpr):
            return self._node(node.expr)
        if isinstance(node, (pp.ParenExpr, pp.SubqueryExpr, pp.UnaryExpr)):
            return self._node(node.expr)
        return NOTHING  # a number or a string

    def _selected(self, selector) -> Needs:
        name = selector.name
        if name == STEP_STATISTIC_METRIC:
            series = {m.value for m in selector.matchers.matchers if m.name == "series"}
            return (frozenset(series & self.logged),)
        if name in self.recordings:
            if name not in self._recorded:
                self._recorded[name] = NOTHING  # a recording that reads itself needs nothing more
                self._recorded[name] = _minimal(way for expr in self.recordings[name]
                                                for way in self.expression(expr))
            return self._recorded[name]
        return (frozenset({name}),) if name in self.logged else NOTHING


def alert_needs(alerts: Iterable[tuple[str, str]], recordings: Iterable[tuple[str, str]],
                catalog: Catalog) -> dict[str, Needs]:
    """Each alert's ways of firing ((name, expression) of the alerts and the recordings, compiled)."""
    by_name: dict[str, list[str]] = {}
    for name, expr in recordings:
        by_name.setdefault(name, []).append(expr)
    reader = _Reader(by_name, logged_series(catalog))
    return {name: reader.expression(expr) for name, expr in alerts}


def blind_without(needs: Mapping[str, Needs], series: str) -> list[str]:
    """The alerts every way of firing of which reads `series`, by name."""
    return sorted(name for name, ways in needs.items() if all(series in way for way in ways))


def readers_table(needs: Mapping[str, Needs], catalog: Catalog) -> list[tuple[tuple[str, str], ...]]:
    """`dashgen:series_readers`: for each logged series of the catalog, the labels of its row: the
    series, its log key and the alerts blind without it (empty: none). Each row is rendered as a
    constant (`vector(1)` with the row as its rule's labels): a chain of `label_replace(vector(1))`
    joined by `or` cost more than any other rule of a cycle at 15 runs, for a table that reads no data."""
    rows = [(("series", name), ("key", catalog[name].verl_keys[0]), ("alerts", ", ".join(blind_without(needs, name))))
            for name in sorted(logged_series(catalog))]
    return [tuple((label, value) for label, value in row if value) for row in rows]  # an empty label is none
