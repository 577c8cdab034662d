"""verl's console log: the `step:N - key:value - key:value ...` lines its `console` logger prints
(the default logger beside wandb), tee'd to a file or kept in a notebook, read as its step log.

Such a log holds much else: Ray's `(TaskRunner pid=...)` prefixes, ANSI colours, tqdm bars,
warnings and tracebacks; a step's values may come on several lines (several ranks, or a
validation line), which merge. Values are as verl printed them: `nan`, `inf`, `np.float64(0.5)`,
and 3 decimals in some versions (a grad norm of 0.0004 prints 0.000; formats/rounding.py reads
how finely a log prints from the values themselves, so such a 0 is not taken for an exact one).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Iterator
from dashgen.formats.records import step_lines, text_head

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# `step:12 - ` where a word starts (after a prefix such as Ray's "(TaskRunner pid=1) ").
CONSOLE_STEP = re.compile(r"(?:^|[\s)\]])step:(\d{1,15}) - (.*)$")
_NUMPY_WRAP = re.compile(r"^np\.(?:float|int)\d*\((.*)\)$")
# How much of a file is read to recognise a console log.


def console_value(text: str) -> float | None:
    """A printed value as a float (nan and inf included); None for one that is no number."""
    text = text.strip()
    wrapped = _NUMPY_WRAP.match(text)
    if wrapped:
        text = wrapped.group(1)
    try:
        return float(text)
    except ValueError:
        return None


def console_line(line: str) -> tuple[int, dict[str, float]] | None:
    """(step, values) of one console line; None for a line that is no step line."""
    found = CONSOLE_STEP.search(ANSI.sub("", line).rstrip())
    if found is None:
        return None
    values = {}
    for part in found.group(2).split(" - "):
        key, separator, raw = part.rpartition(":")
        key = key.strip()
        if not separator or not key or " " in key:
            continue
        value = console_value(raw)
        if value is not None:
            values[key] = value
    return (int(found.group(1)), values) if values else None


def console_records(lines: Iterable[str]) -> list[tuple[int, dict[str, float]]]:
    """The steps the lines print, in step order, the values of the lines of one step merged."""
    by_step: dict[int, dict[str, float]] = {}
    for line in lines:
        parsed = console_line(line)
        if parsed is not None:
            by_step.setdefault(parsed[0], {}).update(parsed[1])
    return sorted(by_step.items())


def is_console_log(path: Path) -> bool:
    """Whether `path` is a console log: text whose first line is not a JSON object (verl's step log
    and a trainer state start with `{`), holding a step line within its first 64 KiB."""
    head = text_head(path)
    if head is None:
        return False
    if head.lstrip().startswith("{"):
        return False
    return any(console_line(line) is not None for line in head.splitlines())


def step_log_lines(path: Path) -> Iterator[bytes]:
    """A console log as verl's step-log lines ({"step": N, "data": {...}}), for the step-log reader."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        records = console_records(handle)
    return step_lines(records, "a console log without any `step:N - key:value` line")
