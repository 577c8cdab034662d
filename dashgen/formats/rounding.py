"""How finely a step log prints its numbers, read from the numbers themselves.

verl's console logger prints every value to 3 decimals, so a healthy grad norm of 0.0004 reads
0.000; its file logger and TRL's trainer_state.json write full floats, where a 0 is a 0. A
corpus run converted from a console log, or a simulated one, is JSON with the console's values.
Nothing in the file says which, but the digits do: the shortest text of each nonzero float
(Python's repr) ends at the last digit the log kept. Half that digit's step is the largest value
the log shows as 0. A line holds dozens of values, so one of them shows the finest digit kept.
"""

from __future__ import annotations

import math


def value_rounding(value: float) -> float | None:
    """Half the step of the last digit of `value`'s shortest text: 0.0005 for 0.452, 0.05 for 12.5.
    None for 0 and non-finite values, which show no digit."""
    if value == 0 or not math.isfinite(value):
        return None
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    fraction = fraction.rstrip("0")
    # The last digit kept: in the fraction, or the last nonzero one of the whole part (1200.0: the 2).
    last = -len(fraction) if fraction else len(whole) - len(whole.rstrip("0"))
    return 10.0 ** (last + int(exponent or 0)) / 2


def line_rounding(data: dict) -> float | None:
    """The finest rounding among a log line's nonzero float values (integers and booleans, which
    every logger writes whole, say nothing); None for a line without one."""
    finest = None
    for value in data.values():
        if isinstance(value, float):
            rounding = value_rounding(value)
            if rounding is not None and (finest is None or rounding < finest):
                finest = rounding
    return finest
