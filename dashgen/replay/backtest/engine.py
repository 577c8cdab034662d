"""The backtest itself: backfill the runs, fill the recording rules, evaluate every alert.

1. The runs are backfilled (only the series the rules select) into a temporary TSDB with
   promtool, part by part while the rest is written (dashgen/replay/backtest/blocks.py).
2. A real `prometheus` is started on loopback over it (dashgen/replay/backtest/server.py).
3. Recording rules are filled by evaluating each one with `query_range` at its group's
   interval, on the same timestamps the group's alerts are evaluated at, and writing the
   result back as blocks with promtool; then Prometheus is restarted to load them
   (dashgen/replay/backtest/recordings.py). `promtool tsdb create-blocks-from rules` does the same
   queries, but picks its own timestamps (newer versions shift them by the group's hash
   offset), so an alert at t could read the recording of the evaluation before t, one
   interval late, whereas Prometheus evaluates a group's recordings and alerts at one
   timestamp. It also cannot fill a recording that reads another.
4. Each alert is evaluated over the runs (dashgen/replay/backtest/evaluation.py).

The queries of a round, and the alerts, run one per processor (each Prometheus query uses one
core); results are taken in the rules' order, so the outcome is that of one query after another.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from dashgen.compiler.queries.promql import metrics_in
from dashgen.catalog import Catalog
from dashgen.compiler.compiled import AlertRule, RecordingRule
from dashgen.compiler.rules.signal_needs import Needs
from dashgen.config import Config
from dashgen.promtool import find_binary
from dashgen.replay.backfill import RecordedRun, Timing, check_unique_runs, read_run, run_labels
from dashgen.replay.openmetrics import series_names, write_openmetrics
from dashgen.replay.backtest.blocks import BlockParts
from dashgen.replay.backtest.evaluation import AlertOutcome, RunOutcome, evaluate_alert
from dashgen.replay.backtest.recordings import fill_recordings, recorded_openmetrics
from dashgen.replay.backtest.rule_files import read_rule_files
from dashgen.replay.backtest.rule_sets import RuleSet, merge, served_statistics
from dashgen.replay.backtest.server import SERVER_ARGS, query_pool, serve_tsdb
from dashgen.replay.backtest.clocked_rules import ClockPlan, alerts_on_clock, clock_plan, recordings_on_clock
from dashgen.replay.backtest.thinning import DENSE, every_nth, widest_gaps
from dashgen.replay.prometheus_server import PrometheusServer
from dashgen.replay.unjudged import needs_of_rules, unjudged
from dashgen.replay.work_dir import work_dir

__all__ = ["SERVER_ARGS", "backtest", "backtest_rule_sets", "evaluate_rules", "recorded_openmetrics", "serve_tsdb"]


def backtest(paths: list[Path], root: Path, config: Config, timing: Timing,
             say: Callable[[str], None] = lambda message: None,
             timings: dict[Path, Timing] | None = None, rule_files: list[Path] | None = None,
             _calendar: bool = False) -> list[RunOutcome]:
    """Backtest every alert of the project at `root` on the runs; cleans up after itself.

    `timings` gives some runs their own timing (e.g. how each ended) instead of `timing`.
    `rule_files`: backtest these Prometheus rule files instead of the project's alerts."""
    from dashgen.compiler.rules.rule_files import compile_rules
    from dashgen.project_metrics import project_catalog

    find_binary("promtool")
    find_binary("prometheus")
    catalog = project_catalog(root)
    if rule_files:
        rule_set = RuleSet(*read_rule_files(rule_files))
    else:
        compiled = compile_rules(root, config, catalog)
        rule_set = RuleSet(compiled.recording_rules, compiled.alert_rules, compiled.step_statistics)
    return backtest_rule_sets(paths, [rule_set], catalog, config, timing, say, timings, _calendar=_calendar)[0]


def backtest_rule_sets(paths: list[Path], rule_sets: list[RuleSet], catalog: Catalog, config: Config, timing: Timing,
                       say: Callable[[str], None] = lambda message: None,
                       timings: dict[Path, Timing] | None = None, _calendar: bool = False) -> list[list[RunOutcome]]:
    """Backtest several rule sets on the runs in one pass (one backfill, one Prometheus per round):
    each set's outcomes on each run, in the sets' order. `config` places the runs on the clock
    (job, step-window floor); the statistics over steps every set reads are computed, and each set's
    digest of them, where its build is known, served beside the others."""
    find_binary("promtool")
    find_binary("prometheus")
    merged = merge(rule_sets)
    recordings, alerts = merged.recordings, merged.alerts
    selected = set().union(*(metrics_in(rule.expr) for rule in [*recordings, *alerts]))
    wanted = served_statistics(rule_sets, config.step_window_floor.seconds)
    digests = tuple(sorted({rule_set.step_statistics.digest for rule_set in rule_sets
                            if rule_set.step_statistics is not None} - {wanted.digest}))
    needs = needs_of_rules(alerts, recordings, catalog)
    # The logged series the step windows are computed from are kept too, for a plot to draw
    # (they are not written to the TSDB unless a rule selects them).
    drawn = set().union(*(way for ways in needs.values() for way in ways))
    runs = [read_run(path, run_labels(path, config.verl_job), (timings or {}).get(path, timing),
                     keep=selected | drawn, catalog=catalog, step_statistics=wanted)
            for path in paths]
    check_unique_runs(runs)
    for run in runs:
        run.other_step_windows_digests = digests
        for note in run.notes:
            say(f"{run.path}: {note}")
    with work_dir("backtest") as workdir:
        # `_calendar`: every sample, every rule at every interval of the span (how a backtest ran before
        # issue 56), for tests that compare the two.
        gaps = None if _calendar else widest_gaps(rule_exprs(recordings, alerts))
        scrape_ms = round(timing.scrape_interval * 1000)
        plan = None if _calendar else clock_plan(recordings, alerts, runs)
        # The step clock writes what its rules read itself: the calendar's TSDB, only what the others read.
        calendar_reads = selected if plan is None else plan.calendar_reads(recordings, alerts)
        with BlockParts(workdir / "parts", workdir / "tsdb", "runs") as blocks:
            write_openmetrics(runs, blocks, timing.scrape_interval, only=calendar_reads,
                              every=lambda name: 1 if gaps is None else every_nth(gaps.get(name, DENSE), scrape_ms))
        per_alert, recorded_names = evaluate_rules(workdir, recordings, alerts, runs, gaps, plan,
                                                   timing.scrape_interval)
        available = series_names(runs) | recorded_names
    signals = [alert_signals(alert, recordings, needs) for alert in alerts]
    outcomes = [[RunOutcome(run, _run_alerts(index, own, rule_set.alerts, alerts, per_alert, signals, available))
                 for index, run in enumerate(runs)] for own, rule_set in zip(merged.alerts_of, rule_sets)]
    for outcome in (outcome for per_set in outcomes for outcome in per_set):
        why = {each.alertname: each.why
               for each in unjudged(needs, outcome.run.logged, catalog, outcome.run.unmapped_keys)}
        for alert in outcome.alerts:
            alert.note = why.get(alert.alertname) or alert.note
    return outcomes


def _run_alerts(run_index: int, own: list[int], stated: list[AlertRule], alerts: list[AlertRule],
                per_alert: list[list[list[AlertOutcome]]], signals: list[tuple[str, ...]],
                available: set[str]) -> list[AlertOutcome]:
    """The outcomes on one run of a set's alerts (`stated`, each `alerts[own[i]]` once merged), each a
    copy of its own; a note names the series as the set states them, not as merged."""
    results = []
    for alert_index, alert in zip(own, stated):
        alert_outcomes = [dataclasses.replace(outcome) for outcome in per_alert[alert_index][run_index]]
        if not metrics_in(alerts[alert_index].expr) & available:
            alert_outcomes[0].note = (f"needs {', '.join(sorted(metrics_in(alert.expr)))}, which "
                                      f"verl's step log does not hold: it cannot fire in a backtest")
        for outcome in alert_outcomes:
            outcome.signals = signals[alert_index]
        results.extend(alert_outcomes)
    return results


def evaluate_rules(workdir: Path, recordings: list[RecordingRule], alerts: list[AlertRule],
                   runs: list[RecordedRun], gaps: dict[str, int] | None = None, plan: ClockPlan | None = None,
                   scrape_interval: float = 15.0) -> tuple[list[list[list[AlertOutcome]]], set[str]]:
    """With the runs' blocks in workdir/tsdb: fill the recordings there, then evaluate every alert.

    Returns each alert's outcomes on each run (in the alerts' order, then the runs'), and the
    recordings that produced samples. A preview uses it too, to draw the alerts a backtest reports.
    `gaps`: how sparsely the recordings may be written (dashgen/replay/backtest/thinning.py).
    `plan`: the rules evaluated once a step, on the step clock, from the runs as scraped every
    `scrape_interval` (dashgen/replay/backtest/step_clock.py, clocked_rules.py); None: none."""
    clocked = set() if plan is None else plan.alerts
    # Alerts that read no recording are evaluated on the first Prometheus, beside the recordings.
    recorded = {rule.record for rule in recordings}
    early = [index for index, alert in enumerate(alerts) if not _reads(alert) & recorded and index not in clocked]
    evaluations: dict[int, Future] = {}  # alert's index -> its outcomes on each run

    def evaluate_early(server: PrometheusServer, pool: ThreadPoolExecutor) -> None:
        evaluations.update({index: pool.submit(evaluate_alert, server, alerts[index], runs) for index in early})

    given = {} if plan is None else recordings_on_clock(workdir / "steps", plan, recordings, runs, scrape_interval)
    written = None if plan is None else plan.calendar_reads(recordings, alerts) & {rule.record for rule in recordings}
    results = fill_recordings(workdir, workdir / "parts", recordings, runs, evaluate_early, gaps, given, written)
    done: dict[int, list[list[AlertOutcome]]] = {}
    if clocked:
        on_clock = alerts_on_clock(workdir / "alerts", [alerts[index] for index in sorted(clocked)], recordings,
                                   results, runs, scrape_interval)
        done = {sorted(clocked)[position]: outcomes for position, outcomes in on_clock.items()}
    late = [index for index in range(len(alerts)) if index not in evaluations and index not in done]
    if late:
        with serve_tsdb(workdir) as server, query_pool() as pool:
            evaluations.update({index: pool.submit(evaluate_alert, server, alerts[index], runs) for index in late})
    # Recordings that produced samples (GPU ones cannot: no GPU series).
    recorded_names = {recordings[index].record for index, series in results.items() if series}
    return [done[index] if index in done else evaluations[index].result() for index in range(len(alerts))], \
        recorded_names


def rule_exprs(recordings: list[RecordingRule], alerts: list[AlertRule]) -> list[str]:
    """Every expression the rules evaluate (an alert's condition and sustain, or its expression)."""
    return [*(rule.expr for rule in recordings),
            *(expr for alert in alerts for expr in (alert.condition or alert.expr, alert.sustain) if expr)]


def _reads(alert: AlertRule) -> set[str]:
    """The series an alert's queries select (its condition and sustain, or its expression)."""
    return set().union(*(metrics_in(expr) for expr in (alert.expr, alert.condition, alert.sustain) if expr))


def alert_signals(alert: AlertRule, recordings: list[RecordingRule], needs: dict[str, Needs]) -> tuple[str, ...]:
    """The run's series an alert reads, what a plot draws: those it selects through its recordings,
    and the logged series of the exporter's step windows it reads (`verl_step_statistic{series=...}`,
    most alerts' only reads since they judge in steps)."""
    logged = set().union(*needs.get(alert.name, ()))
    return tuple(sorted(raw_reads(_reads(alert), recordings) | logged))


def raw_reads(names: set[str], recordings: list[RecordingRule]) -> set[str]:
    """The series `names` read, with each recording replaced by what it reads, to the raw series;
    the alerts' own ALERTS series left out."""
    reads_of: dict[str, set[str]] = {}
    for rule in recordings:
        reads_of.setdefault(rule.record, set()).update(metrics_in(rule.expr))
    raw: set[str] = set()
    seen: set[str] = set()
    pending = list(names)
    while pending:
        name = pending.pop()
        if name in seen or name == "ALERTS":
            continue
        seen.add(name)
        if name in reads_of:
            pending.extend(reads_of[name])
        else:
            raw.add(name)
    return raw
