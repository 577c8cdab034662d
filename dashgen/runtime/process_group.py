"""Child processes run in a process group of their own, so one signal reaches all they started.

`dashgen export -- TRAINER` and `dashgen act`'s command action start a child this way and end it
as systemd ends a service: the whole group, not just the process they started. A group is
signalled only while its leader is unreaped (exited or not): the leader's PID, which is the
group's id, cannot be reused until it is reaped, so a signal never reaches a stranger's group.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dashgen.parent_death import die_with_parent_hook

_PR_SET_CHILD_SUBREAPER = 36


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


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux' PR_SET_CHILD_SUBREAPER): a process a
    child daemonised (double fork, its own session) is reparented here, not to init, so it can be
    found and stopped with the child. False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _process_table() -> dict[int, tuple[str, int, int]] | None:
    """Every process' (state, parent PID, process group) from /proc; None without /proc."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    table = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Fields after the command name: [0] state, [1] parent PID, [2] process group.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            table[int(entry.name)] = (fields[0], int(fields[1]), int(fields[2]))
        except (OSError, IndexError, ValueError):
            continue  # ended while we looked
    return table


def left_behind(process: subprocess.Popen, adopted: bool = False) -> list[int]:
    """The live processes the (exited, unreaped) leader left: those in its group and, with `adopted`
    (this process a subreaper whose only child is the leader), every other descendant of this
    process: what the leader daemonised was reparented here. Zombies do not count. Without /proc:
    the leader's PID if its group can still be signalled."""
    if process.returncode is not None:
        return []
    table = _process_table()
    if table is None:
        try:
            os.killpg(process.pid, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [process.pid]
    me = os.getpid()
    found = []
    for pid, (state, _parent, group) in table.items():
        if pid in (process.pid, me) or state == "Z":
            continue
        ancestor, seen = pid, 0
        while ancestor not in (me, 0, 1) and ancestor in table and seen < len(table):
            ancestor, seen = table[ancestor][1], seen + 1
        if group == process.pid or (adopted and ancestor == me):
            found.append(pid)
    return found


def signal_left_behind(process: subprocess.Popen, sig: int, adopted: bool = False) -> None:
    """Send `sig` to the leader's group and to every process it left (see `left_behind`)."""
    signal_group(process, sig)
    for pid in left_behind(process, adopted) if adopted else ():
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def reap_adopted(process: subprocess.Popen) -> None:
    """Reap the exited processes reparented to this subreaper, other than the leader (left for
    `end_group`, its group id stays reserved until then)."""
    table = _process_table() or {}
    for pid, (state, parent, _group) in table.items():
        if parent == os.getpid() and pid != process.pid and state == "Z":
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def wait_for_exit(process: subprocess.Popen, timeout: float, interval: float = 0.02) -> bool:
    """Wait up to `timeout` seconds for the leader to exit, leaving it unreaped; True if it did."""
    deadline = time.monotonic() + timeout
    while not has_exited(process):
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def end_group(process: subprocess.Popen, adopted: bool = False) -> int:
    """Kill what is left of the group (with `adopted`, all the leader left: see `left_behind`), then
    reap the leader and what was reparented here; the leader's returncode."""
    signal_left_behind(process, signal.SIGKILL, adopted)
    if adopted:
        reap_adopted(process)
    code = process.wait()
    if adopted:
        reap_adopted(process)
    return code
