"""Statistics over a run's last N logged steps, computed from the step log itself.

A window counted in steps (`steps(20)`) has no exact PromQL form: a range is a duration, and a
run's steps last from 1.5 s to 20 minutes. Compiled in PromQL, it is one branch per band of
rhythms (dashgen/compiler/rules/step_windows.py), each evaluated for every run at every cycle. The
exporter reads every step's values as they are logged, so it computes the statistic exactly, by
step number, and serves it as one gauge: `verl_step_statistic{series, statistic}`. The build
lists the statistics its rules read in rendered/exporter/step-statistics.yaml; `dashgen export`
and the backfill of `dashgen backtest` compute the same list with this module, so a backtest sees
what a live run would.

A statistic reads the values a series logged at steps S-E-N < step <= S-E, S being the run's
newest logged step, N the window and E its ending; where those steps hold fewer than
min(N, MIN_WINDOW_VALUES) values, and at least one, it reads back to that many. A key missing from a line is no value, and a
step window holding no value has no statistic. A run whose step goes back (restarted, or resumed
from a checkpoint) starts its windows again: an exporter started at the log's tail reads back
to that point only, and serves what a whole read would.

A labelled family (a validation family: one series per data_source, variable and metric) has its
statistics per member, each served with the member's labels. A member's value at a step is the one
the exporter serves then: the latest test step's result, held until the next test step replaces
the family's results (or a restart drops them), so a window weighs each result by the steps it held.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
from functools import cached_property
from typing import Iterable

from dashgen.catalog import STEP_STATISTIC_METRIC, VALIDATION_FAMILIES, VALIDATION_LABELS, verl_metric_name
from dashgen.conditions import MAX_STEPS, percentile_of
from dashgen.records import record
from dashgen.sources.step_reductions import median_of, reduced


STEP_TIME_METRIC = verl_metric_name("timing_s/step")[0]  # the log's own clock
STEP_STATISTIC_LABELS = ("series", "statistic")
# Besides these, a quantile in whole percents: p1 to p99 (dashgen.conditions.percentile_reduction).
REDUCTIONS = ("median", "max", "min", "spread")


@record
class StepStatistic:
    """One statistic of one series over the run's last `steps` steps, ending `ending` steps ago.

    `of_median`: reduce the series' median over that many steps (taken at each logged step once
    the series has a value from half that many steps before) rather than its values: the quietest
    or peak level of a smoothed signal, never a run's first value alone. `half_logged`: exists
    only once the series has a value from at least half the window before its end (a baseline is
    not the median of a young run's first few steps). `fully_logged`: exists only once the series
    has a value from every step of the window back (a condition held over N steps, never a young
    run's first value alone)."""

    series: str
    reduction: str
    steps: int
    ending: int = 0
    of_median: int = 0
    half_logged: bool = False
    fully_logged: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.series, str) or not self.series:
            raise ValueError(f"series {self.series!r}: expected a series' name, not {_kind(self.series)}")
        if not isinstance(self.reduction, str):
            raise ValueError(f"step statistic of {self.series}: reduction {self.reduction!r}: expected a name ("
                             f"{', '.join(REDUCTIONS)} or a quantile p1 to p99), not {_kind(self.reduction)}")
        for flag in ("half_logged", "fully_logged"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"step statistic of {self.series}: {flag} {getattr(self, flag)!r}: expected true or "
                                 f"false, not {_kind(getattr(self, flag))}")
        for name in ("steps", "ending", "of_median"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"step statistic of {self.series}: {name} {value!r} is not a whole number of steps")
        if self.reduction not in REDUCTIONS and percentile_of(self.reduction) is None:
            raise ValueError(f"step statistic of {self.series}: reduction {self.reduction!r} is not one of "
                             f"{', '.join(REDUCTIONS)} or a quantile p1 to p99")
        if not (1 <= self.steps <= MAX_STEPS and 0 <= self.ending <= MAX_STEPS and 0 <= self.of_median <= MAX_STEPS):
            raise ValueError(f"step statistic of {self.series}: steps must be from 1 to {MAX_STEPS:,}, ending and "
                             f"of_median from 0 to {MAX_STEPS:,}")
        if self.half_logged and self.fully_logged:
            raise ValueError(f"step statistic of {self.series}: half_logged or fully_logged, not both")

    @cached_property  # read for every value a tracker observes
    def name(self) -> str:
        """The `statistic` label: what it is, e.g. median_30steps_ending10 or min_60steps_of_median_5steps."""
        name = f"{self.reduction}_{self.steps}steps"
        if self.ending:
            name += f"_ending{self.ending}"
        if self.of_median:
            name += f"_of_median_{self.of_median}steps"
        if self.half_logged:
            name += "_half_logged"
        if self.fully_logged:
            name += "_fully_logged"
        return name

    @property
    def reach(self) -> int:
        """How many steps back the newest step it reads values from."""
        return self.ending + self.steps + self.of_median


def _kind(value: object) -> str:
    """What a YAML value is, in a message: a list, a mapping, a number, a text (an empty one)."""
    if value == "":
        return "an empty text"
    kinds = {list: "a list", dict: "a mapping", str: "a text", bool: "true or false", type(None): "null"}
    return kinds.get(type(value), "a number" if isinstance(value, (int, float)) else f"a {type(value).__name__}")


# How many steps of history beyond its windows a series keeps for the floor (see StepStatistics):
# a run faster than this many steps per floor has its floor cut to them.
FLOOR_STEPS = 256
# A window of N steps that holds fewer than min(N, this) logged values reads back to that many,
# and a half-logged one exists once it holds half of them: a run that logs every 5th step has 2
# values in 10 steps, and a median, a maximum or a "never" of 2 values is chance (two zero rewards
# in a row of a healthy small-batch run). A run that logs every step is not affected; one that
# logs rarely is judged over more steps than N, never fewer. Not more than 10: a window of 60
# steps is about a rate (entropy falling 10x within 60 steps), and 60 values of a run logged every
# 5th step would be 300 steps.
MIN_WINDOW_VALUES = 10
# The log's clock in microseconds (see StepStatistics).
CLOCK_TICKS_PER_SECOND = 1_000_000
# The time the log's clock gives a line without timing_s/step, per step (as the backfill's default).
UNTIMED_STEP_SECONDS = 60.0
# The longest step time the log's clock takes: the slowest real verl steps last minutes to an hour
# (the public corpus' slowest, 1,100 s). A longer timing_s/step is a unit mistake or a corrupt
# value: the step counts as untimed on this clock, rather than moving it so far that the floor of
# every window holds no step before it (or, past 1.8e302 s, ending the exporter on an
# OverflowError). A backfill still places such a step at its time, and refuses a run spanning too long.
MAX_STEP_SECONDS = 86_400.0


class _History:
    """(step, clock, value) of one series, oldest first, kept `reach` steps back. Steps and clocks
    both grow along it (a restart clears it), so a window is two bisections."""

    def __init__(self, reach: int):
        self.reach = reach
        self.steps: list[int] = []
        self.clocks: list[int] = []
        self.values: list[float] = []
        self.first_step: int | None = None  # the first step it has a value from (since a restart)
        self.horizon: int | None = None  # the newest step it has forgotten (reach steps back)

    def add(self, step: int, clock: int, value: float) -> None:
        if self.steps and self.steps[-1] == step:  # the same step logged again: its newest value
            self.clocks[-1], self.values[-1] = clock, value
            return
        self.steps.append(step)
        self.clocks.append(clock)
        self.values.append(value)
        if self.first_step is None:
            self.first_step = step

    def clear(self) -> None:
        self.steps, self.clocks, self.values = [], [], []
        self.first_step = self.horizon = None

    def prune(self, newest: int) -> None:
        self.horizon = newest - self.reach
        cut = bisect.bisect_right(self.steps, self.horizon)
        if cut > len(self.steps) // 2 and cut > 64:  # drop the front in batches: lists shift on a cut
            del self.steps[:cut], self.clocks[:cut], self.values[:cut]

    def window(self, steps: int, end_step: int, end_clock: int, floor: int) -> list[float]:
        """Values up to the end (step and clock), of the last `steps` steps or `floor` clock ticks;
        a window that holds a value but fewer than min(steps, MIN_WINDOW_VALUES) reads back to that
        many logged values (one that holds none stays empty: a key no longer logged has no statistic)."""
        high = min(bisect.bisect_right(self.steps, end_step), bisect.bisect_right(self.clocks, end_clock))
        low = min(bisect.bisect_right(self.steps, end_step - steps),
                  bisect.bisect_right(self.clocks, end_clock - floor))
        if low < high:
            low = min(low, max(high - min(steps, MIN_WINDOW_VALUES), 0))
        if self.horizon is not None:  # what is past the reach counts for nothing, dropped yet or not
            low = max(low, bisect.bisect_right(self.steps, self.horizon))
        return self.values[low:high]


def _logged_since(values: _History, steps: int, end_step: int) -> bool:
    """Whether the series has a value from half of a window of `steps` ending at `end_step` back
    (as a window in PromQL is: its sample from that many steps ago, condition_compiler's
    `_logged_since`)."""
    return values.first_step is not None and values.first_step <= end_step - steps // 2


class StepStatistics:
    """A run's step statistics, fed one logged line at a time.

    The rules read the statistics once an evaluation, and a fast run logs dozens of steps
    between two: a window or ending of a few steps would hold none of the steps the evaluation
    before saw. So, as step windows in PromQL, they are never shorter than `floor_seconds` of the
    log's own clock (the sum of timing_s/step over the steps logged; UNTIMED_STEP_SECONDS for a
    step without it): a window holds the last N steps or the last floor seconds, and an ending
    is N steps and at least the floor ago."""

    def __init__(self, wanted: Iterable[StepStatistic], floor_seconds: float = 0.0,
                 untimed_step_seconds: float = UNTIMED_STEP_SECONDS):
        self.wanted = sorted(set(wanted), key=lambda s: (s.series, s.name))
        # The clock counts whole microseconds: a sum of floats depends on where the reading
        # started, and a window whose edge falls exactly on a step would hold that step for an
        # exporter started at the log's tail and not for one that read it whole.
        self.floor = round(floor_seconds * CLOCK_TICKS_PER_SECOND)
        self.untimed_step_seconds = untimed_step_seconds
        self._reach: dict[str, int] = {}
        self._median_reach: dict[tuple[str, int], int] = {}
        for stat in self.wanted:
            self._reach[stat.series] = max(self._reach.get(stat.series, 0), stat.reach + FLOOR_STEPS)
            if stat.of_median:
                key = (stat.series, stat.of_median)
                self._median_reach[key] = max(self._median_reach.get(key, 0), stat.steps + stat.ending + FLOOR_STEPS)
        # How far back a tail start reads the log: a median kept `median reach` steps back was taken,
        # then, over the values the series held, themselves kept its reach back (a window of few
        # values reads back to MIN_WINDOW_VALUES of them, however many steps that is, up to there).
        self.reach = max([*self._reach.values(), *(steps + self._reach[series]
                                                    for (series, _), steps in self._median_reach.items())], default=0)
        # Keyed by series, or by a family's member (dashgen.formats.verl_log.ValidationSeries),
        # whose histories are made as members appear and dropped once all they hold is past reach.
        self._values: dict[Member, _History] = {series: _History(steps) for series, steps in self._reach.items()
                                                if series not in FAMILIES}
        self._medians: dict[tuple[Member, int], _History] = {
            (series, count): _History(steps) for (series, count), steps in self._median_reach.items()
            if series not in FAMILIES}
        self.newest: int | None = None
        self.clock = 0

    @property
    def series(self) -> frozenset[str]:
        """The series it keeps history of (a family by its name)."""
        return frozenset(self._reach)

    def given(self, logged: dict[Member, float]) -> set[str]:
        """The series a line's logged values give a value (observe: a NaN gives none)."""
        return {_family(key) for key, value in logged.items()
                if _family(key) in self._reach and value is not None and not math.isnan(value)}

    def observe(self, step: int, logged: dict[Member, float], seconds_per_step: float | None = None) -> None:
        """A line of the log: its step, the values it logged itself (none for a line that logs no
        training value: only the step moves) and the families' members the exporter serves after
        it, and its timing_s/step if it has one."""
        restarted = self.newest is not None and step < self.newest
        if restarted:  # its steps are counted anew
            for history in (*self._values.values(), *self._medians.values()):
                history.clear()
        seconds = clock_reading(seconds_per_step)
        advanced = 1 if self.newest is None or restarted else max(step - self.newest, 0)
        self.clock += round((self.untimed_step_seconds if seconds is None else seconds) * CLOCK_TICKS_PER_SECOND) * advanced
        self.newest = step
        self._add_members(logged)
        for key, history in self._values.items():
            value = logged.get(key)
            if value is not None and not math.isnan(value):
                history.add(step, self.clock, value)
            history.prune(step)
        for (key, count), history in self._medians.items():
            values = self._values[key]
            window = values.window(count, step, self.clock, self.floor)
            if window and _logged_since(values, count, step):
                history.add(step, self.clock, median_of(window))
            history.prune(step)
        self._drop_members(step)

    def logged_before(self, steps: dict[Member, int]) -> None:
        """Before the first observe: each series or member had a value at that step already (a tail
        start's records begin later), which a window's half-logged test reads."""
        self._add_members(steps)
        for key, step in steps.items():
            if key in self._values:
                self._values[key].first_step = step

    def _add_members(self, logged: dict[Member, float]) -> None:
        for key in logged:
            if isinstance(key, tuple) and key[0] in self._reach and key not in self._values:
                self._values[key] = _History(self._reach[key[0]])
                for (series, count), steps in self._median_reach.items():
                    if series == key[0]:
                        self._medians[(key, count)] = _History(steps)

    def _drop_members(self, step: int) -> None:
        gone = [key for key, history in self._values.items()
                if isinstance(key, tuple) and (not history.steps or history.steps[-1] <= step - history.reach)]
        for key in gone:
            del self._values[key]
            for count in [count for member, count in self._medians if member == key]:
                del self._medians[(key, count)]

    def values(self) -> dict[Served, float]:
        """Each wanted statistic that has a value now, of each series or family member."""
        out: dict[Served, float] = {}
        if self.newest is None:
            return out
        for stat in self.wanted:
            for key in ([key for key in self._values if isinstance(key, tuple) and key[0] == stat.series]
                        if stat.series in FAMILIES else [stat.series]):
                value = self._value(stat, key)
                if value is not None:
                    out[(stat, member_labels(key))] = value
        return out

    def _value(self, stat: StepStatistic, key: Member) -> float | None:
        history = self._medians[(key, stat.of_median)] if stat.of_median else self._values[key]
        end_step = self.newest - stat.ending
        end_clock = self.clock - (self.floor if stat.ending else 0)
        window = history.window(stat.steps, end_step, end_clock, self.floor)
        if stat.half_logged and not (_logged_since(self._values[key], stat.steps, end_step)
                                     and len(window) >= min(stat.steps, MIN_WINDOW_VALUES) // 2):
            return None  # a young run's first steps, or half the window's steps but not half its values
        first = self._values[key].first_step
        if stat.fully_logged and not (first is not None and first <= end_step - (stat.steps - 1)
                                      and len(window) >= min(stat.steps, MIN_WINDOW_VALUES)):
            return None  # fewer of the window's steps than it counts, or fewer values than a window reads
        value = reduced(stat.reduction, window) if window else None
        return None if value is None else float(value)


# The labelled families whose statistics are computed per member; a member is keyed by the tuple
# (family, data_source, variable, metric), as dashgen.formats.verl_log.ValidationSeries.
FAMILIES = frozenset(VALIDATION_FAMILIES.values())
Member = str | tuple[str, ...]
# A statistic as served: with the member's labels ((label, value) pairs; none for a series).
Served = tuple[StepStatistic, tuple[tuple[str, str], ...]]


def _family(key: Member) -> str:
    return key[0] if isinstance(key, tuple) else key


def member_labels(key: Member) -> tuple[tuple[str, str], ...]:
    """The labels a family member's statistics are served with; none for a series."""
    return tuple(zip(VALIDATION_LABELS, key[1:])) if isinstance(key, tuple) else ()


_NAME = re.compile(r"(median|max|min|spread|p[1-9]\d?)_(\d+)steps(?:_ending(\d+))?(?:_of_median_(\d+)steps)?(_half_logged)?(_fully_logged)?")
_SELECTED = re.compile(STEP_STATISTIC_METRIC + r"\{([^}]*)\}")


def parse_name(series: str, name: str) -> StepStatistic | None:
    """The statistic a `statistic` label names (StepStatistic.name read back); None if none does;
    ValueError if it names one out of range."""
    match = _NAME.fullmatch(name)
    if match is None:
        return None
    reduction, steps, ending, of_median, half, fully = match.groups()
    return StepStatistic(series, reduction, _count(steps), _count(ending), _count(of_median), bool(half),
                         bool(fully))


def _count(digits: str | None) -> int:
    """A count of steps in a statistic's name: past MAX_STEPS, which StepStatistic refuses, when it
    has more digits than MAX_STEPS (int() of thousands of digits raises a ValueError of its own)."""
    if not digits:
        return 0
    return int(digits) if len(digits) <= len(str(MAX_STEPS)) else MAX_STEPS + 1


@record
class ServedStatistics:
    """The statistics over steps the rules read, and the floor of their windows (the config's
    step_window_floor): what the exporter serves and a backfill writes."""

    statistics: tuple[StepStatistic, ...] = ()
    floor_seconds: float = 0.0

    def tracker(self, untimed_step_seconds: float = UNTIMED_STEP_SECONDS) -> StepStatistics:
        return StepStatistics(self.statistics, self.floor_seconds, untimed_step_seconds)

    @cached_property  # each statistic by its `series` and `statistic` labels, read for every rule compiled
    def by_label(self) -> dict[tuple[str, str], StepStatistic]:
        return {(stat.series, stat.name): stat for stat in self.statistics}

    @property
    def digest(self) -> str:
        """A short fingerprint of what is computed: the statistics and the floor ("none" for none:
        rules that read no step windows are served by any exporter)."""
        if not self.statistics:
            return "none"
        text = "\n".join([f"floor {self.floor_seconds:g}", *sorted(f"{s.series}/{s.name}" for s in self.statistics)])
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def step_seconds(logged: dict[str, float]) -> float | None:
    """A line's timing_s/step, as the exporter names it, if the log's clock can read it: None if it
    logged none, or one that is no plausible step time (see MAX_STEP_SECONDS)."""
    return clock_reading(logged.get(STEP_TIME_METRIC))


def clock_reading(seconds: float | None) -> float | None:
    """A step time the log's clock takes: finite, positive and at most MAX_STEP_SECONDS; else None."""
    return seconds if seconds is not None and math.isfinite(seconds) and 0 < seconds <= MAX_STEP_SECONDS else None


def statistics_in(expressions: Iterable[str]) -> set[StepStatistic]:
    """The statistics rule expressions select (`verl_step_statistic{series="...", statistic="..."}`):
    what a backfill of a run must compute for them."""
    found = set()
    for expr in expressions:
        for matchers in _SELECTED.findall(expr):
            labels = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', matchers))
            if "series" in labels and "statistic" in labels:
                statistic = parse_name(labels["series"], labels["statistic"])
                if statistic is not None:
                    found.add(statistic)
    return found


def served_by(expressions: Iterable[str], floor_seconds: float) -> ServedStatistics:
    """What rules of these expressions read, with the floor of the config they were built with."""
    return ServedStatistics(tuple(sorted(statistics_in(expressions), key=lambda s: (s.series, s.name))),
                            floor_seconds)
