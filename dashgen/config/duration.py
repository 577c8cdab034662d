"""Prometheus durations (90s, 10m, 1h30m): parsing, formatting, and the range Prometheus accepts."""

from __future__ import annotations

import re

import yaml

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



class PrometheusDuration(str):
    """A Prometheus duration: its text as written (90s stays 90s, so rendered files keep the
    config's spelling) and its length, with arithmetic on the length.

    `a + b`, `a - b`, `a * 3`, `a / 2` and `a / b` (a ratio) work on lengths, and a duration they
    make is written largest units first (`PrometheusDuration("1h") + "10m"` is 1h10m); `<`, `<=`,
    `>`, `>=` compare lengths, and `.seconds` is the length. As a string it is its text, which
    YAML, JSON and f-strings write: equality and hashing are the text's (`"90s" != "1m30s"`), so a
    duration may stand wherever its text did.
    """

    def __new__(cls, text: str) -> "PrometheusDuration":
        if isinstance(text, PrometheusDuration):
            return text
        if not isinstance(text, str) or not DURATION.fullmatch(text):
            raise ValueError(f"{text!r} is not a Prometheus duration")
        return super().__new__(cls, text)

    @classmethod
    def of_seconds(cls, seconds: float) -> "PrometheusDuration":
        """The duration of `seconds`, to the millisecond, largest units first (4200 -> 1h10m)."""
        if seconds < 0:
            raise ValueError(f"a duration cannot be negative ({seconds:g} s)")
        return cls(format_duration(seconds))

    @property
    def seconds(self) -> float:
        return duration_seconds(str(self))

    def __add__(self, other: object) -> "PrometheusDuration":
        if not isinstance(other, str):
            return NotImplemented
        return PrometheusDuration.of_seconds(self.seconds + PrometheusDuration(other).seconds)

    def __sub__(self, other: object) -> "PrometheusDuration":
        if not isinstance(other, str):
            return NotImplemented
        return PrometheusDuration.of_seconds(self.seconds - PrometheusDuration(other).seconds)

    def __mul__(self, factor: object) -> "PrometheusDuration":
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            return NotImplemented
        return PrometheusDuration.of_seconds(self.seconds * factor)

    __rmul__ = __mul__

    def __truediv__(self, other: object):
        """A duration divided by a number is a duration; by a duration, their ratio."""
        if isinstance(other, str):
            return self.seconds / PrometheusDuration(other).seconds
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            return NotImplemented
        return PrometheusDuration.of_seconds(self.seconds / other)

    def __lt__(self, other: object) -> bool:
        return self.seconds < PrometheusDuration(other).seconds if isinstance(other, str) else NotImplemented

    def __le__(self, other: object) -> bool:
        return self.seconds <= PrometheusDuration(other).seconds if isinstance(other, str) else NotImplemented

    def __gt__(self, other: object) -> bool:
        return self.seconds > PrometheusDuration(other).seconds if isinstance(other, str) else NotImplemented

    def __ge__(self, other: object) -> bool:
        return self.seconds >= PrometheusDuration(other).seconds if isinstance(other, str) else NotImplemented

    # str's own equality and hash stand: a duration is equal to its text.
    __eq__ = str.__eq__
    __hash__ = str.__hash__


def _represent_duration(dumper: yaml.SafeDumper, value: PrometheusDuration) -> yaml.ScalarNode:
    return dumper.represent_str(str(value))


# Every safe YAML dumper (and its subclasses, whenever made) writes a duration as its text.
yaml.representer.SafeRepresenter.add_multi_representer(PrometheusDuration, _represent_duration)
