"""The alerts judged on real public runs (bench/realruns/): healthy runs must stay quiet, failures
must be caught soon after their onset.

Each run is a folder holding its raw log, `steps.jsonl` (verl's step-log format, made from the
raw log by bench/realruns/convert.py) and `run.yaml`: the verdict its authors give it (healthy or
failure), the onset step of a failure, and the seconds a step takes where the log has no
timing_s/step. All runs are backtested together, from a fixed start, so every figure repeats.

A healthy run is clean when no warning or critical alert fires on it. A failure is caught when
a warning or critical alert starts at a logged step from its onset through the CATCH_WITHIN-th
logged step after it; the latency is counted in logged steps.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path

import yaml

from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.records import record
from dashgen.replay.backfill import Timing
from dashgen.replay.backtest import RunOutcome, backtest

SEVERE = ("critical", "warning")
CATCH_WITHIN = 10  # logged steps after the onset
START = 1_735_689_600.0  # 2025-01-01T00:00:00Z: a fixed clock, so alerts start at the same steps every time


@record
class RealRun:
    """One run of the corpus and its ground truth."""
    name: str
    steps_path: Path
    verdict: str  # "healthy" or "failure"
    onset_step: int | None
    what_failed: str
    step_seconds: float | None  # for a log without timing_s/step


@record(frozen=False)
class Fired:
    alertname: str
    severity: str
    start_step: int
    end_step: int | None


@record(frozen=False)
class Judged:
    """What fired on a run, and whether that is right."""
    run: RealRun
    logged_steps: list[int]
    fired: list[Fired] = field(default_factory=list)

    @property
    def severe(self) -> list[Fired]:
        return [f for f in self.fired if f.severity in SEVERE]

    @property
    def clean(self) -> bool:
        return not self.severe

    @property
    def catch_window(self) -> tuple[int, int] | None:
        """The logged steps from the onset through CATCH_WITHIN logged steps after it."""
        onset = self.run.onset_step
        if onset is None:
            return None
        after = [step for step in self.logged_steps if step >= onset]
        return (onset, after[min(CATCH_WITHIN, len(after) - 1)] if after else onset)

    @property
    def caught_by(self) -> Fired | None:
        """The first warning or critical alert starting within the catch window."""
        window = self.catch_window
        if window is None:
            return None
        inside = [f for f in self.severe if window[0] <= f.start_step <= window[1]]
        return min(inside, key=lambda f: f.start_step, default=None)

    @property
    def latency_steps(self) -> int | None:
        """Logged steps from the onset to the catch (0: at the onset's own line)."""
        caught = self.caught_by
        if caught is None:
            return None
        return sum(1 for step in self.logged_steps if self.run.onset_step < step <= caught.start_step)

    @property
    def false_pages(self) -> list[Fired]:
        """Warnings and criticals that are wrong: any on a healthy run; on a failure, those that
        start before its onset."""
        if self.run.verdict == "healthy":
            return self.severe
        return [f for f in self.severe if f.start_step < (self.run.onset_step or 0)]


def load_corpus(folder: Path) -> list[RealRun]:
    """Every run folder below `folder` (one with run.yaml and steps.jsonl), by name."""
    runs = []
    for meta_path in sorted(folder.glob("*/run.yaml")):
        where = meta_path.parent.name
        try:
            meta = yaml.safe_load(meta_path.read_text())
        except yaml.YAMLError as exc:
            raise BuildError(f"{meta_path}: not YAML: {exc}") from None
        if not isinstance(meta, dict) or meta.get("verdict") not in ("healthy", "failure"):
            raise BuildError(f"{meta_path}: needs verdict: healthy or failure")
        onset = meta.get("onset_step")
        if meta["verdict"] == "failure" and not isinstance(onset, int):
            raise BuildError(f"{meta_path}: a failure needs its onset_step")
        seconds = meta.get("default_step_seconds")
        runs.append(RealRun(where, meta_path.parent / "steps.jsonl", meta["verdict"], onset,
                            str(meta.get("what_failed") or ""), float(seconds) if seconds else None))
    if not runs:
        raise BuildError(f"{folder}: no run folders (each with run.yaml and steps.jsonl)")
    return runs


def judge(runs: list[RealRun], root: Path, config: Config | None = None) -> list[Judged]:
    """Backtest the project at `root` on every run, and judge what fired."""
    timings = {run.steps_path: Timing(start=START, default_step_seconds=run.step_seconds or 60.0) for run in runs}
    outcomes = backtest([run.steps_path for run in runs], root, config or Config(), Timing(start=START),
                        timings=timings)
    return [_judged(run, outcome) for run, outcome in zip(runs, outcomes)]


def _judged(run: RealRun, outcome: RunOutcome) -> Judged:
    judged = Judged(run, list(outcome.run.steps))
    for alert in outcome.alerts:
        for firing in alert.firing:
            judged.fired.append(Fired(alert.alertname, alert.severity, firing.start_step, firing.end_step))
    judged.fired.sort(key=lambda f: (f.start_step, f.alertname))
    return judged


def format_report(judged: list[Judged]) -> str:
    """Per run what fired and when, then the verdicts."""
    lines = ["RUN                                           VERDICT  ONSET  STEPS  RESULT               FIRED (warning and critical: name@start step)"]
    for j in judged:
        run = j.run
        if run.verdict == "healthy":
            result = "clean" if j.clean else "FALSE ALARM"
        elif j.caught_by is not None:
            result = f"caught +{j.latency_steps} steps"
        else:
            result = "MISSED"
        if run.verdict == "failure" and j.false_pages and j.caught_by is not None:
            result += " (+early)"
        fired = ", ".join(f"{f.alertname}({f.severity[0]})@{f.start_step}" for f in j.severe) or "-"
        onset = "-" if run.onset_step is None else str(run.onset_step)
        lines.append(f"{run.name:<45} {run.verdict:<8} {onset:>5}  {len(j.logged_steps):>5}  {result:<20} {fired}")
    healthy = [j for j in judged if j.run.verdict == "healthy"]
    failures = [j for j in judged if j.run.verdict == "failure"]
    critical = [j for j in healthy if any(f.severity == "critical" for f in j.severe)]
    caught = [j for j in failures if j.caught_by is not None]
    lines += [
        "",
        f"healthy runs clean: {sum(j.clean for j in healthy)} of {len(healthy)} "
        f"(a false critical page on {len(critical)}, a false warning or critical on {len(healthy) - sum(j.clean for j in healthy)})",
        f"failures caught within {CATCH_WITHIN} logged steps of onset: {len(caught)} of {len(failures)}"
        + (f" (latency in logged steps: {', '.join(str(j.latency_steps) for j in caught)})" if caught else ""),
        f"runs paged falsely (a warning or critical on a healthy run, or before a failure's onset): "
        f"{sum(bool(j.false_pages) for j in judged)}",
    ]
    return "\n".join(lines) + "\n"
