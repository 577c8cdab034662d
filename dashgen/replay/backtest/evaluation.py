"""Evaluate alerts over a backfilled run as Prometheus' rule manager would, and what came of it.

Each alert's expression is evaluated with `query_range` at its group's interval over the run;
the condition holds at t when the result has a sample at t. `for:` is applied like Prometheus'
rule manager does: pending from the first evaluation that holds, firing from the first
evaluation at least `for` later while it still holds, inactive (resolved) at the first
evaluation that does not, or, with `keep_firing_for`, at the first evaluation that long after
the condition last held. Templated alert labels are not applied (no rule here uses them).
"""

from __future__ import annotations

import json
import math
import urllib.error
from dataclasses import field

from dashgen.compiler.compiled import AlertRule
from dashgen.errors import BuildError
from dashgen.records import record
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.prometheus_server import PrometheusServer

# Prometheus refuses range queries of more than 11,000 steps (11,001 points).
MAX_POINTS_PER_QUERY = 11_000
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


@record
class Firing:
    start_step: int
    end_step: int | None  # None: still firing at the run's end
    start: float
    end: float | None


@record(frozen=False)
class AlertOutcome:
    alertname: str
    severity: str
    labels: dict[str, str]
    firing: list[Firing] = field(default_factory=list)
    note: str = ""  # why the alert cannot fire in a backtest, if it cannot
    signals: tuple[str, ...] = ()  # the run's series it reads, through its recordings (what a plot draws)


@record(frozen=False)
class RunOutcome:
    run: RecordedRun
    alerts: list[AlertOutcome]


# --- Evaluation timestamps -----------------------------------------------------------------

def evaluation_times(run: RecordedRun, interval_ms: int) -> list[int]:
    """Evaluation times (ms) of a group over the run, on multiples of its interval."""
    first = math.ceil(run.times[0] * 1000 / interval_ms) * interval_ms
    return list(range(first, math.floor(run.end * 1000) + 1, interval_ms))


def query_spans(times: list[int], interval_ms: int) -> list[tuple[int, int]]:
    """(start, end) of range queries covering sorted evaluation times, each contiguous and small enough."""
    spans: list[tuple[int, int]] = []
    start = previous = None
    for at in times:
        if start is None or at - previous != interval_ms or (at - start) // interval_ms >= MAX_POINTS_PER_QUERY:
            if start is not None:
                spans.append((start, previous))
            start = at
        previous = at
    if start is not None:
        spans.append((start, previous))
    return spans


def query_range(server: PrometheusServer, expr: str, span: tuple[int, int], interval_ms: int,
                where: str) -> list[dict]:
    try:
        data = server.api("query_range", query=expr, start=f"{span[0] / 1000:.3f}", end=f"{span[1] / 1000:.3f}",
                          step=f"{interval_ms / 1000:.3f}")
    except urllib.error.HTTPError as exc:
        try:
            message = json.load(exc).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        raise BuildError(f"{where}: prometheus refused the expression: {message}") from None
    return data["result"]


def series_key(metric: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, value) for name, value in metric.items() if name != "__name__"))


# --- Alerts ----------------------------------------------------------------------------------

def firing_intervals(times: list[int], held: set[int], for_ms: int, keep_firing_ms: int = 0,
                     sustained: set[int] = frozenset()) -> list[tuple[int, int | None]]:
    """(firing from, resolved at or None) of one alert series, by Prometheus' pending/firing rule.

    `sustained`: times at which the alert's sustain condition holds; it counts as held while
    the alert was firing at the previous evaluation (what its ALERTS series tells Prometheus).
    """
    intervals: list[tuple[int, int | None]] = []
    active_at = firing_since = keep_since = None
    for at in times:
        if at in held or (firing_since is not None and at in sustained):
            keep_since = None
            if active_at is None:
                active_at = at
            if firing_since is None and at - active_at >= for_ms:
                firing_since = at
        elif firing_since is not None and keep_firing_ms > 0 and (keep_since is None
                                                                  or at - keep_since < keep_firing_ms):
            if keep_since is None:
                keep_since = at
        else:
            if firing_since is not None:
                intervals.append((firing_since, at))
            active_at = firing_since = keep_since = None
    if firing_since is not None:
        intervals.append((firing_since, None))
    return intervals


def _belongs_to(labels: dict[str, str], run: RecordedRun) -> bool:
    """A series is the run's if it carries its instance or its project and experiment, or no run label."""
    if "instance" in labels:
        return labels["instance"] == run.labels["instance"]
    if "project" in labels or "experiment" in labels:
        return (labels.get("project"), labels.get("experiment")) == (run.labels["project"],
                                                                    run.labels["experiment"])
    return True


def _held_times(server: PrometheusServer, expr: str, times: list[int], interval_ms: int,
                where: str) -> dict[tuple, set[int]]:
    """For each result series: the evaluation times (ms) at which `expr` returned it."""
    held: dict[tuple, set[int]] = {}
    for span in query_spans(times, interval_ms):
        for series in query_range(server, expr, span, interval_ms, where):
            held.setdefault(series_key(series["metric"]), set()).update(round(at * 1000) for at, _ in series["values"])
    return held


def evaluate_alert(server: PrometheusServer, alert: AlertRule, runs: list[RecordedRun]) -> list[list[AlertOutcome]]:
    """The alert's outcomes on each run, from one set of queries over every run's evaluation times.

    An instant of a range query does not depend on the range's other instants, so a series
    holds at t as it would in a query over its run's times alone; each run reads its own series
    (`_belongs_to`) at its own times."""
    times = [evaluation_times(run, alert.interval_ms) for run in runs]
    every_time = sorted(set().union(*times))
    held = _held_times(server, alert.condition or alert.expr, every_time, alert.interval_ms, f"alert {alert.name}")
    sustained = {} if alert.sustain is None else _held_times(server, alert.sustain, every_time, alert.interval_ms,
                                                             f"alert {alert.name} (sustain)")
    return [run_outcomes(alert, run, run_times, held, sustained) for run, run_times in zip(runs, times)]


def run_outcomes(alert: AlertRule, run: RecordedRun, times: list[int], held: dict[tuple, set[int]],
                  sustained: dict[tuple, set[int]]) -> list[AlertOutcome]:
    outcomes = []
    extra_labels = {name: value for name, value in alert.labels if name != "severity"}
    for key, held_times in sorted(held.items()):
        if not _belongs_to(dict(key), run):
            continue
        intervals = firing_intervals(times, held_times, alert.for_ms, alert.keep_firing_ms,
                                     sustained.get(key, frozenset()))
        if intervals:
            firing = [Firing(run.step_at(start / 1000), None if end is None else run.step_at(end / 1000),
                             start / 1000, None if end is None else end / 1000) for start, end in intervals]
            outcomes.append(AlertOutcome(alert.name, alert.severity, {**dict(key), **extra_labels}, firing))
    return outcomes or [AlertOutcome(alert.name, alert.severity, dict(run.labels))]
