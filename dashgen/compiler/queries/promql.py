"""Static checks of PromQL expressions against the metric catalog.

An expression is parsed (after Grafana's variables are substituted), then walked once:
each selector must name a catalog metric and match only its labels; `by`/`on`/
`group_left` may only name labels the sub-expression carries; `rate`-like functions
take counters and `histogram_quantile` takes histogram buckets.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable, Iterable, Mapping, Sequence, TypeVar

import promql_parser as pp

from dashgen.catalog import Catalog, Metric, MetricType
from dashgen.config import MAX_DURATION_SECONDS
from dashgen.errors import get_close_matches
from dashgen.records import record

Rule = TypeVar("Rule")  # a rule as a caller holds it: compiled, or a rule file's YAML mapping

# Grafana's built-in interval variables, replaced by a representative duration.
_GRAFANA_DURATIONS = {"__rate_interval": "1m", "__interval": "1m", "__range": "1h", "__interval_ms": "60000",
                      "__range_s": "3600", "__range_ms": "3600000"}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)(?::\w+)?\]\]")

_COUNTER_FUNCTIONS = {"rate", "irate", "increase", "resets"}
# Functions that keep their argument's labels; anything else listed here changes them.
_LABEL_FREE_FUNCTIONS = {"time", "vector", "scalar", "pi", "minute", "hour", "day_of_month", "day_of_week",
                         "day_of_year", "days_in_month", "month", "year"}


class QueryError(ValueError):
    """What is wrong with one expression."""


class UnknownMetric(QueryError):
    """A metric the catalog does not know. The "did you mean" hint is looked up only when the
    message is read: a recording that reads another is checked again once that one is known."""

    def __init__(self, name: str, catalog: Catalog):
        super().__init__(name)
        self.name = name
        self.catalog = catalog

    def __str__(self) -> str:
        hint = _closest(self.name, self.catalog)
        return (f"unknown metric {self.name!r}" + (f" (did you mean {hint!r}?)" if hint else "")
                + "; if it is real, declare it in the project's metrics.yaml")


@record
class SeriesInfo:
    """What the checker knows about the result of a sub-expression."""

    labels: frozenset[str]
    is_scalar: bool = False
    # Set only for a bare selector of a catalog series (possibly inside a range).
    metric: Metric | None = None
    suffix: str = ""
    has_buckets: bool = False


def label_value(value: str) -> str:
    """`value` as a quoted PromQL (and Alertmanager matcher) string: a quote, backslash or newline
    in it cannot end the string or the selector."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def substitute_grafana_variables(expr: str) -> str:
    return substitute_variables(expr, _GRAFANA_DURATIONS, "var")


def substitute_variables(expr: str, values: Mapping[str, str], missing: str | None = None) -> str:
    """`expr` with each Grafana variable ($name, ${name}, [[name]]) replaced by its value in `values`;
    one not there by `missing`, or QueryError when `missing` is None."""
    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        if name in values:
            return values[name]
        if missing is None:
            raise QueryError(f"no value for the variable ${name}")
        return missing

    return _VARIABLE.sub(replace, expr)


_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_ALERTNAMES = re.compile(r'alertname=~?"([^"]*)"')


def names_read(expr: str) -> set[str]:
    """The series names and alert names (through ALERTS) an expression reads, and any other word
    of it: a superset, to find the rules it reads by what they produce."""
    return {*_NAME.findall(expr), *(alert for names in _ALERTNAMES.findall(expr) for alert in names.split("|"))}


def rules_reaching(names: Iterable[str], producers: Mapping[str, Sequence[Rule]], expr_of: Callable[[Rule], str],
                   unknowable: re.Pattern | None = None) -> set[int] | None:
    """ids of the rules that produce `names` and of the rules those read, directly or through
    others (`producers`: the rules that produce each name; `expr_of`: a rule's expression): what
    promtool must load to evaluate them as Prometheus does. None if `unknowable` matches an
    expression on the way (a read whose rules its text does not name)."""
    pending = [rule for name in names for rule in producers.get(name, ())]
    needed = {id(rule) for rule in pending}
    while pending:
        expr = expr_of(pending.pop())
        if unknowable is not None and unknowable.search(expr):
            return None
        for name in names_read(expr):
            for producer in producers.get(name, ()):
                if id(producer) not in needed:
                    needed.add(id(producer))
                    pending.append(producer)
    return needed


def metrics_in(expr: str) -> set[str]:
    """Names of the series an expression selects (no checks)."""
    return set(_selected_metrics(expr))


@lru_cache(maxsize=4096)
def _selected_metrics(expr: str) -> frozenset[str]:
    # A backtest asks for the same rules' reads once per run and rule set.
    return frozenset(node.name for node in _selectors(_parsed(substitute_grafana_variables(expr))) if node.name)


def equal_matchers_of(expr: str, metric: str) -> list[dict[str, str]]:
    """The labels each selector of `metric` in an expression pins with `=` (label -> value); none
    for one with `or` between its matchers."""
    return [{} if node.matchers.or_matchers else
            {m.name: m.value for m in node.matchers.matchers if m.op == pp.MatchOp.Equal}
            for node in _selectors(_parsed(substitute_grafana_variables(expr))) if node.name == metric]


def _selectors(node):
    """The vector selectors of a syntax tree, read by its nodes' fields. The parser's own pp.walk
    hands its visitor every node converted from native code with its whole subtree: 3 s for the
    project's 105 recordings, against milliseconds here."""
    if isinstance(node, pp.VectorSelector):
        yield node
    elif isinstance(node, pp.MatrixSelector):
        yield node.vector_selector
    elif isinstance(node, pp.BinaryExpr):
        yield from _selectors(node.lhs)
        yield from _selectors(node.rhs)
    elif isinstance(node, pp.Call):
        for arg in node.args:
            yield from _selectors(arg)
    elif isinstance(node, pp.AggregateExpr):
        yield from _selectors(node.expr)
        if isinstance(node.param, pp.Expr):
            yield from _selectors(node.param)
    elif isinstance(node, (pp.ParenExpr, pp.UnaryExpr, pp.SubqueryExpr)):
        yield from _selectors(node.expr)
    elif not isinstance(node, (pp.NumberLiteral, pp.StringLiteral)):  # a node kind not listed above
        found: list = []
        pp.walk(node, lambda child: found.append(child) if isinstance(child, pp.VectorSelector) else None)
        yield from found


@lru_cache(maxsize=4096)
def _parsed(expr: str):
    """The syntax tree (read, never changed): a panel and a rule often share an expression, and a
    recording is checked again once those it reads are known."""
    return pp.parse(expr)


# The most operators and parentheses an expression may hold: the parser (promql_parser, native code)
# crashes the process on an expression some thousands deep, and the checker below recurses over it.
MAX_OPERATORS = 1000
_OPERATOR = re.compile(r"[()]|\b(?:and|or|unless)\b|[-+*/%^<>=!]=?")


def check_expression(expr: str, catalog: Catalog) -> SeriesInfo:
    """Raise QueryError naming the first problem; return the result's labels otherwise."""
    operators = len(_OPERATOR.findall(expr)) if len(expr) > MAX_OPERATORS else 0  # each is a character or more
    if operators > MAX_OPERATORS:
        raise QueryError(f"the expression holds {operators} operators and parentheses, more than the "
                         f"{MAX_OPERATORS} dashgen checks; split it, e.g. into recording rules")
    try:
        tree = _parsed(substitute_grafana_variables(expr))
    except ValueError as exc:
        raise QueryError(f"PromQL syntax error: {exc}") from None
    try:
        return _Checker(catalog).visit(tree)
    except RecursionError:
        raise QueryError("the expression nests too deep to check; split it, e.g. into recording rules") from None


class _Checker:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def visit(self, node) -> SeriesInfo:
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            raise QueryError(f"unsupported PromQL construct {type(node).__name__}: {node}")
        return method(node)

    def visit_NumberLiteral(self, node) -> SeriesInfo:
        return SeriesInfo(frozenset(), is_scalar=True)

    def visit_StringLiteral(self, node) -> SeriesInfo:
        return SeriesInfo(frozenset(), is_scalar=True)

    def visit_ParenExpr(self, node) -> SeriesInfo:
        return self.visit(node.expr)

    def visit_UnaryExpr(self, node) -> SeriesInfo:
        return self.visit(node.expr)

    def visit_SubqueryExpr(self, node) -> SeriesInfo:
        _check_duration(node.range)
        _check_duration(node.step)
        _check_duration(node.offset)
        inner = self.visit(node.expr)
        return SeriesInfo(inner.labels, has_buckets=inner.has_buckets)

    def visit_MatrixSelector(self, node) -> SeriesInfo:
        _check_duration(node.range)
        return self.visit(node.vector_selector)

    def visit_VectorSelector(self, node) -> SeriesInfo:
        if node.offset is not None:
            _check_duration(node.offset)
        name = node.name
        matchers = list(node.matchers.matchers)
        for group in node.matchers.or_matchers:
            matchers.extend(group)
        if not name:
            named = [m for m in matchers if m.name == "__name__" and m.op == pp.MatchOp.Equal]
            if not named:
                raise QueryError(f"selector {node} does not name a metric; name one catalog metric exactly")
            name = named[0].value
        resolved = self.catalog.resolve(name)
        if resolved is None:
            raise UnknownMetric(name, self.catalog)
        metric, suffix = resolved
        labels = set(metric.labels)
        if suffix == "_bucket":
            labels.add("le")
        for matcher in matchers:
            if matcher.name != "__name__" and matcher.name not in labels:
                raise QueryError(f"metric {name!r} has no label {matcher.name!r} "
                                 f"(its labels: {', '.join(sorted(labels))})")
        return SeriesInfo(frozenset(labels), metric=metric, suffix=suffix, has_buckets=suffix == "_bucket")

    def visit_Call(self, node) -> SeriesInfo:
        func = node.func.name
        args = [self.visit(arg) for arg in node.args]
        if func in _COUNTER_FUNCTIONS:
            arg = args[0]
            if arg.metric is not None and arg.metric.type is MetricType.GAUGE:
                raise QueryError(f"{func}() applied to gauge {arg.metric.name!r}; {func}() is for counters "
                                 f"(use e.g. delta(), deriv() or *_over_time() on a gauge)")
            if arg.metric is not None and arg.metric.type is MetricType.HISTOGRAM and not arg.suffix:
                raise QueryError(f"{func}() needs a histogram's _bucket, _sum or _count series, "
                                 f"not {arg.metric.name!r}")
        if func == "histogram_quantile":
            vector = args[1]
            if not vector.has_buckets:
                raise QueryError("histogram_quantile() needs a histogram's _bucket series as its second argument")
            if "le" not in vector.labels:
                raise QueryError("histogram_quantile() needs the 'le' label; keep it in the aggregation (by (le, ...))")
            return SeriesInfo(vector.labels - {"le"})
        if func in _LABEL_FREE_FUNCTIONS:
            return SeriesInfo(frozenset(), is_scalar=func != "vector")
        if func in ("label_replace", "label_join"):
            first = args[0]
            destination = node.args[1].val
            return SeriesInfo(first.labels | {destination}, has_buckets=first.has_buckets)
        if func == "absent" or func == "absent_over_time":
            return SeriesInfo(args[0].labels)
        vectors = [a for a in args if not a.is_scalar]
        if not vectors:
            return SeriesInfo(frozenset())
        first = vectors[0]
        return SeriesInfo(first.labels, has_buckets=first.has_buckets)

    def visit_AggregateExpr(self, node) -> SeriesInfo:
        inner = self.visit(node.expr)
        if node.param is not None:
            self.visit(node.param)
        op = str(node.op)
        modifier = node.modifier
        grouping = set(modifier.labels) if modifier is not None else set()
        is_without = modifier is not None and modifier.type == pp.AggModifierType.Without
        if modifier is not None and not is_without:
            missing = sorted(grouping - inner.labels)
            if missing:
                raise QueryError(f"aggregation by ({', '.join(sorted(grouping))}) names label(s) "
                                 f"{', '.join(missing)} that {node.expr} does not carry "
                                 f"(it has: {', '.join(sorted(inner.labels)) or 'none'})")
        if op in ("topk", "bottomk", "limitk", "limit_ratio"):
            return SeriesInfo(inner.labels, has_buckets=inner.has_buckets)
        if is_without:
            labels = inner.labels - grouping
        else:
            labels = frozenset(grouping)
        if op == "count_values":
            labels = labels | {node.param.val}
        return SeriesInfo(frozenset(labels), has_buckets=inner.has_buckets)

    def visit_BinaryExpr(self, node) -> SeriesInfo:
        lhs = self.visit(node.lhs)
        rhs = self.visit(node.rhs)
        if lhs.is_scalar and rhs.is_scalar:
            return SeriesInfo(frozenset(), is_scalar=True)
        if lhs.is_scalar or rhs.is_scalar:
            vector = rhs if lhs.is_scalar else lhs
            return SeriesInfo(vector.labels, has_buckets=vector.has_buckets)
        modifier = node.modifier
        matching = modifier.matching if modifier is not None else None
        op = str(node.op)
        if matching is not None and matching.type == pp.LabelModifierType.Include:
            for side_name, side in (("left", lhs), ("right", rhs)):
                missing = sorted(set(matching.labels) - side.labels)
                if missing:
                    raise QueryError(f"on({', '.join(matching.labels)}) names label(s) {', '.join(missing)} "
                                     f"that the {side_name} side of {op} does not carry "
                                     f"(it has: {', '.join(sorted(side.labels)) or 'none'})")
        labels = set(lhs.labels)
        group_labels = set(modifier.group_labels or []) if modifier is not None else set()
        if group_labels:
            one_side = rhs if modifier.card == pp.VectorMatchCardinality.ManyToOne else lhs
            missing = sorted(group_labels - one_side.labels)
            if missing:
                raise QueryError(f"group_left/group_right copies label(s) {', '.join(missing)} "
                                 f"that the 'one' side does not carry")
            labels |= group_labels
        if op == "or":
            labels |= rhs.labels
        return SeriesInfo(frozenset(labels), has_buckets=lhs.has_buckets)


def _check_duration(duration) -> None:
    """A range, step or offset within what Prometheus' parser takes (it refuses a longer one)."""
    if duration is not None and abs(duration.total_seconds()) > MAX_DURATION_SECONDS:
        raise QueryError(f"a range or offset of {duration.days / 365:.0f} years is out of Prometheus' "
                         f"duration range (at most {MAX_DURATION_SECONDS / 31536000:.0f}y)")


def _closest(name: str, catalog: Catalog) -> str | None:
    matches = get_close_matches(name, list(catalog), cutoff=0.75)
    return matches[0] if matches else None
