"""promtool rule tests generated from the alert vocabulary, so an alert written with
`Alert.when` is tested without any YAML written by hand.

For each such alert, these cases on synthetic series of one run each:

- **fires**: every signal sits at a healthy level long enough for its baselines to exist, then
  crosses the condition; the alert is not firing before the crossing, nor `for` after it
  (minus one evaluation), and is firing once `for` and the signals' windows have passed;
- **stays quiet**: the same healthy series without a crossing never fire;
- **holds in the hysteresis band** (alerts with `keep_firing_while`): after firing, the signals
  fall back between the keep-firing threshold and the onset threshold, and the alert is still
  firing when `keep_firing_for` is long over;
- **only branch N crosses** (a condition of `all_of` or `any_of`), one case a branch: that
  branch's signals cross while every other signal stays healthy. Under `all_of` the alert must
  not fire: a branch already true on a healthy run (a factor on the wrong side of 1) would reduce
  the composite to the other branches. Under `any_of` it must fire: a branch that can never cross
  (a ratio threshold of 10) is caught although the other branches fire the case where all cross.
  A signal that other branches read too takes levels found by trying, at which this branch holds
  and no other does. Under `any_of`, a branch for which there are none never fires the alert on
  its own (another branch always crosses first: `KL.above(1.5, ...)` where 5 was meant, beside
  a branch on KL 3x and grad norm), and `dashgen test` fails naming it.

The healthy level comes from the signal, not from the threshold: 1 (0.1 for a ratio) for a
signal compared with its own baseline, so a factor on the wrong side of 1 fires on a healthy
run; and every level of a ratio stays within its range of 0 to 1, so a ratio threshold of 10
(for 10%) can never fire `above` and always fires `below`. Each fails its generated test.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import field
from typing import Iterable

from dashgen.catalog import LAST_STEP_METRIC, Catalog
from dashgen.compiler.rules.condition_compiler import resolve_signal
from dashgen.compiler.rule_tests.fixture_statistics import statistic_selector, statistics_per_sample
from dashgen.compiler.rules.step_windows import GLOBAL_STEP, band_of, step_window_seconds
from dashgen.conditions import AllOf, AnyOf, Compare, Comparison, Condition, Gain, Shift, Steps, Window, comparisons
from dashgen.config import Config, duration_seconds, format_duration
from dashgen.model import Alert
from dashgen.records import record
from dashgen.sources.step_statistics import ServedStatistics

_RATIO_UNITS = ("percentunit",)


@record(frozen=False)
class _Levels:
    healthy: float
    fault: float
    band: float | None = None  # between the keep-firing and the onset threshold


@record(frozen=False)
class _Case:
    name: str
    series: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # selector -> (value, samples)
    checks: list[tuple[int, bool]] = field(default_factory=list)  # (eval time in s, firing?)
    unreachable: str = ""  # set: no series can make the case (a branch that never fires alone), and why
    interval: float = 60.0  # seconds between its samples and its evaluations (case_interval)

    def series_length(self) -> list[tuple[str, int]]:
        return [(selector, sum(count for _, count in segments)) for selector, segments in self.series.items()]


def _threshold(comparison: Comparison, healthy: float) -> float:
    """Where the comparison flips for a signal whose baselines sit at `healthy`."""
    if isinstance(comparison, Compare):
        return comparison.value * (healthy if comparison.baseline is not None else 1)
    if isinstance(comparison, Gain):
        return healthy + comparison.gain
    shift = max(comparison.fraction * abs(healthy), comparison.at_least)
    return healthy - shift if comparison.op == "<" else healthy + shift


def _healthy_level(comparison: Comparison, ratio: bool) -> float:
    if comparison.baseline is not None:
        return 0.1 if ratio else 1.0
    value = comparison.value
    if comparison.op == ">":
        level = value / 2 if value > 0 else value - 1
    else:
        level = value * 2 if value > 0 else value + 1
    return min(max(level, 0.0), 1.0) if ratio else level


def _fault_level(comparison: Comparison, healthy: float, ratio: bool) -> float:
    if isinstance(comparison, Shift) and comparison.negated or isinstance(comparison, Gain):
        return healthy  # a signal that has not moved: where "did not rise" holds
    threshold = _threshold(comparison, healthy)
    if comparison.op == ">":
        level = threshold * 2 if threshold > 0 else threshold + 1
        return min(level, 1.0) if ratio else level
    level = threshold / 2 if threshold > 0 else threshold - 1
    return max(level, 0.0) if ratio else level


def _seconds(window: Window, config: Config, rhythm: float | None) -> float:
    """A window's time: a duration as written; steps at `rhythm` s/step as the compiler gives them in
    PromQL (a band's) or as the exporter counts them (exactly), whichever is longer."""
    if isinstance(window, Steps):
        return max(step_window_seconds(window.count, band_of(rhythm or 60.0), duration_seconds(config.step_window_floor)),
                   window.count * (rhythm or 60.0))
    return duration_seconds(window)


def counts_steps(condition: Condition | None) -> bool:
    """Whether any window of the condition is counted in steps."""
    return any(isinstance(c.signal.window, Steps)
               or (c.baseline is not None and isinstance(c.baseline.window, Steps))
               for c in (comparisons(condition) if condition is not None else ()))


def _windows(condition: Condition | None, config: Config, rhythm: float | None = None) -> tuple[float, float]:
    """The longest reduction window, and the longest baseline window plus its ending, in seconds."""
    reduce, baseline = 0.0, 0.0
    for c in comparisons(condition) if condition is not None else ():
        if c.signal.window:
            reduce = max(reduce, _seconds(c.signal.window, config, rhythm))
        rolling = c.baseline.of if c.baseline is not None and c.baseline.is_held else c.baseline
        if rolling is not None and isinstance(rolling.window, Steps):  # exists from the first steps
            ending = _seconds(rolling.ending, config, rhythm) if rolling.ending else 0.0
            baseline = max(baseline, _seconds(rolling.window, config, rhythm) + ending)
        elif rolling is not None and rolling.is_quietest:  # exists once min_history (or window) is covered
            baseline = max(baseline, duration_seconds(rolling.window or config.baseline_window),
                           duration_seconds(rolling.min_history or "0s"))
        elif rolling is not None:
            baseline = max(baseline, duration_seconds(rolling.window or config.baseline_window)
                           + duration_seconds(rolling.ending or config.baseline_recent_window))
    return reduce, baseline


def _warm_up_windows(alert: Alert, config: Config, rhythm: float | None) -> tuple[float, float]:
    """_windows of the alert's condition, with the baselines its keep-firing condition holds too:
    they must exist by the crossing."""
    reduce, baseline = _windows(alert.condition, config, rhythm)
    return reduce, max(baseline, _windows(alert.keep_firing_while, config, rhythm)[1])


# Rhythms (seconds per training step) every alert that counts in steps is tested at: the fastest
# and the slowest runs issue 35 names (1.5 s and an hour a step), and one a minute.
TEST_RHYTHMS = (1.5, 60.0, 3600.0)
# Prometheus' lookback: an instant selection reads the newest sample at most 5 minutes old. Samples
# further apart leave gaps in every selector and subquery evaluated between them.
LOOKBACK_SECONDS = 300.0
# A case of an alert that reads only windows counted in steps is sampled about this many times a
# step (never less often than LOOKBACK_SECONDS, never more often than the rule interval): its
# condition changes only when a step is logged, and a step of an hour sampled every minute made
# the 3,600 s cases 60 evaluations a step of every rule in the file.
SAMPLES_PER_STEP = 12
# The one rhythm its branches are tested at alone: which branches a composite needs does not
# depend on the rhythm, and a case per branch and rhythm would triple their cost.
BRANCH_RHYTHM = 60.0
BRANCH_CASE = re.compile(r"only-branch-(\d+)-crosses")  # the name of a branch's case
# Cases a default alert is known to fail, each with why: generated as `known-gap-<case>`, which
# checks that the alert still misses (never fires), so `dashgen test` passes, names each gap, and
# fails the day the alert is fixed: then take its entry out. Not a place for a new alert's failures.
KNOWN_GAPS: dict[tuple[str, str], str] = {}
KNOWN_GAP_PREFIX = "known-gap-"


def alert_cases(alert: Alert, catalog: Catalog, config: Config,
                statistics: ServedStatistics = ServedStatistics()) -> list[_Case]:
    """The generated cases of one alert; at each of TEST_RHYTHMS for one that counts in steps.
    `statistics`: the exporter's statistics over steps the rules read, computed from each case's
    series as the exporter would from the step log."""
    if not (counts_steps(alert.condition) or counts_steps(alert.keep_firing_while) or isinstance(alert.for_, Steps)):
        return _cases(alert, catalog, config, None, branches=True)
    cases = []
    for rhythm in TEST_RHYTHMS:
        interval = case_interval(alert, config, rhythm)
        for case in _cases(alert, catalog, config, rhythm, branches=rhythm == BRANCH_RHYTHM, interval=interval):
            case.name = f"{case.name}-at-{rhythm:g}s-per-step"
            step_of = _steps_at(rhythm, interval, max(count for _, count in case.series_length()))
            case.series.update(_statistic_series(case.series, statistics, step_of, interval))
            case.series.update({f"{GLOBAL_STEP}{{verl}}": _runs([float(s) for s in step_of]),
                                f"{LAST_STEP_METRIC}{{verl}}": _runs([(s - 1) * rhythm for s in step_of])})
            if (alert.name, case.name) in KNOWN_GAPS:
                case.name = f"{KNOWN_GAP_PREFIX}{case.name}"
                case.checks = [(at, False) for at, _ in case.checks]
            cases.append(case)
    return cases


def known_gaps(alerts: Iterable[Alert]) -> list[str]:
    """A line per known gap (KNOWN_GAPS) of these alerts, to say beside the tests' result."""
    return [f"alert {alert} still misses its generated case {case.replace('-', ' ')!r}: {why}"
            for alert_obj in alerts for (alert, case), why in KNOWN_GAPS.items() if alert == alert_obj.name]


def case_interval(alert: Alert, config: Config, rhythm: float | None) -> float:
    """Seconds between the samples and evaluations of an alert's cases at `rhythm` s/step: the rule
    interval; for an alert whose condition reads only windows counted in steps, about
    SAMPLES_PER_STEP samples a step where that is coarser, up to LOOKBACK_SECONDS (a multiple of
    the rule interval). Such a condition changes only when a step is logged, so evaluating it 12
    times a step instead of 60 changes no outcome, only when a `for` shorter than the interval is
    seen to have passed: at the next evaluation, at most one interval later (its check that the
    alert is not yet firing is then left out, as it already is for a `for` shorter than the rule
    interval). An alert that also reads time windows (a 10-minute max, a 1-hour baseline) is tested
    at the rule interval at every rhythm: its windows are what it would see."""
    interval = duration_seconds(config.rule_interval)
    if rhythm is None or not reads_only_steps(alert):
        return interval
    coarse = min(LOOKBACK_SECONDS, rhythm / SAMPLES_PER_STEP)
    return max(interval, interval * int(coarse // interval))


def reads_only_steps(alert: Alert) -> bool:
    """Whether every window the alert's condition and keep_firing_while read is counted in steps (or
    is an instant). A held baseline counts when what it holds does: the extreme of a level that
    moves only when a step is logged, over baseline_hold_window, moves only at an evaluation."""
    def in_steps(*windows: Window) -> bool:
        return all(not window or isinstance(window, Steps) for window in windows)

    onset = list(comparisons(alert.condition)) if alert.condition is not None else []
    keep = list(comparisons(alert.keep_firing_while)) if alert.keep_firing_while is not None else []
    for c in (*onset, *keep):
        if not in_steps(c.signal.window):
            return False
        baseline = c.baseline
        if baseline is not None and baseline.is_held:  # bare: the one the condition compares the signal with
            baseline = baseline.of or next((o.baseline for o in onset if o.signal.ref == c.signal.ref
                                             and o.baseline is not None and not o.baseline.is_held), None)
            if baseline is None:
                return False
        if baseline is not None and (baseline.min_history
                                     or not baseline.window  # the config's baseline_window, a duration
                                     or not in_steps(baseline.window, baseline.ending, baseline.over)):
            return False
    return True


def _steps_at(rhythm: float, interval: float, samples: int) -> list[int]:
    """The step a run at `rhythm` s/step has logged last at each evaluation `interval` s apart (what
    the exporter serves as its global step; the time its line arrived is (step - 1) * rhythm)."""
    return [int(i * interval // rhythm) + 1 for i in range(samples)]


def _logging_sample(sample: int, interval: float, rhythm: float | None) -> int:
    """The first sample from `sample` on at which a step is logged: a case's signals change there,
    as the exporter serves a step's values when its line arrives, not between two lines."""
    if rhythm is None:
        return sample
    while sample > 0 and int(sample * interval // rhythm) == int((sample - 1) * interval // rhythm):
        sample += 1
    return sample


def _statistic_series(series: dict[str, list[tuple[float, int]]], statistics: ServedStatistics,
                      step_of: list[int], interval: float) -> dict[str, list[tuple[float | None, int]]]:
    """The exporter's statistics of the case's series, a sample an evaluation (fixture_statistics.py)."""
    out: dict[str, list[tuple[float | None, int]]] = {}
    for selector, segments in series.items():
        name = selector.split("{", 1)[0]
        values = [value for value, count in segments for _ in range(count)]
        for stat, per_sample in statistics_per_sample(values, step_of[:len(values)], statistics, name,
                                                      interval).items():
            out[statistic_selector(stat, "verl")] = _runs(per_sample)
    return out


def _runs(values: list) -> list[tuple[float | None, int]]:
    """Values as (value, repeats) segments; None: no sample."""
    segments: list[tuple[float | None, int]] = []
    for value in values:
        if segments and segments[-1][0] == value:
            segments[-1] = (value, segments[-1][1] + 1)
        else:
            segments.append((value, 1))
    return segments


def _signal_levels(alert: Alert, onset: list[Comparison], keep: list[Comparison],
                   catalog: Catalog) -> tuple[dict[str, _Levels], dict[str, str], set[str]]:
    """Each signal's levels (healthy, fault, and between the thresholds with hysteresis), the series
    it reads, and the signals that are ratios (kept within 0 to 1)."""
    where = f"alert {alert.name!r}"
    levels: dict[str, _Levels] = {}
    series_of: dict[str, str] = {}
    ratios: set[str] = set()
    for comparison in onset:
        resolved = resolve_signal(comparison.signal.ref, catalog, where)
        ratio = resolved.metric is not None and resolved.metric.unit in _RATIO_UNITS
        if ratio:
            ratios.add(comparison.signal.ref)
        healthy = _healthy_level(comparison, ratio)
        levels.setdefault(comparison.signal.ref, _Levels(healthy, _fault_level(comparison, healthy, ratio)))
        series_of[comparison.signal.ref] = resolved.expr
    for comparison in keep:
        level = levels.get(comparison.signal.ref)
        onset_of_signal = next((c for c in onset if c.signal.ref == comparison.signal.ref), None)
        if level is None or onset_of_signal is None:
            continue
        keep_at, onset_at = _threshold(comparison, level.healthy), _threshold(onset_of_signal, level.healthy)
        # Halfway between the two thresholds; where they meet, a little on the fault's side.
        level.band = (keep_at + onset_at) / 2 if keep_at != onset_at else keep_at + (level.fault - keep_at) / 10
    return levels, series_of, ratios


def _cases(alert: Alert, catalog: Catalog, config: Config, rhythm: float | None, branches: bool,
           interval: float | None = None) -> list[_Case]:
    step = interval or duration_seconds(config.rule_interval)
    onset = list(comparisons(alert.condition))
    keep = list(comparisons(alert.keep_firing_while)) if alert.keep_firing_while is not None else []
    levels, series_of, ratios = _signal_levels(alert, onset, keep, catalog)
    reduce, baseline = _warm_up_windows(alert, config, rhythm)
    _check_runnable(alert, max(reduce, baseline), step, rhythm)
    _check_levels_suffice(alert)
    if rhythm is not None:  # the run's rhythm is known from its second line on
        baseline = max(baseline, 2 * rhythm)
    holds = any(c.baseline is not None and c.baseline.is_held for c in (*onset, *keep))
    hold = 2 * duration_seconds(config.baseline_hold_step) if holds else 0
    # Samples before the crossing, which comes with a logged step.
    warm = _logging_sample(_steps(baseline + hold + reduce + 5 * step, step), step, rhythm)
    for_ = _seconds(alert.for_, config, rhythm)
    keep_for = duration_seconds(alert.keep_firing_for)
    # Samples until it must be firing; the hysteresis band starts there, with a logged step too.
    settle = _logging_sample(warm + _steps(reduce + for_ + 3 * step, step), step, rhythm) - warm
    crossing = warm * step

    fires = _Case("fires")
    quiet = _Case("stays-quiet")
    total = warm + settle + 1
    for ref, level in levels.items():
        fires.series[ref] = [(level.healthy, warm), (level.fault, settle + 1)]
        quiet.series[ref] = [(level.healthy, total)]
    fires.checks = [(crossing - step, False), (crossing + settle * step, True)]
    if isinstance(alert.for_, Steps):
        # Sampled twice a step on a grid of its own: a step window may end up to a sample early.
        fires.checks.append((crossing + int(for_ / 2), False))
    elif for_ >= step:
        fires.checks.append((crossing + int(for_) - step, False))
    quiet.checks = [(crossing - step, False), (crossing + settle * step, False)]
    cases = [fires, quiet]
    if branches and alert.condition is not None:
        for number, moves in _branch_crossings(alert.condition, levels, ratios):
            alone = _Case(f"only-branch-{number}-crosses")
            if moves is None:
                alone.unreachable = (f"branch {number} of any_of cannot fire without another: at every level of "
                                     f"the signals it shares, another branch crosses first")
            for ref, level in levels.items():
                before, after = (moves or {}).get(ref, (level.healthy, level.healthy))
                alone.series[ref] = [(before, warm), (after, settle + 1)]
            alone.checks = list(fires.checks if isinstance(alert.condition, AnyOf) else quiet.checks)
            cases.append(alone)

    if keep and all(level.band is not None for level in levels.values()):
        band_from = warm + settle
        linger = _steps(reduce + keep_for + max(for_, step) + 3 * step, step)
        band = _Case("holds-in-hysteresis-band")
        for ref, level in levels.items():
            band.series[ref] = [(level.healthy, warm), (level.fault, settle), (level.band, linger + 1)]
        band.checks = [((band_from - 1) * step, True), ((band_from + linger) * step, True)]
        cases.append(band)
    for case in cases:
        case.series = {series_of[ref]: values for ref, values in case.series.items()}
        case.interval = step
    return cases


def branches_of(condition: Condition) -> tuple[Condition, ...]:
    return condition.conditions if isinstance(condition, (AllOf, AnyOf)) else ()


Moves = dict[str, tuple[float, float]]  # signal -> (level before the crossing, level after it)


def _branch_crossings(condition: Condition, levels: dict[str, _Levels],
                      ratios: set[str]) -> list[tuple[int, Moves | None]]:
    """How each branch of a composite (numbered from 1) crosses alone. Its own signals go from
    healthy to their fault level. A signal other branches read too takes levels found by trying:
    healthy before (no branch holds) and, after, a level where this branch holds and no other
    does. None where no such level exists under any_of: the branch never fires the alert on its
    own; a branch under all_of that cannot cross alone gets no case."""
    parts = branches_of(condition)
    reads = [{c.signal.ref for c in comparisons(branch)} for branch in parts]
    if len(parts) < 2:
        return []
    crossings: list[tuple[int, Moves | None]] = []
    for i, branch in enumerate(parts):
        shared = sorted(reads[i] & set().union(*(other for j, other in enumerate(reads) if j != i)))
        moves = {ref: (levels[ref].healthy, levels[ref].fault) for ref in reads[i] - set(shared)}
        if not shared:
            crossings.append((i + 1, moves))
            continue
        others = [other for j, other in enumerate(parts) if j != i]
        found = _separating_levels(condition, branch, others, shared, moves, levels, ratios)
        if found is not None:
            crossings.append((i + 1, {**moves, **found}))
        elif isinstance(condition, AnyOf):
            crossings.append((i + 1, None))
    return crossings


def _separating_levels(condition: Condition, branch: Condition, others: list[Condition], shared: list[str],
                       moves: Moves, levels: dict[str, _Levels], ratios: set[str]) -> Moves | None:
    """Levels of the `shared` signals, healthy and crossed, at which the alert is quiet before and
    `branch` alone holds after; the first found, trying the signals' own healthy level first."""
    def value(ref: str, at: Moves, after: bool) -> tuple[float, float]:
        healthy, crossed = at.get(ref, (levels[ref].healthy, levels[ref].healthy))
        return healthy, crossed if after else healthy

    choices = [[(healthy, crossed) for healthy in _healthy_candidates(ref, condition, levels, ratios)
                for crossed in _crossing_candidates(ref, condition, healthy, ref in ratios)] for ref in shared]
    for combination in itertools.islice(itertools.product(*choices), _MAX_TRIES):
        at = {**moves, **dict(zip(shared, combination))}
        before = {ref: value(ref, at, False) for ref in levels}
        after = {ref: value(ref, at, True) for ref in levels}
        if not _holds(condition, before) and _holds(branch, after) and not any(_holds(o, after) for o in others):
            return dict(zip(shared, combination))
    return None


_MAX_TRIES = 5000


def _holds(condition: Condition, values: dict[str, tuple[float, float]]) -> bool:
    """Whether a condition holds for steady signals: (healthy level, the signal's level now) each,
    every baseline sitting at the healthy level."""
    if isinstance(condition, AllOf):
        return all(_holds(part, values) for part in condition.conditions)
    if isinstance(condition, AnyOf):
        return any(_holds(part, values) for part in condition.conditions)
    healthy, now = values[condition.signal.ref]
    threshold = _threshold(condition, healthy)
    moved = now > threshold if condition.op == ">" else now < threshold
    return not moved if isinstance(condition, Shift) and condition.negated else moved


def _healthy_candidates(ref: str, condition: Condition, levels: dict[str, _Levels], ratios: set[str]) -> list[float]:
    on_signal = [c for c in comparisons(condition) if c.signal.ref == ref]
    found = [levels[ref].healthy, 1.0, 0.1, 0.01]
    for c in on_signal:
        if isinstance(c, Compare) and c.baseline is None:
            found += [c.value * k for k in (0.25, 0.5, 2.0, 4.0)]
    relative = any(c.baseline is not None for c in on_signal)
    return [h for h in dict.fromkeys(found) if (h > 0 or not relative) and (0 <= h <= 1 or ref not in ratios)]


def _crossing_candidates(ref: str, condition: Condition, healthy: float, ratio: bool) -> list[float]:
    thresholds = sorted({_threshold(c, healthy) for c in comparisons(condition) if c.signal.ref == ref})
    found = [t * k if t > 0 else t + (k - 1) * (abs(t) + 1) for t in thresholds for k in (1.1, 0.9)]
    found += [(low + high) / 2 for low, high in zip(thresholds, thresholds[1:])]
    found += [thresholds[-1] * 2 if thresholds[-1] > 0 else thresholds[-1] + 1,
              thresholds[0] / 2 if thresholds[0] > 0 else thresholds[0] - 1]
    return [x for x in dict.fromkeys(found) if not ratio or 0 <= x <= 1]


# The most samples `promtool test rules` loads in one query (its engine's MaxSamples); a query
# over more fails with "query processing would load too many samples into memory".
PROMTOOL_TEST_MAX_SAMPLES = 10_000


class UntestableAlert(ValueError):
    """An alert whose generated test promtool cannot run; the message says why."""


def _check_runnable(alert: Alert, longest: float, step: float, rhythm: float | None) -> None:
    samples = longest / step
    if samples > PROMTOOL_TEST_MAX_SAMPLES:
        at = f" at {rhythm:g} s per step" if rhythm is not None else ""
        raise UntestableAlert(
            f"alert {alert.name!r}: its generated test cannot run in promtool: its longest window{at}, "
            f"{format_duration(longest)}, is {samples:,.0f} samples at the rule interval, more than the "
            f"{PROMTOOL_TEST_MAX_SAMPLES:,} `promtool test rules` loads in one query (\"too many samples\"). "
            f"Test it with a fixture in tests/rules/ whose series are sampled less often, and say so with "
            f"untested=\"...\" (its generated test is then left out)")


def _check_levels_suffice(alert: Alert) -> None:
    compared = (*comparisons(alert.condition),
                *(comparisons(alert.keep_firing_while) if alert.keep_firing_while else ()))
    counting = [c.signal.ref for c in compared if c.signal.reduction == "changes"]
    if counting:
        raise UntestableAlert(
            f"alert {alert.name!r}: its generated test cannot show it: it counts the changes of {counting[0]!r}, and "
            f"a generated case holds each signal at a level. Test it with a fixture in tests/rules/ whose series "
            f"move, and say so with untested=\"...\" (its generated test is then left out)")
    gains = [c.signal.ref for c in compared if isinstance(c, Gain)]
    if gains:
        raise UntestableAlert(
            f"alert {alert.name!r}: its generated test cannot show it: it asks whether {gains[0]!r} gained less than a "
            f"level over its baseline, which a signal held at a level always has. Test it with a fixture in tests/rules/ "
            f"whose series move, and say so with untested=\"...\" (its generated test is then left out)")


def _steps(seconds: float, step: float) -> int:
    return int(-(-seconds // step))
