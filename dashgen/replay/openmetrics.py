"""A backfill's recorded runs written as `dashgen export` would have been scraped: OpenMetrics text,
families grouped, samples in time order (dashgen/replay/backfill.py turns it into blocks)."""

from __future__ import annotations

import bisect
from typing import Callable, Iterable, TextIO

from dashgen.catalog import (DROPPED_KEYS_METRIC, DROPPED_LINES_METRIC, EXIT_CODE_METRIC, EXPORTER_COUNTERS,
                             KEY_COLLISIONS_METRIC, LAST_STEP_METRIC, PARSE_ERRORS_METRIC, RUN_STATE_METRIC,
                             SERIES_NEVER_LOGGED_METRIC, SERIES_UNLOGGED_METRIC, STEP_STATISTIC_METRIC,
                             STEP_WINDOWS_INFO_METRIC, STEPS_METRIC, VALIDATION_FAMILIES, VALIDATION_LABELS, counter_family)
from dashgen.lifecycle import RunPhase
from dashgen.records import record
from dashgen.replay.backfill import CRASH_EXIT_CODE, RecordedRun

# Keep every how many samples of a run of equal values of a sample name (1: all of them).
EveryNth = Callable[[str], int]


_NONFINITE_TEXT = {"nan": "NaN", "inf": "+Inf", "-inf": "-Inf"}  # repr() of a float -> OpenMetrics


def openmetrics_value(value: float) -> str:
    text = repr(value)
    return _NONFINITE_TEXT.get(text, text)


def kept(count: int, every: int) -> Iterable[int]:
    """Positions kept of a run of `count` equal samples: the first, every `every`-th, the last."""
    yield from range(0, count, every)
    if every > 1 and (count - 1) % every:
        yield count - 1


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
                      only: set[str] | None = None, every: EveryNth = lambda name: 1,
                      scrapes: list[list[tuple[int, int]]] | None = None) -> int:
    """Write the runs' scrapes as OpenMetrics text (families grouped, samples in time order).

    `only` limits the output to these sample names; returns the number of samples written.
    `every`: a sample name's runs of equal values are thinned to their first and last scrape and
    every Nth between (dashgen/replay/backtest/thinning.py says when that changes no result).
    `scrapes`: each run's (time in ms, index of the step shown) instead of its scrapes on the calendar
    (dashgen/replay/backtest/step_clock.py).
    A series' lines are joined a step at a time (`_repeated`): a step is shown by several
    scrapes, whose lines differ only in their timestamp.
    """
    scrapes = [_Scrapes(run, own if own is not None else run.scrapes(scrape_interval))
               for run, own in zip(runs, scrapes or [None] * len(runs))]
    lines = _Lines(out, every)
    for family in _families(runs, only):
        out.write(f"# TYPE {family.name} {family.type}\n")
        for run, run_scrapes, per_step in zip(runs, scrapes, family.values):
            prefix = family.sample + label_text(run.labels) + " "
            series = lines.series(family.sample)
            for index, stamps in run_scrapes.by_step:
                if per_step[index] is None:
                    series.gap()
                else:
                    series.add(prefix + per_step[index], stamps)
            series.end()
    _write_validation(runs, scrapes, lines, only)
    if only is None or STEP_STATISTIC_METRIC in only:
        _write_statistics(runs, scrapes, lines)
    for name, (label_names, per_run) in _per_series(runs).items():
        if only is None or name in only:
            _write_per_series(name, label_names, per_run, runs, scrapes, lines)
    if only is None or STEP_WINDOWS_INFO_METRIC in only:
        out.write(f"# TYPE {STEP_WINDOWS_INFO_METRIC} gauge\n")
        for run, run_scrapes in zip(runs, scrapes):
            for digest in (run.step_windows_digest, *run.other_step_windows_digests):
                labels = label_text({**run.labels, "digest": digest})
                lines.series(STEP_WINDOWS_INFO_METRIC).add(f"{STEP_WINDOWS_INFO_METRIC}{labels} 1",
                                                           run_scrapes.stamps).end()
    if only is None or RUN_STATE_METRIC in only:
        out.write(f"# TYPE {RUN_STATE_METRIC} gauge\n")
        for run, run_scrapes in zip(runs, scrapes):
            final = _final_phase(run)
            for phase in RunPhase:
                prefix = RUN_STATE_METRIC + label_text({**run.labels, "state": phase.value}) + " "
                while_running, after = (str(float(phase is RunPhase.RUNNING)), str(float(phase is final)))
                lines.series(RUN_STATE_METRIC).add(prefix + while_running, run_scrapes.running).add(
                    prefix + after, run_scrapes.ended).end()
    if only is None or EXIT_CODE_METRIC in only:
        out.write(f"# TYPE {EXIT_CODE_METRIC} gauge\n")
        for run, run_scrapes in zip(runs, scrapes):
            if run.end_kind != "hung":
                code = CRASH_EXIT_CODE if run.end_kind == "crashed" else 0
                lines.series(EXIT_CODE_METRIC).add(f"{EXIT_CODE_METRIC}{label_text(run.labels)} {code}",
                                                   run_scrapes.ended).end()
    if only is None or "up" in only:
        out.write("# TYPE up gauge\n")
        for run, run_scrapes in zip(runs, scrapes):
            prefix = "up" + label_text({"job": run.labels["job"], "instance": run.labels["instance"]})
            gone = [_stamp(at) for at in _gone_scrapes(run, scrape_interval)]
            lines.series("up").add(prefix + " 1", run_scrapes.stamps).add(prefix + " 0", gone).end()
    out.write("# EOF\n")
    return lines.written


class _Lines:
    """Where each series' lines go, and how many samples went."""

    def __init__(self, out: TextIO, every: EveryNth):
        self.out = out
        self.every = every
        self.written = 0

    def series(self, sample: str) -> "_SeriesLines":
        return _SeriesLines(self, self.every(sample))


class _SeriesLines:
    """One series' lines, a step's scrapes at a time (`add`, in time order; `gap` where it has no
    value); each run of equal values written whole, or with every > 1 thinned (`kept`)."""

    def __init__(self, lines: _Lines, every: int):
        self.lines = lines
        self.every = every
        self.head: str | None = None  # the run's sample name, labels and value
        self.pieces: list[list[str]] = []  # the run's scrapes' stamps, step by step

    def add(self, head: str, stamps: list[str]) -> "_SeriesLines":
        if not stamps:
            return self
        if head != self.head:
            self.gap()
            self.head = head
        self.pieces.append(stamps)
        return self

    def gap(self) -> None:
        """End the run: the next sample is not the scrape after its last."""
        if self.head is None:
            return
        if self.every == 1:
            text = "".join(_repeated(self.head, stamps) for stamps in self.pieces)
            count = sum(len(stamps) for stamps in self.pieces)
        else:
            stamps = self.pieces[0] if len(self.pieces) == 1 else [at for piece in self.pieces for at in piece]
            chosen = [stamps[position] for position in kept(len(stamps), self.every)]
            text, count = _repeated(self.head, chosen), len(chosen)
        self.lines.out.write(text)
        self.lines.written += count
        self.head, self.pieces = None, []

    end = gap


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


def _write_validation(runs: list[RecordedRun], scrapes: list[_Scrapes], lines: _Lines, only: set[str] | None) -> None:
    """The validation families, each series at every scrape that holds a value for it."""
    for name in VALIDATION_FAMILIES.values():
        if only is not None and name not in only:
            continue
        per_run = [sorted({series for held in run.validation for series in held if series[0] == name})
                   for run in runs]
        if not any(per_run):
            continue
        lines.out.write(f"# TYPE {name} gauge\n")
        for run, run_scrapes, all_series in zip(runs, scrapes, per_run):
            for series in all_series:
                prefix = name + label_text({**run.labels, **dict(zip(VALIDATION_LABELS, series[1:]))})
                _write_at_steps(prefix, [held.get(series) for held in run.validation], run_scrapes,
                                lines.series(name))


def _write_statistics(runs: list[RecordedRun], scrapes: list[_Scrapes], lines: _Lines) -> None:
    wanted = sorted({served for run in runs for step in run.statistics for served in step},
                    key=lambda served: (served[0].series, served[0].name, served[1]))
    if not wanted:
        return
    lines.out.write(f"# TYPE {STEP_STATISTIC_METRIC} gauge\n")
    for served in wanted:
        stat, member = served
        for run, run_scrapes in zip(runs, scrapes):
            if not run.statistics:
                continue
            prefix = STEP_STATISTIC_METRIC + label_text({**run.labels, "series": stat.series, "statistic": stat.name,
                                                         **dict(member)})
            _write_at_steps(prefix, [step.get(served) for step in run.statistics], run_scrapes,
                            lines.series(STEP_STATISTIC_METRIC))


def _write_at_steps(prefix: str, per_step: list[float | int | None], run_scrapes: _Scrapes,
                    series: _SeriesLines) -> None:
    """One series of a run: each step's value (None: none) at the scrapes of that step."""
    for index, stamps in run_scrapes.by_step:
        value = per_step[index]
        if value is None:
            series.gap()
        else:
            series.add(f"{prefix} {openmetrics_value(value)}", stamps)
    series.end()


def _per_series(runs: list[RecordedRun]) -> dict[str, tuple[tuple[str, ...], list[list[dict]]]]:
    """The exporter's gauges labelled by series: their label names, and per run, per step, each labelled
    series' value (keyed by the series' name, or by the tuple of its labels' values)."""
    return {SERIES_UNLOGGED_METRIC: (("series",), [run.unlogged for run in runs]),
            SERIES_NEVER_LOGGED_METRIC: (("series", "logged_as"), [run.never_logged for run in runs])}


def _write_per_series(name: str, label_names: tuple[str, ...], per_run: list[list[dict]], runs: list[RecordedRun],
                      scrapes: list[_Scrapes], lines: _Lines) -> None:
    """A gauge of each series (verl_exporter_series_unlogged_steps, ..._never_logged_steps), at the
    scrapes of the steps it had a value at; an empty label value is left out, as Prometheus does."""
    if any(step for steps in per_run for step in steps):
        lines.out.write(f"# TYPE {name} gauge\n")
    for run, run_scrapes, steps in zip(runs, scrapes, per_run):
        for key in sorted({key for step in steps for key in step}):
            values = key if isinstance(key, tuple) else (key,)
            labels = {label: value for label, value in zip(label_names, values) if value}
            prefix = name + label_text({**run.labels, **labels})
            _write_at_steps(prefix, [step.get(key) for step in steps], run_scrapes, lines.series(name))


def _stamp(at_ms: int) -> str:
    return f" {at_ms // 1000}.{at_ms % 1000:03d}\n"


def _final_phase(run: RecordedRun) -> RunPhase:
    return {"finished": RunPhase.FINISHED, "crashed": RunPhase.CRASHED}.get(run.end_kind, RunPhase.RUNNING)


def _gone_scrapes(run: RecordedRun, interval: float) -> list[int]:
    """Times (ms) of the failed scrapes after the exporter went away."""
    interval_ms = round(interval * 1000)
    served_ms, end_ms = round(run.served_until * 1000), round(run.end * 1000)
    return list(range(served_ms + interval_ms, end_ms + 1, interval_ms))
