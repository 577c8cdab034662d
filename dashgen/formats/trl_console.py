"""transformers' console log of a TRL run: the log dicts its trainer prints every `logging_steps`
(`{'loss': 0.01, 'grad_norm': 0.3, 'reward': 0.5, ...}`), as notebooks keep them, read as the
run's step log.

The dicts carry no step: the n-th training dict is logged step n (a run that logs every 10 steps
reads as steps 1, 2, 3, ...; the alerts count logged steps). An evaluation dict (`eval_*` keys)
joins the training step before it; the summary transformers prints at the end is left out.
Keys are TRL's, read as formats/trl.py reads them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator

from dashgen.formats.trl import EVAL_PREFIX, SUMMARY_KEYS, step_data
from dashgen.formats.records import step_lines, text_head

_DICT = re.compile(r"\{'[^{}]*\}")
# A bare nan or inf is no Python literal: it is quoted, and read back as a float.
_BARE = re.compile(r"(?<![\w'.])(-?)(nan|inf)\b")
_TRAINING_KEYS = ("loss", "reward", "grad_norm")


def printed_dicts(text: str) -> list[dict]:
    """The `{'key': value, ...}` dicts printed in `text`, in order."""
    found = []
    for match in _DICT.finditer(text.replace("\r", "\n")):
        chunk = _BARE.sub(lambda bare: f"'{bare.group(1)}{bare.group(2)}'", match.group(0).replace("\n", " "))
        try:
            value = ast.literal_eval(chunk)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append({key: float(raw) if isinstance(raw, str) and raw.lstrip("-") in ("nan", "inf") else raw
                          for key, raw in value.items()})
    return found


def is_trl_console(path: Path) -> bool:
    """Whether `path` is text holding transformers' printed training dicts (not a JSON document)."""
    head = text_head(path)
    if head is None:
        return False
    if head.lstrip().startswith(("{\"", "[", "{\n")):
        return False
    return any(any(key in entry for key in _TRAINING_KEYS) for entry in printed_dicts(head))


def step_records(text: str) -> list[tuple[int, dict]]:
    records: list[tuple[int, dict]] = []
    for entry in printed_dicts(text):
        if SUMMARY_KEYS & entry.keys():
            continue
        if any(isinstance(key, str) and key.startswith(EVAL_PREFIX) for key in entry):
            if records:
                records[-1][1].update(step_data(entry))
            continue
        if any(key in entry for key in _TRAINING_KEYS):
            records.append((len(records) + 1, step_data(entry)))
    return records


def step_log_lines(path: Path) -> Iterator[bytes]:
    """A console log of printed dicts as verl's step-log lines, for the step-log reader."""
    records = step_records(path.read_text(encoding="utf-8", errors="replace"))
    return step_lines(records, "no training log dict ({'loss': ...}) in it")
