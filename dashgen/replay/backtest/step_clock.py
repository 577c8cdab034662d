"""Recordings of a run's newest step evaluated once per step, on a clock of the steps, not the calendar.

Most recordings read what the exporter serves about the newest step through instant selectors
(`max without(series, statistic) (verl_step_statistic{...})`): between two scrapes that show a new
step, nothing they read changes. Evaluated at every interval of a run at 750 s a step, 12 of each 13
evaluations repeat the one before. Here such a recording is evaluated only at its *keys*: the first
evaluation time at or after each scrape that shows a new step, and the first after the run's last
scrape leaves Prometheus' 5 minute lookback. Each key gets a sample of its own in a separate TSDB,
6 minutes apart (past the lookback, so a key sees nothing but its own sample), and Prometheus
evaluates the recording over those keys in one range query; its value at a key holds until the next.

This gives the very samples the calendar's evaluations give, for a recording that
- reads only series the backfill writes at every scrape of the steps that have them, and that
  never disappear before the run's end (a series that fades out stays visible for the lookback
  after its last scrape, which a key does not see): not `up`, the run state or exit code;
- uses no time: no range, subquery, offset or `@`, no time(), timestamp() or calendar function;
- computes each run from its own series: every aggregation keeps `instance`, every vector match
  is on `instance`, no vector() or scalar(), no label_replace onto a run label. On the calendar a
  recording sees every run at once; here, one run at a time.
(A recording that reads no series and no time is evaluated once: dashgen/replay/backtest/recordings.py.)
"""

from __future__ import annotations

import bisect
import math
from contextlib import ExitStack
from pathlib import Path

import promql_parser as pp

from dashgen.catalog import (EXIT_CODE_METRIC, RUN_STATE_METRIC, SERIES_NEVER_LOGGED_METRIC, SERIES_UNLOGGED_METRIC,
                             STEP_STATISTIC_METRIC)
from dashgen.compiler.compiled import RecordingRule
from dashgen.compiler.queries.promql import substitute_grafana_variables
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.backtest.blocks import BlockParts
from dashgen.replay.backtest.evaluation import query_range, query_spans, series_key
from dashgen.replay.backtest.recordings import TIME_FUNCTIONS, Run, Series, grid_spans, labels_with_rule
from dashgen.replay.backtest.server import query_pool, serve_tsdb
from dashgen.replay.backtest.thinning import LOOKBACK_MS
from dashgen.replay.openmetrics import label_text, write_openmetrics

# Keys' spacing on the step clock: past the lookback, so no key reads another's sample.
KEY_SPACING_MS = 6 * 60 * 1000
# Where the step clock starts (2001-09-09): before any run's keys reach now.
CLOCK_START_MS = 1_000_000_000 * 1000 // KEY_SPACING_MS * KEY_SPACING_MS
RUN_LABEL = "instance"
ACROSS_RUNS = frozenset({"vector", "scalar", "absent", "absent_over_time"})
# Series the backfill does not write at every scrape of the steps: gone after the run, or states.
UNSTEADY = frozenset({"up", RUN_STATE_METRIC, EXIT_CODE_METRIC})


def per_step(expr: str) -> bool:
    """Whether a recording's expression is a function of each run's newest step alone (see above)."""
    return _per_step(pp.parse(substitute_grafana_variables(expr)))


def _per_step(node) -> bool:
    if isinstance(node, pp.VectorSelector):
        return bool(node.name) and node.offset is None and node.at is None
    if isinstance(node, (pp.NumberLiteral, pp.StringLiteral)):
        return True
    if isinstance(node, (pp.ParenExpr, pp.UnaryExpr)):
        return _per_step(node.expr)
    if isinstance(node, pp.Call):
        name = node.func.name
        if name in TIME_FUNCTIONS or name in ACROSS_RUNS:
            return False
        if name in ("label_replace", "label_join") and isinstance(node.args[1], pp.StringLiteral) \
                and node.args[1].val in ("job", RUN_LABEL, "project", "experiment"):
            return False
        return all(_per_step(arg) for arg in node.args)
    if isinstance(node, pp.AggregateExpr):
        labels = set(node.modifier.labels) if node.modifier is not None else set()
        keeps_run = node.modifier is not None and (
            RUN_LABEL in labels if node.modifier.type == pp.AggModifierType.By else RUN_LABEL not in labels)
        return keeps_run and _per_step(node.expr) and (not isinstance(node.param, pp.Expr) or _per_step(node.param))
    if isinstance(node, pp.BinaryExpr):
        matching = node.modifier.matching if node.modifier is not None else None
        if matching is not None:
            labels = set(matching.labels)
            on = matching.type == pp.LabelModifierType.Include
            if (RUN_LABEL not in labels) if on else (RUN_LABEL in labels):
                return False
        return _per_step(node.lhs) and _per_step(node.rhs)
    return False


def fading(runs: list[RecordedRun]) -> set[str]:
    """Names of series some run stops writing before its end (a key that logs at some steps only)."""
    out: set[str] = set()
    for run in runs:
        kinds = ((run.values, lambda key: key), (run.statistics, lambda key: STEP_STATISTIC_METRIC),
                 (run.validation, lambda key: key[0]), (run.unlogged, lambda key: SERIES_UNLOGGED_METRIC),
                 (run.never_logged, lambda key: SERIES_NEVER_LOGGED_METRIC))
        for steps, name_of in kinds:
            for before, after in zip(steps, steps[1:]):
                if before is not after:
                    out.update(name_of(key) for key in before.keys() - after.keys())
    return out


# (first, last, value): a result held at every calendar evaluation time from first to last (ms).
Span = tuple[int, int, str]


class _Keys:
    """A run's keys: the calendar's evaluation times (`times`, those at which the run's series can be
    seen) at which what the run's series show may change, as indexes into `times`, and the step the
    backfill shows at each (None: none). `recorded`: the run's recorded series read, whose runs'
    starts and ends (plus the lookback) are keys too."""

    def __init__(self, run: RecordedRun, times: list[int], scrape_ms: int, recorded: list[list[Run]]):
        step_ms = [round(t * 1000) for t in run.times]
        last_ms = round(run.served_until * 1000)
        first_ms = last_ms - (last_ms - step_ms[0]) // scrape_ms * scrape_ms  # the first scrape
        shown_from = sorted({first_ms + math.ceil(max(at - first_ms, 0) / scrape_ms) * scrape_ms for at in step_ms})
        starts = {bisect.bisect_left(times, at) for at in shown_from if at <= last_ms}
        starts.add(bisect.bisect_right(times, last_ms + LOOKBACK_MS))
        for runs in recorded:
            for first, last, _, _ in runs:
                starts.update((bisect.bisect_left(times, first), bisect.bisect_right(times, last + LOOKBACK_MS)))
        self.times = times
        self.positions = sorted(position for position in starts if position < len(times))
        self.shown: list[int | None] = []
        for position in self.positions:
            at = times[position]
            scrape = first_ms + min(at - first_ms, last_ms - first_ms) // scrape_ms * scrape_ms
            seen = first_ms <= at and at - scrape <= LOOKBACK_MS
            self.shown.append(bisect.bisect_right(step_ms, scrape) - 1 if seen else None)

    def spans(self, key: int, value: str, interval_ms: int) -> list[tuple[int, int]]:
        """The calendar times a key's value holds for, as (first, last) of consecutive grid times."""
        begin = self.positions[key]
        end = self.positions[key + 1] if key + 1 < len(self.positions) else len(self.times)
        times = self.times
        if times[end - 1] - times[begin] == (end - 1 - begin) * interval_ms:
            return [(times[begin], times[end - 1])]  # the usual case: no hole
        return grid_spans(times[begin:end], interval_ms)


def evaluate_on_clock(workdir: Path, exprs: list[tuple[str, str]], runs: list[RecordedRun], times: list[int],
                      interval_ms: int, scrape_interval: float, only: set[str],
                      recorded: dict[str, Series]) -> list[dict[tuple, list[Span]]]:
    """Each expression's results (`exprs`: (expression, what it is, for errors)) at the calendar's
    evaluation `times` of all runs, by the step clock: labels -> the spans each value holds for.
    `only`: the backfilled series they read; `recorded`: the recordings they read, by name (each
    series carries its run's instance)."""
    scrape_ms = round(scrape_interval * 1000)
    of_run: list[dict[str, list]] = [{} for _ in runs]  # per run: name -> [(labels, runs)]
    by_instance = {run.labels[RUN_LABEL]: index for index, run in enumerate(runs)}
    for name, series in recorded.items():
        for labels, series_runs in series.items():
            of_run[by_instance[dict(labels)[RUN_LABEL]]].setdefault(name, []).append((labels, series_runs))
    keys, clock, scrapes, start = [], [], [], CLOCK_START_MS
    for run, read in zip(runs, of_run):
        reads = [series_runs for per_name in read.values() for _, series_runs in per_name]
        seen_until = max([round(run.served_until * 1000), *(runs_[-1][1] for runs_ in reads)]) + LOOKBACK_MS
        own = times[bisect.bisect_left(times, round(run.times[0] * 1000)):bisect.bisect_right(times, seen_until)]
        run_keys = _Keys(run, own, scrape_ms, reads)
        keys.append(run_keys)
        clock.append(start)
        scrapes.append([(start + i * KEY_SPACING_MS, shown) for i, shown in enumerate(run_keys.shown)
                        if shown is not None])
        start += (len(run_keys.positions) + 1) * KEY_SPACING_MS
    with ExitStack() as stack:
        with BlockParts(workdir / "parts", workdir / "tsdb", "steps") as blocks:
            for name in sorted(recorded):  # before the backfilled series, which end with '# EOF'
                blocks.write(_recorded_text(name, of_run, keys, clock))
            write_openmetrics(runs, blocks, scrape_interval, only=only, scrapes=scrapes)
        server = stack.enter_context(serve_tsdb(workdir))
        pool = stack.enter_context(query_pool())
        answers = pool.map(lambda query: _query(server, query, start), exprs)
        return [_on_calendar(answer, by_instance, keys, clock, interval_ms) for answer in answers]


def _recorded_text(name: str, of_run: list[dict[str, list]], keys: list[_Keys], clock: list[int]) -> str:
    """A recording's series as the step clock's samples: at each key, what the calendar shows then."""
    lines = []
    for read, run_keys, start in zip(of_run, keys, clock):
        for labels, series_runs in read.get(name, ()):
            prefix = name + label_text(dict(labels)) + " "
            index = 0  # the last run that starts at or before the key
            for key, position in enumerate(run_keys.positions):
                at = run_keys.times[position]
                while index + 1 < len(series_runs) and series_runs[index + 1][0] <= at:
                    index += 1
                first, last, step, value = series_runs[index]
                if first <= at and at - min(last, first + (at - first) // step * step) <= LOOKBACK_MS:
                    stamp = start + key * KEY_SPACING_MS
                    lines.append(f"{prefix}{value} {stamp // 1000}.{stamp % 1000:03d}\n")
    return f"# TYPE {name} gauge\n" + "".join(lines) if lines else ""


def _query(server, query: tuple[str, str], end: int) -> list[dict]:
    expr, where = query
    out = []
    for span in query_spans(list(range(CLOCK_START_MS, end, KEY_SPACING_MS)), KEY_SPACING_MS):
        out.extend(query_range(server, expr, span, KEY_SPACING_MS, where))
    return out


def _on_calendar(answer: list[dict], by_instance: dict[str, int], keys: list[_Keys], clock: list[int],
                 interval_ms: int) -> dict[tuple, list[Span]]:
    """The step clock's answer on the calendar: a key's value until the next key."""
    out: dict[tuple, list[Span]] = {}
    for series in answer:
        labels = series_key(series["metric"])
        run = by_instance[dict(labels)[RUN_LABEL]]
        own = out.setdefault(labels, [])
        for at, value in series["values"]:
            key = (round(at * 1000) - clock[run]) // KEY_SPACING_MS
            for first, last in keys[run].spans(key, value, interval_ms):
                if own and own[-1][2] == value and own[-1][1] + interval_ms == first:
                    first = own.pop()[0]
                own.append((first, last, value))
    return {labels: spans for labels, spans in out.items() if spans}


def recorded_series(rule: RecordingRule, spans: dict[tuple, list[Span]]) -> Series:
    """A recording's result from the step clock's spans."""
    return {labels_with_rule(labels, rule): [(first, last, rule.interval_ms, value) for first, last, value in own]
            for labels, own in spans.items()}


def held_times(spans: dict[tuple, list[Span]], interval_ms: int) -> dict[tuple, set[int]]:
    """An alert's condition from the step clock's spans: the times each series holds at."""
    return {labels: {at for first, last, _ in own for at in range(first, last + 1, interval_ms)}
            for labels, own in spans.items()}
