"""The field kinds: what an `Annotated[...]` adds to a field's base type (a format, range or unit),
and the named kinds config classes use (`Duration`, `Fraction`, `JobName`, ...)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from dashgen.config.duration import PrometheusDuration
from dashgen.errors import BuildError
from dashgen.records import record


class ConfigError(BuildError):
    """A field's value does not fit its schema; the message starts with the field's name."""


# --- Field kinds: what an `Annotated[...]` adds to the base type ------------------------------

@record
class DurationRange:
    """A Prometheus duration (90s, 10m, 1h30m), read into a PrometheusDuration, within a range."""
    positive: bool = False
    max_seconds: float = 10 * 365 * 86400

    def describe(self) -> str:
        return "a Prometheus duration" + (", longer than 0s" if self.positive else "")

    def parse(self, value: Any) -> Any:
        if isinstance(value, str) and not isinstance(value, PrometheusDuration):
            try:
                return PrometheusDuration(value)
            except ValueError:
                raise ConfigError(f"{value!r} is not a Prometheus duration (e.g. 90s, 10m, 1h)") from None
        return value

    def problem(self, value: PrometheusDuration) -> str | None:
        if self.positive and value.seconds <= 0:
            return f"{value!r} must be longer than 0s"
        if value.seconds > self.max_seconds:
            return f"{value!r} is longer than {self.max_seconds / 86400 / 365:g} years"
        return None


@record
class Between:
    """A number in [low, high] (an open end is excluded), in `unit`."""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    unit: str = ""

    def describe(self) -> str:
        low = "" if self.low is None else f"{'>' if self.low_open else '>='} {self.low:g}"
        high = "" if self.high is None else f"<= {self.high:g}"
        return " and ".join(filter(None, (low, high))) + (f", in {self.unit}" if self.unit else "")

    def problem(self, value: float) -> str | None:
        unit = f" {self.unit}" if self.unit else ""
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return f"{value!r}{unit} must be {'greater than' if self.low_open else 'at least'} {self.low:g}{unit}"
        if self.high is not None and value > self.high:
            return f"{value!r}{unit} must be at most {self.high:g}{unit}"
        return None


@record
class Matches:
    """A string matching `pattern` in full; `example` shows the expected form."""
    pattern: str
    example: str

    def describe(self) -> str:
        return f"like {self.example}"

    def problem(self, value: str) -> str | None:
        if not re.fullmatch(self.pattern, value):
            return f"{value!r} is not valid here; expected something like {self.example}"
        return None


@record
class HostPort:
    """host:port as another process should reach it; port 1-65535."""

    def describe(self) -> str:
        return "host:port"

    def problem(self, value: str) -> str | None:
        match = re.fullmatch(r"([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})", value)
        if not match or not 1 <= int(match.group(2)) <= 65535:
            return f"{value!r} is not host:port with a port from 1 to 65535 (e.g. localhost:9464)"
        return None


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)")
_SIZE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
               "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


@record
class ByteSize:
    """A number of bytes: an integer, or a string with a unit (80GiB, 40 GB)."""

    def describe(self) -> str:
        return "bytes, or a size such as 80GiB"

    def parse(self, value: Any) -> Any:
        if isinstance(value, str):
            match = _SIZE.fullmatch(value.strip())
            if not match:
                raise ConfigError(f"{value!r} is not a size; give bytes or a number with a unit (80GiB, 40GB)")
            return round(float(match.group(1)) * _SIZE_UNITS[match.group(2)])
        return value

    def problem(self, value: int) -> str | None:
        return None if value >= 1 else f"{value!r} bytes must be at least 1 byte"


# Named kinds used by the fields below (and by fields other modules add).
Duration = Annotated[PrometheusDuration, DurationRange()]
Interval = Annotated[PrometheusDuration, DurationRange(positive=True)]  # a window or a period: longer than 0s
Fraction = Annotated[float, Between(0.0, 1.0)]
Factor = Annotated[float, Between(0.0, None, low_open=True)]  # a multiplier: greater than 0
NonNegative = Annotated[float, Between(0.0, None)]
Percent = Annotated[float, Between(0.0, 100.0, unit="%")]
Bytes = Annotated[int, ByteSize(), Between(1, None, unit="bytes")]
StepCount = Annotated[int, Between(1, 10_000, unit="steps")]  # a window of training steps: steps(N)
JobName = Annotated[str, Matches(r"[A-Za-z_][A-Za-z0-9_.:/-]*", "verl (letters, digits, _ . : / -)")]
GrafanaUid = Annotated[str, Matches(r"[A-Za-z0-9_-]{1,40}", "dashgen-prometheus (1-40 of A-Z a-z 0-9 _ -)")]
GrafanaTime = Annotated[str, Matches(r"now(-\d+[smhdwMy])*(/[smhdwMy])?", "now-6h")]
Address = Annotated[str, HostPort()]
# Kubernetes names and labels (DNS-1123 label; label key and value syntax of the API reference).
DnsLabel = Annotated[str, Matches(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "monitoring (a DNS-1123 label: up to 63 of "
                                                                        "a-z 0-9 -, starting and ending alphanumeric)")]
# A label or annotation key: an optional DNS-1123 subdomain prefix of at most 253 characters, each
# of its dot-separated labels a DNS-1123 label of at most 63, and '/', then a name of at most 63.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
LabelKey = Annotated[str, Matches(rf"((?=[^/]{{1,253}}/){_DNS_LABEL}(\.{_DNS_LABEL})*/)?"
                                  r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?",
                                  "app.kubernetes.io/name (an optional prefix of up to 253 of a-z 0-9 - ., each part "
                                  "between dots up to 63, and '/', then up to 63 of A-Z a-z 0-9 - _ ., starting and "
                                  "ending alphanumeric)")]
# A container port's name (IANA_SVC_NAME): up to 15 of a-z 0-9 -, at least one letter, no '-' at
# either end nor two in a row.
PortName = Annotated[str, Matches(r"(?=.{1,15}$)(?=.*[a-z])[a-z0-9]+(-[a-z0-9]+)*",
                                  "metrics (a port name: up to 15 of a-z 0-9 -, with a letter, no '-' at either "
                                  "end nor '--')")]
LabelValue = Annotated[str, Matches(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", "kube-prometheus-stack")]
