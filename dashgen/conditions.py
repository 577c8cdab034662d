"""The alert vocabulary: conditions on training signals, stated once and compiled to PromQL.

An author writes what should fire, not the plumbing:

    Alert.when("TeamRewardDrop",
               Signal("critic/score/mean").median_over("5m").below(0.5, times=Baseline("1h", ending="10m")),
               keep_firing_while=Signal("critic/score/mean").median_over("5m").below(0.8, times=Baseline.held()),
               severity=Severity.WARNING, for_="10m", summary="The reward fell to half its level of the hour before.")

and the compiler (dashgen/compiler/rules/condition_compiler.py, called by dashgen/compiler/rules/rule_files.py) writes the rest: the baseline's
recording, the held baseline and the group that steps it, the hysteresis branch on the alert's
own ALERTS series, the description with the thresholds filled in, and promtool tests
(dashgen/compiler/rule_tests/generated_cases.py).

A signal names a verl step-log key (`critic/score/mean`) or a catalog or recorded series
(`verl_critic_score_mean`, `verl:perf_total_num_tokens:baseline_median`); an unknown one fails the build
with a "did you mean". Signals of one alert are matched on the run's labels
(`dashgen.model.RUN_MATCH_LABELS`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterator, Union

from dashgen.records import record

# Prometheus alert templates, for descriptions written by hand.
RUN_NAME = "{{ $labels.project }}/{{ $labels.experiment }}"
VALUE = '{{ printf "%.4g" $value }}'
# The most steps a window may count: 10,000 steps of the slowest rhythm compile to a window of
# months, which no Prometheus keeps.
MAX_STEPS = 10_000
# The longest `for_=steps(N)`. A `for` rides out a condition that flickers between evaluations;
# one held for hundreds of steps is a level, which a median over steps(N) states exactly (the
# exporter computes it) and cheaply. Its generated test replays the N steps at 300 s a step, an
# evaluation a minute: steps(3000) made `dashgen test` run for minutes (issue 38).
MAX_FOR_STEPS = 500
# The largest magnitude of a threshold, factor, fraction or floor: a generated test doubles it, and
# PromQL and promtool's test files print it.
MAX_MAGNITUDE = 1e100
# The most all_of/any_of an alert's condition nests, and the most comparisons it holds: the compiler,
# the PromQL checks and Prometheus' own parser recurse over the expression, so a condition is
# bounded (a definition built in a loop could otherwise nest thousands deep).
MAX_NESTING = 8
MAX_COMPARISONS = 64


@record
class Steps:
    """A window counted in the run's training steps, not in time: `steps(20)` is the last 20 steps
    whatever a step lasts (1.5 s or 20 minutes). The compiler turns it into the time the run's own
    rhythm gives (dashgen/compiler/rules/step_windows.py)."""

    count: int

    def __str__(self) -> str:
        return f"{self.count} steps"


def steps(count: int) -> Steps:
    """A window of `count` training steps (see Steps)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_STEPS:
        raise ValueError(f"steps({count!r}): give a whole number of steps from 1 to {MAX_STEPS:,}")
    return Steps(count)


# A window: a Prometheus duration ("5m") or a number of training steps (steps(20)).
Window = Union[str, Steps]


def percentile_reduction(fraction: float) -> str:
    """The reduction name of a quantile in whole percents: 0.8 -> "p80" (as step statistics and
    recordings name it)."""
    number = isinstance(fraction, (int, float)) and not isinstance(fraction, bool) and math.isfinite(fraction)
    percent = round(fraction * 100) if number else None
    if percent is None or not 1 <= percent <= 99 or not math.isclose(percent, fraction * 100):
        raise ValueError(f"quantile_over({fraction!r}, ...): give a quantile in whole percents, from 0.01 to 0.99")
    return f"p{percent}"


def percentile_of(reduction: str) -> float | None:
    """The quantile a reduction name gives ("p80" -> 0.8); None for any other reduction."""
    if (isinstance(reduction, str) and len(reduction) in (2, 3) and reduction[0] == "p" and reduction[1:].isdigit()
            and reduction[1] != "0"):
        return int(reduction[1:]) / 100
    return None


@record
class Baseline:
    """A signal's own recent level: the median of its series over `window`, ending `ending` ago.
    Empty fields take the config's `baseline_window` and `baseline_recent_window`.

    It exists once the window is covered from its start, so a run's first steps are compared with
    nothing; with `min_history`, once that much of the window is covered, so a run is watched from
    early on against its own first steps (the median of what there is).

    `Baseline.held()` is the level from before a fault: the lowest rolling baseline of the last
    `baseline_hold_window` for a signal a fault raises (`above`), the highest for one it lowers
    (`below`). Bare, in `keep_firing_while`, it holds the baseline the alert's condition compares the
    same signal with (over full windows only, whatever its min_history); `Baseline.held(of=Baseline("1h"))` holds that one, anywhere: a fall relative
    to the run's own best level (entropy collapsing) rather than to a fixed number.

    `Baseline.quietest("5m", over="1h")` is the run's quietest level of the last hour: the lowest
    median over 5m for a signal a fault raises, the highest for one it lowers. A fault cannot move
    it, so it needs no `ending`, and a signal still settling from a warm-up (GRPO's high first KL)
    is compared with where it has settled to, not with the median of its decay."""

    window: Window = ""
    ending: Window = ""
    is_held: bool = False
    min_history: str = ""
    of: "Baseline | None" = None  # with is_held: the rolling baseline held
    over: Window = ""  # set: the quietest median over `window` within the last `over`
    is_peak: bool = False  # with over: the loudest median instead (see Baseline.peak)

    @classmethod
    def held(cls, of: "Baseline | None" = None) -> "Baseline":
        return cls(is_held=True, of=of)

    @classmethod
    def quietest(cls, window: Window, over: Window, min_history: str = "") -> "Baseline":
        """In steps (`Baseline.quietest(steps(10), over=steps(60))`), both windows count steps and the
        baseline exists from the run's first steps: a fall or rise fast for the run's rhythm."""
        return cls(window=window, over=over, min_history=min_history)

    @classmethod
    def peak(cls, window: Window, over: Window, ending: Window = "") -> "Baseline":
        """The run's peak level: the highest median over `window` within the last `over` for a
        signal a fault raises (`above`), the lowest for one it lowers, ending `ending` ago. A
        signal 3x above its peak has reached a level the run never had lately (an explosion),
        where a return to its level after a dip (a recovery) has not."""
        return cls(window=window, over=over, ending=ending, is_peak=True)

    @property
    def is_quietest(self) -> bool:
        """Read from the extremes of a recorded median (a quietest or a peak baseline)."""
        return bool(self.over)

    def describe(self) -> str:
        if self.is_held:
            return "its level before the fault" if self.of is None else f"the best of {self.of.describe()}"
        if self.is_quietest:
            ended = f", ending {self.ending} ago" if self.ending else ""
            return f"its {'peak' if self.is_peak else 'quietest'} median over {self.window} of the last {self.over}{ended}"
        return (f"its median of the {self.window or 'baseline window'} before "
                + (f"the last {self.ending}" if self.ending else "the recent window"))


@record
class Signal:
    """A series to watch, optionally reduced over a window (median smooths a spike away; max
    and min catch one within the window)."""

    ref: str
    reduction: str = ""  # "", "median", "max", "min", "changes" or a quantile ("p80": see quantile_over)
    window: Window = ""
    half_logged: bool = False  # see after_half_window

    def median_over(self, window: Window) -> "Signal":
        return replace(self, reduction="median", window=window)

    def after_half_window(self) -> "Signal":
        """A reduction over steps that exists only once the series has been logged over half its
        window: a max of 20 steps is not judged on a run's first three."""
        return replace(self, half_logged=True)

    def max_over(self, window: Window) -> "Signal":
        return replace(self, reduction="max", window=window)

    def min_over(self, window: Window) -> "Signal":
        return replace(self, reduction="min", window=window)

    def quantile_over(self, fraction: float, window: Window) -> "Signal":
        """The value a `fraction` of the window's values are at or below, interpolated between the
        two nearest as Prometheus' quantile_over_time does: of 10 values, quantile_over(0.8, ...)
        is 0 where 9 of them are 0 and none is below."""
        return replace(self, reduction=percentile_reduction(fraction), window=window)

    def changes_over(self, window: Window) -> "Signal":
        """How many times the series changed its value within the window: a gauge of events that
        rises for a step and falls back (verl_nonfinite_streak_steps on a skipped step) changes twice
        an event. Of a series the exporter does not compute step windows of: read in PromQL, twice a step."""
        return replace(self, reduction="changes", window=window)

    def above(self, value: float, times: Baseline | None = None) -> "Compare":
        """Greater than `value`, or than `value` times a baseline."""
        return Compare(self, ">", value, times)

    def below(self, value: float, times: Baseline | None = None) -> "Compare":
        """Less than `value`, or than `value` times a baseline."""
        return Compare(self, "<", value, times)

    def falls_by(self, fraction: float, of: Baseline, at_least: float = 0.0, beyond_noise: float = 0.0) -> "Shift":
        """Below the baseline by `fraction` of its magnitude, and by at least `at_least` in the
        signal's own units (a fraction of a baseline near 0, as signed rewards have, is nothing).

        `beyond_noise`: and by more than this many standard errors of the change, read from the
        signal's own noise (see Shift.beyond_noise): a fall that small-batch noise could make
        by chance does not count."""
        return Shift(self, "<", fraction, of, at_least, beyond_noise)

    def rises_by(self, fraction: float, of: Baseline, at_least: float = 0.0, beyond_noise: float = 0.0) -> "Shift":
        """Above the baseline by `fraction` of its magnitude, and by at least `at_least` (and
        `beyond_noise`, as falls_by)."""
        return Shift(self, ">", fraction, of, at_least, beyond_noise)

    def rises_to(self, multiple: float, of: Baseline, at_least: float = 0.0, beyond_noise: float = 0.0) -> "Shift":
        """rises_by(multiple - 1): above `multiple` times the baseline (10: ten times its level)."""
        return Shift(self, ">", multiple - 1, of, at_least, beyond_noise)

    def falls_to(self, share: float, of: Baseline, at_least: float = 0.0, beyond_noise: float = 0.0) -> "Shift":
        """falls_by(1 - share): below `share` of the baseline (0.6: under 60% of its level)."""
        return Shift(self, "<", 1 - share, of, at_least, beyond_noise)

    def does_not_rise_by(self, fraction: float, of: Baseline, at_least: float = 0.0,
                         beyond_noise: float = 0.0) -> "Shift":
        """The negation of rises_by with the same arguments: the signal has not risen that far
        above the baseline (a reward that is not improving)."""
        return Shift(self, ">", fraction, of, at_least, beyond_noise, negated=True)

    def does_not_fall_by(self, fraction: float, of: Baseline, at_least: float = 0.0,
                         beyond_noise: float = 0.0) -> "Shift":
        """The negation of falls_by with the same arguments: the signal has not fallen that far below
        the baseline (a reward still at the highest level the run has reached)."""
        return Shift(self, "<", fraction, of, at_least, beyond_noise, negated=True)

    def gains_less_than(self, gain: float, of: Baseline, beyond_noise: float = 0.0,
                        within_noise: float = 0.0) -> "Gain":
        """Less than `gain` (in the signal's own units) above the baseline: a reward that has stopped
        rising. `beyond_noise`: short of `gain` by more than this many standard errors of the gain
        (read from the signal's own noise, as Shift.beyond_noise), so a gain the noise could hide is
        not taken for none; `within_noise`: or above `gain` by no more than this many (a gain not
        yet shown to be larger, for a keep-firing condition)."""
        return Gain(self, gain, of, beyond_noise, within_noise)

    def describe(self) -> str:
        quantile = percentile_of(self.reduction)
        what = {"median": "the median", "max": "the highest value", "min": "the lowest value",
                "changes": "the number of changes"}.get(self.reduction) or (
            f"the {quantile:g} quantile" if quantile is not None else None)
        return f"{what} of {self.ref} over {self.window}" if what else self.ref


@record
class Compare:
    """A signal compared with a value, or with the value times a baseline of the run."""

    signal: Signal
    op: str  # ">" or "<"
    value: float
    baseline: Baseline | None = None

    @property
    def raises(self) -> bool:
        """A fault this condition catches pushes the signal up."""
        return self.op == ">"

    def describe(self) -> str:
        word = "above" if self.op == ">" else "below"
        if self.baseline is None:
            return f"{self.signal.describe()} is {word} {self.value:g}"
        return f"{self.signal.describe()} is {word} {self.value:g}x {self.baseline.describe()}"


@record
class Shift:
    """A signal that falls or rises by a fraction of its baseline.

    `beyond_noise` (z, 0 for none) asks the change to be large against the signal's own noise
    too: more than z standard errors of the difference between the signal's median over n steps
    and the baseline's median over m steps, 1.25 s sqrt(1/n + 1/m), where s is the signal's
    step-to-step spread over the baseline's steps (dashgen/sources/step_statistics.py). Until
    that spread exists (three logged values), the shift does not hold: too little history is
    judged by nothing but the absolute bounds. It needs the signal's median over steps(n) and a
    baseline counted in steps, and applies where the exporter computes step windows from the step
    log; a source without one (RL-Insight) compiles the shift without it.

    `negated`: the shift has not happened (does_not_rise_by, does_not_fall_by)."""

    signal: Signal
    op: str  # "<": falls by; ">": rises by
    fraction: float
    baseline: Baseline
    at_least: float = 0.0
    beyond_noise: float = 0.0
    negated: bool = False

    @property
    def raises(self) -> bool:
        return self.op == ">"

    def describe(self) -> str:
        word = ("fell", "fall") if self.op == "<" else ("rose", "rise")
        floor = f" (and by at least {self.at_least:g})" if self.at_least else ""
        noise = f", beyond {self.beyond_noise:g} standard errors of its own noise" if self.beyond_noise else ""
        change = f"by more than {self.fraction:.0%} of {self.baseline.describe()}{floor}{noise}"
        return f"{self.signal.describe()} {'did not ' + word[1] if self.negated else word[0]} {change}"


@record
class Gain:
    """A signal's gain over a baseline (its level minus the baseline's, in its own units) that is
    less than `gain`, by more than `beyond_noise` standard errors of the gain, or more than `gain`
    by no more than `within_noise` of them: it holds where the signal is below the baseline plus
    `gain` minus (beyond_noise - within_noise) standard errors. The standard error is Shift's
    (1.25 s sqrt(1/n + 1/m), s the step-to-step spread over the baseline's steps); until that spread
    exists the gain does not hold, and a source without step statistics compiles it without."""

    signal: Signal
    gain: float
    baseline: Baseline
    beyond_noise: float = 0.0
    within_noise: float = 0.0
    op = "<"  # the signal held below a level: read as a fall wherever a direction is asked

    @property
    def raises(self) -> bool:
        return False

    def describe(self) -> str:
        noise = (f", by more than {self.beyond_noise:g} standard errors of its own noise" if self.beyond_noise else
                 f", or above it within {self.within_noise:g} standard errors of its own noise"
                 if self.within_noise else "")
        return f"{self.signal.describe()} gained less than {self.gain:g} over {self.baseline.describe()}{noise}"


@record
class AllOf:
    """Every condition holds for the same run."""
    conditions: tuple["Condition", ...]

    def describe(self) -> str:
        return "; and ".join(c.describe() for c in self.conditions)


@record
class AnyOf:
    """At least one condition holds."""
    conditions: tuple["Condition", ...]

    def describe(self) -> str:
        return "; or ".join(c.describe() for c in self.conditions)


Condition = Union[Compare, Shift, Gain, AllOf, AnyOf]
Comparison = Union[Compare, Shift, Gain]


def all_of(*conditions: Condition) -> AllOf:
    return AllOf(tuple(conditions))


def any_of(*conditions: Condition) -> AnyOf:
    return AnyOf(tuple(conditions))


def comparisons(condition: Condition) -> Iterator[Comparison]:
    """The leaf comparisons of a condition, in the order written."""
    if isinstance(condition, (AllOf, AnyOf)):
        for part in condition.conditions:
            yield from comparisons(part)
    else:
        yield condition


def windows_in(condition: Condition | None, for_: Window = "0s") -> tuple[list[str], list[str]]:
    """What an alert's condition (and its `for`) reads over steps and what over time, in words:
    (steps, time)."""
    in_steps: list[str] = [f"held for {for_}"] if isinstance(for_, Steps) else []
    in_time: list[str] = [f"held for {for_}"] if for_ not in ("0s", "0m") and not isinstance(for_, Steps) else []
    for c in comparisons(condition) if condition is not None else ():
        if c.signal.window:
            (in_steps if isinstance(c.signal.window, Steps) else in_time).append(c.signal.describe())
        baseline = c.baseline.of if c.baseline is not None and c.baseline.is_held and c.baseline.of else c.baseline
        if baseline is not None and not baseline.is_held and (baseline.window or baseline.over):
            counted = isinstance(baseline.window, Steps)
            (in_steps if counted else in_time).append(f"{c.signal.ref}: {baseline.describe()}")
    return list(dict.fromkeys(in_steps)), list(dict.fromkeys(in_time))
