"""Labelled runs: a folder per recorded run, its step log and what its team says of it (run.yaml).

    <run>/
      steps.jsonl          verl's step log (its `file` logger's JSONL), or
      trainer_state.json   a TRL / Unsloth run's trainer state
      run.yaml             optional: verdict, onset_step, latest_step, critical, split, default_step_seconds,
                           allow (alerts that are right on a healthy or degrading run)

The format is that of dashgen's public corpus (bench/realruns/, the package `dashgen_runs`).
A run without run.yaml, or whose run.yaml gives no verdict, is unlabelled: a review reports
what fires on it and judges nothing.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path

import yaml

from dashgen.errors import BuildError
from dashgen.records import record

RUN_FILE = "run.yaml"
STEP_LOGS = ("steps.jsonl", "trainer_state.json")  # in order of preference, when a folder holds both
SPLITS = ("tune", "holdout")


class Verdict(str, Enum):
    """What the run's team says of it, and so what the alerts may do on it."""
    HEALTHY = "healthy"      # no warning or critical may fire (info may)
    DEGRADING = "degrading"  # warnings may fire, no critical
    FAILURE = "failure"      # a warning or critical must start within the catch window


@record
class LabelledRun:
    """One recorded run and its labels (all None for an unlabelled run)."""
    name: str
    steps_path: Path
    verdict: Verdict | None = None
    onset_step: int | None = None  # a failure's first step of the catch window
    latest_step: int | None = None  # the window's last step; None: CATCH_WITHIN logged steps after the onset
    needs_critical: bool = False  # `critical: true`: only a critical alert catches the failure
    split: str | None = None
    what_failed: str = ""
    step_seconds: float | None = None  # for a log without timing_s/step
    # `allow:` alerts that are right on a healthy or degrading run (a real one-hour stall in a run
    # otherwise judged healthy): they may fire on it at any severity.
    allowed: tuple[str, ...] = ()

    @property
    def labelled(self) -> bool:
        return self.verdict is not None

    @property
    def meta_path(self) -> Path:
        return self.steps_path.parent / RUN_FILE


def find_runs(paths: list[Path]) -> list[LabelledRun]:
    """The runs in `paths`: each a run folder (one holding a step log) or a folder of run folders."""
    runs = []
    for path in paths:
        if not path.is_dir():
            raise BuildError(f"{path}: not a folder; give a run folder (holding {' or '.join(STEP_LOGS)}) "
                             f"or a folder of run folders")
        if _is_run_folder(path):
            runs.append(read_run_folder(path))
            continue
        folders = sorted(folder for folder in path.iterdir() if folder.is_dir() and _is_run_folder(folder))
        if not folders:
            raise BuildError(f"{path}: no run folders in it (each holding {' or '.join(STEP_LOGS)}, and a "
                             f"{RUN_FILE} with its verdict)")
        runs.extend(read_run_folder(folder) for folder in folders)
    seen: dict[str, Path] = {}
    for run in runs:
        if run.name in seen:
            raise BuildError(f"{run.steps_path.parent} and {seen[run.name]}: two runs named {run.name}; "
                             f"rename one of the folders")
        seen[run.name] = run.steps_path.parent
    return runs


def _is_run_folder(folder: Path) -> bool:
    return any((folder / name).is_file() for name in (*STEP_LOGS, RUN_FILE))


def read_run_folder(folder: Path) -> LabelledRun:
    """The run in `folder`; BuildError naming the file for a run.yaml that is not right."""
    steps = next((folder / name for name in STEP_LOGS if (folder / name).is_file()), None)
    meta_path = folder / RUN_FILE
    if steps is None:
        raise BuildError(f"{meta_path}: the run has no step log beside it ({' or '.join(STEP_LOGS)})")
    if not meta_path.is_file():
        return LabelledRun(folder.name, steps)
    try:
        meta = yaml.safe_load(meta_path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise BuildError(f"{meta_path}: not YAML: {exc}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise BuildError(f"{meta_path}: expected a mapping (verdict: healthy, degrading or failure, ...)")
    return _labelled(folder.name, steps, meta, meta_path)


def _labelled(name: str, steps: Path, meta: dict, where: Path) -> LabelledRun:
    verdict_text = meta.get("verdict")
    seconds = meta.get("default_step_seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0):
        raise BuildError(f"{where}: default_step_seconds: {seconds!r} is not a number of seconds above 0")
    split = meta.get("split")
    if split is not None and split not in SPLITS:
        raise BuildError(f"{where}: split: {split!r}; expected one of {', '.join(SPLITS)}")
    if verdict_text is None:
        return LabelledRun(name, steps, split=split, step_seconds=seconds)
    try:
        verdict = Verdict(verdict_text)
    except ValueError:
        raise BuildError(f"{where}: verdict: {verdict_text!r}; expected one of "
                         f"{', '.join(v.value for v in Verdict)}") from None
    onset, latest = meta.get("onset_step"), meta.get("latest_step")
    for field_name, value in (("onset_step", onset), ("latest_step", latest)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise BuildError(f"{where}: {field_name}: {value!r} is not a step number")
    if verdict is Verdict.FAILURE and onset is None:
        raise BuildError(f"{where}: a failure needs its onset_step (the first step the alerts may catch it at)")
    if latest is not None and onset is not None and latest < onset:
        raise BuildError(f"{where}: latest_step {latest} comes before onset_step {onset}")
    critical = meta.get("critical") or False
    if not isinstance(critical, bool):
        raise BuildError(f"{where}: critical: {critical!r}; expected true or false")
    allowed = meta.get("allow") or []
    if not isinstance(allowed, list) or not all(isinstance(name, str) and name for name in allowed):
        raise BuildError(f"{where}: allow: {allowed!r}; expected a list of alert names")
    return LabelledRun(name, steps, verdict, onset, latest, critical, split, str(meta.get("what_failed") or ""),
                       seconds, tuple(allowed))


def check_steps(run: LabelledRun, logged_steps: list[int]) -> None:
    """A run's onset and latest step lie within the steps its log holds."""
    last = logged_steps[-1] if logged_steps else None
    for field_name, step in (("onset_step", run.onset_step), ("latest_step", run.latest_step)):
        if step is not None and (last is None or step > last):
            raise BuildError(f"{run.meta_path}: {field_name} {step} is beyond the run's last logged step "
                             f"({last}, in {run.steps_path.name})")
