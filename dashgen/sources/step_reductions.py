"""The reductions a step statistic applies to the values of its window (dashgen/sources/step_statistics.py)."""

from __future__ import annotations

import math
import statistics
from typing import Iterable

from dashgen.conditions import percentile_of


def median_of(values: Iterable[float]) -> float:
    return statistics.median(values)


# A spread needs this many values: two give one difference, no estimate of a noise.
SPREAD_MIN_VALUES = 3


def step_to_step_spread(values: list[float]) -> float | None:
    """The signal's own noise: the median absolute difference between consecutive logged values,
    less their drift. For independent noise of standard deviation s it is 0.95 s. Blind to a
    single outlier, and to a steady trend at any logging cadence: a share rising 0.01 a step moves
    each difference 0.01 in a log of every step but 0.05 in a log of every 5th, which, not taken
    out, would read the rise itself as noise (issue 35). Their mean where the median is 0. None
    with fewer than SPREAD_MIN_VALUES.

    The drift is taken out only where two estimates of it agree in sign, and the smaller of them:
    the median difference (which a signal alternating between two levels puts on one of its two
    jumps) and the median of the window's later half less that of its earlier half, per logged
    step between them (which a signal taking few values shifts by a whole level)."""
    if len(values) < SPREAD_MIN_VALUES:
        return None
    differences = [later - earlier for earlier, later in zip(values, values[1:])]
    half = len(values) // 2
    by_halves = (statistics.median(values[-half:]) - statistics.median(values[:half])) / (len(values) - half)
    by_differences = statistics.median(differences)
    drift = min(by_halves, by_differences, key=abs) if by_halves * by_differences > 0 else 0.0
    deviations = [abs(difference - drift) for difference in differences]
    # A signal that takes few values (a share of two completions: 0, 0.5 or 1) repeats itself on
    # most steps, and the median difference of 0 would say it has no noise at all.
    return statistics.median(deviations) or statistics.fmean(deviations)


def quantile(values: list[float], fraction: float) -> float:
    """The value `fraction` of `values` are at or below, interpolated linearly between the two
    nearest ranks: Prometheus' quantile_over_time, so the exporter's statistic and a step window in
    PromQL read the same."""
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    below = math.floor(rank)
    above = min(below + 1, len(ordered) - 1)
    weight = rank - below
    return ordered[below] * (1 - weight) + ordered[above] * weight


REDUCTIONS_BY_NAME = {"median": median_of, "max": max, "min": min, "spread": step_to_step_spread}


def reduced(reduction: str, values: list[float]) -> float | None:
    fraction = percentile_of(reduction)
    return REDUCTIONS_BY_NAME[reduction](values) if fraction is None else quantile(values, fraction)
