"""Labelled runs judged by one rule set (the corpus score) or by two (a review: before and after).

Every run is backtested from a fixed start, so the same rules give the same steps every time;
two rule sets are backtested in one pass (dashgen/replay/backtest/rule_sets.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from dashgen.config import Config
from dashgen.project_metrics import project_catalog
from dashgen.records import record
from dashgen.replay.backfill import Timing
from dashgen.replay.backtest import RuleSet, backtest, backtest_rule_sets
from dashgen.review.judging import Judged, judged
from dashgen.review.runs import LabelledRun, Verdict

START = 1_735_689_600.0  # 2025-01-01T00:00:00Z: a fixed clock, so alerts start at the same steps every time
DEFAULT_STEP_SECONDS = 60.0


def run_timings(runs: list[LabelledRun]) -> dict[Path, Timing]:
    return {run.steps_path: Timing(start=START, default_step_seconds=run.step_seconds or DEFAULT_STEP_SECONDS)
            for run in runs}


def judge(runs: list[LabelledRun], root: Path, config: Config | None = None) -> list[Judged]:
    """Backtest the project at `root` on every run, and judge what fired."""
    outcomes = backtest([run.steps_path for run in runs], root, config or Config(), Timing(start=START),
                        timings=run_timings(runs))
    return [judged(run, outcome) for run, outcome in zip(runs, outcomes)]


@record
class RunChange:
    """One run judged before and after."""
    before: Judged
    after: Judged

    @property
    def run(self) -> LabelledRun:
        return self.before.run

    @property
    def regressions(self) -> list[str]:
        """What got worse, in words: a forbidden alert that newly fires, a failure newly missed or caught later."""
        if self.run.verdict is Verdict.FAILURE:
            before, after = self.before.latency_steps, self.after.latency_steps
            if before is not None and after is None:
                return [f"no longer caught (was caught +{before} logged steps by {self.before.caught_by.alertname})"]
            if before is not None and after > before:
                return [f"caught later: +{after} logged steps instead of +{before}"]
            return []
        return [f"newly paged by {name} ({severity}) from step {step}"
                for name, severity, step in _new_alerts(self.before.forbidden, self.after.forbidden)]

    @property
    def improvements(self) -> list[str]:
        if self.run.verdict is Verdict.FAILURE:
            before, after = self.before.latency_steps, self.after.latency_steps
            if after is not None and (before is None or after < before):
                return [f"caught +{after} logged steps" + ("" if before is None else f" instead of +{before}")]
            return []
        return [f"no longer paged by {name} ({severity})"
                for name, severity, _ in _new_alerts(self.after.forbidden, self.before.forbidden)]

    @property
    def changed(self) -> bool:
        return self.before.fired != self.after.fired


def _new_alerts(before, after) -> list[tuple[str, str, int]]:
    """(alert, severity, first start step) of the alerts in `after` that are not in `before`."""
    known = {(f.alertname, f.severity) for f in before}
    first: dict[tuple[str, str], int] = {}
    for f in after:
        if (f.alertname, f.severity) not in known:
            first.setdefault((f.alertname, f.severity), f.start_step)
    return [(name, severity, step) for (name, severity), step in sorted(first.items())]


@record
class Review:
    """Every run judged before and after a change of the rules."""
    base_name: str
    head_name: str
    runs: list[RunChange]

    @property
    def regressions(self) -> list[RunChange]:
        return [change for change in self.runs if change.regressions]

    @property
    def changed(self) -> bool:
        return any(change.changed for change in self.runs)


def review(runs: list[LabelledRun], base: RuleSet, head: RuleSet, root: Path, config: Config, base_name: str,
           head_name: str, say: Callable[[str], None] = lambda message: None) -> Review:
    """Backtest both rule sets on every run in one pass, and judge each run before and after.
    The runs are read with the working tree's catalog and config (`root`, `config`)."""
    before, after = backtest_rule_sets([run.steps_path for run in runs], [base, head], project_catalog(root), config,
                                       Timing(start=START), say, run_timings(runs))
    return Review(base_name, head_name, [RunChange(judged(run, old), judged(run, new))
                                         for run, old, new in zip(runs, before, after)])
