"""The newest step of a run as Prometheus metrics: the one state every front end feeds.

`dashgen export` feeds it from verl's JSONL step log (log_follower.py) and serves it
(metrics_server.py); `VerlPrometheusLogger.log(data, step)` feeds it from code that drives verl's
tracking itself. Only the newest step's values are held, and of the steps before, the values the
step windows read (dashgen/sources/step_statistics.py, a few hundred steps of a few series), so
memory stays flat however long the run.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable, Collection, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from dashgen.catalog import (CATALOG, DROPPED_KEYS_METRIC, DROPPED_LINES_METRIC, EXIT_CODE_METRIC, EXPORTER_COUNTERS,
                             KEY_COLLISIONS_METRIC, LAST_STEP_METRIC, LOG_ROUNDING_METRIC, NONFINITE_LOSS_STREAK_METRIC,
                             NONFINITE_STREAK_METRIC, PARSE_ERRORS_METRIC, RUN_STATE_METRIC, SERIES_NEVER_LOGGED_METRIC, SERIES_UNLOGGED_METRIC, STEP_STATISTIC_METRIC,
                             STEP_WINDOWS_INFO_METRIC, STEPS_METRIC, VALIDATION_FAMILIES, VALIDATION_LABELS, Catalog,
                             counter_family, verl_metric_name)
from dashgen.lifecycle import NonFiniteStreak, RunPhase
from dashgen.runtime.log_tail import VALIDATION_MARKERS, HistoryCounts, StatisticsInput, TailStart
from dashgen.formats.rounding import line_rounding
from dashgen.sources.expected_keys import NeverLogged
from dashgen.sources.series_arrival import SeriesArrival, logged_series
from dashgen.sources.step_statistics import FAMILIES, STEP_STATISTIC_LABELS, ServedStatistics, step_seconds
from dashgen.formats.verl_log import (MAX_REMEMBERED_KEYS, StepMapper, ValidationSeries, held_validation,
                                     is_training_line)

LABELS = ("project", "experiment")


class RunState:
    """The newest step of one run, as a prometheus_client collector."""

    def __init__(self, project: str, experiment: str, catalog: Catalog = CATALOG, export_unknown: bool = True,
                 total_steps: int | None = None, step_statistics: ServedStatistics = ServedStatistics()):
        self.labels = (project, experiment)
        self.catalog = catalog
        self._mapper = StepMapper(catalog, export_unknown)
        self._help = {name: m.help for name, m in catalog.items()}
        self._lock = threading.Lock()
        self._values: dict[str, float] = {}
        self.last_step: int | None = None
        self.last_step_time: float | None = None
        self.steps_total = 0
        self.parse_errors_total = 0
        # Sidecar mode: the run is finished once a step >= total_steps is logged.
        self.total_steps = total_steps
        self.phase = RunPhase.RUNNING
        self.exit_code: int | None = None
        self._streak = NonFiniteStreak(catalog)
        self._rounding: float | None = None  # the newest line's (dashgen/formats/rounding.py)
        self.dropped_lines_total = 0
        # Validation results are logged on test steps only: held until the next test step
        # replaces them (all of them: a series that step lacks is gone) or the run restarts.
        self._validation: dict[ValidationSeries, float] = {}
        # Started at a long log's tail: the counters are not served until its lines are counted.
        self.history_pending = False
        self.version = 0  # changes whenever what collect() yields may have
        # The rules' windows counted in steps (rendered/exporter/step-statistics.yaml): the one
        # thing kept of past steps, as far back as those windows reach.
        self._statistics = step_statistics.tracker()
        self._statistics_digest = step_statistics.digest
        self._arrival = SeriesArrival(logged_series(catalog))
        self._never_logged = NeverLogged(catalog)
        self._series_of_key = {key: metric.name for key, metric in catalog.verl_key_map().items()}

    def record(self, step: int, data: dict) -> None:
        """Take one line's data: its values replace the previous step's (StepMapper.step_values)."""
        with self._lock:
            values = self._mapper.step_values(step, data, self._values)
            self.version += 1
            self._values = values
            self.last_step_time = time.time()
            self._count(step, data)
            self._observe(step, values if is_training_line(data) else {})

    def take_values(self, step: int, data: dict) -> None:
        """Take a skipped line's values only: the newest training step before a line that has none."""
        with self._lock:
            self.version += 1
            self._values = self._mapper.step_values(step, data, self._values, counting=False)  # skip() counted it

    def amend(self, step: int, data: dict) -> None:
        """The newest step again, with values read after it was served (an event file's step written in
        two flushes): served as that step's, nothing counted again (its streaks and step windows keep
        what it held when first served)."""
        with self._lock:
            self.version += 1
            self._values = self._mapper.step_values(step, data, self._values, counting=False)
            self._validation = held_validation(self._validation, self._mapper.validation(data, counting=False), False)
            self._rounding = line_rounding(data) or self._rounding

    def skip(self, step: int, data: dict) -> None:
        """Count a step whose values a newer step already replaces (catching up on a long log)."""
        with self._lock:
            self.version += 1
            self._mapper.count(data)  # its keys not exported count as if it had been served
            self._count(step, data)
            if self._statistics.wanted:
                self._observe(step, self._logged(data))

    def resume(self, tail: TailStart) -> None:
        """Take what a whole read of the log so far would have left; its lines are counted by add_history."""
        with self._lock:
            self.version += 1
            self.history_pending = True
            if tail.newest is not None:
                step, data = tail.newest
                # Their keys not exported are counted with the rest of the history (add_history).
                trained = (self._mapper.step_values(*tail.newest_training, None, counting=False)
                           if tail.newest_training is not None else None)
                self._values = self._mapper.step_values(step, data, trained, counting=False)
                self.last_step_time = time.time()
                self.last_step = step
                self._reach(step)
            self._streak.steps, self._streak.loss_steps = tail.nonfinite_steps, tail.nonfinite_loss_steps
            self._rounding = tail.rounding
            self._validation = tail.validation

    @property
    def statistics_reach(self) -> int:
        """How many steps back the step statistics read: what a tail start reads again for them."""
        return self._statistics.reach

    def take_recent(self, records: list[tuple[int, dict]], before: TailStart | None = None,
                    logged_before: dict[str, int] | None = None) -> None:
        """The last steps' records before a tail start, oldest first: the step statistics' history;
        `before`: what a whole read left before them (read_tail where the oldest starts), if any;
        `logged_before`: the series a record before them gave a value, since the run last restarted,
        each with its step (log_tail.logged_before)."""
        with self._lock:
            self.version += 1
            held = self._validation
            # The results held along them: those a test step before them left, then those they log.
            self._validation = before.validation if before is not None else {}
            previous = before.newest[0] if before is not None and before.newest is not None else None
            if records and (previous is None or previous <= records[0][0]):  # no restart at the first
                self._statistics.logged_before({**(logged_before or {}),
                                                **dict.fromkeys(self._validation, previous)})
            for index, (step, data) in enumerate(records):
                restarted = step < (records[index - 1][0] if index > 0 else previous if previous is not None else step)
                self._validation = held_validation(self._validation, self._mapper.validation(data, counting=False),
                                                   restarted)
                self._observe(step, self._logged(data))
            self._validation = held

    def statistics_input(self) -> StatisticsInput:
        """What the step statistics read of a record: which of a step's lines a tail start decodes."""
        return _StatisticsInput(self)

    def _logged(self, data: dict) -> dict[str, float]:
        """A line's values as the step statistics take them: none from a line with no training value."""
        return self._mapper.map(data, counting=False) if is_training_line(data) else {}

    def _observe(self, step: int, logged: dict[str, float]) -> None:
        """Feed the statistics a line's values and the validation results served after it."""
        self._statistics.observe(step, {**logged, **self._validation}, step_seconds(logged))

    def add_history(self, counts: HistoryCounts) -> None:
        """Count the lines a tail start skipped, as a whole read would have."""
        with self._lock:
            self.version += 1
            self.steps_total += counts.steps
            self.parse_errors_total += counts.parse_errors
            self.dropped_lines_total += counts.dropped_lines
            self._mapper.counts.dropped_keys += counts.dropped_keys
            self._mapper.counts.key_collisions += counts.key_collisions
            if counts.highest_step is not None:
                self._reach(counts.highest_step)
            self.history_pending = False

    def _reach(self, step: int) -> None:
        if self.total_steps is not None and step >= self.total_steps and self.phase is RunPhase.RUNNING:
            self.phase = RunPhase.FINISHED

    def _count(self, step: int, data: dict) -> None:
        self._validation = held_validation(self._validation, self._mapper.validation(data),
                                           self.last_step is not None and step < self.last_step)
        self.last_step = step
        self.steps_total += 1
        self._streak.observe(data)
        self._rounding = line_rounding(data) or self._rounding
        if is_training_line(data):
            self._arrival.observe(self._series_of_key[key] for key in data if key in self._series_of_key)
            self._never_logged.observe(data)
        self._reach(step)

    def ended(self, phase: RunPhase, exit_code: int | None = None) -> None:
        """The trainer is gone: how it ended, and its exit code when known."""
        with self._lock:
            self.version += 1
            self.phase = phase
            self.exit_code = exit_code

    def parse_error(self) -> None:
        with self._lock:
            self.version += 1
            self.parse_errors_total += 1

    def dropped_line(self) -> None:
        with self._lock:
            self.version += 1
            self.dropped_lines_total += 1

    def take_notes(self) -> list[str]:
        """Messages about keys not exported (collisions, the series limit) since the last call."""
        with self._lock:
            notes, self._mapper.counts.notes = self._mapper.counts.notes, []
        return notes

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            values = dict(self._values)
            last_time, steps, errors = self.last_step_time, self.steps_total, self.parse_errors_total
            phase, exit_code, streak = self.phase, self.exit_code, self._streak.steps
            loss_streak, rounding = self._streak.loss_steps, self._rounding
            validation = self._validation
            statistics = self._statistics.values()
            per_series = ((SERIES_UNLOGGED_METRIC, ("series",), {(series,): lines for series, lines in
                                                               self._arrival.unlogged().items()}),
                          (SERIES_NEVER_LOGGED_METRIC, ("series", "logged_as"), self._never_logged.labelled()))
            counts = {STEPS_METRIC: steps, PARSE_ERRORS_METRIC: errors, DROPPED_LINES_METRIC: self.dropped_lines_total,
                      DROPPED_KEYS_METRIC: self._mapper.counts.dropped_keys,
                      KEY_COLLISIONS_METRIC: self._mapper.counts.key_collisions}
            counters = () if self.history_pending else [(name, counts[name]) for name in EXPORTER_COUNTERS]
        for name in sorted(values):
            family = GaugeMetricFamily(name, self._help.get(name, "verl metric (no catalog entry)"),
                                       labels=LABELS)
            family.add_metric(self.labels, values[name])
            yield family
        if last_time is not None:
            family = GaugeMetricFamily(LAST_STEP_METRIC, self._help[LAST_STEP_METRIC], labels=LABELS)
            family.add_metric(self.labels, last_time)
            yield family
        for name, value in counters:
            family = CounterMetricFamily(counter_family(name), self._help[name], labels=LABELS)
            family.add_metric(self.labels, value)
            yield family
        family = GaugeMetricFamily(RUN_STATE_METRIC, self._help[RUN_STATE_METRIC], labels=(*LABELS, "state"))
        for each in RunPhase:
            family.add_metric((*self.labels, each.value), float(each is phase))
        yield family
        if exit_code is not None:
            family = GaugeMetricFamily(EXIT_CODE_METRIC, self._help[EXIT_CODE_METRIC], labels=LABELS)
            family.add_metric(self.labels, exit_code)
            yield family
        gauges = [(NONFINITE_STREAK_METRIC, streak), (NONFINITE_LOSS_STREAK_METRIC, loss_streak)]
        if rounding is not None:
            gauges.append((LOG_ROUNDING_METRIC, rounding))
        for name, value in gauges:
            family = GaugeMetricFamily(name, self._help[name], labels=LABELS)
            family.add_metric(self.labels, value)
            yield family
        yield from validation_families(validation, self.labels, self._help)
        family = GaugeMetricFamily(STEP_WINDOWS_INFO_METRIC, self._help[STEP_WINDOWS_INFO_METRIC],
                                   labels=(*LABELS, "digest"))
        family.add_metric((*self.labels, self._statistics_digest), 1.0)
        yield family
        if statistics:
            family = GaugeMetricFamily(STEP_STATISTIC_METRIC, self._help[STEP_STATISTIC_METRIC],
                                       labels=(*LABELS, *STEP_STATISTIC_LABELS))
            for (statistic, member), value in statistics.items():
                labels = dict(zip((*LABELS, *STEP_STATISTIC_LABELS), (*self.labels, statistic.series, statistic.name)))
                family.add_sample(STEP_STATISTIC_METRIC, {**labels, **dict(member)}, value)
            yield family
        for name, label_names, lines_of in per_series:
            if lines_of:
                family = GaugeMetricFamily(name, self._help[name], labels=(*LABELS, *label_names))
                for labels, lines in sorted(lines_of.items()):
                    family.add_metric((*self.labels, *labels), lines)
                yield family


def validation_families(held: dict[ValidationSeries, float], run: tuple[str, str],
                        help_texts: dict[str, str]) -> Iterator[Metric]:
    for name in VALIDATION_FAMILIES.values():
        series = sorted((key, value) for key, value in held.items() if key[0] == name)
        if series:
            family = GaugeMetricFamily(name, help_texts[name], labels=(*LABELS, *VALIDATION_LABELS))
            for (_, *labels), value in series:
                family.add_metric((*run, *labels), value)
            yield family


class VerlPrometheusLogger:
    """For people who build verl's Tracking themselves: `log(data, step)` like any backend.

    >>> from dashgen.sources.statistics_file import load_statistics
    >>> logger = VerlPrometheusLogger("gsm8k", "ppo-7b",
    ...     step_statistics=load_statistics(Path("rendered/exporter/step-statistics.yaml")))
    >>> logger.log({"actor/ppo_kl": 0.01}, step=1)
    Serve `logger.registry` with prometheus_client (e.g. start_http_server(9464, registry=...)).
    """

    def __init__(self, project: str, experiment: str, registry: CollectorRegistry | None = None,
                 export_unknown: bool = True, step_statistics: ServedStatistics = ServedStatistics()):
        self.state = RunState(project, experiment, export_unknown=export_unknown, step_statistics=step_statistics)
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self.registry.register(self.state)

    def log(self, data: dict, step: int) -> None:
        try:
            self.state.record(int(step), data)
        except Exception:  # monitoring must never take the training job down
            self.state.parse_error()


# A line's strings, read without decoding it, each with the colon after it if it is a key. Read
# from the line's start, its quotes pair as JSON's do (a string spelt with escapes is not read
# so: a line with a backslash is decoded instead).
_STRING = re.compile(rb'"([^"\\]*)"(\s*:)?')


class _StatisticsInput:
    """RunState.statistics_input: a record's series read through the run's own key mapping."""

    def __init__(self, state: RunState):
        self._state = state
        self.series = state._statistics.series
        self._catalog_keys = state.catalog.verl_key_map()
        self._key_series: dict[bytes, frozenset[str]] = {}

    def gives(self, data: dict) -> set[str]:
        """The series a record gives a value; each family for one that logs any validation result,
        which replaces all held."""
        with self._state._lock:
            given = self._state._statistics.given(self._state._logged(data))
            if self._state._mapper.validation(data, counting=False):
                given |= self.series & FAMILIES
            return given

    def may_give(self, series: Collection[str]) -> Callable[[bytes], bool]:
        missing = frozenset(series)
        markers = VALIDATION_MARKERS if not missing.isdisjoint(FAMILIES) else ()

        def test(line: bytes) -> bool:
            return b"\\" in line or any(marker in line for marker in markers) or any(
                colon and not missing.isdisjoint(self._series_of(key)) for key, colon in _STRING.findall(line))

        return test

    def _series_of(self, key: bytes) -> frozenset[str]:
        """The series a key may be exported as: the catalog's, or its own escaped name (StepMapper)."""
        if key not in self._key_series:
            try:
                text = key.decode()
            except UnicodeDecodeError:  # never a key json reads: decoded and refused like any garbage
                return self.series
            named = {verl_metric_name(text)[0]}
            if text in self._catalog_keys:
                named.add(self._catalog_keys[text].name)
            if len(self._key_series) >= MAX_REMEMBERED_KEYS:
                self._key_series.clear()
            self._key_series[key] = frozenset(named)
        return self._key_series[key]
