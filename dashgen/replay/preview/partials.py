"""Where a preview PNG is drawn before it replaces the committed one.

Each is drawn to a hidden file beside its final path, named with the drawing process' PID, and
renamed over the final path only once every dashboard is drawn and good; a failed or interrupted
preview removes its partials, and one killed outright (SIGKILL) leaves them to the next preview.
A preview holds a lock (flock) on a file of its own beside them while it draws, which the kernel
releases when it dies, however it dies: the next preview removes the partials whose lock nobody
holds. A PID alone cannot tell: a killed preview not yet reaped (a zombie) or a PID used again
still answers as alive.
"""

from __future__ import annotations

import fcntl
import os
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

_PARTIAL = re.compile(r"\..+\.png\.(\d+)\.partial")
_OWNER = re.compile(r"\.dashgen-preview\.(\d+)\.lock")


def partial_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.partial")


def _owner_lock(folder: Path, pid: int) -> Path:
    return folder / f".dashgen-preview.{pid}.lock"


@contextmanager
def drawing_partials(folder: Path) -> Iterator[None]:
    """Remove what killed previews left in `folder`, then hold this one's lock while the block runs."""
    remove_abandoned_partials(folder)
    lock = _owner_lock(folder, os.getpid())
    staged = lock.with_name(lock.name + ".new")  # locked before it has its name: never seen unlocked
    fd = os.open(staged, os.O_CREAT | os.O_TRUNC | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(staged, lock)
        yield
    finally:
        staged.unlink(missing_ok=True)
        lock.unlink(missing_ok=True)
        os.close(fd)


def remove_abandoned_partials(folder: Path) -> None:
    """Remove the partials, and owner locks, of the previews in `folder` that are gone."""
    for path in folder.glob(".*"):
        match = _PARTIAL.fullmatch(path.name) or _OWNER.fullmatch(path.name)
        if match and not _drawing(folder, int(match.group(1))):
            path.unlink(missing_ok=True)


def _drawing(folder: Path, pid: int) -> bool:
    """Whether preview `pid` holds its lock in `folder` (a partial without a lock file is abandoned)."""
    try:
        fd = os.open(_owner_lock(folder, pid), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False
