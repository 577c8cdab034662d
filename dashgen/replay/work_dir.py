"""Temporary folders of the replay commands (backtest, preview, backfill) that a killed run cannot leak.

A `with` block removes its folder however it ends, but SIGKILL ends no block. So each folder
holds a lock file that its run keeps locked (flock) while it lives; the kernel releases the lock
when the process dies, however it dies. Before making its own folder, a run removes the folders
of its kind whose lock nobody holds: what a killed run left behind.

The tools a run starts meanwhile get a $TMPDIR inside its folder: what they leave there when they
are stopped (promtool's TSDB head folders, `head*`, when a SIGTERM cuts a backtest short) goes
with the folder, instead of staying in the system's temporary folder for good.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

LOCK_NAME = ".dashgen-owner.lock"


@contextmanager
def work_dir(purpose: str) -> Iterator[Path]:
    """A new folder $TMPDIR/dashgen-<purpose>-*, removed when the block ends (or by a later run)."""
    prefix = f"dashgen-{purpose}-"
    remove_abandoned(prefix)
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    # Once more at exit, after Python has joined the run's worker threads: a signal ends the block
    # below in the main thread while a worker may still be writing blocks into the folder, and
    # its mkdir(parents=True) would make the folder anew after the block removed it.
    atexit.register(shutil.rmtree, folder, True)
    try:
        lock = _hold_lock(folder)
        try:
            with _children_tmpdir(folder / "tmp"):
                yield folder
        finally:
            os.close(lock)
    finally:
        _remove(folder)


@contextmanager
def _children_tmpdir(folder: Path) -> Iterator[None]:
    """$TMPDIR of the processes started in the block: `folder`. From the main thread only, where the
    blocks nest (os.environ is the process' own: another thread's block could restore it out of turn)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    folder.mkdir()
    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = previous


def _remove(folder: Path) -> None:
    """Remove `folder` whole: a SIGTERM that arrives while it is being removed (the CLI turns it into
    an exception) is raised once the folder is gone, not in the middle of removing it."""
    interrupted: BaseException | None = None
    while True:
        try:
            shutil.rmtree(folder, ignore_errors=True)
            break
        except BaseException as exc:  # noqa: BLE001 - re-raised below, once the folder is gone
            interrupted = exc
    if interrupted is not None:
        raise interrupted


def _hold_lock(folder: Path) -> int:
    """Lock a new file, then give it its name: a sweeping run never sees the name unlocked."""
    staged = folder / f"{LOCK_NAME}.new"
    fd = os.open(staged, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(staged, folder / LOCK_NAME)
    return fd


def remove_abandoned(prefix: str) -> list[Path]:
    """Remove this user's $TMPDIR/<prefix>* folders whose owner is gone; the folders removed."""
    removed = []
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return removed
    for entry in entries:
        try:
            if not (entry.name.startswith(prefix) and entry.is_dir(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_uid == os.getuid()):
                continue
            fd = os.open(Path(entry.path) / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # no lock file (yet): not a folder a run owns
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its run is alive
        else:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
        finally:
            os.close(fd)
    return removed
