"""Child processes that die with dashgen: a SIGKILLed command leaves no server, tool or trainer behind."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent_hook():
    """A preexec_fn that makes the child get SIGKILL when its parent dies (Linux' PR_SET_PDEATHSIG).

    Linux ties this to the thread that started the child: start it from a thread that lives as
    long as the child should (the main thread); None elsewhere than on Linux.

    prctl is looked up before the fork: the hook then only calls it, which is safe in a child
    forked from a threaded parent (no allocation, no lock)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return hook
