"""A run in MLflow's file store (verl's `mlflow` logger with a local tracking URI) read as its step
log: `mlruns/<experiment>/<run>/metrics/<key>`, one file per key (a key's `/` makes folders), one
`<timestamp ms> <value> <step>` line per logged value. Give the run's folder (or its metrics/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator
from dashgen.formats.records import step_lines

METRICS = "metrics"
# The most metric files read from one run: verl logs a few hundred keys.
MAX_KEYS = 10_000


def metrics_folder(path: Path) -> Path | None:
    """The run's metrics folder, for a run folder or the metrics folder itself; None otherwise."""
    for folder in (path / METRICS, path):
        if folder.name == METRICS and folder.is_dir() and not folder.is_symlink():
            return folder
    return None


def is_mlflow_run(path: Path) -> bool:
    """Whether `path` is an MLflow file-store run: a metrics folder whose first file holds
    `<timestamp> <value> <step>` lines."""
    folder = metrics_folder(path) if path.is_dir() else None
    if folder is None:
        return False
    first = next((file for file in sorted(folder.rglob("*")) if file.is_file()), None)
    if first is None:
        return False
    try:
        with open(first, encoding="utf-8", errors="replace") as handle:
            line = handle.readline(4096)
    except OSError:
        return False
    return _line(line) is not None


def _line(line: str) -> tuple[int, float] | None:
    parts = line.split()
    if len(parts) != 3:
        return None
    try:
        int(parts[0])
        value, step = float(parts[1]), int(parts[2])
    except ValueError:
        return None
    return step, value


def step_records(path: Path) -> list[tuple[int, dict[str, float]]]:
    """(step, values) per step, in step order; a key logged twice at one step keeps the last."""
    folder = metrics_folder(path)
    if folder is None:
        raise ValueError(f"no {METRICS} folder: give an MLflow run's folder (mlruns/<experiment>/<run>)")
    files = sorted(file for file in folder.rglob("*") if file.is_file())
    if len(files) > MAX_KEYS:
        raise ValueError(f"{len(files)} metric files: more than the {MAX_KEYS:,} keys a run is read with")
    by_step: dict[int, dict[str, float]] = {}
    for file in files:
        key = file.relative_to(folder).as_posix()
        with open(file, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, 1):
                parsed = _line(line)
                if parsed is None:
                    if line.strip():
                        raise ValueError(f"{file}: line {number} is not '<timestamp> <value> <step>'")
                    continue
                step, value = parsed
                by_step.setdefault(step, {})[key] = value
    return sorted(by_step.items())


def step_log_lines(path: Path) -> Iterator[bytes]:
    """An MLflow run as verl's step-log lines ({"step": N, "data": {...}}), for the step-log reader."""
    return step_lines(step_records(path), "an MLflow run without any logged metric")
