"""A recorded verl run -> Prometheus TSDB blocks, made by `promtool tsdb create-blocks-from openmetrics`.

verl's step log has step numbers but no clock. Each step's time is rebuilt from the
cumulative `timing_s/step` (a step is logged when it ends; a line of a log that holds every
Nth step also stands for the N-1 steps before it, each taking the run's median step time),
anchored at a start time that
defaults to the file's modification time minus the run's length, so the last step lands
when the file was last written. A run that would reach past now is moved back to end now:
Prometheus drops samples of blocks that reach into the future.

The samples then look like scrapes of `dashgen export`: every scrape interval, the newest
step's values (same names, labels and unit conversions as the exporter, through
`StepMapper`), `verl_exporter_last_step_timestamp_seconds`, the exporter's counters and
`up 1`. Windows and `for:` of the alerts then judge a backfilled run like a scraped one.

How the run ended is modelled as the exporter would publish it (dashgen/lifecycle.py):
`finished` (the default) or `crashed` runs serve their final state (`verl_run_state`,
`verl_run_exit_code`) for the grace period after the last step, then the exporter is gone
(`up 0`) for GONE_SECONDS, so a backtest shows whether that absence would page; a `hung` run
keeps serving its last step, still running, for the hold.
One difference remains: a key a step stops logging fades out after Prometheus' 5 minute
lookback instead of at once, as OpenMetrics cannot carry the staleness marker a scrape writes.
"""

from __future__ import annotations

import bisect
import math
import os
import statistics
import time
from contextlib import contextmanager
from dataclasses import field
from pathlib import Path
from typing import Iterator

from dashgen.catalog import CATALOG, LOG_ROUNDING_METRIC, NONFINITE_LOSS_STREAK_METRIC, NONFINITE_STREAK_METRIC, Catalog
from dashgen.errors import BuildError
from dashgen.lifecycle import NonFiniteStreak
from dashgen.promtool import run_promtool
from dashgen.records import record
from dashgen.runtime.log_follower import MAX_LINE_BYTES, run_from_path
from dashgen.formats.rounding import line_rounding
from dashgen.formats import (mlflow_store, tensorboard_events, trl, trl_console, verl_console, wandb_export,
                             wandb_offline)
from dashgen.formats.trl import is_trainer_state
from dashgen.sources.expected_keys import NeverLogged
from dashgen.sources.series_arrival import SeriesArrival, logged_series
from dashgen.sources.step_statistics import STEP_TIME_METRIC, ServedStatistics, StepStatistic
from dashgen.formats.verl_log import (LineError, StepMapper, ValidationSeries, held_validation, is_training_line,
                                     parse_line)

# promtool's block lengths: 2h times a power of 3 (the TSDB's compaction ranges).
SMALLEST_BLOCK_HOURS = 2
# How a recorded run ended: the exporter's final states, or a trainer that hangs.
RUN_ENDS = ("finished", "crashed", "hung")
# After a finished or crashed run's grace period, how long the exporter is shown gone (up 0).
GONE_SECONDS = 1800.0
CRASH_EXIT_CODE = 1
# The largest step interval a log written every N steps is taken to have (see _steps_advanced).
MAX_LOGGING_INTERVAL_STEPS = 1000
# Scrapes written per run (a 15 s interval: 174 days); more would take gigabytes.
MAX_SCRAPES_PER_RUN = 1_000_000
_NONE_UNLOGGED: dict[str, int] = {}  # the steps at which no series is missing share it
_NONE_NEVER_LOGGED: dict[tuple[str, str], int] = {}


@record
class Timing:
    """How a run's steps are placed on the clock and sampled."""
    start: float | None = None  # Unix time the run began; None: file mtime minus the run's length
    scrape_interval: float = 15.0
    default_step_seconds: float = 60.0  # for steps that log no usable timing_s/step
    # How the run ended (RUN_ENDS) and how long the exporter serves after the last step: the grace
    # period of a finished or crashed run, or how long a hung trainer is watched.
    end: str = "finished"
    hold_seconds: float = 300.0

    def __post_init__(self) -> None:
        if self.end not in RUN_ENDS:
            raise ValueError(f"end {self.end!r} is not one of {', '.join(RUN_ENDS)}")


@record(frozen=False)
class RecordedRun:
    path: Path
    labels: dict[str, str]  # job, instance, project, experiment, in that order
    steps: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # Unix time each step was logged
    values: list[dict[str, float]] = field(default_factory=list)  # metric name -> value, per step
    errors_seen: list[int] = field(default_factory=list)  # unparseable lines read by the time of each step
    # (too-long lines, keys over the series limit, colliding keys) by the time of each step
    dropped_seen: list[tuple[int, int, int]] = field(default_factory=list)
    parse_errors: int = 0
    dropped_lines: int = 0
    untimed_steps: int = 0
    end_kind: str = "finished"  # one of RUN_ENDS
    served_until: float = 0.0  # the exporter's last scrape: the last step plus the hold
    end: float = 0.0  # time of the last sample: served_until, then the gone exporter's up 0
    notes: list[str] = field(default_factory=list)
    # The validation results held at each step (the latest test step's, as the exporter serves
    # them); consecutive steps share one dict.
    validation: list[dict[ValidationSeries, float]] = field(default_factory=list)
    # The step statistics the exporter serves after each step (none unless asked for), and the
    # digest of those it computes.
    statistics: list[dict[StepStatistic, float]] = field(default_factory=list)
    step_windows_digest: str = ServedStatistics().digest
    # The series a regular run stopped logging, and for how many training lines, after each step
    # (dashgen/sources/series_arrival.py); and every series it logged (a value or a NaN) on any line.
    unlogged: list[dict[str, int]] = field(default_factory=list)
    logged: set[str] = field(default_factory=set)
    # The series its framework logs on every step that it had not logged yet, after each step
    # (dashgen/sources/expected_keys.py), with a key it logs that looks like it (logged_as, or ""):
    # (series, logged_as) -> the training lines logged so far. And the keys no catalog series reads.
    never_logged: list[dict[tuple[str, str], int]] = field(default_factory=list)
    unmapped_keys: frozenset[str] = frozenset()
    # Digests served beside it: rule sets backtested side by side (a review) each find theirs.
    other_step_windows_digests: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.labels['project']}/{self.labels['experiment']}"

    def step_at(self, when: float) -> int:
        """The step the exporter was showing at `when`."""
        return self.steps[max(bisect.bisect_right(self.times, when) - 1, 0)]

    def scrapes(self, interval: float) -> list[tuple[int, int]]:
        """(time in ms, index of the step shown) of each scrape, the last one at `served_until`."""
        step_ms = [round(t * 1000) for t in self.times]
        interval_ms = round(interval * 1000)
        last_ms = round(self.served_until * 1000)
        count = (last_ms - step_ms[0]) // interval_ms + 1
        out: list[tuple[int, int]] = []
        index = 0
        for at in range(last_ms - (count - 1) * interval_ms, last_ms + 1, interval_ms):
            while index + 1 < len(step_ms) and step_ms[index + 1] <= at:
                index += 1
            out.append((at, index))
        return out


def run_labels(path: Path, job: str, project: str | None = None, experiment: str | None = None,
               instance: str | None = None) -> dict[str, str]:
    """The labels a scrape of `dashgen export --jsonl path` would carry."""
    default_project, default_experiment = run_from_path(path)
    project, experiment = project or default_project, experiment or default_experiment
    return {"job": job, "instance": instance or f"backfill/{project}/{experiment}",
            "project": project, "experiment": experiment}


def read_run(path: Path, labels: dict[str, str], timing: Timing, export_unknown: bool = True,
             keep: set[str] | None = None, now: float | None = None, catalog: Catalog = CATALOG,
             step_statistics: ServedStatistics = ServedStatistics()) -> RecordedRun:
    """Parse the step log and place its steps on the clock; BuildError if it holds no step.

    `keep` limits the values held to these metric names (a long run's other keys cost memory).
    `step_statistics`: computed at each step as the exporter computes them.
    """
    if path.exists() and not path.is_file() and recorded_format(path) is None:
        # a FIFO would block the read until someone writes to it
        raise BuildError(f"{path}: not a regular file; give verl's step log as written by its file logger (or a "
                         f"console log, a TensorBoard event file or log directory, a W&B export or offline run, an "
                         f"MLflow run's folder)")
    run = RecordedRun(path, labels, end_kind=timing.end, step_windows_digest=step_statistics.digest)
    mapper = StepMapper(catalog, export_unknown=export_unknown)
    streak = NonFiniteStreak()
    rounding: float | None = None  # the newest line's that shows one (dashgen/formats/rounding.py)
    step_stats = step_statistics.tracker(timing.default_step_seconds)
    arrival = SeriesArrival(logged_series(catalog))
    never_logged = NeverLogged(catalog)
    durations: list[float] = []
    steps_left_out: list[int] = []  # per line: steps the log left out before it (a log of every Nth step)
    lines = 0
    shown: dict[str, float] | None = None  # what the exporter shows after the line before
    held: dict[ValidationSeries, float] = {}  # the validation results it shows
    try:
        with _run_lines(path) as lines_read:
            for line in lines_read:
                if line is not None and not line.strip():
                    continue
                lines += 1
                if line is None:  # longer than MAX_LINE_BYTES: dropped, as the exporter does
                    run.dropped_lines += 1
                    continue
                try:
                    number, data = parse_line(line)
                except LineError:
                    run.parse_errors += 1
                    continue
                shown = mapper.step_values(number, data, shown)
                held_before = held
                if is_training_line(data):
                    arrival.observe(shown)
                    never_logged.observe(data)
                    run.logged.update(shown)
                run.unlogged.append(arrival.unlogged() or _NONE_UNLOGGED)
                run.never_logged.append(never_logged.labelled() or _NONE_NEVER_LOGGED)
                held = held_validation(held, mapper.validation(data), bool(run.steps) and number < run.steps[-1])
                if step_stats.wanted:
                    logged = shown if is_training_line(data) else {}
                    step_stats.observe(number, {**logged, **held}, logged.get(STEP_TIME_METRIC))
                    run.statistics.append(step_stats.values())
                values = dict(shown)
                values[NONFINITE_STREAK_METRIC] = float(streak.observe(data))
                values[NONFINITE_LOSS_STREAK_METRIC] = float(streak.loss_steps)
                rounding = line_rounding(data) or rounding
                if rounding is not None:
                    values[LOG_ROUNDING_METRIC] = rounding
                if run.steps and number < run.steps[-1]:
                    run.notes.append(f"step went back from {run.steps[-1]} to {number} "
                                     f"(a resumed run); its steps are placed after the earlier ones")
                run.errors_seen.append(run.parse_errors)
                run.dropped_seen.append((run.dropped_lines, mapper.counts.dropped_keys, mapper.counts.key_collisions))
                if not run.validation or held is not held_before:
                    run.validation.append(held if keep is None else
                                          {series: value for series, value in held.items() if series[0] in keep})
                else:  # held from the previous test step: one dict for all the steps it is held
                    run.validation.append(run.validation[-1])
                steps_left_out.append(_steps_advanced(run.steps[-1] if run.steps else None, number) - 1)
                run.steps.append(number)
                run.values.append(values if keep is None else
                                  {name: value for name, value in values.items() if name in keep})
                durations.append(_step_seconds(values, timing.default_step_seconds))
                run.untimed_steps += not _has_timing(values)
        modified = os.stat(path).st_mtime
    except OSError as exc:
        raise BuildError(f"{path}: cannot read the step log: {exc.strerror or exc}") from None
    if not run.steps:
        raise BuildError(f"{path}: no step records in {lines} non-empty line(s) ({run.parse_errors} unparseable); "
                         f"expected verl's file-logger JSONL, one {{\"step\": N, \"data\": {{...}}}} per line")
    run.unmapped_keys = frozenset(never_logged.unmapped)
    # Errors read after a step's line but before the next step belong to that step's scrapes.
    run.errors_seen = [*run.errors_seen[1:], run.parse_errors]
    run.dropped_seen = [(lines_after[0], keys, collisions) for lines_after, (_, keys, collisions)
                        in zip([*run.dropped_seen[1:], (run.dropped_lines,)], run.dropped_seen)]
    if run.dropped_lines:
        run.notes.append(f"dropped {run.dropped_lines} line(s) longer than {MAX_LINE_BYTES} bytes")
    if run.parse_errors:
        run.notes.append(f"skipped {run.parse_errors} unparseable line(s)")
    if run.untimed_steps:
        run.notes.append(f"{run.untimed_steps} step(s) without timing_s/step placed "
                         f"{timing.default_step_seconds:g} s after the previous one")
    for note in mapper.counts.notes:
        run.notes.append(note)
    if any(steps_left_out):
        # A left-out step takes the run's median step time, not the next line's, which may hold
        # a validation or a checkpoint.
        typical = statistics.median(durations)
        durations = [seconds + left_out * typical for seconds, left_out in zip(durations, steps_left_out)]
    _place_on_clock(run, durations, timing, modified, time.time() if now is None else now)
    return run


def recorded_format(path: Path):
    """The reader of a record of a run that is not verl's JSONL step log (a TRL trainer_state.json,
    a TensorBoard event file or log directory, a W&B history export or offline run, verl's console
    log, an MLflow run's folder), known by its content;
    None for a step log or anything else."""
    for reader, recognises in ((mlflow_store, mlflow_store.is_mlflow_run), (trl, is_trainer_state),
                               (tensorboard_events, tensorboard_events.is_tensorboard_events),
                               (wandb_export, wandb_export.is_wandb_export),
                               (wandb_offline, wandb_offline.is_wandb_offline_run),
                               (verl_console, verl_console.is_console_log), (trl_console, trl_console.is_trl_console)):
        if recognises(path):
            return reader
    return None


@contextmanager
def _run_lines(path: Path) -> Iterator[Iterator[bytes | None]]:
    """The run's step-log lines: verl's JSONL as written, or another record of a run as such lines
    (a TRL trainer_state.json, a TensorBoard event file, a W&B history export, verl's console log, an
    MLflow run's folder: each known by its content)."""
    converted = recorded_format(path)
    if converted is not None:
        try:
            yield converted.step_log_lines(path)
        except ValueError as exc:
            raise BuildError(f"{path}: {exc}") from None
        return
    with open(path, "rb") as handle:
        yield _bounded_lines(handle)


def count_lines(path: Path, limit: int) -> int:
    """The run's non-empty step-log lines (an upper bound of its steps), counted without decoding
    them, up to `limit` + 1: a million-line log is not read whole to say it is over the limit."""
    counted = 0
    try:
        with _run_lines(path) as lines:
            for line in lines:
                if line is None or line.strip():
                    counted += 1
                    if counted > limit:
                        break
    except OSError as exc:
        raise BuildError(f"{path}: cannot read the step log: {exc.strerror or exc}") from None
    return counted


def _bounded_lines(handle) -> Iterator[bytes | None]:
    """The file's lines; None for one longer than the exporter's MAX_LINE_BYTES (not held in memory)."""
    while True:
        line = handle.readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
            while line and not line.endswith(b"\n"):
                line = handle.readline(MAX_LINE_BYTES)
            yield None
        else:
            yield line


def _steps_advanced(previous: int | None, number: int) -> int:
    """Steps a line stands for: a log that holds every Nth step advances N steps per line. A step
    that goes back (a resumed run) or a forward jump beyond MAX_LOGGING_INTERVAL_STEPS (not a
    logging interval: another run's log) counts as one."""
    if previous is None or not previous < number <= previous + MAX_LOGGING_INTERVAL_STEPS:
        return 1
    return number - previous


def _has_timing(values: dict[str, float]) -> bool:
    value = values.get(STEP_TIME_METRIC)
    return value is not None and math.isfinite(value) and value > 0


def _step_seconds(values: dict[str, float], default: float) -> float:
    return values[STEP_TIME_METRIC] if _has_timing(values) else default


def _place_on_clock(run: RecordedRun, durations: list[float], timing: Timing, modified: float,
                    now: float) -> None:
    offsets, total = [], 0.0
    for seconds in durations:
        total += seconds
        offsets.append(total)
    anchor = timing.start if timing.start is not None else modified - total
    overshoot = anchor + total + timing.hold_seconds - now
    if overshoot > 0:
        anchor -= overshoot
        run.notes.append(f"reconstructed times reached {overshoot:.0f} s past now; moved the run back to end now "
                         f"(Prometheus drops samples from the future)")
    run.times = [anchor + offset for offset in offsets]
    run.served_until = run.times[-1] + timing.hold_seconds
    # The gone exporter's failed scrapes stop at now: a run that just ended has no more yet.
    gone = 0.0 if timing.end == "hung" else GONE_SECONDS
    run.end = max(run.served_until, min(run.served_until + gone, now))
    scrapes = (run.end - run.times[0]) / timing.scrape_interval
    if not (math.isfinite(run.end) and math.isfinite(scrapes)) or scrapes > MAX_SCRAPES_PER_RUN:
        raise BuildError(f"{run.path}: the run spans {run.end - run.times[0]:.3g} s (its timing_s/step values sum to "
                         f"{total:.3g} s, plus --hold): {scrapes:.3g} scrapes at {timing.scrape_interval:g} s; "
                         f"at most {MAX_SCRAPES_PER_RUN:,} per run. Lengthen --scrape-interval or check the "
                         f"step times")
    if run.times[0] < 0:
        raise BuildError(f"{run.path}: placed to end by now, the run would start before 1970 (its timing_s/step "
                         f"values sum to {total:.3g} s); check the step times")


# --- OpenMetrics ---------------------------------------------------------------------------

def block_hours(span_seconds: float) -> int:
    """The shortest block length promtool offers that holds `span_seconds`.

    promtool 2.42 reads its whole input once per block, so a week-long run cut into its
    default 2 h blocks takes minutes; one or two blocks take seconds. The price, as
    Prometheus' docs say, is that retention drops a block only once all of it is too old.
    """
    hours = SMALLEST_BLOCK_HOURS
    while hours * 3600 < span_seconds:
        hours *= 3
    return hours


def create_blocks(openmetrics_file: Path, tsdb_dir: Path, span_seconds: float) -> None:
    """`promtool tsdb create-blocks-from openmetrics` into tsdb_dir; BuildError with promtool's message."""
    tsdb_dir.mkdir(parents=True, exist_ok=True)
    result = run_promtool(["tsdb", "create-blocks-from", "openmetrics", "--quiet",
                           f"--max-block-duration={block_hours(span_seconds)}h", str(openmetrics_file),
                           str(tsdb_dir)])
    if result.returncode != 0:
        raise BuildError(f"promtool could not turn {openmetrics_file} into blocks in {tsdb_dir} "
                         f"(exit {result.returncode}):\n{(result.stderr or result.stdout).strip()}")


def check_unique_runs(runs: list[RecordedRun]) -> None:
    seen: dict[str, Path] = {}
    for run in runs:
        if run.labels["instance"] in seen:
            raise BuildError(f"{run.path} and {seen[run.labels['instance']]} both map to run {run.name}; "
                             f"give one of them another file or folder name")
        seen[run.labels["instance"]] = run.path
