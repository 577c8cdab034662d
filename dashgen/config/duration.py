"""Prometheus durations (90s, 10m, 1h30m): parsing, formatting, and the range Prometheus accepts."""

from __future__ import annotations

import re

# Prometheus' own syntax: units largest first, each at most once (1h30m, not 30m1h).
DURATION = re.compile(r"(?=\d)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
# Prometheus keeps a duration in int64 nanoseconds and refuses a longer one ("duration out of range").
MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


def duration_seconds(text: str) -> float:
    if not isinstance(text, str) or not DURATION.fullmatch(text):
        raise ValueError(f"{text!r} is not a Prometheus duration")
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text))


def duration_problem(text: object) -> str | None:
    """Why Prometheus would refuse `text` as a duration (in a rule file or a PromQL range), or None."""
    if not isinstance(text, str) or not DURATION.fullmatch(text):
        return f"{text!r} is not a Prometheus duration (e.g. 90s, 10m, 1h30m: units largest first)"
    if len(text) > 3 and duration_seconds(text) > MAX_DURATION_SECONDS:  # three characters (99y) are in range
        return f"{text!r} is out of Prometheus' duration range (at most {MAX_DURATION_SECONDS / _UNITS['y']:.0f}y)"
    return None


def format_duration(seconds: float) -> str:
    """A Prometheus duration, to the millisecond, largest units first (4200 -> 1h10m, 1.5 -> 1s500ms):
    the inverse of duration_seconds, for windows derived from the config's."""
    millis, parts = round(seconds * 1000), []
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if millis >= size:
            parts.append(f"{millis // size}{unit}")
            millis %= size
    return "".join(parts) or "0s"

