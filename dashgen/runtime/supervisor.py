"""`dashgen export ... -- CMD`: run the trainer as a child and publish how it ends.

The trainer runs as the leader of a process group (and session) of its own, as systemd runs a
service. Asked to stop (SIGINT or SIGTERM to the exporter, which is what `dashgen act`'s stop
sends), the exporter passes the signal to the whole group and, if the trainer has not exited
within the kill timeout, sends SIGKILL. A stop is idempotent: a second request (two alerts set
to stop, a re-notified one) changes nothing, so a trainer saving a checkpoint on SIGTERM always
gets its kill timeout. Any exit after a stop request is published as stopped, whatever its code.
On Linux the trainer is killed if the exporter itself is killed (PR_SET_PDEATHSIG), so it never
runs on unwatched.

After the trainer exits, what it left in its process group, and on Linux what it daemonised (the
exporter is its subreaper, so a double-forked daemon in a session of its own is reparented to it),
is stopped as the trainer would have been (SIGTERM, SIGKILL after the kill timeout), its PID file
is removed, the log is read a last time (a buffered writer's final lines), the end is published,
and /metrics stays up for the grace period so Prometheus scrapes the final state before the
exporter goes away. A signal once the trainer has exited ends the grace period at once.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

from dashgen.errors import BuildError
from dashgen.lifecycle import RunPhase, phase_after_exit, shell_exit_status
from dashgen.runtime.log_follower import LogFollower
from dashgen.runtime.log_watch import LogChanges
from dashgen.runtime.process_group import (become_subreaper, end_group, has_exited, left_behind, reap_adopted,
                                           signal_group, signal_left_behind, start_group)

FORWARDED = (signal.SIGINT, signal.SIGTERM)


class Supervisor:
    def __init__(self, command: list[str], follower: LogFollower, poll_interval: float, grace_seconds: float,
                 kill_timeout: float, pid_file: Path | None = None, say: Callable[[str], None] = print,
                 changes: LogChanges | None = None):
        self.command = command
        self.follower = follower
        self.poll_interval = poll_interval
        self.grace_seconds = grace_seconds
        self.kill_timeout = kill_timeout
        self.pid_file = pid_file
        self.say = say
        self.stop_requested = False
        self._kill_at: float | None = None  # monotonic time of the SIGKILL after a stop request
        self._killed = False
        self._leave_after_exit = False  # a signal came once the trainer had exited: no grace period
        self._child: subprocess.Popen | None = None
        self._wake = threading.Event()
        self._changes = changes  # wakes the follow loop when the log changes
        self._adopts = False  # a subreaper: what the trainer daemonises is stopped with it

    def _on_signal(self, signum: int, _frame) -> None:
        child = self._child
        if child is not None and has_exited(child):  # the trainer is gone: skip the grace period
            self._leave_after_exit = True
            self._wake.set()
            return
        if not self.stop_requested:  # a repeat never cuts the kill timeout short
            self.stop_requested = True
            self._kill_at = time.monotonic() + self.kill_timeout
            if child is not None:
                signal_group(child, signum)
        self._wake.set()
        if self._changes is not None:
            self._changes.wake()

    def run(self) -> int:
        """Run the trainer to its end and through the grace period; returns its shell exit status."""
        pid_handle = self._open_pid_file()  # before the trainer starts: a bad path is an error, not an orphan
        previous = {sig: signal.signal(sig, self._on_signal) for sig in FORWARDED}
        try:
            self._adopts = become_subreaper()  # what the trainer daemonises is reparented here
            try:
                self._child = start_group(self.command, die_with_parent=True)
            except OSError as exc:
                raise BuildError(f"cannot start {self.command[0]!r}: {exc.strerror or exc}") from None
            if self.stop_requested:  # a signal came while it was starting
                signal_group(self._child, signal.SIGTERM)
            if pid_handle is not None:
                self._write_pid(pid_handle, self._child.pid)
            self.say(f"dashgen export: started {self.command[0]} (pid {self._child.pid}, its own process group)")
            exit_code = self._supervise(self._child)
            if self.pid_file is not None:
                self.pid_file.unlink(missing_ok=True)
            self._poll_log(final=True)
            phase = phase_after_exit(exit_code, self.stop_requested, self.follower.state.last_step is not None)
            self.follower.state.ended(phase, exit_code)
            if phase is RunPhase.EXITED_WITHOUT_STEPS:
                self.say(f"dashgen export: the trainer exited with 0 but wrote no step to {self.follower.path}: it "
                         f"trained nothing, or it logs to another file (check trainer.logger and "
                         f"VERL_FILE_LOGGER_PATH); published as {phase.value}, not finished")
            self.say(f"dashgen export: the trainer exited with {exit_code} ({phase.value}); serving the final "
                     f"state for {self.grace_seconds:g} s")
            self._wake.clear()
            if not self._leave_after_exit:
                self._wake.wait(self.grace_seconds)
            return shell_exit_status(exit_code)
        finally:
            if self._child is not None and self._child.returncode is None:  # an error while it ran
                end_group(self._child, self._adopts)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if self.pid_file is not None and pid_handle is not None:
                pid_handle.close()
                self.pid_file.unlink(missing_ok=True)

    def _supervise(self, child: subprocess.Popen) -> int:
        """Follow the log until the trainer exits, killing its group once a stop has waited long
        enough; then stop what it left in its group. Returns the trainer's exit code."""
        while not has_exited(child):
            if self._kill_at is not None and not self._killed and time.monotonic() >= self._kill_at:
                self.say(f"dashgen export: the trainer (pid {child.pid}) has not exited; SIGKILL to its process "
                         f"group")
                signal_group(child, signal.SIGKILL)
                self._killed = True
            self._follow(None if self._killed else self._kill_at)
        # A data loader or checkpoint writer it left behind in its group, or a process it daemonised
        # (reparented here): asked to stop as the trainer was, or now.
        if not self.stop_requested:
            self._kill_at = time.monotonic() + self.kill_timeout
        signal_left_behind(child, signal.SIGTERM, self._adopts)
        while self._kill_at is not None and time.monotonic() < self._kill_at and left_behind(child, self._adopts):
            reap_adopted(child)
            self._follow(self._kill_at)
        if not self._killed and left_behind(child, self._adopts):
            self.say(f"dashgen export: processes the trainer (pid {child.pid}) left in its process group or "
                     f"daemonised have not exited; SIGKILL to them")
        return end_group(child, self._adopts)

    def _follow(self, until: float | None) -> None:
        """Read the log, then wait a poll interval (less if `until`, a monotonic time, comes first)."""
        self._poll_log()
        wait = self.poll_interval
        if until is not None:
            wait = max(0.0, min(wait, until - time.monotonic()))
        if self._changes is not None:
            self._changes.wait(wait)
        else:
            self._wake.wait(wait)
        self._wake.clear()

    def _open_pid_file(self) -> TextIO | None:
        if self.pid_file is None:
            return None
        try:
            return open(self.pid_file, "w")
        except OSError as exc:
            raise BuildError(f"--pid-file {self.pid_file}: cannot write it: {exc.strerror or exc}; give a file in "
                             f"a folder you can write to") from None

    def _write_pid(self, handle: TextIO, pid: int) -> None:
        try:
            handle.write(f"{pid}\n")
            handle.flush()
        except OSError as exc:
            raise BuildError(f"--pid-file {self.pid_file}: cannot write the trainer's PID: "
                             f"{exc.strerror or exc}; stopped the trainer") from None

    def _poll_log(self, final: bool = False) -> None:
        try:
            self.follower.poll(final)
        except OSError as exc:
            self.say(f"dashgen export: reading {self.follower.path} failed ({exc}); retrying")
            self.follower.close()
