"""Values as Grafana's unit formatters show them, for the units dashgen's panels use."""

from __future__ import annotations

import math
import time

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_IEC = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def _short(value: float) -> str:
    """Grafana's `short`: three significant digits, k/M/G/T above a thousand."""
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}".rstrip()
    if value == 0 or abs(value) >= 0.01:
        return f"{value:.3g}"
    return f"{value:.2e}"


def _bytes(value: float) -> str:
    index = 0
    while abs(value) >= 1024 and index < len(_IEC) - 1:
        value /= 1024
        index += 1
    return f"{value:.3g} {_IEC[index]}"


def _seconds(value: float) -> str:
    magnitude = abs(value)
    if magnitude == 0:
        return "0 s"
    if magnitude < 1e-3:
        return f"{value * 1e6:.3g} µs"
    if magnitude < 1:
        return f"{value * 1e3:.3g} ms"
    if magnitude < 60:
        return f"{value:.3g} s"
    if magnitude < 3600:
        return f"{value / 60:.3g} min"
    return f"{value / 3600:.3g} hour"


def format_value(value: float, unit: str) -> str:
    """`value` in `unit` (a Grafana unit id or a custom `suffix:`/`prefix:` unit)."""
    if value is None or math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if unit.startswith("suffix:"):
        return f"{_short(value)}{unit[len('suffix:'):]}"
    if unit.startswith("prefix:"):
        return f"{unit[len('prefix:'):]}{_short(value)}"
    if unit == "percentunit":
        return f"{value * 100:.3g}%"
    if unit == "percent":
        return f"{value:.3g}%"
    if unit == "s":
        return _seconds(value)
    if unit == "bytes":
        return _bytes(value)
    if unit == "mbytes":  # MiB
        return _bytes(value * 2**20)
    if unit == "dateTimeAsIso":
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(value))
    return _short(value)
