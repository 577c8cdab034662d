"""A backfill's recorded runs written as `dashgen export` would have been scraped: OpenMetrics text,
families grouped, samples in time order (dashgen/replay/backfill.py turns it into blocks)."""

from __future__ import annotations

import bisect
from typing import Iterable, TextIO

from dashgen.catalog import (DROPPED_KEYS_METRIC, DROPPED_LINES_METRIC, EXIT_CODE_METRIC, EXPORTER_COUNTERS,
                             KEY_COLLISIONS_METRIC, LAST_STEP_METRIC, PARSE_ERRORS_METRIC, RUN_STATE_METRIC,
                             SERIES_NEVER_LOGGED_METRIC, SERIES_UNLOGGED_METRIC, STEP_STATISTIC_METRIC,
                             STEP_WINDOWS_INFO_METRIC, STEPS_METRIC, VALIDATION_FAMILIES, VALIDATION_LABELS, counter_family)
from dashgen.lifecycle import RunPhase
from dashgen.records import record
from dashgen.replay.backfill import CRASH_EXIT_CODE, RecordedRun


_NONFINITE_TEXT = {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}  # repr() of a float -> OpenMetrics


def openmetrics_value(value: float) -> str:
    text = repr(value)
    return _NONFINITE_TEXT.get(text, text)


def label_text(labels: dict[str, str]) -> str:
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for value in labels.values())
    return "{" + ",".join(f'{name}="{value}"' for name, value in zip(labels, escaped)) + "}"


# A run's dropped lines, dropped keys and key collisions after each step (RecordedRun.dropped_seen), in order.
DROPPED_COUNTERS = (DROPPED_LINES_METRIC, DROPPED_KEYS_METRIC, KEY_COLLISIONS_METRIC)
# The exporter's own series (dashgen/catalog.py, EXPORTER_SERIES) that a backfill writes whatever the
# run logs; the non-finite streaks are among a step's values, the statistics and validation when computed.
EXPORTER_SAMPLES = frozenset({LAST_STEP_METRIC, *EXPORTER_COUNTERS, RUN_STATE_METRIC, EXIT_CODE_METRIC,
                              STEP_WINDOWS_INFO_METRIC})


def series_names(runs: list[RecordedRun]) -> set[str]:
    """Names of every series a backfill of the runs writes."""
    served = {STEP_STATISTIC_METRIC} if any(step for run in runs for step in run.statistics) else set()
    served |= {name for name, (_, per_run) in _per_series(runs).items()
               if any(step for steps in per_run for step in steps)}
    return {name for run in runs for step in run.values for name in step} | EXPORTER_SAMPLES | {"up"} | served


@record
class _Family:
    name: str
    type: str  # "gauge" or "counter"
    sample: str  # the sample's name: the family's, or with _total for a counter
    values: list  # per run: per-step value strings (None: not logged at that step)


def _families(runs: list[RecordedRun], only: set[str] | None) -> Iterable[_Family]:
    names = sorted({name for run in runs for step in run.values for name in step})
    for name in names:
        if only is None or name in only:
            yield _Family(name, "gauge", name, [[openmetrics_value(step[name]) if name in step else None
                                                  for step in run.values] for run in runs])
    # Each counter's value after each step, as the exporter counts it at that step.
    counted = {STEPS_METRIC: lambda run: [str(i + 1) for i in range(len(run.steps))],
               PARSE_ERRORS_METRIC: lambda run: [str(n) for n in run.errors_seen],
               **{name: lambda run, which=which: [str(counts[which]) for counts in run.dropped_seen]
                  for which, name in enumerate(DROPPED_COUNTERS)}}
    exporter = [(LAST_STEP_METRIC, "gauge", LAST_STEP_METRIC, lambda run: [repr(t) for t in run.times]),
                *((counter_family(name), "counter", name, counted[name]) for name in EXPORTER_COUNTERS)]
    for family, kind, sample, per_step in exporter:
        if only is None or sample in only:
            yield _Family(family, kind, sample, [per_step(run) for run in runs])


def write_openmetrics(runs: list[RecordedRun], out: TextIO, scrape_interval: float,
                      only: set[str] | None = None) -> int:
    """Write the runs' scrapes as OpenMetrics text (families grouped, samples in time order).

    `only` limits the output to these sample names; returns the number of samples written.
    A series' lines are joined a step at a time (`_repeated`): a step is shown by several
    scrapes, whose lines differ only in their timestamp.
    """
    scrapes = [_Scrapes(run, run.scrapes(scrape_interval)) for run in runs]
    written = 0
    for family in _families(runs, only):
        out.write(f"# TYPE {family.name} {family.type}\n")
        for run, run_scrapes, per_step in zip(runs, scrapes, family.values):
            prefix = family.sample + label_text(run.labels) + " "
            chunks = [_repeated(prefix + per_step[index], stamps) for index, stamps in run_scrapes.by_step
                      if per_step[index] is not None]
            out.write("".join(chunks))
            written += sum(len(stamps) for index, stamps in run_scrapes.by_step if per_step[index] is not None)
    written += _write_validation(runs, scrapes, out, only)
    if only is None or STEP_STATISTIC_METRIC in only:
        written += _write_statistics(runs, scrapes, out)
    for name, (label_names, per_run) in _per_series(runs).items():
        if only is None or name in only:
            written += _write_per_series(name, label_names, per_run, runs, scrapes, out)
    if only is None or STEP_WINDOWS_INFO_METRIC in only:
        out.write(f"# TYPE {STEP_WINDOWS_INFO_METRIC} gauge\n")
        for run, run_scrapes in zip(runs, scrapes):
            for digest in (run.step_windows_digest, *run.other_step_windows_digests):
                labels = label_text({**run.labels, "digest": digest})
                out.write(_repeated(f"{STEP_WINDOWS_INFO_METRIC}{labels} 1", run_scrapes.stamps))
                written += len(run_scrapes.stamps)
    if only is None or RUN_STATE_METRIC in only:
        out.write(f"# TYPE {RUN_STATE_METRIC} gauge\n")
        for run, run_scrapes in zip(runs, scrapes):
            final = _final_phase(run)
            for phase in RunPhase:
                prefix = RUN_STATE_METRIC + label_text({**run.labels, "state": phase.value}) + " "
                while_running, after = (str(float(phase is RunPhase.RUNNING)), str(float(phase is final)))
                out.write(_repeated(prefix + while_running, run_scrapes.running)
                          + _repeated(prefix + after, run_scrapes.ended))
                written += len(run_scrapes.stamps)
    if only is None or EXIT_CODE_METRIC in only:
        out.write(f"# TYPE {EXIT_CODE_METRIC} gauge\n")
        for run, run_scrapes in zip(runs, scrapes):
            if run.end_kind != "hung":
                code = CRASH_EXIT_CODE if run.end_kind == "crashed" else 0
                out.write(_repeated(f"{EXIT_CODE_METRIC}{label_text(run.labels)} {code}", run_scrapes.ended))
                written += len(run_scrapes.ended)
    if only is None or "up" in only:
        out.write("# TYPE up gauge\n")
        for run, run_scrapes in zip(runs, scrapes):
            prefix = "up" + label_text({"job": run.labels["job"], "instance": run.labels["instance"]})
            gone = [_stamp(at) for at in _gone_scrapes(run, scrape_interval)]
            out.write(_repeated(prefix + " 1", run_scrapes.stamps) + _repeated(prefix + " 0", gone))
            written += len(run_scrapes.stamps) + len(gone)
    out.write("# EOF\n")
    return written


class _Scrapes:
    """A run's scrapes as timestamp texts: all, grouped by the step shown, and before and after the last step."""

    def __init__(self, run: RecordedRun, scrapes: list[tuple[int, int]]):
        self.stamps = [_stamp(at) for at, _ in scrapes]
        self.by_step: list[tuple[int, list[str]]] = []  # (index of the step shown, its scrapes' stamps)
        first = 0
        for position in range(1, len(scrapes) + 1):
            if position == len(scrapes) or scrapes[position][1] != scrapes[first][1]:
                self.by_step.append((scrapes[first][1], self.stamps[first:position]))
                first = position
        # The scrape at the last step's own time still shows the run running.
        last_step_ms = round(run.times[-1] * 1000)
        after = bisect.bisect_right([at for at, _ in scrapes], last_step_ms)
        self.running, self.ended = self.stamps[:after], self.stamps[after:]


def _repeated(head: str, stamps: list[str]) -> str:
    """One line per stamp: head, then the stamp (which starts with a space and ends the line)."""
    return head + head.join(stamps) if stamps else ""


def _write_validation(runs: list[RecordedRun], scrapes: list[_Scrapes], out: TextIO, only: set[str] | None) -> int:
    """The validation families, each series at every scrape that holds a value for it."""
    written = 0
    for name in VALIDATION_FAMILIES.values():
        if only is not None and name not in only:
            continue
        per_run = [sorted({series for held in run.validation for series in held if series[0] == name})
                   for run in runs]
        if not any(per_run):
            continue
        out.write(f"# TYPE {name} gauge\n")
        for run, run_scrapes, all_series in zip(runs, scrapes, per_run):
            for series in all_series:
                prefix = name + label_text({**run.labels, **dict(zip(VALIDATION_LABELS, series[1:]))}) + " "
                held = [(run.validation[index][series], stamps) for index, stamps in run_scrapes.by_step
                        if series in run.validation[index]]
                out.write("".join(_repeated(prefix + openmetrics_value(value), stamps) for value, stamps in held))
                written += sum(len(stamps) for _, stamps in held)
    return written


def _write_statistics(runs: list[RecordedRun], scrapes: list[_Scrapes], out: TextIO) -> int:
    wanted = sorted({served for run in runs for step in run.statistics for served in step},
                    key=lambda served: (served[0].series, served[0].name, served[1]))
    if not wanted:
        return 0
    written = 0
    out.write(f"# TYPE {STEP_STATISTIC_METRIC} gauge\n")
    for served in wanted:
        stat, member = served
        for run, run_scrapes in zip(runs, scrapes):
            if not run.statistics:
                continue
            prefix = STEP_STATISTIC_METRIC + label_text({**run.labels, "series": stat.series, "statistic": stat.name,
                                                         **dict(member)})
            written += _write_at_steps(prefix, [step.get(served) for step in run.statistics], run_scrapes, out)
    return written


def _write_at_steps(prefix: str, per_step: list[float | int | None], run_scrapes: _Scrapes, out: TextIO) -> int:
    """One series of a run: each step's value (None: none) at the scrapes of that step."""
    written = 0
    for index, stamps in run_scrapes.by_step:
        value = per_step[index]
        if value is not None:
            out.write(_repeated(f"{prefix} {openmetrics_value(value)}", stamps))
            written += len(stamps)
    return written


def _per_series(runs: list[RecordedRun]) -> dict[str, tuple[tuple[str, ...], list[list[dict]]]]:
    """The exporter's gauges labelled by series: their label names, and per run, per step, each labelled
    series' value (keyed by the series' name, or by the tuple of its labels' values)."""
    return {SERIES_UNLOGGED_METRIC: (("series",), [run.unlogged for run in runs]),
            SERIES_NEVER_LOGGED_METRIC: (("series", "logged_as"), [run.never_logged for run in runs])}


def _write_per_series(name: str, label_names: tuple[str, ...], per_run: list[list[dict]], runs: list[RecordedRun],
                      scrapes: list[_Scrapes], out: TextIO) -> int:
    """A gauge of each series (verl_exporter_series_unlogged_steps, ..._never_logged_steps), at the
    scrapes of the steps it had a value at; an empty label value is left out, as Prometheus does."""
    written = 0
    if any(step for steps in per_run for step in steps):
        out.write(f"# TYPE {name} gauge\n")
    for run, run_scrapes, steps in zip(runs, scrapes, per_run):
        for key in sorted({key for step in steps for key in step}):
            values = key if isinstance(key, tuple) else (key,)
            labels = {label: value for label, value in zip(label_names, values) if value}
            prefix = name + label_text({**run.labels, **labels})
            written += _write_at_steps(prefix, [step.get(key) for step in steps], run_scrapes, out)
    return written


def _stamp(at_ms: int) -> str:
    return f" {at_ms // 1000}.{at_ms % 1000:03d}\n"


def _final_phase(run: RecordedRun) -> RunPhase:
    return {"finished": RunPhase.FINISHED, "crashed": RunPhase.CRASHED}.get(run.end_kind, RunPhase.RUNNING)


def _gone_scrapes(run: RecordedRun, interval: float) -> list[int]:
    """Times (ms) of the failed scrapes after the exporter went away."""
    interval_ms = round(interval * 1000)
    served_ms, end_ms = round(run.served_until * 1000), round(run.end * 1000)
    return list(range(served_ms + interval_ms, end_ms + 1, interval_ms))
