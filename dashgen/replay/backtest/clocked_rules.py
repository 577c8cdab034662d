"""Which rules a backtest evaluates on the step clock (dashgen/replay/backtest/step_clock.py), and
their results brought back to the calendar: recordings before the rounds of fill_recordings, alerts
after them (an alert may read any recording of at most the lookback's interval: its runs' starts
and ends are keys too)."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

from dashgen.records import record

from dashgen.compiler.compiled import AlertRule, RecordingRule
from dashgen.compiler.queries.promql import metrics_in
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.backtest.evaluation import AlertOutcome, evaluation_times, run_outcomes
from dashgen.replay.backtest.recordings import Series, Window, constant, evaluation_grid
from dashgen.replay.backtest.step_clock import (UNSTEADY, evaluate_on_clock, fading, held_times, per_step,
                                                recorded_series)
from dashgen.replay.backtest.thinning import LOOKBACK_MS

# The most keys per evaluation on the calendar at which the step clock is worth its own Prometheus.
WORTH_A_CLOCK = 0.5


def clock_interval(recordings: list[RecordingRule], alerts: list[AlertRule]) -> int:
    """The step clock's grid: the rules' most common interval."""
    intervals = Counter(rule.interval_ms for rule in [*recordings, *alerts])
    return intervals.most_common(1)[0][0] if intervals else 0


@record
class ClockPlan:
    """What goes on the step clock: recordings (those of the newest step that read no recording, and
    constants), alerts (of the newest step, reading only those recordings and windows over them)."""
    steady: list[int]
    constants: list[int]
    alerts: set[int]

    def calendar_reads(self, recordings: list[RecordingRule], alerts: list[AlertRule]) -> set[str]:
        """The series the calendar's Prometheus reads (backfilled or recorded): those the rules left
        to it read."""
        recorded = {rule.record for rule in recordings}
        # A window over a recording is taken in Python from that recording's results; one over a
        # series of the log (a team's max_over_time(verl_actor_ppo_kl[5m])) is the server's to read.
        left = [rule.expr for index, rule in enumerate(recordings)
                if index not in self.steady and index not in self.constants
                and (Window.of(rule) is None or Window.of(rule).source not in recorded)]
        left += [expr for index, alert in enumerate(alerts) if index not in self.alerts for expr in _exprs(alert)]
        return set().union(*(metrics_in(expr) for expr in left))


def clock_plan(recordings: list[RecordingRule], alerts: list[AlertRule], runs: list[RecordedRun]) -> ClockPlan:
    """What goes on the step clock; nothing where it would save too little (steps about as frequent
    as the evaluations: the clock costs a Prometheus and a TSDB of its own)."""
    recorded = {rule.record for rule in recordings}
    unsteady = UNSTEADY | fading(runs)
    interval = clock_interval(recordings, alerts)
    if not interval or _keys_per_evaluation(runs, interval) > WORTH_A_CLOCK:
        return ClockPlan([], [], set())
    steady = [index for index, rule in enumerate(recordings)
              if rule.interval_ms == interval and metrics_in(rule.expr)
              and not metrics_in(rule.expr) & (recorded | unsteady) and per_step(rule.expr)]
    constants = [index for index, rule in enumerate(recordings) if constant(rule.expr)]
    # Recordings an alert on the clock may read: those on it, and windows over them (in Python), each
    # a series per run; of at most the lookback's interval (a longer one blinks between evaluations).
    names_of = Counter(rule.record for rule in recordings)
    derived = {recordings[index].record for index in steady}
    while True:
        more = {rule.record for rule in recordings if Window.of(rule) is not None and Window.of(rule).source in derived}
        if more <= derived:
            break
        derived |= more
    readable = {rule.record for rule in recordings
                if rule.record in derived and names_of[rule.record] == 1 and rule.interval_ms <= LOOKBACK_MS}
    clocked = set()
    for index, alert in enumerate(alerts):
        reads = set().union(*(metrics_in(expr) for expr in _exprs(alert)))
        if (alert.interval_ms == interval and reads and not reads & unsteady and (reads & recorded) <= readable
                and all(per_step(expr) for expr in _exprs(alert))):
            clocked.add(index)
    return ClockPlan(steady, constants, clocked)


def _keys_per_evaluation(runs: list[RecordedRun], interval_ms: int) -> float:
    """About how many keys the step clock would have for each evaluation on the calendar."""
    keys = sum(len({math.ceil(at * 1000 / interval_ms) for at in run.times}) + 2 for run in runs)
    evaluations = sum((run.end - run.times[0]) * 1000 / interval_ms + 1 for run in runs)
    return keys / evaluations


def recordings_on_clock(workdir: Path, plan: ClockPlan, recordings: list[RecordingRule], runs: list[RecordedRun],
                        scrape_interval: float) -> dict[int, Series]:
    """The results of the plan's recordings of the newest step; recording's index -> its series."""
    given: dict[int, Series] = {}
    if plan.steady:
        rules = [recordings[index] for index in plan.steady]
        read = set().union(*(metrics_in(rule.expr) for rule in rules))
        answers = evaluate_on_clock(workdir / "clock", [(rule.expr, f"recording rule {rule.record}") for rule in rules],
                                    runs, evaluation_grid(rules[0], runs), rules[0].interval_ms, scrape_interval,
                                    read, {})
        given.update({index: recorded_series(rule, spans) for index, rule, spans in zip(plan.steady, rules, answers)})
    return given


def _exprs(alert: AlertRule) -> list[str]:
    return [expr for expr in (alert.condition or alert.expr, alert.sustain) if expr]


def alerts_on_clock(workdir: Path, alerts: list[AlertRule], recordings: list[RecordingRule],
                    results: dict[int, Series], runs: list[RecordedRun],
                    scrape_interval: float) -> dict[int, list[list[AlertOutcome]]]:
    """The outcomes of the alerts (`clock_plan`'s) on each run, alert's index -> per run."""
    by_name = {recordings[index].record: series for index, series in results.items()}
    chosen = dict(enumerate(alerts))
    if not chosen:
        return {}
    reads = set().union(*(metrics_in(expr) for alert in chosen.values() for expr in _exprs(alert)))
    queries = [(expr, f"alert {alert.name}") for alert in chosen.values() for expr in _exprs(alert)]
    interval = next(iter(chosen.values())).interval_ms
    times = sorted({at for run in runs for at in evaluation_times(run, interval)})
    answers = iter(evaluate_on_clock(workdir, queries, runs, times, interval, scrape_interval, reads - set(by_name),
                                     {name: by_name[name] for name in reads & set(by_name)}))
    out = {}
    for index, alert in chosen.items():
        held = held_times(next(answers), interval)
        sustained = held_times(next(answers), interval) if alert.sustain else {}
        out[index] = [run_outcomes(alert, run, evaluation_times(run, interval), held, sustained) for run in runs]
    return out
