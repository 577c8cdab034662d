"""Starting beside a long run: what a whole read of verl's step log would leave behind, found from its end.

An exporter restarted mid-run (or a sidecar attached late) must serve the newest step at once,
not after decoding 100,000 lines. What it serves depends on history in a few bounded ways,
each found here by walking back from the end and decoding only what decides it:

- the newest step's values: the last line that is a step record;
- the non-finite streaks: back to the newest finite step;
- the held validation results: back to the newest test step, or to a restart (a step lower
  than the one before it) after it, which dropped them. Lines with no validation key are not
  decoded on the way when their step can be read from the line's start; with no validation
  key left further back (a substring test), the walk stops.

The exporter's counters (steps, parse errors, dropped lines and keys, key collisions) and a --total-steps end
reached before a restart depend on every line: `HistoryCounter` counts them in one forward pass,
which the follower runs in the background after it serves the tail.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from dataclasses import field
from typing import Callable, Collection, Iterator, Protocol

from dashgen.catalog import CATALOG, VALIDATION_FAMILIES, Catalog
from dashgen.lifecycle import step_is_nonfinite, watched_keys, NONFINITE_FATAL
from dashgen.records import record
from dashgen.formats.rounding import line_rounding
from dashgen.formats.verl_log import (MAX_VALIDATION_SERIES, LineError, StepMapper, ValidationSeries, is_training_line,
                                     parse_line)

BLOCK_BYTES = 1 << 20
# A line holding one of these may hold a validation key: verl writes keys unescaped, and a key
# spelt with JSON escapes holds a backslash.
VALIDATION_MARKERS = tuple(f'"{section}/'.encode() for section in VALIDATION_FAMILIES) + (b'"val/test_score/', b"\\")
# `{"step": 12, ...`: the step as json.loads would read it, provided the line is a step record,
# holds "step" once and no escape (a second "step" key, perhaps spelt with escapes, would win).
# At most 16 digits and never negative: a step beyond MAX_STEP, which parse_line refuses, is left to it.
_LEADING_STEP = re.compile(rb'\s*\{\s*"step"\s*:\s*(0|[1-9][0-9]{0,15})\s*[,}]')


def last_line_end(fd: int, size: int) -> int:
    """The offset just past the last newline in the first `size` bytes (0 if there is none)."""
    end = size
    while end > 0:
        start = max(0, end - BLOCK_BYTES)
        found = os.pread(fd, end - start, start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def lines_backwards(fd: int, end: int, max_line_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """(start offset, line) of each line in [0, end), newest first; `end` follows a newline.

    A line longer than max_line_bytes comes as None, never held whole."""
    pieces: list[bytes] = []  # the current line's bytes read so far, right to left
    size = 0
    too_long = False
    position = end - 1 if end > 0 else 0  # the newest line's newline is not part of it
    while position > 0:
        start = max(0, position - BLOCK_BYTES)
        block = os.pread(fd, position - start, start)
        if len(block) != position - start:
            raise OSError(f"the log shrank while its end was read (expected {position - start} bytes at {start})")
        cut = len(block)
        while (newline := block.rfind(b"\n", 0, cut)) >= 0:
            piece = block[newline + 1:cut]
            if too_long or size + len(piece) > max_line_bytes:
                yield start + newline + 1, None
            else:
                yield start + newline + 1, b"".join([piece, *reversed(pieces)])
            pieces, size, too_long, cut = [], 0, False, newline
        if not too_long:
            size += cut
            if size > max_line_bytes:
                pieces, too_long = [], True
            else:
                pieces.append(block[:cut])
        position = start
    if end > 0:
        yield 0, None if too_long else b"".join(reversed(pieces))


def last_marker_at(fd: int, end: int, markers: tuple[bytes, ...]) -> int | None:
    """The offset of the last occurrence of any of `markers` in the first `end` bytes, searched from the end."""
    overlap = max(len(marker) for marker in markers) - 1
    position = end
    while position > 0:
        start = max(0, position - BLOCK_BYTES)
        block = os.pread(fd, min(end, position + overlap) - start, start)
        found = max(block.rfind(marker) for marker in markers)
        if found >= 0:
            return start + found
        position = start
    return None


class StatisticsInput(Protocol):
    """What the step statistics read of a record (RunState.statistics_input)."""

    series: frozenset[str]  # the series they keep history of

    def gives(self, data: dict) -> Collection[str]:
        """The series a record gives a value."""

    def may_give(self, series: Collection[str]) -> Callable[[bytes], bool]:
        """A test of a line, undecoded: False only if it surely gives none of `series` a value."""


def recent_records(fd: int, offset: int, steps_back: int, max_line_bytes: int,
                   reads: StatisticsInput | None = None) -> list[tuple[int, dict]]:
    """recent_records_from's records alone."""
    return recent_records_from(fd, offset, steps_back, max_line_bytes, reads)[0]


def recent_records_from(fd: int, offset: int, steps_back: int, max_line_bytes: int,
                        reads: StatisticsInput | None = None) -> tuple[list[tuple[int, dict]], int]:
    """The step records of the last `steps_back` steps before `offset`, oldest first, and where the
    oldest of their lines starts (what a whole read left before them is read_tail's there): what the
    step statistics read of them, not past a restart (a step that goes back), whose earlier lines
    are another attempt's.

    Of a step logged on many lines (a trainer re-logging one step 200,000 times), only the lines
    that decide what a whole read leaves are decoded and returned: the newest line giving each
    series a value (`reads`), and the step's first line, whose timing moves the statistics'
    clock. The others are skimmed for their step, not decoded."""
    records: list[tuple[int, dict]] = []  # newest first
    if steps_back <= 0:
        return records, offset
    run: _OneStep | None = None  # the lines of the step being walked through
    newest: int | None = None
    oldest_at = offset
    for start, line in lines_backwards(fd, offset, max_line_bytes):
        if line is None or not line.strip():
            continue
        if run is not None and run.repeats(start, line):
            continue
        if run is not None and not run.may_give(line) and _leading_step(line) == run.step:
            run.skim(start, line)
            continue
        try:
            step, data = parse_line(line)
        except LineError:
            continue
        if run is not None and step == run.step:
            run.add(start, line, data)
            continue
        if run is not None:
            records.extend(run.records(fd, max_line_bytes))
            oldest_at = run.oldest_at
            if step > run.step or step <= newest - steps_back:
                run = None
                break
        newest = step if newest is None else newest
        run = _OneStep(step, reads)
        run.add(start, line, data)
    if run is not None:
        records.extend(run.records(fd, max_line_bytes))
        oldest_at = run.oldest_at
    return records[::-1], oldest_at


def logged_before(fd: int, offset: int, first_step: int, series: Collection[str], max_line_bytes: int,
                  reads: StatisticsInput) -> dict[str, int]:
    """Of `series`, those a record before `offset` gives a value with no restart between it and the
    record at `offset` (step `first_step`), each with the step of the newest such value: what a
    whole read's history held before the records a tail start reads back (a series logged only now
    and then may have no value among them, and a window is half-logged by its first value). Lines
    that surely give none are skimmed for their step; a restart seen so is checked decoding all."""
    try:
        return _logged_before(fd, offset, first_step, series, max_line_bytes, reads, skim=True)
    except _RestartSeen:
        return _logged_before(fd, offset, first_step, series, max_line_bytes, reads, skim=False)


def _logged_before(fd: int, offset: int, later: int, series: Collection[str], max_line_bytes: int,
                   reads: StatisticsInput, skim: bool) -> dict[str, int]:
    found: dict[str, int] = {}
    missing = set(series)
    test = reads.may_give(missing) if missing else None
    for _, line in lines_backwards(fd, offset, max_line_bytes):
        if test is None:
            break
        if line is None or not line.strip():
            continue
        if skim and not test(line):
            step = _leading_step(line)
            if step is not None:
                if step > later:
                    raise _RestartSeen  # or garbage whose start reads as a step
                later = step
                continue
        try:
            step, data = parse_line(line)
        except LineError:
            continue
        if step > later:
            break  # a restart: the history before it was cleared
        later = step
        given = missing.intersection(reads.gives(data))
        if given:
            found.update(dict.fromkeys(given, step))
            missing -= given
            test = reads.may_give(missing) if missing else None
    return found


class _OneStep:
    """The lines of one step, walked newest first (recent_records). Decoded: those that may give
    a series still without a value, and any whose step cannot be skimmed. Skimmed: the others,
    of which only the oldest is kept, as the step's first line if it is a record."""

    def __init__(self, step: int, reads: StatisticsInput | None):
        self.step, self._reads = step, reads
        self._missing = set(reads.series) if reads is not None else None  # None: every line decides
        self._decided: list[dict] = []  # newest first: the decoded lines that gave a missing series a value
        self._oldest: tuple[bytes, dict] | None = None  # the oldest decoded line, if not in _decided
        self._oldest_at = 0  # where the oldest decoded line starts
        self._skimmed: tuple[int, bytes] | None = None  # the oldest skimmed line, if older than _oldest
        self._test: Callable[[bytes], bool] | None = None  # reads.may_give of the series still missing

    def may_give(self, line: bytes) -> bool:
        if self._missing is None:
            return True
        if self._test is None:
            self._test = self._reads.may_give(self._missing) if self._missing else lambda line: False
        return self._test(line)

    def add(self, start: int, line: bytes, data: dict) -> None:
        self._oldest_at, self._skimmed = start, None
        given = self._reads.gives(data) if self._missing is not None else ()
        if self._missing is None or not self._missing.isdisjoint(given):
            self._decided.append(data)
            self._oldest = None
            if self._missing is not None:
                self._missing.difference_update(given)
                self._test = None
        else:
            self._oldest = (line, data)

    def repeats(self, start: int, line: bytes) -> bool:
        """Whether the line is a copy of the oldest line seen, which it then replaces as that
        without a second look (a step logged again and again)."""
        if self._skimmed is not None and self._skimmed[1] == line:
            self._skimmed = (start, line)
            return True
        if self._skimmed is None and self._oldest is not None and self._oldest[0] == line:
            self._oldest_at = start
            return True
        return False

    def skim(self, start: int, line: bytes) -> None:
        self._skimmed = (start, line)

    @property
    def oldest_at(self) -> int:
        """Where the oldest of the step's lines walked through starts."""
        return self._skimmed[0] if self._skimmed is not None else self._oldest_at

    def records(self, fd: int, max_line_bytes: int) -> list[tuple[int, dict]]:
        """This step's records that decide what a whole read leaves, newest first."""
        first = self._first_skimmed(fd, max_line_bytes)
        if first is None and self._oldest is not None:
            first = self._oldest[1]
        return [(self.step, data) for data in (*self._decided, *([first] if first is not None else []))]

    def _first_skimmed(self, fd: int, max_line_bytes: int) -> dict | None:
        """The oldest skimmed line, if it is a record of this step: the step's first line. A line
        whose start reads as this step may be garbage: then the lines after it are decoded."""
        if self._skimmed is None:
            return None
        start, line = self._skimmed
        for line in itertools.chain([line], _lines_from(fd, start + len(line) + 1, self._oldest_at, max_line_bytes)):
            try:
                step, data = parse_line(line)
            except LineError:
                continue
            if step == self.step:
                return data
        return None


def _lines_from(fd: int, start: int, end: int, max_line_bytes: int) -> Iterator[bytes]:
    """The lines of [start, end), oldest first; `end` follows a newline; one longer than
    max_line_bytes is left out, never held whole."""
    held: list[bytes] = []
    size = 0
    too_long = False
    position = start
    while position < end:
        block = os.pread(fd, min(BLOCK_BYTES, end - position), position)
        if not block:
            return
        position += len(block)
        cut = 0
        while (newline := block.find(b"\n", cut)) >= 0:
            if not too_long and size + newline - cut <= max_line_bytes:
                yield b"".join([*held, block[cut:newline]])
            held, size, too_long, cut = [], 0, False, newline + 1
        if not too_long:
            held.append(block[cut:])
            size += len(block) - cut
            if size > max_line_bytes:
                held, too_long = [], True


@record(frozen=False)
class TailStart:
    """The state a whole read of the log's first `offset` bytes leaves, but for counts over every line."""
    offset: int
    newest: tuple[int, dict] | None = None  # (step, data) of the last step record
    # (step, data) of the last training record before `newest` when that is none (is_training_line)
    newest_training: tuple[int, dict] | None = None
    nonfinite_steps: int = 0
    nonfinite_loss_steps: int = 0
    rounding: float | None = None  # of the newest line that shows one (dashgen/formats/rounding.py)
    validation: dict[ValidationSeries, float] = field(default_factory=dict)


class _RestartSeen(Exception):
    """A step read from a line's start went back: decode every line to tell a restart from garbage."""


def read_tail(fd: int, offset: int, max_line_bytes: int, catalog: Catalog = CATALOG) -> TailStart:
    """What a whole read of [0, offset) leaves behind; `offset` follows a newline (or is 0)."""
    try:
        return _walk_back(fd, offset, max_line_bytes, catalog, skim=True)
    except _RestartSeen:
        return _walk_back(fd, offset, max_line_bytes, catalog, skim=False)


def _walk_back(fd: int, offset: int, max_line_bytes: int, catalog: Catalog, skim: bool) -> TailStart:
    found = TailStart(offset)
    keys, loss_keys = watched_keys(catalog), tuple(key for name in NONFINITE_FATAL for key in catalog[name].verl_keys)
    mapper = StepMapper(catalog)  # its counts are the history pass's to make, not this walk's
    streak_open = loss_streak_open = True
    validation_open = training_open = True
    later_step: int | None = None  # the step of the newest record after this line
    marker_at: int | None = None  # where the newest validation marker not yet walked past is
    for start, line in lines_backwards(fd, offset, max_line_bytes):
        if line is None or not line.strip():
            continue
        rounding_open = found.rounding is None  # a line of whole numbers alone shows none
        if not (found.newest is None or streak_open or loss_streak_open or validation_open or training_open
                or rounding_open):
            break
        if found.newest is not None and not (streak_open or loss_streak_open or training_open or rounding_open):
            if marker_at is None or start + len(line) <= marker_at:
                marker_at = last_marker_at(fd, start + len(line), VALIDATION_MARKERS)
                if marker_at is None:
                    break  # no test step left: the held results are none, restart or not
            if skim and not any(marker in line for marker in VALIDATION_MARKERS):
                step = _leading_step(line)
                if step is not None:
                    if later_step is not None and later_step < step:
                        raise _RestartSeen
                    later_step = step  # if the line is garbage, its step only makes this stricter
                    continue
        try:
            step, data = parse_line(line)
        except LineError:
            continue
        if found.newest is None:
            found.newest = (step, data)
            training_open = not is_training_line(data)
        elif training_open and is_training_line(data):
            found.newest_training, training_open = (step, data), False
        if rounding_open:
            found.rounding = line_rounding(data)
        if streak_open:
            streak_open = step_is_nonfinite(data, keys)
            found.nonfinite_steps += streak_open
        if loss_streak_open:
            loss_streak_open = step_is_nonfinite(data, loss_keys)
            found.nonfinite_loss_steps += loss_streak_open
        if validation_open:
            if later_step is not None and later_step < step:
                if skim:
                    raise _RestartSeen  # the newer step may have been a skimmed line that is garbage
                validation_open = False  # the newer step restarted the run and dropped the results
            elif validation := mapper.validation(data):
                found.validation, validation_open = validation, False
        later_step = step
    return found


def _leading_step(line: bytes) -> int | None:
    match = _LEADING_STEP.match(line)
    if match is None or line.count(b'"step"') != 1 or b"\\" in line:
        return None
    return int(match.group(1))


@record(frozen=False)
class HistoryCounts:
    """What every line of [0, offset) adds to the exporter's counters."""
    steps: int = 0
    parse_errors: int = 0
    dropped_lines: int = 0
    dropped_keys: int = 0  # keys not exported: over a limit, or named like the exporter's own series
    key_collisions: int = 0  # keys whose name another key already exports
    highest_step: int | None = None


class HistoryCounter:
    """Counts the complete lines of [0, offset) in a forward pass that can pause and go on."""

    def __init__(self, fd: int, offset: int, max_line_bytes: int, catalog: Catalog = CATALOG):
        self.fd, self.offset, self.max_line_bytes = fd, offset, max_line_bytes
        self.counts = HistoryCounts()
        self._mapper = StepMapper(catalog)
        self._position = 0
        self._held: list[bytes] = []  # the start of a line the last blocks did not end
        self._held_size = 0
        self._too_long = False
        # In the background: let the threads serving /metrics have the GIL after every line.
        self.yield_after_each_line = False

    @property
    def done(self) -> bool:
        return self._position >= self.offset

    def advance(self, stop: threading.Event, decode_budget: int | None = None) -> bool:
        """Count on until done (True), `stop` is set or about `decode_budget` bytes of lines were decoded."""
        decoded = 0
        while not self.done and not stop.is_set() and (decode_budget is None or decoded < decode_budget):
            block = os.pread(self.fd, min(BLOCK_BYTES, self.offset - self._position), self._position)
            if not block:
                self._position = self.offset  # truncated meanwhile: the follower reads the new log whole
                break
            self._position += len(block)
            decoded += self._count_block(block)
        self.counts.dropped_keys = self._mapper.counts.dropped_keys
        self.counts.key_collisions = self._mapper.counts.key_collisions
        return self.done

    def _count_block(self, block: bytes) -> int:
        decoded = 0
        cut = 0
        while (newline := block.find(b"\n", cut)) >= 0:
            if self._too_long or self._held_size + newline - cut > self.max_line_bytes:
                self.counts.dropped_lines += 1
            else:
                line = b"".join([*self._held, block[cut:newline]])
                decoded += len(line)
                self._count_line(line)
                if self.yield_after_each_line:
                    time.sleep(0)
            self._held, self._held_size, self._too_long, cut = [], 0, False, newline + 1
        if not self._too_long and cut < len(block):
            self._held.append(block[cut:])
            self._held_size += len(block) - cut
            if self._held_size > self.max_line_bytes:
                self._held, self._held_size, self._too_long = [], 0, True
        return decoded

    def _count_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            step, data = parse_line(line)
        except LineError:
            self.counts.parse_errors += 1
            return
        self.counts.steps += 1
        if self.counts.highest_step is None or step > self.counts.highest_step:
            self.counts.highest_step = step
        self._mapper.count(data)  # keys not exported, as the exporter's own mapper would count them
        if sum(line.count(marker) for marker in VALIDATION_MARKERS) > MAX_VALIDATION_SERIES:
            self._mapper.validation(data)  # counts validation series over the limit
