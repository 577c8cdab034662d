"""Waking the exporter when verl's step log changes, so a step is served within milliseconds.

On Linux, inotify (through libc, no dependency) watches the log's folder, which reports the log
being created, written, renamed over or deleted, and the log itself, which covers a log reached
through a symlink. Elsewhere, or when inotify cannot be had (no watches left), the log is looked
at every SHORT_POLL_SECONDS. Either way the follower still looks every poll interval: a network
filesystem does not report writes made on another machine.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import sys
from pathlib import Path

SHORT_POLL_SECONDS = 0.05
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW = 0x400, 0x800, 0x4000
FOLDER_EVENTS = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
LOG_EVENTS = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF
_EVENT_HEADER = struct.Struct("iIII")  # wd, mask, cookie, name length


def _libc_inotify():
    """libc's inotify functions, or None where there are none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        functions = libc.inotify_init1, libc.inotify_add_watch, libc.inotify_rm_watch
    except (OSError, AttributeError):
        return None
    init, add, remove = functions
    init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
    add.argtypes, add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
    remove.argtypes, remove.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return functions


class LogChanges:
    """wait() returns soon after the log at `path` may have changed, wake() is called, or the timeout passes."""

    def __init__(self, path: Path, use_inotify: bool = True):
        self.path = Path(os.path.abspath(path))
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._inotify = _libc_inotify() if use_inotify else None
        self._fd = -1
        if self._inotify is not None:
            self._fd = self._inotify[0](os.O_NONBLOCK | os.O_CLOEXEC)
            if self._fd < 0:
                self._inotify = None
        self._folder_watch = -1
        self._log_watch = -1
        self._watch()

    @property
    def notified(self) -> bool:
        """Whether changes come from inotify (else from a short poll)."""
        return self._inotify is not None and self._folder_watch >= 0

    def _watch(self) -> None:
        """Watch the folder and the file now at the path (a new one after a replacement)."""
        if self._inotify is None:
            return
        if self._folder_watch < 0:
            self._folder_watch = self._add(self.path.parent, FOLDER_EVENTS)
        if self._inotify is None:
            return
        watch = self._add(self.path, LOG_EVENTS)
        if watch != self._log_watch and self._log_watch >= 0:
            self._inotify[2](self._fd, self._log_watch)  # the replaced file's; gone already if it was deleted
        self._log_watch = watch

    def _add(self, path: Path, events: int) -> int:
        """The watch's descriptor; -1 if `path` does not exist (yet), or if no watch is left: then polling."""
        watch = self._inotify[1](self._fd, os.fsencode(path), events)
        if watch < 0 and ctypes.get_errno() in (errno.ENOSPC, errno.EMFILE, errno.ENOMEM):
            self._give_up_inotify()
        return watch

    def _give_up_inotify(self) -> None:
        os.close(self._fd)
        self._fd, self._inotify, self._folder_watch, self._log_watch = -1, None, -1, -1

    def wait(self, timeout: float) -> None:
        if not self.notified:
            timeout = min(timeout, SHORT_POLL_SECONDS)
        waiting = select.poll()
        waiting.register(self._wake_read, select.POLLIN)
        if self._fd >= 0:
            waiting.register(self._fd, select.POLLIN)
        ready = {fd for fd, _ in waiting.poll(timeout * 1000)}
        if self._wake_read in ready:
            _drain(self._wake_read)
        if self._fd in ready and self._read_events():
            self._watch()
        elif not ready and self._inotify is not None and self._log_watch < 0:
            self._watch()  # the folder or the log may exist by now

    def _read_events(self) -> bool:
        """Drain inotify's events; whether the log may now be another file (created, moved, deleted)."""
        rewatch = False
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return rewatch
            for offset in _event_offsets(data):
                mask = _EVENT_HEADER.unpack_from(data, offset)[1]
                if mask & (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF
                           | IN_Q_OVERFLOW):
                    rewatch = True

    def wake(self) -> None:
        """End a wait() at once (e.g. from a signal handler asked to stop)."""
        try:
            os.write(self._wake_write, b"!")
        except BlockingIOError:
            pass  # already woken

    def close(self) -> None:
        for fd in (self._fd, self._wake_read, self._wake_write):
            if fd >= 0:
                os.close(fd)
        self._fd = self._wake_read = self._wake_write = -1
        self._inotify = None

    def __enter__(self) -> LogChanges:
        return self

    def __exit__(self, *_) -> None:
        self.close()


def _event_offsets(data: bytes):
    offset = 0
    while offset + _EVENT_HEADER.size <= len(data):
        yield offset
        offset += _EVENT_HEADER.size + _EVENT_HEADER.unpack_from(data, offset)[3]


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass
