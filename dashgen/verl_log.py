"""verl's step log -> Prometheus samples: the mapping shared by the exporter and backfill.

verl's file logger writes one JSON object per step: {"step": N, "data": {"actor/ppo_kl": ...}}.
Keys map to metric names through the catalog (unit conversions, version aliases); keys the
catalog does not know are named by the same rule unless switched off.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from dashgen.catalog import CATALOG, NONFINITE_STREAK_METRIC, RUN_STATE_METRIC, Catalog, verl_metric_name

# Names the exporter uses for itself; a logged key that maps onto one of them is dropped.
EXPORTER_METRICS = frozenset({"verl_exporter_last_step_timestamp_seconds", "verl_exporter_steps_total",
                              "verl_exporter_parse_errors_total", RUN_STATE_METRIC, "verl_run_exit_code",
                              NONFINITE_STREAK_METRIC})


class LineError(ValueError):
    """A line that is not a step record; the caller counts it and goes on."""


@dataclass(frozen=True)
class Step:
    step: int
    values: dict[str, float]  # metric name -> value in the metric's base unit


def parse_line(line: str | bytes) -> tuple[int, dict]:
    """(step, data) of one log line; LineError if it is not a step record."""
    try:
        record = json.loads(line)  # Python's json also honours NaN / Infinity tokens
    except (ValueError, UnicodeDecodeError) as exc:
        raise LineError(f"not JSON: {exc}") from None
    if not isinstance(record, dict):
        raise LineError(f"not an object but {type(record).__name__}")
    data = record.get("data")
    step = record.get("step")
    if not isinstance(data, dict):
        raise LineError("no 'data' object")
    if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step):
        step = data.get("training/global_step")
        if isinstance(step, bool) or not isinstance(step, (int, float)) or not math.isfinite(step):
            raise LineError("no numeric 'step'")
    return int(step), data


class StepMapper:
    """Maps a step's data dict to {metric name: value}; remembers each key's mapping."""

    def __init__(self, catalog: Catalog = CATALOG, export_unknown: bool = True):
        self._export_unknown = export_unknown
        self._by_key: dict[str, tuple[str, float, int] | None] = {}
        for key, metric in catalog.verl_key_map().items():
            # The alias's position: the first key of a metric wins when a step logs two of them.
            self._by_key[key] = (metric.name, metric.scale, metric.verl_keys.index(key))

    def _mapping(self, key: str) -> tuple[str, float, int] | None:
        if key not in self._by_key:
            mapping = None
            if self._export_unknown:
                name, scale = verl_metric_name(key)
                if name not in EXPORTER_METRICS:
                    mapping = (name, scale, 0)
            self._by_key[key] = mapping
        return self._by_key[key]

    def map(self, data: dict) -> dict[str, float]:
        values: dict[str, float] = {}
        priority: dict[str, int] = {}
        for key, raw in data.items():
            if not isinstance(key, str):
                continue
            mapping = self._mapping(key)
            if mapping is None:
                continue
            name, scale, rank = mapping
            if raw is None:
                # verl's file logger (orjson) writes NaN and infinities as null.
                value = math.nan
            elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
                continue
            else:
                value = float(raw) * scale
            if name in priority and priority[name] <= rank:
                continue
            values[name] = value
            priority[name] = rank
        return values

    def step(self, line: str | bytes) -> Step:
        number, data = parse_line(line)
        return Step(number, self.map(data))
