"""A run's W&B history as exported, read as its step log: the JSON rows `run.history()` and
`run.scan_history()` give (a list of objects, every key in every row, null where a row did not log
it), and a CSV (the run's history downloaded, or a panel's data: `Step`, `<run> - <key>` columns,
`__MIN`/`__MAX` beside them, which are left out).

W&B's own `_step` counts every `wandb.log` call, evaluation rows included, so a row is placed at
its training step where the run logged one: verl's `training/global_step`, or TRL's
`train/global_step` (TRL's keys then lose their `train/` prefix and are read as TRL's keys,
`eval/...` as validation). Rows of one step merge; keys starting with `_` are W&B's bookkeeping.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Iterator

from dashgen.bounded_read import parse_nested
from dashgen.formats.trl import logger_key
from dashgen.formats.records import step_lines, text_head

# Columns that number a row, most meaningful first.
STEP_KEYS = ("training/global_step", "train/global_step", "_step", "Step", "step")
TRL_STEP = "train/global_step"
# Step columns that are no logged value (verl's training/global_step is one: it stays in the data).
_NOT_DATA = frozenset({"_step", "Step", "step", TRL_STEP})
_PANEL_EXTREMES = ("__MIN", "__MAX")


def is_wandb_export(path: Path) -> bool:
    """Whether `path` holds W&B history rows (JSON) or a W&B CSV export, known by its first bytes."""
    head = text_head(path)
    if head is None:
        return False
    stripped = head.lstrip()
    if stripped.startswith("["):
        return '"_step"' in head or f'"{TRL_STEP}"' in head
    header = next(csv.reader([stripped.split("\n", 1)[0]]), [])
    return any(column in STEP_KEYS for column in header) and len(header) > 1


def _number(raw) -> float | None:
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, (int, float)):
        try:
            return float(raw)
        except OverflowError:
            return math.inf if raw > 0 else -math.inf
    if isinstance(raw, str) and raw.strip():
        try:
            return float(raw.strip())
        except ValueError:
            return None
    return None


def _rows(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8", errors="replace")
    if text.lstrip().startswith("["):
        rows = parse_nested(json.loads, text)
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise ValueError("W&B history rows: expected a JSON list of objects (one a logged row)")
        return rows
    rows = []
    for row in csv.DictReader(io.StringIO(text)):
        kept = {}
        for column, value in row.items():
            if column is None or column.endswith(_PANEL_EXTREMES):
                continue
            kept[column.split(" - ", 1)[1] if " - " in column else column] = value
        rows.append(kept)
    return rows


def step_records(rows: list[dict]) -> list[tuple[int, dict[str, float]]]:
    """(step, values) per step, in step order."""
    keys = set().union(*rows) if rows else set()
    step_key = next((key for key in STEP_KEYS if key in keys), None)
    if step_key is None:
        raise ValueError(f"W&B export: no step column ({', '.join(STEP_KEYS)})")
    trl = step_key == TRL_STEP
    by_step: dict[int, dict[str, float]] = {}
    for row in rows:
        step = _number(row.get(step_key))
        if step is None or not math.isfinite(step):
            continue  # a row of another cadence (an evaluation logged without the training step)
        values = {(logger_key(key) if trl else key): value for key, raw in row.items()
                  if isinstance(key, str) and not key.startswith("_") and key not in _NOT_DATA
                  and (value := _number(raw)) is not None}
        if values:
            by_step.setdefault(int(step), {}).update(values)
    return sorted(by_step.items())


def step_log_lines(path: Path) -> Iterator[bytes]:
    """A W&B export as verl's step-log lines ({"step": N, "data": {...}}), for the step-log reader."""
    try:
        records = step_records(_rows(path))
    except (ValueError, csv.Error) as exc:
        raise ValueError(str(exc)) from None
    return step_lines(records, "a W&B export without any row numbered by a training step")
