"""What is wrong with an alert's condition as written, in words (dashgen/conditions.py is what an
author writes with; this is how Alert checks it when it is defined, dashgen/model.py)."""

from __future__ import annotations

import math

from dashgen.conditions import (MAX_COMPARISONS, MAX_MAGNITUDE, MAX_NESTING, MAX_STEPS, AllOf, AnyOf, Baseline,
                                Compare, Comparison, Gain, Shift, Signal, Steps)
from dashgen.config import duration_problem, duration_seconds


def condition_problem(condition: object) -> str | None:
    """What is wrong with a condition as written, or None: every threshold, factor, fraction and
    floor a finite number, a factor that fits its direction, every window a duration or steps.
    Checked by Alert (dashgen/model.py) when an alert is defined, so the mistake is named with
    the alert and the line that defines it."""
    stack = [(condition, 0)]
    count = 0
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (AllOf, AnyOf)):
            if not isinstance(node.conditions, tuple):
                return f"all_of and any_of take conditions, not {node.conditions!r}"
            if depth == MAX_NESTING:
                return f"all_of and any_of nest more than {MAX_NESTING} deep; split the alert"
            stack.extend((part, depth + 1) for part in reversed(node.conditions))
        elif isinstance(node, (Compare, Shift, Gain)):
            count += 1
            if count > MAX_COMPARISONS:
                return f"the condition holds more than {MAX_COMPARISONS} comparisons; split the alert"
            problem = _comparison_problem(node)
            if problem:
                return problem
        else:
            return (f"{node!r} is not a condition; build one from Signal(...).above/below/falls_by/rises_by/"
                    f"gains_less_than, all_of or any_of")
    return None


def _comparison_problem(c: Comparison) -> str | None:
    if not isinstance(c.signal, Signal) or not isinstance(c.signal.ref, str) or not c.signal.ref:
        return f"{c.signal!r} is not a Signal('verl/key')"
    ref = c.signal.ref
    if c.signal.reduction:
        problem = _window_problem(f"{ref}: the {c.signal.reduction} window", c.signal.window)
        if problem:
            return problem
    if c.op not in (">", "<"):
        return f"{ref}: comparison {c.op!r} is not > or <"
    baseline = c.baseline
    if baseline is not None:
        problem = _baseline_problem(ref, baseline)
        if problem:
            return problem
    if isinstance(c, Gain):
        if baseline is None:
            return f"{ref}: gains_less_than compares with a Baseline(...) (of=)"
        return (_number_problem(f"{ref}: the gain of gains_less_than()", c.gain)
                or _number_problem(f"{ref}: beyond_noise of gains_less_than()", c.beyond_noise, non_negative=True)
                or _number_problem(f"{ref}: within_noise of gains_less_than()", c.within_noise, non_negative=True))
    if isinstance(c, Compare):
        word = "above" if c.op == ">" else "below"
        if baseline is None:
            return _number_problem(f"{ref}: the threshold of {word}()", c.value)
        problem = _number_problem(f"{ref}: the factor of {word}(..., times=...)", c.value, positive=True)
        if problem:
            return problem
        if c.op == ">" and c.value < 1 or c.op == "<" and c.value > 1:
            other, meant = ("below", "a fall to under") if c.op == ">" else ("above", "a rise to over")
            return (f"{ref}: {word}({c.value:g}, times=...) holds whenever the signal is at its baseline: a factor "
                    f"{word} a baseline is {'at least' if c.op == '>' else 'at most'} 1 (for {meant} "
                    f"{c.value:g}x, write {other}({c.value:g}, times=...))")
        return None
    if baseline is None:
        return f"{ref}: falls_by and rises_by compare with a Baseline(...) (of=)"
    word, same = ("falls_by", "falls_to(s) is falls_by(1 - s)") if c.op == "<" else ("rises_by", "rises_to(m) is rises_by(m - 1)")
    fraction_problem = _number_problem(f"{ref}: the fraction of {word}()", c.fraction, positive=True)
    return (fraction_problem and f"{fraction_problem} ({same})"
            or _number_problem(f"{ref}: at_least of {word}()", c.at_least, non_negative=True)
            or _number_problem(f"{ref}: beyond_noise of {word}()", c.beyond_noise, non_negative=True)
            or (None if isinstance(c.negated, bool) else f"{ref}: negated is {c.negated!r}, not True or False"))


def _number_problem(what: str, value: object, positive: bool = False, non_negative: bool = False) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        hint = " (a string: convert it, e.g. float(os.environ[...]))" if isinstance(value, str) else ""
        return f"{what} is {value!r}, not a number{hint}"
    if not math.isfinite(value):
        return f"{what} is {value!r}, not a finite number"
    if abs(value) > MAX_MAGNITUDE:
        return f"{what} is {value!r}, beyond +-{MAX_MAGNITUDE:g}"
    if positive and value <= 0:
        return f"{what} is {value!r}; it must be greater than 0"
    if non_negative and value < 0:
        return f"{what} is {value!r}; it must be 0 or more"
    return None


def _window_problem(what: str, window: object, empty: bool = False, zero: bool = False) -> str | None:
    """A window: steps(N), or a Prometheus duration longer than 0s (`zero`: 0s too; `empty`: "" too)."""
    if isinstance(window, Steps):
        count = window.count
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_STEPS:
            return f"{what} {window!r}: give steps(N) a whole number from 1 to {MAX_STEPS:,}"
        return None
    if empty and window == "":
        return None
    problem = duration_problem(window)
    if problem:
        return f"{what}: {problem}, or steps(N)"
    if not zero and duration_seconds(window) <= 0:
        return f"{what} {window!r} must be longer than 0s"
    return None


def _baseline_problem(ref: str, baseline: object) -> str | None:
    if not isinstance(baseline, Baseline):
        return f"{ref}: {baseline!r} is not a Baseline(...)"
    if baseline.of is not None:
        if not isinstance(baseline.of, Baseline):
            return f"{ref}: Baseline.held(of={baseline.of!r}): give a Baseline(...) to hold"
        problem = _baseline_problem(ref, baseline.of)
        if problem:
            return problem
    what = f"{ref}: baseline"
    return (_window_problem(f"{what} window", baseline.window, empty=True)
            or _window_problem(f"{what} ending", baseline.ending, empty=True, zero=True)
            or _window_problem(f"{what} over", baseline.over, empty=True)
            or (_window_problem(f"{what} min_history", baseline.min_history, empty=True)
                if not isinstance(baseline.min_history, Steps) else f"{what} min_history is a duration, not steps"))
