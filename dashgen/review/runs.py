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

from dashgen.bounded_read import NotText, TooLarge, parse_nested, read_text
from dashgen.errors import BuildError
from dashgen.records import record
from dashgen.replay.backfill import recorded_format

RUN_FILE = "run.yaml"
# A label file is a few hundred bytes of hand-written YAML: these bounds refuse what no one writes
# by hand (a megabyte, an alias bomb whose expansion never ends) with an error instead of a hang.
RUN_FILE_BYTES = 1 << 20
RUN_FILE_ALIASES = 16
# The longest step a run may take (30 days), for a log without timing_s/step.
MAX_STEP_SECONDS = 30 * 86_400.0
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


def _step_log(folder: Path) -> Path | None:
    """The folder's record of the run: steps.jsonl or trainer_state.json, else the one other file or
    folder that holds a run in a format dashgen reads (a console log, a TensorBoard event file or log
    directory, a W&B export, an MLflow run's folder), known by its content."""
    named = next((folder / name for name in STEP_LOGS if (folder / name).is_file()), None)
    if named is not None:
        return named
    others = sorted(path for path in folder.iterdir() if path.name != RUN_FILE and (path.is_file() or path.is_dir())
                    and not path.name.startswith(".") and recorded_format(path) is not None)
    if len(others) > 1:
        raise BuildError(f"{folder}: {len(others)} records of a run in it ({', '.join(p.name for p in others)}); "
                         f"keep one, or name it steps.jsonl")
    return others[0] if others else None


def read_run_folder(folder: Path) -> LabelledRun:
    """The run in `folder`; BuildError naming the file for a run.yaml that is not right."""
    steps = _step_log(folder)
    meta_path = folder / RUN_FILE
    if steps is None:
        raise BuildError(f"{meta_path}: the run has no step log beside it ({' or '.join(STEP_LOGS)}, or a "
                         f"console log, TensorBoard event file or log directory, W&B export or MLflow run folder)")
    if meta_path.is_symlink() and not meta_path.exists():
        raise BuildError(f"{meta_path}: a symlink to nothing ({meta_path.readlink()}); the run's labels are lost")
    if meta_path.exists() and not meta_path.is_file():
        raise BuildError(f"{meta_path}: not a file")
    if not meta_path.is_file():
        return LabelledRun(folder.name, steps)
    try:
        meta = parse_nested(lambda text: yaml.load(text, Loader=_LabelLoader),
                            read_text(meta_path, RUN_FILE_BYTES))
    except TooLarge as exc:
        raise BuildError(f"{meta_path}: {exc}; a run's labels are a few lines") from None
    except NotText as exc:
        raise BuildError(f"{meta_path}: {exc}; a run's labels are a few lines of YAML") from None
    except OSError as exc:
        raise BuildError(f"{meta_path}: cannot be read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise BuildError(f"{meta_path}: not YAML: {exc}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise BuildError(f"{meta_path}: expected a mapping (verdict: healthy, degrading or failure, ...)")
    return _labelled(folder.name, steps, meta, meta_path)


class _LabelLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing more than RUN_FILE_ALIASES aliases."""

    aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > RUN_FILE_ALIASES:
                raise yaml.YAMLError(f"more than {RUN_FILE_ALIASES} aliases (*name): a label file needs none")
        return super().compose_node(parent, index)


def _labelled(name: str, steps: Path, meta: dict, where: Path) -> LabelledRun:
    verdict_text = meta.get("verdict")
    if verdict_text is not None and not isinstance(verdict_text, str):
        raise BuildError(f"{where}: verdict: expected one of {', '.join(v.value for v in Verdict)}, "
                         f"not a {type(verdict_text).__name__}")
    what_failed = meta.get("what_failed")
    if what_failed is not None and not isinstance(what_failed, str):
        raise BuildError(f"{where}: what_failed: expected a text, not a {type(what_failed).__name__}")
    seconds = meta.get("default_step_seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not 0 < seconds <= MAX_STEP_SECONDS):
        raise BuildError(f"{where}: default_step_seconds: {seconds!r} is not a number of seconds above 0 and at "
                         f"most {MAX_STEP_SECONDS:g} (30 days)")
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
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise BuildError(f"{where}: {field_name}: {value!r} is not a step number (0 or more)")
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
    return LabelledRun(name, steps, verdict, onset, latest, critical, split, what_failed or "", seconds,
                       tuple(allowed))


def check_steps(run: LabelledRun, logged_steps: list[int]) -> None:
    """A run's onset and latest step lie within the steps its log holds."""
    last = logged_steps[-1] if logged_steps else None
    for field_name, step in (("onset_step", run.onset_step), ("latest_step", run.latest_step)):
        if step is not None and (last is None or step > last):
            raise BuildError(f"{run.meta_path}: {field_name} {step} is beyond the run's last logged step "
                             f"({last}, in {run.steps_path.name})")
