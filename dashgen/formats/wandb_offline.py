"""A W&B offline run read as its step log: the folder `wandb/offline-run-<time>-<id>/` that verl's
`wandb` logger or TRL's `report_to="wandb"` leaves with `WANDB_MODE=offline`, or its transaction log
`run-<id>.wandb` itself, known by the log's first bytes (`:W&B`), not by its name.

The log is read by the `wandb` package itself (pinned; the extra `dashgen-rl[wandb]`): `wandb leet
inspect --json` prints its records a line each, with no network (its reader, wandb-core, reads the
local file; tests/replay/test_wandb_offline.py runs it in a network namespace that has none). The
history records' rows are then read as a W&B history export is (formats/wandb_export.py): placed at
the training step, TRL's train/ and eval/ keys read as TRL's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from dashgen.formats import wandb_export
from dashgen.formats.records import step_lines

MAGIC = b":W&B"
# The longest a read of one run's log may take (wandb-core reads a 100,000-step log in seconds).
READ_TIMEOUT_SECONDS = 600.0


def _starts_with_magic(path: Path) -> bool:
    try:
        if not path.is_file():
            return False
        with open(path, "rb") as handle:
            return handle.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def wandb_log(path: Path) -> Path | None:
    """The run's transaction log: `path` itself, or the one such log in the folder `path`; None otherwise."""
    if not path.is_dir():
        return path if _starts_with_magic(path) else None
    try:
        logs = [file for file in sorted(path.iterdir()) if _starts_with_magic(file)]
    except OSError:
        return None
    return logs[0] if len(logs) == 1 else None


def is_wandb_offline_run(path: Path) -> bool:
    return wandb_log(path) is not None


def history_rows(log: Path) -> Iterator[dict]:
    """The history rows of the run's log, in the order logged, as the wandb package reads them."""
    try:
        import wandb  # noqa: F401 (only to say what is missing)
    except ImportError:
        raise ValueError("reading a W&B offline run needs the wandb package: install dashgen-rl with its "
                         "extra, pip install 'dashgen-rl[wandb]'") from None
    if log.suffix != ".wandb":  # wandb reads a file so named only (a symlink's target's name counts)
        with tempfile.TemporaryDirectory(prefix="dashgen-wandb-") as folder:
            named = Path(folder) / "run.wandb"
            try:
                os.link(log, named)
            except OSError:  # another filesystem
                shutil.copyfile(log, named)
            yield from history_rows(named)
        return
    environment = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    with subprocess.Popen([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(log)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          env=environment) as reader:
        try:
            for line in reader.stdout:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and record.get("type") == "history":
                    item = record.get("history", {}).get("item")
                    if isinstance(item, dict):
                        yield item
            error = reader.stderr.read(64 << 10).decode(errors="replace").strip()
            code = reader.wait(READ_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            reader.kill()
            raise ValueError(f"wandb could not read it within {READ_TIMEOUT_SECONDS:g} s") from None
        finally:
            if reader.poll() is None:  # the caller stopped reading early
                reader.kill()
    if code != 0:
        raise ValueError(f"wandb could not read it (exit {code}): {error.splitlines()[-1] if error else 'no message'}")


def step_log_lines(path: Path) -> Iterator[bytes]:
    """A W&B offline run as verl's step-log lines ({"step": N, "data": {...}}), for the step-log reader."""
    log = wandb_log(path)
    if log is None:
        raise ValueError("no W&B transaction log (run-<id>.wandb) in it")
    records = wandb_export.step_records(list(history_rows(log)))
    return step_lines(records, "a W&B run without any history row numbered by a training step")
