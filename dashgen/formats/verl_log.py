"""verl's step log -> Prometheus samples: the mapping shared by the exporter and backfill.

verl's file logger writes one JSON object per step: {"step": N, "data": {"actor/ppo_kl": ...}}.
Keys map to metric names through the catalog (unit conversions, version aliases); keys the
catalog does not know are named by the same rule unless switched off.
"""

from __future__ import annotations

import json
import math
from dataclasses import field
from typing import Any, Iterator

from dashgen.bounded_read import parse_nested
from dashgen.catalog import (CATALOG, EXPORTER_COUNTERS, EXPORTER_SERIES, VALIDATION_FAMILIES, Catalog, counter_family,
                             verl_metric_name)
from dashgen.gpu import RUN_SESSION_INFO
from dashgen.records import record

# Names the exporter serves itself, as families and samples: in OpenMetrics (which Prometheus asks
# for) the counter `x_total` is the family `x`, with `x_created` beside it. A gauge of a logged key
# under one of these names would make the page invalid: such a key is dropped and counted.
EXPORTER_METRICS = frozenset({*EXPORTER_SERIES, RUN_SESSION_INFO,
                              *(counter_family(name) for name in EXPORTER_COUNTERS),
                              *(counter_family(name) + "_created" for name in EXPORTER_COUNTERS)})
# Bounds that keep a run's held state flat whatever it logs: distinct names exported for keys
# the catalog does not know, keys whose mapping is remembered, collision messages kept.
MAX_UNKNOWN_SERIES = 2_000
MAX_REMEMBERED_KEYS = 10_000
MAX_NOTES = 100
OVER_LIMIT = "(over the limit of unknown keys)"  # a key's mapping when MAX_UNKNOWN_SERIES is reached
RESERVED = "(a name the exporter serves itself)"  # a key's mapping onto one of EXPORTER_METRICS
# Validation series held between test steps: one test step's worth (data sources x variables
# x metrics); keys beyond it are counted as dropped keys.
MAX_VALIDATION_SERIES = 1_000

# (family, data_source, variable, metric): one validation series.
ValidationSeries = tuple[str, str, str, str]


OLD_VALIDATION_PREFIX = "val/test_score/"


def validation_series(key: str) -> ValidationSeries | None:
    """The labelled series of a validation key; None if `key` is not one.

    verl writes f"{section}/{data_source}/{var_name}/{metric_name}", where a data source may
    hold slashes (`openai/gsm8k`) and a metric name may too (`best@4/mean`): the metric starts
    at the last segment holding `@N`. Keys without one (`val-aux/num_turns/mean`) split as
    .../<variable>/<metric>.
    """
    if key.startswith(OLD_VALIDATION_PREFIX):
        # verl before 0.3 logged one mean score per data source: val/test_score/<data_source>.
        source = key[len(OLD_VALIDATION_PREFIX):]
        return (VALIDATION_FAMILIES["val-core"], source, "reward", "mean") if source else None
    section, _, rest = key.partition("/")
    family = VALIDATION_FAMILIES.get(section)
    if family is None or not rest:
        return None
    parts = rest.split("/")
    at = max((i for i, part in enumerate(parts) if "@" in part), default=len(parts) - 1)
    if at == 0:
        return family, "", "", rest
    return family, "/".join(parts[:at - 1]), parts[at - 1], "/".join(parts[at:])


class LineError(ValueError):
    """A line that is not a step record; the caller counts it and goes on."""


@record
class Step:
    step: int
    values: dict[str, float]  # metric name -> value in the metric's base unit


def parse_line(line: str | bytes) -> tuple[int, dict]:
    """(step, data) of one log line; LineError if it is not a step record."""
    try:
        record = parse_nested(json.loads, line)  # Python's json also honours NaN / Infinity tokens
    except (ValueError, UnicodeDecodeError) as exc:  # Unparseable among them
        raise LineError(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise LineError(f"not an object but {type(record).__name__}")
    data = record.get("data")
    step = record.get("step")
    if not isinstance(data, dict):
        raise LineError("no 'data' object")
    number = _step_number(step)
    if number is None:
        number = _step_number(data.get("training/global_step"))
        if number is None:
            raise LineError(f"no step: a whole number from 0 to {MAX_STEP:,} under 'step' or "
                            f"'data'/'training/global_step'")
    return number, data


# The highest step a line may log: every step up to it is exact as a float (a sample's value, a
# window's arithmetic). A larger, negative, fractional or non-finite step is a line in error.
MAX_STEP = 2 ** 53


def _step_number(value: Any) -> int | None:
    """A logged step as an int; None if it is not a whole number from 0 to MAX_STEP. Compared
    as it is, never converted first: an integer of 400 digits has no float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_STEP:
        return None  # NaN compares false: None too
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


@record(frozen=False)
class MappingCounts:
    """What a StepMapper did not export, for the exporter's own counters and messages."""
    dropped_keys: int = 0  # key occurrences past MAX_UNKNOWN_SERIES distinct names, or onto EXPORTER_METRICS
    key_collisions: int = 0  # key occurrences whose name another key already exports
    notes: list[str] = field(default_factory=list)  # first messages about collisions and the limit, to show


class StepMapper:
    """Maps a step's data dict to {metric name: value}; remembers each key's mapping.

    A name belongs to the first key that maps onto it (or to the catalog): another key that
    sanitises to the same name (`a.b` and `a/b`, non-ASCII keys) is counted and reported,
    not exported over it. Unknown keys beyond MAX_UNKNOWN_SERIES names are counted and dropped.
    """

    def __init__(self, catalog: Catalog = CATALOG, export_unknown: bool = True,
                 max_unknown_series: int = MAX_UNKNOWN_SERIES):
        self._export_unknown = export_unknown
        self._max_unknown_series = max_unknown_series
        self._by_key: dict[str, tuple[str, float, int] | str | None] = {}
        self._owner: dict[str, str] = {}  # metric name -> the key (or catalog) that exports it
        self.counts = MappingCounts()
        self._said_limit = False
        for key, metric in catalog.verl_key_map().items():
            # The alias's position: the first key of a metric wins when a step logs two of them.
            self._by_key[key] = (metric.name, metric.scale, metric.verl_keys.index(key))
            self._owner[metric.name] = "the catalog"
        self._unknown_names = 0
        self._remembered_unknown = 0
        # Keys known to count nothing (exported, remembered), so count() skips a step of only those.
        self._uncounted: set[str] = set()

    def _mapping(self, key: str) -> tuple[str, float, int] | str | None:
        """(name, scale, rank); None: not exported; a str: the name, owned by another key."""
        if key in self._by_key:
            return self._by_key[key]
        mapping: tuple[str, float, int] | str | None = None
        if self._export_unknown:
            name, scale = verl_metric_name(key)
            owner = self._owner.get(name)
            if name in EXPORTER_METRICS:
                mapping = RESERVED
                self._note(f"key {key!r} maps to {name}, a name the exporter serves itself; not exported, "
                           f"counted in verl_exporter_dropped_keys_total")
            elif owner == key:  # its own name, no longer remembered
                mapping = (name, scale, 0)
            elif owner is not None:
                mapping = name
                self._note(f"keys {key!r} and {owner!r} both map to {name}; exporting {owner!r} only")
            elif self._unknown_names >= self._max_unknown_series:
                if not self._said_limit:
                    self._said_limit = True
                    self._note(f"more than {self._max_unknown_series} distinct unknown keys; dropping new ones "
                               f"(first: {key!r}); counted in verl_exporter_dropped_keys_total")
                return OVER_LIMIT  # not remembered: the key cache stays bounded
            else:
                mapping = (name, scale, 0)
                self._owner[name] = key
                self._unknown_names += 1
        if self._remembered_unknown < MAX_REMEMBERED_KEYS:
            self._remembered_unknown += 1
            self._by_key[key] = mapping
        return mapping

    def _note(self, message: str) -> None:
        if len(self.counts.notes) < MAX_NOTES:
            self.counts.notes.append(message)

    def _exported(self, data: dict, counting: bool = True) -> Iterator[tuple[str, float, int, Any]]:
        """(name, scale, rank, raw value) of each key of `data` that is exported; counts the others
        unless the step was counted before (`counting` False)."""
        counts = self.counts if counting else MappingCounts()
        for key, raw in data.items():
            if not isinstance(key, str) or key.startswith(_VALIDATION_PREFIXES):
                continue  # validation keys go to validation(), labelled
            mapping = self._mapping(key)
            if mapping is None:
                continue
            if mapping is OVER_LIMIT or mapping is RESERVED:
                counts.dropped_keys += 1
            elif isinstance(mapping, str):
                counts.key_collisions += 1
            else:
                yield (*mapping, raw)

    def count(self, data: dict) -> None:
        """Count the keys of a step that are not exported, as map() would, without mapping the others."""
        if self._uncounted.issuperset(data):
            return  # the usual step: the keys of the steps before
        for _ in self._exported(data):
            pass
        if len(self._uncounted) < MAX_REMEMBERED_KEYS:  # remembered mappings never change
            self._uncounted.update(key for key in data
                                   if key in self._by_key and not isinstance(self._by_key[key], str))

    def map(self, data: dict, counting: bool = True) -> dict[str, float]:
        values: dict[str, float] = {}
        priority: dict[str, int] = {}
        for name, scale, rank, raw in self._exported(data, counting):
            if raw is None:
                # verl's file logger (orjson) writes NaN and infinities as null.
                value = math.nan
            elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
                continue
            else:
                try:
                    value = float(raw) * scale
                except OverflowError:  # an integer beyond float range
                    value = math.inf if raw > 0 else -math.inf
            if name in priority and priority[name] <= rank:
                continue
            values[name] = value
            priority[name] = rank
        return values

    def step_values(self, step: int, data: dict, previous: dict[str, float] | None,
                    counting: bool = True) -> dict[str, float]:
        """What the run shows once this line is read, given what the line before left (`previous`).

        A key missing from a line is no value. A line with no training value (a validation-only
        line, a TRL eval entry) is no training step: the training values before it stay and only
        the step moves. Every line carries its step as the global step, logged or not."""
        values = self.map(data, counting)
        values.setdefault(GLOBAL_STEP_METRIC, float(step))
        if previous and not is_training_line(data):
            return {**previous, **values}
        return values

    def validation(self, data: dict, counting: bool = True) -> dict[ValidationSeries, float]:
        """The step's validation results (empty unless it is a test step), at most
        MAX_VALIDATION_SERIES of them (`counting` those beyond as dropped keys)."""
        held: dict[ValidationSeries, float] = {}
        for key, raw in data.items():
            if not isinstance(key, str) or not key.startswith(_VALIDATION_PREFIXES):
                continue
            series = validation_series(key)
            if series is None or isinstance(raw, bool) or not isinstance(raw, (int, float, type(None))):
                continue
            if len(held) >= MAX_VALIDATION_SERIES:
                self.counts.dropped_keys += counting
                continue
            held[series] = math.nan if raw is None else _as_float(raw)
        return held

    def step(self, line: str | bytes) -> Step:
        number, data = parse_line(line)
        return Step(number, self.map(data))


def held_validation(held: dict[ValidationSeries, float], logged: dict[ValidationSeries, float],
                    restarted: bool) -> dict[ValidationSeries, float]:
    """The validation results served after a line: those it logged replace all held (a series that
    test step lacks is gone); else those held, unless the run restarted (the old run's are not this one's)."""
    return logged or ({} if restarted else held)


_VALIDATION_PREFIXES = (*(f"{section}/" for section in VALIDATION_FAMILIES), OLD_VALIDATION_PREFIX)
GLOBAL_STEP_METRIC = verl_metric_name("training/global_step")[0]
# Keys that say where the run stands, not what a step measured.
STEP_COUNTER_KEYS = frozenset({"training/global_step", "training/epoch"})


def is_training_line(data: dict) -> bool:
    """Whether a line logs a training step: a key beyond validation results and the step counters
    (see StepMapper.step_values). Read from the keys alone, so following a log stays cheap."""
    return any(isinstance(key, str) and key not in STEP_COUNTER_KEYS and not key.startswith(_VALIDATION_PREFIXES)
               for key in data)


def _as_float(raw: int | float) -> float:
    try:
        return float(raw)
    except OverflowError:  # an integer beyond float range
        return math.inf if raw > 0 else -math.inf
