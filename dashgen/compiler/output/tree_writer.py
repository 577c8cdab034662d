"""Replace the files of rendered/ as a whole: after a crash the tree is the old set or the new set.

rendered/ itself is kept (Grafana and Prometheus containers bind-mount it and its folders;
swapping the directory would leave them reading the old one). Instead, one transaction:

1. the new files are written in full to `.dashgen-staging/new/` beside rendered/, and the
   files about to be replaced or removed are hard-linked to `.dashgen-staging/old/`;
2. `.dashgen-staging/journal.json` is written by rename: the commit point;
3. each new file is renamed into place and each left-over file removed, with SIGINT and
   SIGTERM held back until done; then the staging folder is removed.

Every command that reads rendered/ first calls `recover`: a staging folder with a journal
is rolled forward (its renames are finished), one without is discarded. Builds of one
project are serialised by an flock on the project folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
from pathlib import Path
from typing import Callable, Iterator

from dashgen.errors import BuildError

STAGING = ".dashgen-staging"
JOURNAL = "journal.json"


@contextlib.contextmanager
def project_lock(root: Path) -> Iterator[None]:
    """Hold an exclusive flock on the project folder (no lock file to leave behind)."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise BuildError(f"{root}: cannot open the project folder: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


# Folders of rendered/ that another command writes (`dashgen preview`'s PNGs): a build neither
# replaces nor removes what they hold, and `check` does not count it as left over.
UNMANAGED = ("preview/",)


def existing_files(out_dir: Path) -> set[str]:
    """The files of out_dir a build manages (those under UNMANAGED are not)."""
    if not out_dir.is_dir():
        return set()
    found = {p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file() or p.is_symlink()}
    return {rel for rel in found if not rel.startswith(UNMANAGED)}


def recover(out_dir: Path) -> str | None:
    """Finish or discard an interrupted replace of out_dir; says what it did, or None."""
    staging = out_dir.parent / STAGING
    if not staging.exists():
        return None
    journal = staging / JOURNAL
    if journal.is_file():
        plan = json.loads(journal.read_text())
        try:
            _apply(out_dir, staging, plan)
        except OSError as exc:
            raise BuildError(f"cannot finish the interrupted update of {out_dir} ({_where(exc, out_dir)}: "
                             f"{exc.strerror or exc}); fix that and run the command again") from None
        shutil.rmtree(staging)
        return f"finished the interrupted update of {out_dir} ({len(plan['write'])} written, " \
               f"{len(plan['delete'])} removed)"
    shutil.rmtree(staging)
    return f"discarded an interrupted build's staging folder; {out_dir} was left as it was"


def replace_tree(out_dir: Path, files: dict[str, str],
                 check: Callable[[list[str]], None] | None = None) -> list[str]:
    """Make out_dir hold exactly `files` (path under out_dir -> text); returns the paths changed.
    `check`, given the paths about to be written, may refuse them (raise) before anything changes.

    Call under `project_lock` after `recover`. On an error out_dir is left as it was.
    """
    existing = existing_files(out_dir)
    write = sorted(rel for rel, content in files.items() if not _same(out_dir / rel, content))
    delete = sorted(existing - set(files))
    if not write and not delete:
        return []
    if check is not None:
        check(write)
    staging = out_dir.parent / STAGING
    try:
        _preflight(out_dir, write, delete)
        staging.mkdir()
        for rel in write:
            path = staging / "new" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[rel])
            os.chmod(path, 0o644)
        for rel in sorted((set(write) & existing) | set(delete)):
            backup = staging / "old" / rel
            backup.parent.mkdir(parents=True, exist_ok=True)
            os.link(out_dir / rel, backup, follow_symlinks=False)
        tmp = staging / f"{JOURNAL}.tmp"
        tmp.write_text(json.dumps({"write": write, "delete": delete}))
        os.replace(tmp, staging / JOURNAL)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BuildError(f"cannot write {_where(exc, out_dir)}: {exc.strerror or exc}; "
                         f"{out_dir} was left as it was") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        try:
            _apply(out_dir, staging, {"write": write, "delete": delete})
        except OSError as exc:
            _roll_back(out_dir, staging, write, delete)
            raise BuildError(f"cannot write {_where(exc, out_dir)}: {exc.strerror or exc}; "
                             f"{out_dir} was restored as it was") from None
        shutil.rmtree(staging, ignore_errors=True)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    return sorted(set(write) | set(delete))


def _same(path: Path, content: str) -> bool:
    try:
        return path.is_file() and path.read_text() == content
    except (OSError, UnicodeDecodeError):
        return False


def _preflight(out_dir: Path, write: list[str], delete: list[str]) -> None:
    """Refuse before anything changes when a folder that must change is not writable."""
    folders = {(out_dir / rel).parent for rel in [*write, *delete]}
    for folder in sorted(folders):
        existing = folder
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            raise BuildError(f"cannot write {folder}: {existing} is not a folder; {out_dir} was left as it was")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise BuildError(f"cannot write into {existing}: permission denied; {out_dir} was left as it was")


def _apply(out_dir: Path, staging: Path, plan: dict) -> None:
    """Move the staged files into place and remove the left-overs; safe to repeat."""
    for rel in plan["write"]:
        staged = staging / "new" / rel
        if staged.exists():
            (out_dir / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, out_dir / rel)
    for rel in plan["delete"]:
        (out_dir / rel).unlink(missing_ok=True)
    _remove_empty_folders(out_dir)


def _roll_back(out_dir: Path, staging: Path, write: list[str], delete: list[str]) -> None:
    for rel in [*write, *delete]:
        backup = staging / "old" / rel
        if backup.exists():
            os.replace(backup, out_dir / rel)
        elif rel in write:
            (out_dir / rel).unlink(missing_ok=True)
    _remove_empty_folders(out_dir)
    shutil.rmtree(staging, ignore_errors=True)


def _remove_empty_folders(out_dir: Path) -> None:
    if not out_dir.is_dir():
        return
    for directory in sorted((d for d in out_dir.rglob("*") if d.is_dir()), reverse=True):
        if not any(directory.iterdir()):
            directory.rmdir()


def _where(exc: OSError, out_dir: Path) -> str:
    return exc.filename if getattr(exc, "filename", None) else str(out_dir)
