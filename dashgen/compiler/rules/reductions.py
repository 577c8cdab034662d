"""The PromQL text of a signal's reductions over a window (median, max, min, a quantile, changes) and of the
rolling baselines the alert vocabulary compares with (dashgen/compiler/rules/condition_compiler.py)."""

from __future__ import annotations

from typing import Callable

from dashgen.conditions import percentile_of
from dashgen.config import duration_seconds, format_duration


def complete_baseline_median(series: str, window: str, ending: str) -> str:
    """Median of `series` over `window`, ending `ending` ago; empty until that window is
    covered from its start, so nothing is compared against a run's first few steps."""
    return (f"quantile_over_time(0.5, {series}[{window}] offset {ending})\n"
            f"  and present_over_time({series}[{ending}] offset {window})")


def early_baseline_median(series: str, window: str, ending: str, min_history: str) -> str:
    """Median of `series` over `window`, ending `ending` ago, once at least `min_history` of that
    window holds samples: a young run is compared with its own first steps."""
    back = format_duration(duration_seconds(window) - duration_seconds(min_history))
    offset = format_duration(duration_seconds(ending) + duration_seconds(min_history))
    return (f"quantile_over_time(0.5, {series}[{window}] offset {ending})\n"
            f"  and present_over_time({series}[{back}] offset {offset})")


def promql_number(value: float) -> str:
    """`value` as PromQL reads it back exactly: short (0.5, 1e-05) where that is exact, else in full."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def smoothed(series: str, window: str) -> str:
    """Median over `window`: one odd step (a spike, a dip) changes nothing."""
    return f"quantile_over_time(0.5, {series}[{window}])"


# A signal reduced over a window of time (`median_over("5m")`).
REDUCTIONS = {"median": smoothed, "max": lambda s, w: f"max_over_time({s}[{w}])",
              "min": lambda s, w: f"min_over_time({s}[{w}])", "changes": lambda s, w: f"changes({s}[{w}])"}
# The same over a range written whole (`[1h:1m]`, `[1h:1m] offset 10m`): step windows.
RANGE_REDUCTIONS = {"median": lambda s, r: f"quantile_over_time(0.5, {s}{r})",
                    "max": lambda s, r: f"max_over_time({s}{r})", "min": lambda s, r: f"min_over_time({s}{r})",
                    "changes": lambda s, r: f"changes({s}{r})",
                    "present": lambda s, r: f"present_over_time({s}{r})"}


def over_time(reduction: str) -> Callable[[str, str], str] | None:
    """The PromQL of `reduction` over a window of time (`median_over("5m")`); None for no such reduction."""
    quantile = percentile_of(reduction)
    if quantile is not None:
        return lambda s, w: f"quantile_over_time({quantile:g}, {s}[{w}])"
    return REDUCTIONS.get(reduction)


def over_range(reduction: str) -> Callable[[str, str], str]:
    """The PromQL of `reduction` over a range written whole (a step window's band)."""
    quantile = percentile_of(reduction)
    if quantile is not None:
        return lambda s, r: f"quantile_over_time({quantile:g}, {s}{r})"
    return RANGE_REDUCTIONS[reduction]
