"""Child processes run in a process group of their own, so one signal reaches all they started.

`dashgen export -- TRAINER` and `dashgen act`'s command action start a child this way and end it
as systemd ends a service: the whole group, not just the process they started. A group is
signalled only while its leader is unreaped (exited or not): the leader's PID, which is the
group's id, cannot be reused until it is reaped, so a signal never reaches a stranger's group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from dashgen.parent_death import die_with_parent_hook


def start_group(argv: list[str], die_with_parent: bool = False, **popen_options) -> subprocess.Popen:
    """Start `argv` as the leader of a new process group (and session, so a terminal's Ctrl-C
    reaches it only through us); with `die_with_parent`, it is killed if this process dies."""
    hook = die_with_parent_hook() if die_with_parent else None
    return subprocess.Popen(argv, start_new_session=True, preexec_fn=hook, **popen_options)


def has_exited(process: subprocess.Popen) -> bool:
    """Whether the leader has exited, without reaping it (its group id stays reserved)."""
    if process.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def signal_group(process: subprocess.Popen, sig: int) -> None:
    """Send `sig` to every process of the leader's group; only while the leader is unreaped."""
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_has_others(process: subprocess.Popen) -> bool:
    """Whether a live process other than the (exited, unreaped) leader is still in its group.

    On Linux from /proc (zombies do not count); elsewhere whether the group can be signalled."""
    if process.returncode is not None:
        return False
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        try:
            os.killpg(process.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == process.pid:
            continue
        try:
            # Fields after the command name: [0] state, [1] parent PID, [2] process group.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended while we looked
        if fields[2] == str(process.pid) and fields[0] != "Z":
            return True
    return False


def wait_for_exit(process: subprocess.Popen, timeout: float, interval: float = 0.02) -> bool:
    """Wait up to `timeout` seconds for the leader to exit, leaving it unreaped; True if it did."""
    deadline = time.monotonic() + timeout
    while not has_exited(process):
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def end_group(process: subprocess.Popen) -> int:
    """Kill what is left of the group, then reap the leader; its returncode."""
    signal_group(process, signal.SIGKILL)
    return process.wait()
