"""What every reader of a recorded run shares: a file's first bytes, to know its format by content,
and the records it reads as verl's step-log lines (`{"step": N, "data": {...}}`), which the step-log
reader (dashgen/replay/backfill.py) takes whatever the run was recorded in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

HEAD_BYTES = 64 << 10


def text_head(path: Path, size: int = HEAD_BYTES) -> str | None:
    """The first `size` bytes of a regular file as text; None for anything else or an unreadable one
    (a FIFO is not opened: that would wait for a writer)."""
    try:
        if not path.is_file():
            return None
        with open(path, "rb") as handle:
            return handle.read(size).decode("utf-8", errors="replace")
    except OSError:
        return None


def step_lines(records: Iterable[tuple[int, dict]], empty: str) -> Iterator[bytes]:
    """Records (step, values) as step-log lines; ValueError saying `empty` when there is none."""
    written = False
    for step, data in records:
        written = True
        yield json.dumps({"step": step, "data": data}, sort_keys=True).encode()
    if not written:
        raise ValueError(empty)
