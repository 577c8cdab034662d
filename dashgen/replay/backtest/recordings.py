"""Fill a backtest's recording rules: their results over the runs, written back as blocks.

Each recording is evaluated at its group's interval on the timestamps its group's alerts are
evaluated at (engine.py says why not `promtool tsdb create-blocks-from rules`). A recording that
reads another can be queried only once Prometheus has loaded the other's blocks, so recordings
are filled in rounds, each with a Prometheus of its own. Two kinds need no new round:
- one whose recorded inputs all produced nothing (GPU ones, on verl's step log): they are as
  absent from this Prometheus as they would be from the next;
- a window over one recording, `min_over_time(<recording>[range])` or `max_over_time` (a held
  baseline and its `<group>-hold`): computed here from the samples the recording got, as
  Prometheus 2.x computes it (the samples in [t - range, t]; NaN only when all are; of equal
  values the first) and written with the text Prometheus gave the sample chosen.
The project's chain of three levels so takes one Prometheus and one set of blocks; a recording
outside these kinds starts another round.
"""

from __future__ import annotations

import operator
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterator

import promql_parser as pp

from dashgen.compiler.queries.promql import metrics_in, substitute_grafana_variables
from dashgen.compiler.compiled import RecordingRule
from dashgen.records import record
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.openmetrics import kept, label_text
from dashgen.replay.backtest.blocks import BlockParts
from dashgen.replay.backtest.evaluation import evaluation_times, query_range, query_spans, series_key
from dashgen.replay.backtest.rule_files import recording_levels
from dashgen.replay.backtest.server import query_pool, serve_tsdb
from dashgen.replay.backtest.thinning import DENSE, every_nth
from dashgen.replay.prometheus_server import PrometheusServer

# Recordings go to promtool in smaller parts than the runs' series, most of them while the round's
# last queries run: the next Prometheus waits only for the last part.
RECORDED_PART_BYTES = 8 * 1024 * 1024
# Functions of the evaluation's time (with no argument, the calendar ones read it too).
TIME_FUNCTIONS = frozenset({"time", "timestamp", "minute", "hour", "day_of_week", "day_of_month", "day_of_year",
                            "days_in_month", "month", "year"})
# Equal samples of a series: at first, first + step, ... last (ms), the value as Prometheus wrote it.
# A recording's result is held as such runs, so a long steady stretch costs one.
Run = tuple[int, int, int, str]
# A recording's result: labels -> its runs, in time order.
Series = dict[tuple[tuple[str, str], ...], list[Run]]
# A window function -> "the new value wins" (Prometheus replaces only on strictly less or greater).
_WINDOWS: dict[str, Callable[[float, float], bool]] = {"min_over_time": operator.lt, "max_over_time": operator.gt}


def constant(expr: str) -> bool:
    """Whether the expression reads no series and no time: the same at every evaluation."""
    return not metrics_in(expr) and not _uses_time(pp.parse(substitute_grafana_variables(expr)))


def _uses_time(node) -> bool:
    if isinstance(node, pp.Call):
        return node.func.name in TIME_FUNCTIONS or any(_uses_time(arg) for arg in node.args)
    if isinstance(node, pp.BinaryExpr):
        return _uses_time(node.lhs) or _uses_time(node.rhs)
    if isinstance(node, (pp.ParenExpr, pp.UnaryExpr)):
        return _uses_time(node.expr)
    if isinstance(node, pp.AggregateExpr):
        return _uses_time(node.expr) or (isinstance(node.param, pp.Expr) and _uses_time(node.param))
    return not isinstance(node, (pp.NumberLiteral, pp.StringLiteral))


def add_sample(runs: list[Run], at: int, value: str, step: int) -> None:
    """Append a sample to a series' runs (a new run unless it is the last run's next, equal one)."""
    if runs:
        first, last, last_step, last_value = runs[-1]
        if last_value == value and last_step == step and last + step == at:
            runs[-1] = (first, at, step, value)
            return
    runs.append((at, at, step, value))


def samples(runs: list[Run]) -> Iterator[tuple[int, str]]:
    """(time in ms, value) of every sample of the runs."""
    for first, last, step, value in runs:
        for at in range(first, last + 1, step):
            yield at, value


def series_of(times: list[int], values: list[str], step: int) -> list[Run]:
    """Samples (times on a grid of `step`) as runs."""
    runs: list[Run] = []
    for at, value in zip(times, values):
        add_sample(runs, at, value, step)
    return runs


def queried_series(server: PrometheusServer, rule: RecordingRule, runs: list[RecordedRun]) -> Series:
    """The rule's results over every run, from Prometheus; a constant's from one evaluation."""
    if constant(rule.expr):
        times = evaluation_grid(rule, runs)
        answer = query_range(server, rule.expr, (times[0], times[0]), rule.interval_ms, f"recording rule {rule.record}")
        spans = grid_spans(times, rule.interval_ms)
        return {labels_with_rule(series_key(series["metric"]), rule):
                [(first, last, rule.interval_ms, series["values"][0][1]) for first, last in spans] for series in answer}
    out: Series = {}
    for span in query_spans(evaluation_grid(rule, runs), rule.interval_ms):
        for series in query_range(server, rule.expr, span, rule.interval_ms, f"recording rule {rule.record}"):
            own = out.setdefault(labels_with_rule(series_key(series["metric"]), rule), [])
            for at, value in series["values"]:
                add_sample(own, round(at * 1000), value, rule.interval_ms)
    return out


def family_text(record: str, series: Series, every: int = 1) -> str:
    """One OpenMetrics family of the recorded series ('' if there are none); with every > 1 each run
    thinned to its first and last sample and every Nth between (dashgen/replay/backtest/thinning.py)."""
    if not series:
        return ""
    out = [f"# TYPE {record} gauge\n"]
    for labels, runs in series.items():
        prefix = record + label_text(dict(labels)) + " "
        for first, last, step, value in runs:
            stamps = (first + step * position for position in kept((last - first) // step + 1, every))
            out.extend(f"{prefix}{value} {at // 1000}.{at % 1000:03d}\n" for at in stamps)
    return "".join(out)


def recorded_openmetrics(server: PrometheusServer, rules: list[RecordingRule], runs: list[RecordedRun]) -> str:
    """The rules' results over every run, one query after another, as OpenMetrics text ('' if they produced nothing)."""
    text = "".join(family_text(rule.record, queried_series(server, rule, runs)) for rule in rules)
    return text + "# EOF\n" if text else ""


@record
class Window:
    """`min_over_time(<source>[range])` or `max_over_time`, of a bare recorded name."""
    wins: Callable[[float, float], bool]
    source: str
    range_ms: int

    @staticmethod
    def of(rule: RecordingRule) -> Window | None:
        try:
            tree = pp.parse(rule.expr)
        except ValueError:
            return None
        if not (isinstance(tree, pp.Call) and tree.func.name in _WINDOWS and len(tree.args) == 1
                and isinstance(tree.args[0], pp.MatrixSelector)):
            return None
        selector = tree.args[0].vector_selector
        if (not selector.name or selector.offset is not None or selector.at is not None
                or selector.matchers.matchers or selector.matchers.or_matchers):
            return None
        return Window(_WINDOWS[tree.func.name], selector.name, round(tree.args[0].range.total_seconds() * 1000))

    def over(self, source: Series, rule: RecordingRule, runs: list[RecordedRun]) -> Series:
        """The window at each of the rule's evaluation times, for each series of the source."""
        times = evaluation_grid(rule, runs)
        out: Series = {}
        for labels, source_runs in source.items():
            at, values = [], []
            for t, value in samples(source_runs):
                at.append(t)
                values.append(value)
            own: list[Run] = []
            for t, index in self._chosen(at, [float(value) for value in values], times):
                add_sample(own, t, values[index], rule.interval_ms)
            if own:
                out[labels_with_rule(labels, rule)] = own
        return out

    def _chosen(self, at: list[int], values: list[float], times: list[int]):
        """(t, index of the sample the window yields at t), for each t whose window holds a sample."""
        best: deque[int] = deque()  # non-NaN samples in the window that a later one has not beaten, oldest first
        first = entered = 0  # the window holds samples first..entered-1
        for t in times:
            while entered < len(at) and at[entered] <= t:
                if values[entered] == values[entered]:  # not NaN
                    while best and self.wins(values[entered], values[best[-1]]):
                        best.pop()
                    best.append(entered)
                entered += 1
            while first < entered and at[first] < t - self.range_ms:
                first += 1
            while best and best[0] < first:
                best.popleft()
            if first < entered:
                yield t, best[0] if best else first  # all NaN: NaN


def fill_recordings(workdir: Path, parts: Path, recordings: list[RecordingRule], runs: list[RecordedRun],
                    alongside: Callable[[PrometheusServer, ThreadPoolExecutor], object] = lambda server, pool: None,
                    gaps: dict[str, int] | None = None, given: dict[int, Series] | None = None,
                    written: set[str] | None = None) -> dict[int, Series]:
    """Every recording's results, in blocks in workdir/tsdb; returns them, by the recording's index.

    `alongside` is handed the first round's server and query threads, for queries that read no
    recording (the engine's alerts on raw series): they fill the processors when the round's
    last recordings leave one idle. `gaps`: how far apart the samples of a run of equal values may be
    written, per name read (dashgen/replay/backtest/thinning.py); None: every sample. `given`: the
    results of some recordings already computed (dashgen/replay/backtest/step_clock.py), by index;
    `written`: the names any query here reads, the only ones written to blocks (None: all)."""
    recording_levels(recordings)  # a cycle is an error before any work

    def every(rule: RecordingRule) -> int:
        return 1 if gaps is None else every_nth(gaps.get(rule.record, DENSE), rule.interval_ms)

    def write(blocks: BlockParts, rule: RecordingRule, series: Series) -> None:
        if written is None or rule.record in written:
            blocks.write(family_text(rule.record, series, every(rule)))

    rules_of: dict[str, list[int]] = {}
    for index, rule in enumerate(recordings):
        rules_of.setdefault(rule.record, []).append(index)
    reads = [metrics_in(rule.expr) & set(rules_of) for rule in recordings]
    windows = [Window.of(rule) for rule in recordings]
    results: dict[int, Series] = {}
    loaded: set[int] = set()  # rules whose blocks the next Prometheus loads
    round_ = 0
    while True:
        with BlockParts(parts, workdir / "tsdb", f"recorded-{round_}", RECORDED_PART_BYTES) as blocks:
            with serve_tsdb(workdir) as server, query_pool() as pool:
                if round_ == 0:
                    alongside(server, pool)
                    for i, series in sorted((given or {}).items()):
                        results[i] = series
                        write(blocks, recordings[i], series)
                while True:
                    readable = {name for name, indexes in rules_of.items()
                                if all(i in loaded or (i in results and not results[i]) for i in indexes)}
                    held = {name for name, indexes in rules_of.items()
                            if len(indexes) == 1 and indexes[0] in results}
                    pending = [i for i in range(len(recordings)) if i not in results]
                    by_server = [i for i in pending if reads[i] <= readable]
                    by_window = [i for i in pending if i not in by_server and windows[i] and windows[i].source in held]
                    if not by_server and not by_window:
                        break
                    queried = pool.map(lambda i: queried_series(server, recordings[i], runs), by_server)
                    for i, series in zip(by_server, queried):
                        results[i] = series
                        write(blocks, recordings[i], series)
                    for i in by_window:
                        source = results[rules_of[windows[i].source][0]]
                        results[i] = windows[i].over(source, recordings[i], runs)
                        write(blocks, recordings[i], results[i])
        loaded |= set(results)
        round_ += 1
        if len(results) == len(recordings):
            break
    return results


def evaluation_grid(rule: RecordingRule, runs: list[RecordedRun]) -> list[int]:
    """Every time the rule's group is evaluated at over the runs, in order."""
    return sorted({at for run in runs for at in evaluation_times(run, rule.interval_ms)})


def labels_with_rule(labels: tuple[tuple[str, str], ...], rule: RecordingRule) -> tuple[tuple[str, str], ...]:
    """A result series' labels with the rule's own."""
    return tuple(sorted({**dict(labels), **dict(rule.labels)}.items()))


def grid_spans(times: list[int], interval_ms: int) -> list[tuple[int, int]]:
    """Sorted grid times as (first, last) of their runs of consecutive ones."""
    out, first = [], 0
    for position in range(1, len(times) + 1):
        if position == len(times) or times[position] - times[position - 1] != interval_ms:
            out.append((times[first], times[position - 1]))
            first = position
    return out
