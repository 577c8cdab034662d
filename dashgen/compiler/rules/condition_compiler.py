"""Compiles the alert vocabulary (dashgen/conditions.py) to PromQL, and records the baselines
the conditions compare with: rolling medians, held baselines and the groups that step them."""

from __future__ import annotations

import math
from dataclasses import field, replace
from typing import Callable

from dashgen.catalog import Catalog, Metric, Origin
from dashgen.compiler.rules.reductions import (RANGE_REDUCTIONS, complete_baseline_median, early_baseline_median,
                                         over_range, over_time, promql_number, smoothed)
from dashgen.compiler.rules.step_windows import (MAX_SAMPLES, MAX_SAMPLES_OF_MEDIANS, STEP_BAND, banded, near_band_copy,
                                          rhythm_recordings)
from dashgen.conditions import (AllOf, AnyOf, Baseline, Compare, Comparison, Condition, Gain, Shift, Signal, Steps,
                                comparisons, percentile_of)
from dashgen.config import duration_seconds, format_duration
from dashgen.errors import BuildError, get_close_matches
from dashgen.model import ON_RUN, Recording, RuleGroup
from dashgen.records import record
from dashgen.sources.step_statistics import FAMILIES, STEP_STATISTIC_LABELS, STEP_STATISTIC_METRIC, StepStatistic


@record
class BaselineDefaults:
    """What an empty Baseline field means, and how held baselines are kept (from the config)."""
    window: str
    ending: str
    hold_window: str
    hold_step: str
    rhythm_window: str = "6h"  # where a run's seconds per step are measured (step windows)
    step_window_floor: str = "1m"  # the shortest time a step window compiles to
    rule_interval: str = "1m"  # how often a recording is evaluated (the slow bands read copies of it)
    scrape_interval: str = "15s"  # how often a scraped series has a sample


@record(frozen=False)
class SignalSeries:
    """A signal's series as a rule reads it, and the names its baselines are recorded under."""
    expr: str  # e.g. verl_actor_ppo_kl{verl}
    stem: str  # e.g. verl:actor_ppo_kl, the level:metric part of its recordings' names
    metric: Metric | None


@record(frozen=False)
class BaselineRecordings:
    """The recordings an alert group needs, in the order they are emitted."""
    rolling: list[Recording] = field(default_factory=list)
    held: list[Recording] = field(default_factory=list)
    steps: list[Recording] = field(default_factory=list)  # the held baselines' per-step extremes


# Which scrape job's selector a signal's metric takes, by the metric's origin.
_SELECTOR_BY_ORIGIN = {Origin.VERL: "verl", Origin.PROJECT: "verl", Origin.RAY: "node", Origin.DCGM: "gpu",
                       Origin.VLLM: "rollout", Origin.SGLANG: "rollout"}


def resolve_signal(ref: str, catalog: Catalog, where: str) -> SignalSeries:
    """The series a signal reference names: a verl key, a catalog name or a recorded series."""
    by_key = catalog.verl_key_map()
    metric = by_key.get(ref) or catalog.get(ref)
    if metric is None:
        known = [*by_key, *catalog]
        close = get_close_matches(ref, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else " (a verl step-log key such as 'actor/ppo_kl', or a metric of the catalog)"
        raise BuildError(f"{where}: signal {ref!r} is neither a verl key nor a known metric{hint}")
    name = metric.name
    if metric.origin is Origin.RECORDING_RULE or ":" in name:
        return SignalSeries(name, name, metric)
    selector = _SELECTOR_BY_ORIGIN.get(metric.origin)
    if metric.origin is Origin.PROJECT and not metric.verl_keys:
        selector = None  # another exporter's metric: the author's own selectors apply
    stem = "verl:" + name[len("verl_"):] if name.startswith("verl_") else f"dashgen:{name}"
    return SignalSeries(f"{name}{{{selector}}}" if selector else name, stem, metric)


# The reductions the exporter computes over a logged series' steps (dashgen/sources/step_statistics.py),
# besides any quantile.
_EXPORTER_REDUCTIONS = ("median", "max", "min")


class ConditionCompiler:
    """Compiles the conditions of a project's alerts and collects the baselines they need. A
    baseline is recorded once per project (series names are global): in the group of the first
    alert that needs it; later alerts read that recording."""

    def __init__(self, catalog: Catalog, defaults: BaselineDefaults, exporter_statistics: bool = False):
        self.catalog = catalog
        self.defaults = defaults
        # The source computes step windows of the series it logs itself (the exporter): their
        # recordings read its verl_step_statistic, and these are the statistics they read.
        self.exporter_statistics = exporter_statistics
        self.step_statistics: set[StepStatistic] = set()
        self.recordings = BaselineRecordings()
        self._rolling: dict[tuple[str, ...], str] = {}  # (stem, window, ending, min_history) -> recording name
        self._held: dict[tuple[str, bool], str] = {}  # (rolling name, fault raises) -> held name
        self._medians: set[tuple[str, str]] = set()  # (stem, window) of the rolling medians recorded
        self._quietest: dict[tuple, str] = {}  # (stem, window, over, min_history, fault raises) -> name
        self._by_steps: dict[tuple, str] = {}  # (stem, reduction, steps[, ending]) -> recording name
        self._copies: dict[str, str] = {}  # series -> the recording of its near-band copies
        self._rhythm_recorded = False

    def signal(self, signal: Signal, where: str) -> tuple[str, SignalSeries]:
        series = resolve_signal(signal.ref, self.catalog, where)
        if not signal.reduction:
            return series.expr, series
        reduce = over_time(signal.reduction)
        if reduce is None or not signal.window:
            raise BuildError(f"{where}: signal {signal.ref!r}: reduce with median_over, max_over, min_over, "
                             f"quantile_over or changes_over(window)")
        if isinstance(signal.window, Steps):
            return self.step_reduction(series, signal.reduction, signal.window, signal.half_logged), series
        if signal.half_logged:
            raise BuildError(f"{where}: signal {signal.ref!r}: after_half_window() applies to a window in steps")
        if not isinstance(signal.window, str):
            raise BuildError(f"{where}: signal {signal.ref!r}: a window is a duration ('5m') or steps(N), "
                             f"not {signal.window!r}")
        return reduce(series.expr, signal.window), series

    def _rhythm(self) -> None:
        """The run's rhythm, recorded in the group of the first alert that counts in steps."""
        if not self._rhythm_recorded:
            self._rhythm_recorded = True
            self.recordings.rolling.extend(rhythm_recordings(self.defaults.rhythm_window))

    def _sampled_every(self, series: str) -> str:
        """How often `series` has a sample: a recording's once an evaluation, a scraped one's once a scrape."""
        return self.defaults.rule_interval if ":" in series.split("{")[0] else self.defaults.scrape_interval

    def _copied(self, series: str, name: str, reduce: Callable[[str, str], str]) -> tuple[Callable[[str], str], str]:
        """How a coarse branch reads `series`: `reduce` of its near-band copy (recorded under
        `name`, once, when a branch first reads it), and how often that copy is recorded."""
        def read_copy(selected_range: str) -> str:
            if series not in self._copies:
                self._copies[series] = f"{name}:by_band"
                self.recordings.rolling.append(near_band_copy(self._copies[series], series))
            return reduce(self._copies[series], selected_range)
        return read_copy, self.defaults.rule_interval

    def computes_step_windows(self, series: SignalSeries) -> bool:
        """Whether the source computes `series`' step windows from the step log (see
        dashgen/sources/step_statistics.py): a series the exporter maps from a logged key, or a
        labelled family of them (per member)."""
        metric = series.metric
        return (self.exporter_statistics and metric is not None and metric.origin in (Origin.VERL, Origin.PROJECT)
                and (bool(metric.verl_keys) or metric.name in FAMILIES) and ":" not in metric.name)

    def _statistic(self, statistic: StepStatistic) -> str:
        """The exporter's series of `statistic`, as the run's own series (its labels dropped)."""
        self.step_statistics.add(statistic)
        return (f"max without({', '.join(STEP_STATISTIC_LABELS)}) ({STEP_STATISTIC_METRIC}"
                f"{{verl, series=\"{statistic.series}\", statistic=\"{statistic.name}\"}})")

    def step_reduction(self, series: SignalSeries, reduction: str, window: Steps, half_logged: bool = False,
                       fully_logged: bool = False) -> str:
        """A recording of `series` reduced over the run's last `window.count` steps (`half_logged`:
        once the series has been logged over half of them; `fully_logged`, the exporter's only: all)."""
        key = (series.stem, reduction, window.count, half_logged, fully_logged)
        if key in self._by_steps:
            return self._by_steps[key]
        logged = "_half_logged" if half_logged else "_fully_logged" if fully_logged else ""
        name = self._by_steps[key] = f"{series.stem}:{reduction}_{window.count}steps{logged}"
        since = ", once half of them are logged" if half_logged else ", once all are logged" if fully_logged else ""
        if self.computes_step_windows(series) and (reduction in _EXPORTER_REDUCTIONS
                                                   or percentile_of(reduction) is not None):
            self.recordings.rolling.append(Recording(
                name, self._statistic(StepStatistic(series.metric.name, reduction, window.count,
                                                    half_logged=half_logged, fully_logged=fully_logged)),
                f"The {reduction} of {series.metric.name} over the run's last {window.count} logged steps{since} "
                f"(the exporter's)"))
            return name
        self._rhythm()
        reduce = over_range(reduction)
        copied = self._copied(series.expr, series.stem, reduce)
        floor, every = self.defaults.step_window_floor, self._sampled_every(series.expr)
        # Changes are read twice a step whatever the window: sampled more coarsely, a value held for one
        # step (a skipped step's streak of 1) falls between two samples.
        most = 2 * window.count if reduction == "changes" else MAX_SAMPLES
        expr = banded(window.count, lambda r: reduce(series.expr, r), floor, max_samples=most, copied=copied,
                      sampled_every=every)
        if half_logged:
            expr = f"(\n{expr}\n)\nand on({ON_RUN})\n(\n{self._logged_since(series, window.count // 2)}\n)"
        self.recordings.rolling.append(Recording(
            name, expr, f"The {reduction} of {series.expr.split('{')[0]} over the run's last {window.count} steps{since}"))
        return name

    def _logged_since(self, series: SignalSeries, steps_back: int) -> str:
        """Present where `series` has a sample from `steps_back` steps ago (a step window in PromQL)."""
        present = RANGE_REDUCTIONS["present"]
        return banded(1, lambda r: present(series.expr, r), self.defaults.step_window_floor, ending=steps_back,
                      copied=self._copied(series.expr, series.stem, present),
                      sampled_every=self._sampled_every(series.expr))

    def rolling_baseline(self, series: SignalSeries, baseline: Baseline, where: str) -> str:
        if isinstance(baseline.window, Steps) or isinstance(baseline.ending, Steps):
            return self._rolling_in_steps(series, baseline, where)
        window = baseline.window or self.defaults.window
        ending = baseline.ending or self.defaults.ending
        key = (series.stem, window, ending, baseline.min_history)
        if baseline.min_history and not 0 < duration_seconds(baseline.min_history) < duration_seconds(window):
            raise BuildError(f"{where}: baseline of {series.expr}: min_history {baseline.min_history!r} must be a duration "
                             f"longer than 0s and shorter than the window ({window})")
        if key not in self._rolling:
            # baseline_median, or baseline_median_early10m for one that exists after 10m of history;
            # a second baseline of the same kind on other windows says them.
            early = f"_early{baseline.min_history}" if baseline.min_history else ""
            name = f"{series.stem}:baseline_median{early}"
            if name in self._rolling.values():
                name += f"_{window}_{ending}"
            self._rolling[key] = name
            if baseline.min_history:
                expr = early_baseline_median(series.expr, window, ending, baseline.min_history)
                since = f"once {baseline.min_history} of that window is covered"
            else:
                expr, since = complete_baseline_median(series.expr, window, ending), "once that window is full"
            self.recordings.rolling.append(Recording(
                name, expr, f"Median of {series.expr.split('{')[0]} over {window}, ending {ending} ago, {since}"))
        return self._rolling[key]

    def _rolling_in_steps(self, series: SignalSeries, baseline: Baseline, where: str) -> str:
        """The median of the run's `window` steps ending `ending` steps ago, from its first steps on."""
        window, ending = baseline.window, baseline.ending
        if not (isinstance(window, Steps) and isinstance(ending, Steps)) or baseline.min_history:
            raise BuildError(f"{where}: baseline of {series.expr}: a baseline in steps gives its window and ending in steps "
                             f"(Baseline(steps(100), ending=steps(20))) and needs no min_history")
        key = (series.stem, str(window), str(ending), "")
        if key in self._rolling:
            return self._rolling[key]
        name = self._rolling[key] = f"{series.stem}:baseline_median_{window.count}steps_ending{ending.count}"
        if self.computes_step_windows(series):
            statistic = StepStatistic(series.metric.name, "median", window.count, ending.count, half_logged=True)
            self.recordings.rolling.append(Recording(
                name, self._statistic(statistic),
                f"Median of {series.metric.name} over the run's {window.count} logged steps ending {ending.count} "
                f"steps ago, once half of that window is logged (the exporter's)"))
            return name
        self._rhythm()
        floor = self.defaults.step_window_floor
        median = banded(window.count, lambda r: RANGE_REDUCTIONS["median"](series.expr, r), floor,
                        ending=ending.count, sampled_every=self._sampled_every(series.expr),
                        copied=self._copied(series.expr, series.stem, RANGE_REDUCTIONS["median"]))
        # Once the run has logged half the window: a median of a young run's first few steps
        # is no level to compare a fault with.
        history = self._logged_since(series, ending.count + window.count // 2)
        self.recordings.rolling.append(Recording(
            name, f"(\n{median}\n)\nand on({ON_RUN})\n(\n{history}\n)",
            f"Median of {series.expr.split('{')[0]} over the run's {window.count} steps ending {ending.count} "
            f"steps ago, once half of that window is logged"))
        return name

    def quietest_baseline(self, series: SignalSeries, baseline: Baseline, fault_raises: bool, where: str) -> str:
        """The lowest (a fault raises the signal) or highest median over `window` of the last `over`:
        a recorded rolling median, and its extreme over `over` once `min_history` of it exists."""
        # A peak is the other extreme: the highest median for a signal a fault raises.
        lowest = fault_raises != baseline.is_peak
        if isinstance(baseline.window, Steps) or isinstance(baseline.over, Steps):
            return self._quietest_in_steps(series, baseline, lowest, where)
        if baseline.is_peak or baseline.ending:
            raise BuildError(f"{where}: a peak baseline, or a quietest one with an ending, counts its windows in "
                             f"steps: Baseline.peak(steps(10), over=steps(200), ending=steps(10))")
        window, over, min_history = baseline.window or self.defaults.window, baseline.over, baseline.min_history
        if duration_seconds(window) >= duration_seconds(over):
            raise BuildError(f"{where}: quietest baseline of {series.expr}: its window {window!r} must be shorter "
                             f"than over {over!r}")
        if min_history and not 0 < duration_seconds(min_history) < duration_seconds(over):
            raise BuildError(f"{where}: quietest baseline of {series.expr}: min_history {min_history!r} must be a "
                             f"duration longer than 0s and shorter than over ({over})")
        key = (series.stem, window, over, min_history, fault_raises)
        if key not in self._quietest:
            median = f"{series.stem}:median_{window}"
            if (series.stem, window) not in self._medians:
                self._medians.add((series.stem, window))
                self.recordings.rolling.append(Recording(
                    median, smoothed(series.expr, window), f"Median of {series.expr.split('{')[0]} over {window}"))
            extreme, word = ("min", "floor") if fault_raises else ("max", "ceiling")
            name = f"{series.stem}:baseline_{word}"
            if name in self._quietest.values():  # another quietest baseline of the signal: say all that differs
                name += f"_{window}_{over}_{min_history or 'full'}"
            self._quietest[key] = name
            expr = f"{extreme}_over_time({median}[{over}])"
            since = ""
            if min_history:
                back = format_duration(duration_seconds(over) - duration_seconds(min_history))
                expr += f"\n  and present_over_time({series.expr}[{back}] offset {min_history})"
                since = f", once the run has {min_history} of history in it"
            adjective = "Lowest" if fault_raises else "Highest"
            self.recordings.rolling.append(Recording(
                name, expr, f"{adjective} {median} of the last {over}{since}: the run's quietest level"))
        return self._quietest[key]

    def _quietest_in_steps(self, series: SignalSeries, baseline: Baseline, lowest: bool, where: str) -> str:
        """The lowest or highest median over `window` steps of the last `over` steps (ending
        `ending` steps ago), from the run's first steps on."""
        window, over, ending = baseline.window, baseline.over, baseline.ending
        if not (isinstance(window, Steps) and isinstance(over, Steps) and isinstance(ending, (Steps, str))
                and (isinstance(ending, Steps) or not ending)):
            raise BuildError(f"{where}: baseline of {series.expr}: count its windows (and ending) in steps "
                             f"(Baseline.quietest(steps(10), over=steps(60))) or none of them")
        if window.count >= over.count:
            raise BuildError(f"{where}: quietest baseline of {series.expr}: its window {window} must be shorter "
                             f"than over {over}")
        if baseline.min_history:
            raise BuildError(f"{where}: quietest baseline of {series.expr}: a baseline in steps exists from the "
                             f"run's first steps; min_history does not apply")
        ended = ending.count if ending else 0
        key = (series.stem, window, over, ended, lowest)
        if key not in self._quietest:
            extreme, word = ("min", "floor") if lowest else ("max", "ceiling")
            name = f"{series.stem}:baseline_{word}_{over.count}steps" + (f"_ending{ended}" if ended else "")
            if name in self._quietest.values():
                name += f"_of_{window.count}"
            self._quietest[key] = name
            adjective = "Lowest" if lowest else "Highest"
            before = f", ending {ended} steps ago" if ended else ""
            if self.computes_step_windows(series):
                statistic = StepStatistic(series.metric.name, extreme, over.count, ended, of_median=window.count)
                self.recordings.rolling.append(Recording(
                    name, self._statistic(statistic),
                    f"{adjective} median of {series.metric.name} over {window.count} steps, of the run's last "
                    f"{over.count} logged steps{before} (the exporter's)"))
                return name
            # A median from the run's first steps would be its first value alone.
            median = self.step_reduction(series, "median", window, half_logged=True)
            reduce = RANGE_REDUCTIONS[extreme]
            self.recordings.rolling.append(Recording(
                name, banded(over.count, lambda r: reduce(median, r), self.defaults.step_window_floor,
                             ending=ended, max_samples=MAX_SAMPLES_OF_MEDIANS,
                             copied=self._copied(median, median, reduce), sampled_every=self.defaults.rule_interval),
                f"{adjective} {median} of the run's last {over.count} steps{before}"))
        return self._quietest[key]

    def held_for_steps(self, expr: str, alert: str, for_steps: Steps) -> str:
        """`expr`, once it has held at every evaluation over the run's last `for_steps` steps:
        `for` counted in steps. What held is recorded as 1 (held) or 0 (a run with a rhythm where
        it did not), and its minimum over the steps must be 1, from a record as old as the steps."""
        self._rhythm()
        holds = f"dashgen:{alert}:condition_holds"
        self.recordings.rolling.append(Recording(
            holds, f"max by ({ON_RUN}) (({expr}) * 0 + 1)\nor on({ON_RUN})\n{STEP_BAND} * 0",
            f"1 where {alert}'s condition holds, 0 for the other runs with a rhythm"))
        floor, count = self.defaults.step_window_floor, for_steps.count
        every = self.defaults.rule_interval
        lowest = banded(count, lambda r: RANGE_REDUCTIONS["min"](holds, r), floor, sampled_every=every,
                        copied=self._copied(holds, holds, RANGE_REDUCTIONS["min"]))
        recorded = banded(1, lambda r: RANGE_REDUCTIONS["present"](holds, r), floor, ending=count, sampled_every=every,
                          copied=self._copied(holds, holds, RANGE_REDUCTIONS["present"]))
        return (f"({expr})\nand on({ON_RUN})\n(\n{lowest}\n) == 1\n"
                f"and on({ON_RUN})\n(\n{recorded}\n)")

    def held_baseline(self, rolling: str, fault_raises: bool) -> str:
        """The pre-fault level of a rolling baseline, read from its extreme of each hold step (a
        group of that interval records them), so a cycle reads a tenth of the samples a look-back
        over every evaluation would."""
        key = (rolling, fault_raises)
        if key not in self._held:
            extreme, word = ("min", "low") if fault_raises else ("max", "high")
            step, window = self.defaults.hold_step, self.defaults.hold_window
            base, operation = rolling.rsplit(":", 1)
            step_name = f"{base}:{operation.replace('baseline_median', f'baseline_{word}')}"
            held_name = f"{base}:{operation.replace('baseline_median', 'baseline_held')}"
            if any(k[0] == rolling for k in self._held):  # the same baseline held both ways
                step_name, held_name = step_name + f"_{word}", held_name + f"_{word}"
            self._held[key] = held_name
            adjective = "Lowest" if fault_raises else "Highest"
            self.recordings.steps.append(Recording(
                step_name, f"{extreme}_over_time({rolling}[{step}])", f"{adjective} {rolling} of the last {step}"))
            self.recordings.held.append(Recording(
                held_name, f"{extreme}_over_time({step_name}[{window}])",
                f"{adjective} {rolling} of the last {window}: the level before a fault"))
        return self._held[key]

    def compile(self, condition: Condition, where: str, onset: Condition | None = None) -> str:
        """PromQL of `condition`; `onset` is the alert's firing condition, whose baselines a
        `Baseline.held()` in a keep-firing condition refers to."""
        if isinstance(condition, (AllOf, AnyOf)):
            if len(condition.conditions) < 2:
                raise BuildError(f"{where}: all_of and any_of take at least two conditions")
            joiner = f"\nand on({ON_RUN})\n" if isinstance(condition, AllOf) else "\nor\n"
            return joiner.join(f"({self.compile(part, where, onset)})" for part in condition.conditions)
        if not isinstance(condition, (Compare, Shift, Gain)):
            raise BuildError(f"{where}: {condition!r} is not a condition; build one from Signal(...).above/below/"
                             f"falls_by/rises_by/gains_less_than, all_of or any_of")
        expr, series = self.signal(condition.signal, where)
        baseline = condition.baseline
        if baseline is None:
            return f"{expr} {condition.op} {promql_number(condition.value)}"
        reference = self._baseline_series(condition, series, where, onset)
        if isinstance(condition, Compare):
            return f"{expr} {condition.op} {promql_number(condition.value)} * {reference}"
        if isinstance(condition, Gain):
            return self._gain(condition, expr, reference, series, where)
        sign = "-" if condition.op == "<" else "+"
        # A negated shift holds where the shift does not: at or short of either margin.
        op = {"<": ">=", ">": "<="}[condition.op] if condition.negated else condition.op
        margins = [f"clamp_min({promql_number(condition.fraction)} * abs({reference}), "
                   f"{promql_number(condition.at_least)})"]
        noise = (self.noise_margin(condition.signal, condition.baseline, condition.beyond_noise, series, where)
                 if condition.beyond_noise else None)
        if noise is not None:
            margins.append(noise)
        parts = [f"{expr} {op} ({reference} {sign} {margin})" for margin in margins]
        if len(parts) == 1:
            return parts[0]
        joiner = "\nor\n" if condition.negated else f"\nand on({ON_RUN})\n"
        return joiner.join(f"({part})" for part in parts)

    def _gain(self, gain: Gain, expr: str, reference: str, series: SignalSeries, where: str) -> str:
        """The signal below its baseline plus the gain, less the noise beyond it or plus the noise
        within it (see Gain)."""
        if gain.baseline.is_held or gain.baseline.is_quietest:
            raise BuildError(f"{where}: {gain.signal.ref}: gains_less_than compares with a rolling Baseline(...), "
                             f"not a held, quietest or peak one")
        z = gain.beyond_noise - gain.within_noise
        noise = self.noise_margin(gain.signal, gain.baseline, abs(z), series, where) if z else None
        if noise is None:
            return f"{expr} < ({reference} + {promql_number(gain.gain)})"
        return f"{expr} < ({reference} + {promql_number(gain.gain)} {'-' if z > 0 else '+'} {noise})"

    def noise_margin(self, signal: Signal, baseline: Baseline, z: float, series: SignalSeries,
                     where: str) -> str | None:
        """z standard errors of the difference between the signal's median over n steps and its
        baseline's median over m steps: z * 1.25 * sqrt(1/n + 1/m) times the signal's step-to-step
        spread over the baseline's steps (see Shift.beyond_noise). None where the exporter does not
        compute the spread: PromQL has no median of differences between consecutive steps, and a
        stand-in (a standard deviation, an interquartile range) moves with the change it is to
        judge. The shift is checked either way, so a wrong one fails the build under every source."""
        if signal.reduction != "median" or not isinstance(signal.window, Steps):
            raise BuildError(f"{where}: {signal.ref}: beyond_noise compares medians: give the signal as "
                             f"median_over(steps(N))")
        if baseline.is_held or not isinstance(baseline.window, Steps):
            raise BuildError(f"{where}: {signal.ref}: beyond_noise needs a baseline counted in steps "
                             f"(Baseline(steps(100), ending=steps(30)) or Baseline.quietest(steps(10), over=steps(200)))")
        if not self.computes_step_windows(series):
            return None
        span = baseline.over if baseline.is_quietest else baseline.window
        # The noise of the steps before those the signal's median reads: a quietest level's window
        # reaches to now, and the change itself is no noise.
        ending = baseline.ending.count if isinstance(baseline.ending, Steps) else signal.window.count
        # 1.2533 (sqrt(pi/2)): a median's standard error over a mean's, for normal noise.
        factor = z * 1.2533 * math.sqrt(1 / signal.window.count + 1 / baseline.window.count)
        return f"{promql_number(round(factor, 4))} * {self.step_spread(series, span.count, ending)}"

    def step_spread(self, series: SignalSeries, count: int, ending: int) -> str:
        """A recording of `series`' step-to-step spread over the run's `count` steps ending `ending`
        steps ago, as the exporter computes it from the step log."""
        key = (series.stem, "spread ending", count, ending)
        if key in self._by_steps:
            return self._by_steps[key]
        name = self._by_steps[key] = f"{series.stem}:spread_{count}steps" + (f"_ending{ending}" if ending else "")
        before = f" ending {ending} steps ago" if ending else ""
        self.recordings.rolling.append(Recording(
            name, self._statistic(StepStatistic(series.metric.name, "spread", count, ending)),
            f"Step-to-step spread of {series.metric.name} over the run's {count} logged steps{before} "
            f"(the exporter's): its noise"))
        return name

    def _baseline_series(self, condition: Comparison, series: SignalSeries, where: str,
                         onset: Condition | None) -> str:
        baseline = condition.baseline
        if baseline.is_quietest:
            return self.quietest_baseline(series, baseline, condition.raises, where)
        if not baseline.is_held:
            return self.rolling_baseline(series, baseline, where)
        if baseline.of is not None:
            if baseline.of.is_held or baseline.of.is_quietest:
                raise BuildError(f"{where}: Baseline.held(of=...) holds a rolling Baseline(...), not a held or "
                                 f"quietest one")
            return self.held_baseline(self.rolling_baseline(series, baseline.of, where), condition.raises)
        compared = [c for c in comparisons(onset) if c.signal.ref == condition.signal.ref
                    and c.baseline is not None and not c.baseline.is_held
                    and not c.baseline.is_quietest] if onset is not None else []
        if not compared:
            raise BuildError(f"{where}: Baseline.held() of {condition.signal.ref!r} needs the alert's condition to "
                             f"compare {condition.signal.ref!r} with a Baseline(...) first; it holds that baseline "
                             f"(or name the baseline to hold: Baseline.held(of=Baseline('1h')))")
        onset_series = resolve_signal(compared[0].signal.ref, self.catalog, where)
        # The level before a fault is one of full windows: the median of a young run's first few
        # steps (min_history) is no level to hold a fault against for a day.
        complete = replace(compared[0].baseline, min_history="")
        return self.held_baseline(self.rolling_baseline(onset_series, complete, where), compared[0].raises)


def expand_group(group: RuleGroup, compiler: ConditionCompiler, expand_alert: Callable) -> list[RuleGroup]:
    """A rule group whose declarative alerts are compiled: the baselines they introduce lead the
    group (rolling, then held), and the held baselines' per-step extremes get a group of the hold
    step's interval, `<group>-hold`."""
    compiler.recordings = BaselineRecordings()
    rules = tuple(expand_alert(rule, compiler) for rule in group.rules)
    new = compiler.recordings
    out = [replace(group, rules=(*new.rolling, *new.held, *rules))]
    if new.steps:
        out.append(RuleGroup(f"{group.name}-hold", tuple(new.steps), interval=compiler.defaults.hold_step))
    return out
