"""Follow a run's record as it grows when it is not verl's JSONL step log (`dashgen export`): verl's
console log and TensorBoard event files (one file, or a run's log directory); and the follower a
path's content asks for, chosen once it shows.

Each feeds the same RunState as the step log's follower, so a run serves the same values whichever
record it is followed from. A console log is read whole from its start (the step log's tail start
reads JSON lines back from the end) and, like the step log, a line at a time, bounded in memory.
"""

from __future__ import annotations

import os
import stat as stat_mode
import sys
import time
from pathlib import Path
from typing import Callable

from dashgen.formats.tensorboard_events import (VERSION_MARK, EventFileReader, event_files, is_event_file,
                                                is_tensorboard_events, key_namer)
from dashgen.formats.verl_console import console_line
from dashgen.formats.verl_log import is_training_line, parse_line
from dashgen.runtime.exporter import RunState
from dashgen.runtime.log_follower import LogFollower

# The bytes of a file looked at to know what it holds; a file shorter than this, whose first line is
# not yet whole, is looked at again once it has grown.
HEAD_BYTES = 256
# A step of an event file is served once a later step is read, or once no scalar has come for this long
# (a writer flushes a step's tags in a burst, its validation results maybe after its training values:
# a step served before it is whole would feed the step windows a step without them). The rest of a
# step cut by a flush and read later amends what is served (not the step windows).
SETTLE_SECONDS = 2.0


def _say(message: str) -> None:
    print(message, file=sys.stderr)


class ConsoleFollower(LogFollower):
    """verl's console log followed like `tail -F`: its `step:N - key:value` lines are the records, a
    step printed on several lines in a row one record; every other line (Ray's, tqdm's, a
    traceback) is no record and no error. A line starting with `{` is read as a step-log line."""

    def __init__(self, path: Path, state: RunState, say: Callable[[str], None] = _say, **options):
        super().__init__(path, state, say, **{**options, "start_at_tail": False})

    def _decode(self, line: bytes) -> tuple[int, dict] | None:
        if line.lstrip().startswith(b"{"):
            return parse_line(line)
        return console_line(line.decode("utf-8", errors="replace"))

    def _same_step(self, before: tuple[int, dict], line: tuple[int, dict]) -> bool:
        return before[0] == line[0]


class EventsFollower:
    """TensorBoard event files followed as they grow, with the package's own reader: a file, or a log
    directory whose newest event file is followed (a restarted writer opens a new one, which is read
    after the one before it is read to its end). Steps are fed to the RunState in the order written."""

    def __init__(self, path: Path, state: RunState, say: Callable[[str], None] = _say,
                 settle_seconds: float = SETTLE_SECONDS):
        self.path = path
        self.state = state
        self.say = say
        self.settle_seconds = settle_seconds
        self._done: list[Path] = []  # files read to their end
        self._reader: EventFileReader | None = None
        self._identity: tuple[int, int] | None = None
        self._name: Callable[[str], str] | None = None  # how tags are read as keys, from the first step
        # The newest step's tags as read so far, whether they are served, and whether more came since.
        self._step: int | None = None
        self._tags: dict[str, float] = {}
        self._served = False
        self._grown = False
        self._last_scalar = time.monotonic()
        # Steps read whole but not yet fed: the newest is recorded, those before it skipped (counted).
        self._held: tuple[int, dict] | None = None
        self._held_training: tuple[int, dict] | None = None
        self._previous_step: int | None = None
        self._said: str | None = None

    def poll(self, final: bool = False) -> int:
        """Read whatever the event files hold that is new; the number of scalars read."""
        read = 0
        for file in self._files_to_read():
            if self._reader is None or self._reader.path != file:
                if self._reader is not None:
                    read += self._read(self._reader)
                    self._done.append(self._reader.path)
                    self.say(f"dashgen export: {self.path}: reading the next event file, {file.name}")
                self._open(file)
            read += self._read(self._reader)
        self._finish_poll(final or (read == 0 and time.monotonic() - self._last_scalar >= self.settle_seconds))
        self._serve_held()
        for note in self.state.take_notes():
            self.say(f"dashgen export: {self.path}: {note}")
        return read

    def _tell(self, message: str) -> None:
        if self._said != message:
            self.say(f"dashgen export: {message}")
            self._said = message

    def _files_to_read(self) -> list[Path]:
        """The current event file and those written after it, in order; none while there is none."""
        if not self.path.exists():
            self._tell(f"waiting for {self.path} to appear")
            return []
        try:
            files = event_files(self.path) if self.path.is_dir() else [self.path]
        except (ValueError, OSError) as exc:
            self._tell(f"{self.path}: {exc}; waiting")
            return []
        files = [file for file in files if file not in self._done and is_event_file(file)]
        if self._reader is not None and self._replaced(self._reader.path):
            self.say(f"dashgen export: {self._reader.path} was replaced; reading it from the start")
            self._reader = None
        if self._reader is not None and self._reader.path in files:
            files = files[files.index(self._reader.path):]
        self._said = None
        return files

    def _replaced(self, file: Path) -> bool:
        try:
            info = os.stat(file)
        except OSError:
            return False
        return (info.st_dev, info.st_ino) != self._identity

    def _open(self, file: Path) -> None:
        self._reader = EventFileReader(file)
        info = os.stat(file)
        self._identity = (info.st_dev, info.st_ino)

    def _read(self, reader: EventFileReader) -> int:
        read = 0
        for step, tags in reader.read():
            read += len(tags)
            if step != self._step:
                self._end_step()
                self._step, self._tags, self._served, self._grown = step, {}, False, False
            self._tags.update(tags)
            self._grown = True
        if read:
            self._last_scalar = time.monotonic()
        return read

    def _record(self) -> tuple[int, dict]:
        if self._name is None:
            self._name = key_namer(self._tags)
        return self._step, {self._name(tag): value for tag, value in self._tags.items()}

    def _end_step(self) -> None:
        """The newest step is whole (a later one starts): held to be fed, unless it was served whole."""
        if self._step is None or (self._served and not self._grown):
            return
        self._hold(self._record(), amend=self._served)  # served in part, and more came: amended

    def _finish_poll(self, settled: bool) -> None:
        """Serve the newest step once it has settled (its writer quiet since its last scalar)."""
        if self._step is None or (self._served and not self._grown):
            return
        if settled:
            self._hold(self._record(), amend=self._served)
            self._served, self._grown = True, False

    def _hold(self, record: tuple[int, dict], amend: bool = False) -> None:
        """Take a step to feed: the newest held is recorded at the poll's end, those before it skipped.
        `amend`: the step served last, now with more values (nothing else is held before it then)."""
        if amend and self._held is None:
            self.state.amend(*record)
            return
        if self._held is not None:
            self.state.skip(*self._held)
            if is_training_line(self._held[1]):
                self._held_training = self._held
        if self._previous_step is not None and record[0] < self._previous_step:
            self.say(f"dashgen export: step went back from {self._previous_step} to {record[0]} in {self.path} "
                     f"(a restarted or resumed run); exporting the new steps")
        self._previous_step = record[0]
        self._held = record

    def _serve_held(self) -> None:
        if self._held is None:
            return
        if self._held_training is not None and not is_training_line(self._held[1]):
            self.state.take_values(*self._held_training)
        self.state.record(*self._held)
        self._held = self._held_training = None

    def wait_for_history(self, timeout: float | None = None) -> bool:
        return True

    def close(self) -> None:
        self._reader = None

    def stop(self) -> None:
        self.close()


def follower_kind(path: Path) -> type | None:
    """The follower `path`'s content asks for: an event file or log directory, verl's step log (its
    first byte a `{`), else a console log; None until there is enough to tell (a file not there yet, or
    its first line not yet whole)."""
    if path.is_dir():
        return EventsFollower if is_tensorboard_events(path) else None
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat_mode.S_ISREG(info.st_mode):
        return LogFollower  # which waits for a regular file, saying so
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:
        return None
    if VERSION_MARK in head:
        return EventsFollower
    text = head.lstrip()
    if text.startswith(b"{"):
        return LogFollower
    if not text or (len(head) < HEAD_BYTES and b"\n" not in text):
        return None
    return ConsoleFollower


class RecordFollower:
    """The follower of a run's record, whichever it is: chosen by content once the record shows it, then
    kept (`dashgen export --jsonl` and the supervisor poll it as they poll the step log's)."""

    def __init__(self, path: Path, state: RunState, say: Callable[[str], None] = _say):
        self.path = path
        self.state = state
        self.say = say
        self.following: LogFollower | ConsoleFollower | EventsFollower | None = None
        self._said_waiting = False

    def poll(self, final: bool = False) -> int:
        if self.following is None:
            kind = follower_kind(self.path)
            if kind is None:
                if not self._said_waiting:
                    self.say(f"dashgen export: waiting for {self.path} to appear (a step log, a console log, or "
                             f"TensorBoard event files)")
                    self._said_waiting = True
                return 0
            self.following = kind(self.path, self.state, self.say)
        return self.following.poll(final)

    def wait_for_history(self, timeout: float | None = None) -> bool:
        return self.following is None or self.following.wait_for_history(timeout)

    def close(self) -> None:
        if self.following is not None:
            self.following.close()

    def stop(self) -> None:
        if self.following is not None:
            self.following.stop()
