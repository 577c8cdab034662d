"""Follow verl's JSONL step log like `tail -F` into a RunState (`dashgen export`)."""

from __future__ import annotations

import os
import stat as stat_mode
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_tail import (HistoryCounter, HistoryCounts, last_line_end, logged_before, read_tail,
                                      recent_records_from)
from dashgen.sources.step_statistics import FAMILIES
from dashgen.runtime.log_watch import LogChanges
from dashgen.formats.verl_log import LineError, is_training_line, parse_line

READ_CHUNK = 1 << 20
HEAD_BYTES = 256
# verl's lines are kilobytes; a longer one is dropped (and counted) instead of held in memory.
MAX_LINE_BYTES = 16 << 20
# Lines (bytes of them decoded) of a log's history counted before the first scrape; the rest in the background.
COUNT_HISTORY_AT_ONCE_BYTES = 512 << 10


class LogFollower:
    """Follow a JSONL file like `tail -F`: wait for it, survive truncation and replacement,
    hold back a partial last line until it is complete (up to max_line_bytes: a longer line is
    dropped and counted). Only regular files are opened, without blocking: a FIFO is waited out.

    The log found at the first look is started at its tail (see log_tail): what is served is what
    a whole read would serve, and the counters follow once its lines are counted (in the
    background for a long log). A log that appears, is truncated or replaced later is read whole."""

    def __init__(self, path: Path, state: RunState, say: Callable[[str], None] = lambda m: print(m, file=sys.stderr),
                 max_line_bytes: int = MAX_LINE_BYTES, start_at_tail: bool = True):
        self.path = path
        self.state = state
        self.say = say
        self._file = None
        self._inode: tuple[int, int] | None = None
        self._offset = 0
        self._partial: list[bytes] = []  # pieces of the incomplete last line, joined once it ends
        self._partial_size = 0
        self._dropping = False  # inside a line longer than max_line_bytes: skip to its end
        self.max_line_bytes = max_line_bytes
        self._head = b""
        self._said_missing = False
        self._said_not_regular = False
        self._previous_step: int | None = None
        self._start_at_tail = start_at_tail
        self._stop_counting = threading.Event()
        self._counting: threading.Thread | None = None

    def poll(self, final: bool = False) -> int:
        """Read whatever is new; returns the number of complete lines handled. `final`: the trainer
        has exited (a follower that holds back a step written in part serves it now; this one holds none)."""
        handled = self._reopen_if_changed()
        if self._file is not None:
            handled += self._read_to_end()
        for note in self.state.take_notes():
            self.say(f"dashgen export: {self.path}: {note}")
        return handled

    def _read_to_end(self) -> int:
        """Handle the complete lines from the offset to the file's end; their number."""
        handled = 0
        last_good: tuple[int, dict] | None = None
        last_training: tuple[int, dict] | None = None  # the newest skipped line that logs a training step
        while True:
            chunk = self._file.read(READ_CHUNK)
            if not chunk:
                break
            self._offset += len(chunk)
            if len(self._head) < HEAD_BYTES:
                self._head = (self._head + chunk)[:HEAD_BYTES]
            for line in self._complete_lines(chunk):
                handled += 1
                if not line.strip():
                    continue
                try:
                    parsed = self._decode(line)
                except LineError:
                    self.state.parse_error()
                    continue
                if parsed is None:  # not a record, and no error (a console log's other lines)
                    continue
                if last_good is not None and self._same_step(last_good, parsed):
                    last_good = (parsed[0], {**last_good[1], **parsed[1]})
                    continue
                self._check_order(parsed[0])
                if last_good is not None:
                    # Catching up: only the newest step's values matter, but every step counts.
                    self.state.skip(*last_good)
                    if is_training_line(last_good[1]):
                        last_training = last_good
                last_good = parsed
        if last_good is not None:
            if last_training is not None and not is_training_line(last_good[1]):
                self.state.take_values(*last_training)
            self.state.record(*last_good)
        return handled

    def _decode(self, line: bytes) -> tuple[int, dict] | None:
        """A line's (step, data); LineError for a line that is no step record."""
        return parse_line(line)

    def _same_step(self, before: tuple[int, dict], line: tuple[int, dict]) -> bool:
        """Whether `line` carries on the step of the line before it, merged into one record (not in
        verl's step log: each of its lines is a record)."""
        return False

    def _complete_lines(self, chunk: bytes) -> Iterator[bytes]:
        """The lines `chunk` completes; keeps the rest, within max_line_bytes."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._hold(chunk[start:])
                return
            piece, start = chunk[start:end], end + 1
            if self._dropping:
                self._dropping = False
                continue
            if self._partial:
                self._hold(piece)
                if self._dropping:
                    self._dropping = False
                    continue
                piece = b"".join(self._partial)
                self._partial, self._partial_size = [], 0
            elif len(piece) > self.max_line_bytes:
                self.state.dropped_line()
                continue
            yield piece

    def _hold(self, piece: bytes) -> None:
        if self._dropping or not piece:
            return
        if self._partial_size + len(piece) > self.max_line_bytes:
            self.state.dropped_line()
            self._partial, self._partial_size, self._dropping = [], 0, True
            return
        self._partial.append(piece)
        self._partial_size += len(piece)

    def _check_order(self, step: int) -> None:
        previous = self._previous_step
        self._previous_step = step
        if previous is not None and step < previous:
            self.say(f"dashgen export: step went back from {previous} to {step} in {self.path} "
                     f"(a restarted or resumed run); exporting the new steps")

    def _reopen_if_changed(self) -> int:
        """Open the log if it appeared, was replaced or truncated; the lines a replaced file still
        held are read first (rotation renames the log, so its last lines are only there).
        Returns their number."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            if not self._said_missing:
                self.say(f"dashgen export: waiting for {self.path} to appear")
                self._said_missing = True
            return 0
        self._said_missing = False
        if not stat_mode.S_ISREG(stat.st_mode):
            if not self._said_not_regular:
                self.say(f"dashgen export: {self.path} is not a regular file (a FIFO or device?); "
                         f"waiting for verl's log file")
                self._said_not_regular = True
            self.close()
            return 0
        self._said_not_regular = False
        identity = (stat.st_dev, stat.st_ino)
        if self._file is not None and identity == self._inode and stat.st_size >= self._offset \
                and self._same_head():
            return 0
        drained = 0
        if self._file is not None:
            replaced = identity != self._inode
            if replaced:
                drained = self._read_to_end()
            self.say(f"dashgen export: {self.path} was {'replaced' if replaced else 'truncated'}; reading it from "
                     f"the start")
            self._file.close()
        # O_NONBLOCK: should the path become a FIFO between stat and open, open must not wait
        # for a writer (that would also keep SIGTERM from being handled).
        self._file = os.fdopen(os.open(self.path, os.O_RDONLY | os.O_NONBLOCK), "rb")
        self._inode = identity
        self._offset = 0
        self._partial, self._partial_size, self._dropping = [], 0, False
        self._head = b""
        if self._start_at_tail:
            self._start_at_tail = False
            self._resume_at_tail(stat.st_size)
        return drained

    def _resume_at_tail(self, size: int) -> None:
        """Skip to the last complete line, taking what the lines before it leave behind."""
        fd = self._file.fileno()
        offset = last_line_end(fd, size)
        self.state.resume(read_tail(fd, offset, self.max_line_bytes, self.state.catalog))
        reads = self.state.statistics_input()
        records, oldest_at = recent_records_from(fd, offset, self.state.statistics_reach, self.max_line_bytes, reads)
        # What a whole read held before them: the validation results of a test step before the
        # records, which it served along them (a log with gaps holds no test step within the reach),
        # and which series it had a value of (a window is half-logged from the series' first value).
        before = logged = None
        if records and oldest_at > 0:
            before = read_tail(fd, oldest_at, self.max_line_bytes, self.state.catalog)
            given = set().union(*(reads.gives(data) for _, data in records)) - FAMILIES  # none: no window to judge
            logged = logged_before(fd, oldest_at, records[0][0], given, self.max_line_bytes, reads)
        self.state.take_recent(records, before, logged)
        self._previous_step = self.state.last_step
        self._head = os.pread(fd, min(HEAD_BYTES, offset), 0)
        self._offset = offset
        self._file.seek(offset)
        counter = HistoryCounter(fd, offset, self.max_line_bytes, self.state.catalog)
        if counter.advance(self._stop_counting, COUNT_HISTORY_AT_ONCE_BYTES):
            self.state.add_history(counter.counts)
            return
        counter.fd = os.dup(fd)  # the follower may close or reopen its file meanwhile
        counter.yield_after_each_line = True
        self._counting = threading.Thread(target=self._count_history, args=(counter,), name="log-history",
                                          daemon=True)
        self._counting.start()

    def _count_history(self, counter: HistoryCounter) -> None:
        if hasattr(os, "setpriority"):  # Linux: this thread only; the trainer and scrapes come first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        try:
            if not counter.advance(self._stop_counting):
                return  # stopped
        except OSError as exc:
            self.say(f"dashgen export: counting the lines already in {self.path} failed ({exc}); the "
                     f"verl_exporter_*_total counters count from where the exporter started")
            counter.counts = HistoryCounts()
        finally:
            os.close(counter.fd)
        self.state.add_history(counter.counts)

    def wait_for_history(self, timeout: float | None = None) -> bool:
        """Whether the lines a tail start skipped are counted (waiting up to `timeout` seconds)."""
        if self._counting is not None:
            self._counting.join(timeout)
        return not self.state.history_pending

    def _same_head(self) -> bool:
        """A run restarted between two polls may already have written past the old offset:
        the file's first bytes tell a rewritten log from a grown one."""
        return os.pread(self._file.fileno(), len(self._head), 0) == self._head

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def stop(self) -> None:
        """Close the log and end the count of its history, if one is under way."""
        if self._counting is not None:
            self._stop_counting.set()
            self._counting.join()
            self._counting = None
        self.close()


def run_from_path(path: Path) -> tuple[str, str]:
    """verl's file logger writes $VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl.

    The path as given (made absolute, symlinks not followed): a link's folder names the run."""
    path = Path(os.path.abspath(path))
    return path.parent.name or "default", path.stem or "default"


def follow_forever(follower: LogFollower, changes: LogChanges, interval: float, stop: threading.Event) -> None:
    """Read the log whenever it changes (and every `interval` seconds) until `stop` is set."""
    while not stop.is_set():
        try:
            follower.poll()
        except OSError as exc:  # e.g. the file vanished between stat and read: try again
            follower.say(f"dashgen export: reading {follower.path} failed ({exc}); retrying")
            follower.close()
        changes.wait(interval)
