"""What fired on a labelled run, and whether that is right for its verdict.

healthy: clean when no warning or critical fires (info may).
degrading: clean when no critical fires (warnings may).
failure: caught when a warning or critical (a critical, with `critical: true`) starts within its
catch window: from onset_step through latest_step, or without it through the CATCH_WITHIN-th
logged step after the onset. Latency is counted in logged steps from the onset.
"""

from __future__ import annotations

from dataclasses import field

from dashgen.records import record
from dashgen.replay.backtest import RunOutcome
from dashgen.replay.unjudged import UNJUDGED
from dashgen.review.runs import LabelledRun, Verdict, check_steps

SEVERE = ("critical", "warning")
CATCH_WITHIN = 10  # logged steps after the onset, for a failure without latest_step


@record
class Fired:
    """One firing interval of one alert on a run."""
    alertname: str
    severity: str
    start_step: int
    end_step: int | None  # None: still firing at the run's end


@record(frozen=False)
class Judged:
    """What fired on a run, and whether that is right."""
    run: LabelledRun
    logged_steps: list[int]
    fired: list[Fired] = field(default_factory=list)
    unjudged: dict[str, str] = field(default_factory=dict)  # alerts that could not judge the run: why

    @property
    def severe(self) -> list[Fired]:
        return [f for f in self.fired if f.severity in SEVERE]

    @property
    def critical(self) -> list[Fired]:
        return [f for f in self.fired if f.severity == "critical"]

    @property
    def forbidden(self) -> list[Fired]:
        """What may not fire on the run at all: warnings and criticals on a healthy run, criticals on a
        degrading one; nothing on a failure or an unlabelled run."""
        if self.run.verdict is Verdict.HEALTHY:
            return [f for f in self.severe if f.alertname not in self.run.allowed]
        if self.run.verdict is Verdict.DEGRADING:
            return [f for f in self.critical if f.alertname not in self.run.allowed]
        return []

    @property
    def clean(self) -> bool:
        return not self.forbidden

    @property
    def catch_window(self) -> tuple[int, int] | None:
        """The steps a failure must be caught within."""
        onset = self.run.onset_step
        if self.run.verdict is not Verdict.FAILURE or onset is None:
            return None
        if self.run.latest_step is not None:
            return onset, self.run.latest_step
        after = [step for step in self.logged_steps if step >= onset]
        return onset, after[min(CATCH_WITHIN, len(after) - 1)] if after else onset

    def catches(self, fired: Fired) -> bool:
        """Whether this firing catches the failure: severe enough, and starting within the window."""
        window = self.catch_window
        severities = ("critical",) if self.run.needs_critical else SEVERE
        return window is not None and fired.severity in severities and window[0] <= fired.start_step <= window[1]

    @property
    def caught_by(self) -> Fired | None:
        """The first alert that catches the failure."""
        return min((f for f in self.fired if self.catches(f)), key=lambda f: (f.start_step, f.alertname), default=None)

    @property
    def latency_steps(self) -> int | None:
        """Logged steps from the onset to the catch (0: at the onset's own line)."""
        caught = self.caught_by
        if caught is None:
            return None
        return sum(1 for step in self.logged_steps if self.run.onset_step < step <= caught.start_step)

    @property
    def false_pages(self) -> list[Fired]:
        """Alerts that page wrongly: what may not fire at all, and on a failure a warning or critical
        that starts before its onset."""
        if self.run.verdict is Verdict.FAILURE:
            return [f for f in self.severe if f.start_step < self.run.onset_step]
        return self.forbidden

    @property
    def result(self) -> str:
        """The judgement in a few words."""
        verdict = self.run.verdict
        if verdict is None:
            return "unlabelled"
        if verdict is not Verdict.FAILURE:
            return "clean" if self.clean else ("paged" if verdict is Verdict.HEALTHY else "critical page")
        return "missed" if self.caught_by is None else f"caught +{self.latency_steps}"


def judged(run: LabelledRun, outcome: RunOutcome) -> Judged:
    """The run judged on a backtest's outcome; BuildError if its labels name steps its log lacks."""
    # Distinct steps: a resumed run logs its replayed steps again, which are no more steps to catch within.
    steps = sorted(set(outcome.run.steps))
    check_steps(run, steps)
    fired = [Fired(alert.alertname, alert.severity, firing.start_step, firing.end_step)
             for alert in outcome.alerts for firing in alert.firing]
    return Judged(run, steps, sorted(fired, key=lambda f: (f.start_step, f.alertname)),
                  {alert.alertname: alert.note for alert in outcome.alerts if alert.note.startswith(UNJUDGED)})
