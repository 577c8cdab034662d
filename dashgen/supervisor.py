"""`dashgen export ... -- CMD`: run the trainer as a child and publish how it ends.

The trainer gets its own session, so a Ctrl-C in the terminal reaches it once, through us:
SIGINT and SIGTERM sent to the exporter are forwarded to it and mark the run as stopped
(not crashed) when it then exits. After it exits the log is read a last time (a buffered
writer's final lines), the end is published, and /metrics stays up for the grace period so
Prometheus scrapes the final state before the exporter goes away. A second signal during
the grace period ends it at once.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path
from typing import Callable

from dashgen.errors import BuildError
from dashgen.exporter import LogFollower
from dashgen.lifecycle import phase_after_exit, shell_exit_status

FORWARDED = (signal.SIGINT, signal.SIGTERM)


class Supervisor:
    def __init__(self, command: list[str], follower: LogFollower, poll_interval: float, grace_seconds: float,
                 pid_file: Path | None = None, say: Callable[[str], None] = print):
        self.command = command
        self.follower = follower
        self.poll_interval = poll_interval
        self.grace_seconds = grace_seconds
        self.pid_file = pid_file
        self.say = say
        self.stop_requested = False
        self._child: subprocess.Popen | None = None
        self._wake = threading.Event()

    def _on_signal(self, signum: int, _frame) -> None:
        if self._child is not None and self._child.poll() is None:
            self.stop_requested = True
            self._child.send_signal(signum)
        else:  # already in the grace period: leave now
            self._wake.set()

    def run(self) -> int:
        """Run the trainer to its end and through the grace period; returns its shell exit status."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in FORWARDED}
        try:
            try:
                self._child = subprocess.Popen(self.command, start_new_session=True)
            except OSError as exc:
                raise BuildError(f"cannot start {self.command[0]!r}: {exc.strerror or exc}") from None
            if self.pid_file is not None:
                self.pid_file.write_text(f"{self._child.pid}\n")
            self.say(f"dashgen export: started {self.command[0]} (pid {self._child.pid})")
            while self._child.poll() is None:
                self._poll_log()
                self._wake.wait(self.poll_interval)
            exit_code = self._child.returncode
            self._poll_log()
            phase = phase_after_exit(exit_code, self.stop_requested)
            self.follower.state.ended(phase, exit_code)
            self.say(f"dashgen export: the trainer exited with {exit_code} ({phase.value}); serving the final "
                     f"state for {self.grace_seconds:g} s")
            self._wake.clear()
            self._wake.wait(self.grace_seconds)
            return shell_exit_status(exit_code)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if self.pid_file is not None:
                self.pid_file.unlink(missing_ok=True)

    def _poll_log(self) -> None:
        try:
            self.follower.poll()
        except OSError as exc:
            self.say(f"dashgen export: reading {self.follower.path} failed ({exc}); retrying")
            self.follower.close()

