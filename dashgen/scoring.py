"""Score a backtest against the ground truth of simulated runs (dashgen/simulate.py).

For every alert: the episodes it must catch and how many it did, how late, how many
separate firings each episode got, which share of a lasting fault it covered, how soon it
resolved after a recovery, and the firings that no episode explains (false firings).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from dashgen.backtest import RunOutcome
from dashgen.simulate import FAULT_ALERTS, TERMINAL, Fault, RunSpec

# A firing that starts this long after an episode ended still belongs to it (windows lag).
SLACK_SECONDS = 1800.0
PAGING = ("critical", "warning")


@dataclass
class AlertScore:
    alertname: str
    severity: str
    episodes: int = 0
    detected: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds from onset to firing
    firings_per_episode: list[int] = field(default_factory=list)
    coverage: list[float] = field(default_factory=list)  # lasting faults: share of the fault spent firing
    resolve_after_recovery: list[float] = field(default_factory=list)  # seconds; recovering faults
    true_firings: int = 0
    false_firings: int = 0


@dataclass
class Score:
    alerts: dict[str, AlertScore]
    healthy_steps: int = 0
    critical_at_normal_end: list[str] = field(default_factory=list)  # "run: alert"

    def paging(self) -> list[AlertScore]:
        return [a for a in self.alerts.values() if a.severity in PAGING]

    @property
    def precision(self) -> float:
        true = sum(a.true_firings for a in self.paging())
        false = sum(a.false_firings for a in self.paging())
        return true / (true + false) if true + false else 1.0

    @property
    def recall(self) -> float:
        episodes = sum(a.episodes for a in self.paging())
        return sum(a.detected for a in self.paging()) / episodes if episodes else 1.0

    @property
    def false_critical_per_1000_healthy_steps(self) -> float:
        false = sum(a.false_firings for a in self.alerts.values() if a.severity == "critical")
        return 1000 * false / self.healthy_steps if self.healthy_steps else 0.0


def _time_of(outcome: RunOutcome, step: int) -> float:
    """When the run logged `step` (the first time, if a restart repeats it)."""
    run = outcome.run
    if step in run.steps:
        return run.times[run.steps.index(step)]
    return run.times[-1] if step > run.steps[-1] else run.times[0]


def _episode_window(outcome: RunOutcome, spec: RunSpec, episode: Fault) -> tuple[float, float, bool]:
    """(onset, end, lasting). A lasting fault runs to the end of what the exporter served; one
    that ends the run (a hang, a crash) to the end of what the backtest evaluated."""
    if episode.kind in TERMINAL:
        return outcome.run.times[-1], outcome.run.end, True
    start = _time_of(outcome, episode.at)
    if episode.until is None or episode.until > spec.last_step:
        return start, outcome.run.served_until, True
    return start, _time_of(outcome, episode.until), False


def score(outcomes: list[RunOutcome], specs: list[RunSpec]) -> Score:
    result = Score({})
    for outcome, spec in zip(outcomes, specs):
        episodes = [(episode, *_episode_window(outcome, spec, episode)) for episode in spec.episodes()]
        faulty = [(start, end) for episode, start, end, _ in episodes if episode.kind not in ("plateau", "nan_skip")]
        result.healthy_steps += sum(1 for step, when in zip(outcome.run.steps, outcome.run.times)
                                    if not any(start <= when <= end for start, end in faulty))
        for alert in outcome.alerts:
            entry = result.alerts.setdefault(alert.alertname, AlertScore(alert.alertname, alert.severity))
            spans = [(f.start, f.end if f.end is not None else outcome.run.end) for f in alert.firing]
            explained = [False] * len(spans)
            for episode, start, end, lasting in episodes:
                must, may = FAULT_ALERTS[episode.kind]
                if alert.alertname not in must | may:
                    continue
                hits = [i for i, (s, e) in enumerate(spans) if s <= end + SLACK_SECONDS and e >= start]
                for i in hits:
                    explained[i] = True
                if alert.alertname not in must:
                    continue
                entry.episodes += 1
                # A firing that began well before the episode belongs to an earlier one (e.g. a
                # reward fault that recovers before the run converges): it detects this episode
                # but is not one of its firings. Re-firing within the episode still counts.
                entry.firings_per_episode.append(sum(1 for i in hits if spans[i][0] >= start - SLACK_SECONDS))
                if not hits:
                    continue
                entry.detected += 1
                entry.latencies.append(spans[hits[0]][0] - start)
                if lasting:
                    covered = sum(max(0.0, min(e, end) - max(s, start)) for s, e in (spans[i] for i in hits))
                    entry.coverage.append(covered / (end - start) if end > start else 1.0)
                else:
                    entry.resolve_after_recovery.append(max(0.0, spans[hits[-1]][1] - end))
            entry.true_firings += sum(explained)
            entry.false_firings += len(spans) - sum(explained)
            if spec.end == "finished" and alert.severity == "critical":
                last_step = outcome.run.times[-1]
                for (s, _), ok in zip(spans, explained):
                    if s >= last_step and not ok:
                        result.critical_at_normal_end.append(f"{spec.name}: {alert.alertname}")
    return result


def _minutes(values: list[float], how) -> str:
    return f"{how(values) / 60:.0f}" if values else "-"


def format_score(result: Score) -> str:
    header = ("ALERT", "SEVERITY", "EPISODES", "DETECTED", "LATENCY MIN (MED/MAX)", "FALSE", "MAX FIRINGS/EP",
              "COVERAGE (MIN)", "RESOLVED AFTER RECOVERY MIN (MAX)")
    rows = [header]
    order = {"critical": 0, "warning": 1, "info": 2}
    for entry in sorted(result.alerts.values(), key=lambda a: (order.get(a.severity, 9), a.alertname)):
        rows.append((entry.alertname, entry.severity, str(entry.episodes), str(entry.detected),
                     f"{_minutes(entry.latencies, statistics.median)}/{_minutes(entry.latencies, max)}",
                     str(entry.false_firings),
                     str(max(entry.firings_per_episode)) if entry.firings_per_episode else "-",
                     f"{min(entry.coverage):.2f}" if entry.coverage else "-",
                     _minutes(entry.resolve_after_recovery, max)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines += [
        f"critical+warning precision {result.precision:.3f}, recall {result.recall:.3f}",
        f"false critical pages per 1,000 healthy steps: {result.false_critical_per_1000_healthy_steps:.3f} "
        f"({result.healthy_steps} healthy steps)",
        f"critical alerts at the normal end of a run: {len(result.critical_at_normal_end)}"
        + (f" ({', '.join(result.critical_at_normal_end)})" if result.critical_at_normal_end else ""),
    ]
    return "\n".join(lines) + "\n"
