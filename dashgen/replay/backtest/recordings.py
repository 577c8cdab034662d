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
from typing import Callable

import promql_parser as pp

from dashgen.compiler.queries.promql import metrics_in
from dashgen.compiler.compiled import RecordingRule
from dashgen.records import record
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.openmetrics import label_text
from dashgen.replay.backtest.blocks import BlockParts
from dashgen.replay.backtest.evaluation import evaluation_times, query_range, query_spans, series_key
from dashgen.replay.backtest.rule_files import recording_levels
from dashgen.replay.backtest.server import query_pool, serve_tsdb
from dashgen.replay.prometheus_server import PrometheusServer

# Recordings go to promtool in smaller parts than the runs' series, most of them while the round's
# last queries run: the next Prometheus waits only for the last part.
RECORDED_PART_BYTES = 8 * 1024 * 1024
# A recording's result: labels -> (evaluation times in ms, values as Prometheus wrote them).
Series = dict[tuple[tuple[str, str], ...], tuple[list[int], list[str]]]
# A window function -> "the new value wins" (Prometheus replaces only on strictly less or greater).
_WINDOWS: dict[str, Callable[[float, float], bool]] = {"min_over_time": operator.lt, "max_over_time": operator.gt}


def queried_series(server: PrometheusServer, rule: RecordingRule, runs: list[RecordedRun]) -> Series:
    """The rule's results over every run, from Prometheus."""
    out: Series = {}
    for span in query_spans(_times(rule, runs), rule.interval_ms):
        for series in query_range(server, rule.expr, span, rule.interval_ms, f"recording rule {rule.record}"):
            times, values = out.setdefault(_labels(series_key(series["metric"]), rule), ([], []))
            for at, value in series["values"]:
                times.append(round(at * 1000))
                values.append(value)
    return out


def family_text(record: str, series: Series) -> str:
    """One OpenMetrics family of the recorded series ('' if there are none)."""
    if not series:
        return ""
    out = [f"# TYPE {record} gauge\n"]
    for labels, (times, values) in series.items():
        prefix = record + label_text(dict(labels)) + " "
        out.extend(f"{prefix}{value} {at // 1000}.{at % 1000:03d}\n" for at, value in zip(times, values))
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
        times = _times(rule, runs)
        out: Series = {}
        for labels, (at, values) in source.items():
            chosen = [(t, values[index]) for t, index in self._chosen(at, [float(value) for value in values], times)]
            if chosen:
                out[_labels(labels, rule)] = ([t for t, _ in chosen], [value for _, value in chosen])
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
                    ) -> set[str]:
    """Every recording's results, in blocks in workdir/tsdb; returns the names that produced samples.

    `alongside` is handed the first round's server and query threads, for queries that read no
    recording (the engine's alerts on raw series): they fill the processors when the round's
    last recordings leave one idle."""
    recording_levels(recordings)  # a cycle is an error before any work
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
                        blocks.write(family_text(recordings[i].record, series))
                    for i in by_window:
                        source = results[rules_of[windows[i].source][0]]
                        results[i] = windows[i].over(source, recordings[i], runs)
                        blocks.write(family_text(recordings[i].record, results[i]))
        loaded |= set(results)
        round_ += 1
        if len(results) == len(recordings):
            break
    return {recordings[i].record for i, series in results.items() if series}


def _times(rule: RecordingRule, runs: list[RecordedRun]) -> list[int]:
    return sorted({at for run in runs for at in evaluation_times(run, rule.interval_ms)})


def _labels(labels: tuple[tuple[str, str], ...], rule: RecordingRule) -> tuple[tuple[str, str], ...]:
    """A result series' labels with the rule's own."""
    return tuple(sorted({**dict(labels), **dict(rule.labels)}.items()))
