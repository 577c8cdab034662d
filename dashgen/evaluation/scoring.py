"""Score a backtest against the ground truth of simulated runs (dashgen/evaluation/simulate.py).

For every alert: the episodes it must catch and how many it did, how late, how many
separate firings each episode got, which share of a lasting fault it covered, how soon it
resolved after a recovery, and the firings that no episode explains (false firings).
Latency is measured from the onset and from the step the fault becomes measurable, in
seconds and in steps. An alert a fault expects that the rules do not define (yet) counts
its episodes as missed, at the severity `PLANNED_ALERTS` gives it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import field

from dashgen.records import record
from dashgen.replay.backtest import RunOutcome
from dashgen.evaluation.fault_alerts import FAULT_ALERTS, PLANNED_ALERTS
from dashgen.evaluation.simulate import TERMINAL, Fault, RunSpec, noise_free_entropy

# A firing that starts this long after an episode ended still belongs to it (windows lag).
SLACK_SECONDS = 1800.0
PAGING = ("critical", "warning")


@record(frozen=False)
class AlertScore:
    alertname: str
    severity: str
    episodes: int = 0
    detected: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds from onset to firing
    latency_steps: list[int] = field(default_factory=list)  # steps from onset to the step shown when it fired
    measurable_latencies: list[float] = field(default_factory=list)  # seconds from measurable to firing
    measurable_latency_steps: list[int] = field(default_factory=list)
    firings_per_episode: list[int] = field(default_factory=list)
    coverage: list[float] = field(default_factory=list)  # lasting faults: share of the fault spent firing
    resolve_after_recovery: list[float] = field(default_factory=list)  # seconds; recovering faults
    true_firings: int = 0
    false_firings: int = 0


@record
class FirstFiring:
    """An alert's first firing on an episode: when, and which step the run was showing."""
    at: float
    step: int
    severity: str


@record
class ScoredEpisode:
    """One episode of a run with what fired on it: each alert it must or may raise, by name."""
    run: RunSpec
    episode: Fault
    onset: float  # Unix time the onset step was logged (interpolated on a log of every Nth step)
    measurable: float
    run_start: float
    firings: dict[str, FirstFiring]
    entropy_fifth: float | None = None  # entropy faults: when entropy reached a fifth of its held level


@record(frozen=False)
class Score:
    alerts: dict[str, AlertScore]
    healthy_steps: int = 0
    critical_at_normal_end: list[str] = field(default_factory=list)  # "run: alert"
    episodes: list[ScoredEpisode] = field(default_factory=list)
    false_firings: list[tuple[str, str]] = field(default_factory=list)  # (run, alert)
    runs: list[RunSpec] = field(default_factory=list)

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
    """When the run logged `step` (the first time, if a restart repeats it); a step the log
    leaves out (a log of every Nth step) is placed between the lines around it."""
    run = outcome.run
    if step in run.steps:
        return run.times[run.steps.index(step)]
    later = next((i for i, logged in enumerate(run.steps) if logged > step), None)
    if later is None:
        return run.times[-1]
    if later == 0:
        return run.times[0]
    before = later - 1  # every line before `later` logged a step below `step`
    share = (step - run.steps[before]) / (run.steps[later] - run.steps[before])
    return run.times[before] + share * (run.times[later] - run.times[before])


# Entropy's held level: its highest of the day before a fault (the level a 24 h hold keeps).
ENTROPY_HELD_LOOKBACK_SECONDS = 86400.0
ENTROPY_FAULTS = ("entropy_collapse",)


def entropy_fifth_step(spec: RunSpec, episode: Fault) -> int | None:
    """The first step at which the fault's noise-free entropy is a fifth of its held level."""
    lookback = round(ENTROPY_HELD_LOOKBACK_SECONDS / spec.step_seconds)
    held = max(noise_free_entropy(spec, episode, step) for step in range(max(1, episode.at - lookback), episode.at))
    return next((step for step in range(episode.at, spec.last_step + 1)
                 if noise_free_entropy(spec, episode, step) <= held / 5), None)


def _episode_window(outcome: RunOutcome, spec: RunSpec, episode: Fault) -> tuple[float, float, bool]:
    """(onset, end, lasting). A lasting fault runs to the end of what the exporter served; one
    that ends the run (a hang, a crash) to the end of what the backtest evaluated."""
    if episode.kind in TERMINAL:
        return outcome.run.times[-1], outcome.run.end, True
    start = _time_of(outcome, episode.at)
    if episode.until is None or episode.until > spec.last_step:
        return start, outcome.run.served_until, True
    return start, _time_of(outcome, episode.until), False


def alert_severities(outcomes: list[RunOutcome]) -> dict[str, str]:
    """Severity of every alert the rules define, and of those PLANNED_ALERTS plans."""
    return {**PLANNED_ALERTS, **{alert.alertname: alert.severity for outcome in outcomes for alert in outcome.alerts}}


def unknown_expected_alerts(outcomes: list[RunOutcome]) -> list[str]:
    """Alerts FAULT_ALERTS expects that no rule defines and PLANNED_ALERTS does not plan: typos."""
    expected = {name for must, may in FAULT_ALERTS.values() for name in must | may}
    return sorted(expected - set(alert_severities(outcomes)))


def score(outcomes: list[RunOutcome], specs: list[RunSpec]) -> Score:
    result = Score({})
    severities = alert_severities(outcomes)
    for outcome, spec in zip(outcomes, specs):
        result.runs.append(spec)
        episodes = [(episode, *_episode_window(outcome, spec, episode)) for episode in spec.episodes()]
        faulty = [(start, end) for episode, start, end, _ in episodes if episode.kind not in ("plateau", "nan_skip")]
        result.healthy_steps += sum(1 for step, when in zip(outcome.run.steps, outcome.run.times)
                                    if not any(start <= when <= end for start, end in faulty))
        first_firings: list[dict[str, FirstFiring]] = [{} for _ in episodes]
        for alert in outcome.alerts:
            entry = result.alerts.setdefault(alert.alertname, AlertScore(alert.alertname, alert.severity))
            spans = [(f.start, f.end if f.end is not None else outcome.run.end) for f in alert.firing]
            explained = [False] * len(spans)
            for (episode, start, end, lasting), firings in zip(episodes, first_firings):
                must, may = FAULT_ALERTS[episode.kind]
                if alert.alertname not in must | may:
                    continue
                hits = [i for i, (s, e) in enumerate(spans) if s <= end + SLACK_SECONDS and e >= start]
                for i in hits:
                    explained[i] = True
                if hits:
                    first = alert.firing[hits[0]]
                    firings[alert.alertname] = FirstFiring(first.start, first.start_step, alert.severity)
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
                entry.latency_steps.append(alert.firing[hits[0]].start_step - episode.at)
                entry.measurable_latencies.append(spans[hits[0]][0] - _measurable_time(outcome, episode, start))
                entry.measurable_latency_steps.append(alert.firing[hits[0]].start_step - episode.measurable_from)
                if lasting:
                    covered = sum(max(0.0, min(e, end) - max(s, start)) for s, e in (spans[i] for i in hits))
                    entry.coverage.append(covered / (end - start) if end > start else 1.0)
                else:
                    entry.resolve_after_recovery.append(max(0.0, spans[hits[-1]][1] - end))
            entry.true_firings += sum(explained)
            entry.false_firings += len(spans) - sum(explained)
            result.false_firings += [(spec.name, alert.alertname)] * (len(spans) - sum(explained))
            if spec.end == "finished" and alert.severity == "critical":
                last_step = outcome.run.times[-1]
                for (s, _), ok in zip(spans, explained):
                    if s >= last_step and not ok:
                        result.critical_at_normal_end.append(f"{spec.name}: {alert.alertname}")
        defined = {alert.alertname for alert in outcome.alerts}
        for episode, start, _, _ in episodes:
            # Expected of an alert that is not (yet) a rule: missed.
            for name in sorted((FAULT_ALERTS[episode.kind][0] - defined) & set(severities)):
                entry = result.alerts.setdefault(name, AlertScore(name, severities[name]))
                entry.episodes += 1
                entry.firings_per_episode.append(0)
        for (episode, start, _, _), firings in zip(episodes, first_firings):
            fifth = entropy_fifth_step(spec, episode) if episode.kind in ENTROPY_FAULTS else None
            result.episodes.append(ScoredEpisode(
                spec, episode, start, _measurable_time(outcome, episode, start), outcome.run.times[0], firings,
                None if fifth is None else _time_of(outcome, fifth)))
    return result


def _measurable_time(outcome: RunOutcome, episode: Fault, onset: float) -> float:
    """When the episode can be told from noise: its `measurable` step; a hang once the silence
    is longer than any step the run took (validations and checkpoints included); else the onset."""
    if episode.measurable is not None:
        return _time_of(outcome, episode.measurable)
    times = outcome.run.times
    if episode.kind == "stall" and len(times) > 1:
        return onset + max(later - earlier for earlier, later in zip(times, times[1:]))
    return onset


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


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _spread(values: list[float], unit: float = 1.0) -> str:
    """Median/max of values in `unit`s, one decimal."""
    return f"{statistics.median(values) / unit:.1f}/{max(values) / unit:.1f}" if values else "-"


def format_latency(result: Score) -> str:
    """Per alert: latency from the onset and from the point the fault is measurable, in steps and minutes."""
    rows = [("ALERT", "SEVERITY", "EPISODES", "DETECTED", "FROM ONSET STEPS (MED/MAX)", "MIN (MED/MAX)",
             "FROM MEASURABLE STEPS (MED/MAX)", "MIN (MED/MAX)", "FALSE")]
    order = {"critical": 0, "warning": 1, "info": 2}
    for entry in sorted(result.alerts.values(), key=lambda a: (order.get(a.severity, 9), a.alertname)):
        rows.append((entry.alertname, entry.severity, str(entry.episodes), str(entry.detected),
                     _spread(entry.latency_steps), _spread(entry.latencies, 60),
                     _spread(entry.measurable_latency_steps), _spread(entry.measurable_latencies, 60),
                     str(entry.false_firings)))
    return "\n".join(_table(rows)) + "\n"


def format_episodes(result: Score, kinds_left_out: tuple[str, ...] = ("plateau",)) -> str:
    """Each episode and what its expected alerts did: first firing after onset and measurability."""
    rows = [("RUN", "FAULT", "ONSET", "MEASURABLE", "EXPECTED ALERT", "FIRED (STEPS/MIN FROM ONSET; FROM MEASURABLE)")]
    for scored in result.episodes:
        episode = scored.episode
        if episode.kind in kinds_left_out:
            continue
        must, may = FAULT_ALERTS[episode.kind]
        for name in sorted(must) or sorted(may):
            first = scored.firings.get(name)
            fired = ("missed" if first is None else
                     f"{first.step - episode.at:+d} / {(first.at - scored.onset) / 60:+.1f}; "
                     f"{first.step - episode.measurable_from:+d} / {(first.at - scored.measurable) / 60:+.1f}")
            if not must:
                fired = "quiet" if first is None else f"fired ({first.severity}) at step {first.step}"
            rows.append((scored.run.name, episode.kind, str(episode.at), str(episode.measurable_from), name, fired))
    return "\n".join(_table(rows)) + "\n"


# --- The targets of issue 20: alerts from the first step and for every model ------------------

FIRST_HOUR_SECONDS = 3600.0
FIRST_HOUR_PAGE_STEPS = 6
COLLAPSE_FLAGGED_SECONDS = 1800.0  # length collapse, vanished learning signal: from measurable
CRITICAL_MEDIAN_LATENCY_SECONDS = 300.0  # from measurable
LOW_ENTROPY_LEVEL = 0.1  # a healthy run whose entropy starts below this has a low level
PLATEAU_MEASURABLE_SECONDS = 1800.0  # a plateau shows once its gain is measured over this window
PLATEAU_FOUND_SECONDS = 3600.0


@record
class Check:
    target: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.target}: {self.detail}"


def _counted(items: list[str]) -> str:
    """" (a x2, b)": each distinct item once, with how often it occurs; "" for none."""
    counts = {item: items.count(item) for item in items}
    return f" ({', '.join(item + (f' x{n}' if n > 1 else '') for item, n in counts.items())})" if items else ""


def _episodes_of(result: Score, *kinds: str) -> list[ScoredEpisode]:
    return [scored for scored in result.episodes if scored.episode.kind in kinds]


def _first_expected(scored: ScoredEpisode) -> FirstFiring | None:
    """The earliest firing of an alert the episode must raise."""
    fired = [scored.firings[name] for name in FAULT_ALERTS[scored.episode.kind][0] if name in scored.firings]
    return min(fired, key=lambda first: first.at, default=None)


def _missed(result: Score) -> list[str]:
    return [f"{scored.run.name}: {name}" for scored in result.episodes
            for name in sorted(FAULT_ALERTS[scored.episode.kind][0])
            if name in result.alerts and result.alerts[name].severity in PAGING and name not in scored.firings]


def done_when_checks(result: Score) -> list[Check]:
    """The benchmark's "Done when" of issues 20 and 35: precision, recall, no false critical page,
    a divergence in the first hour paged within FIRST_HOUR_PAGE_STEPS steps."""
    checks = [
        Check("critical+warning precision >= 0.95", result.precision >= 0.95, f"{result.precision:.3f}"),
        Check("critical+warning recall 1.0", result.recall == 1.0,
              f"{result.recall:.3f}" + (f"; missed {', '.join(_missed(result))}" if _missed(result) else "")),
    ]
    false_pages = [f"{run}: {name}" for run, name in result.false_firings
                   if result.alerts[name].severity == "critical"]
    checks.append(Check("0 false critical pages per 1,000 healthy steps", not false_pages,
                        f"{result.false_critical_per_1000_healthy_steps:.3f}{_counted(false_pages)}"))
    first_hour = [scored for scored in _episodes_of(result, "divergence")
                  if scored.onset - scored.run_start < FIRST_HOUR_SECONDS]
    checks.append(_latency_check(f"first-hour divergence paged within {FIRST_HOUR_PAGE_STEPS} steps of onset",
                                 first_hour, lambda scored, first: first.step - scored.episode.at
                                 <= FIRST_HOUR_PAGE_STEPS and first.severity == "critical"))
    return checks


def issue_20_checks(result: Score) -> list[Check]:
    """The "Done when" targets of issue 20, then its plateau target (item 6), each PASS or FAIL."""
    checks = done_when_checks(result)
    warm_ups = {spec.name for spec in result.runs if not spec.faults and (
        spec.warmup_kl or spec.noisy_first_steps or spec.restart_at is not None)}
    warm_up_pages = [f"{run}: {name}" for run, name in result.false_firings
                     if run in warm_ups and result.alerts[name].severity in PAGING]
    checks.append(Check("no critical or warning on a healthy warm-up (high initial KL, noisy first steps, restart)",
                        bool(warm_ups) and not warm_up_pages,
                        f"{len(warm_up_pages)} firing(s) on {len(warm_ups)} run(s){_counted(warm_up_pages)}"))
    checks.append(_latency_check("entropy collapse flagged before entropy reaches a fifth of its held baseline",
                                 _episodes_of(result, *ENTROPY_FAULTS),
                                 lambda scored, first: scored.entropy_fifth is not None
                                 and first.at < scored.entropy_fifth,
                                 lambda scored: "" if scored.entropy_fifth is None else
                                 f", a fifth at +{(scored.entropy_fifth - scored.onset) / 60:.0f} min"))
    entropy_alerts = {name for kind in ENTROPY_FAULTS for name in FAULT_ALERTS[kind][0]}
    low_runs = {spec.name for spec in result.runs if not spec.faults and spec.entropy_level < LOW_ENTROPY_LEVEL}
    low_warnings = [f"{run}: {name}" for run, name in result.false_firings if run in low_runs and name in entropy_alerts]
    checks.append(Check("no entropy warning on a healthy run whose entropy is low and flat",
                        bool(low_runs) and not low_warnings,
                        f"{len(low_warnings)} firing(s) on {len(low_runs)} run(s){_counted(low_warnings)}"))
    checks.append(_latency_check(
        f"length collapse and a vanished learning signal flagged within {COLLAPSE_FLAGGED_SECONDS / 60:.0f} min "
        f"of measurable", _episodes_of(result, "length_collapse", "no_learning_signal"),
        lambda scored, first: first.at - scored.measurable <= COLLAPSE_FLAGGED_SECONDS))
    skips = _episodes_of(result, "nan_skip")
    warned = [f"{scored.run.name} step {scored.episode.at}: {name}" for scored in skips
              for name, first in sorted(scored.firings.items()) if first.severity in PAGING]
    checks.append(Check("no warning for isolated skipped steps", bool(skips) and not warned,
                        f"{len(warned)} of {len(skips)} skipped step(s) warned" + (f" ({'; '.join(warned)})"
                                                                                    if warned else "")))
    critical = [entry for entry in result.alerts.values() if entry.severity == "critical" and entry.episodes]
    slow = [entry for entry in critical if entry.detected < entry.episodes
            or statistics.median(entry.measurable_latencies) > CRITICAL_MEDIAN_LATENCY_SECONDS]
    checks.append(Check(f"every critical alert's median latency <= {CRITICAL_MEDIAN_LATENCY_SECONDS / 60:.0f} min "
                        f"from measurable", not slow,
                        ", ".join(f"{entry.alertname} {_median_minutes(entry.measurable_latencies)}"
                                  + ("" if entry.detected == entry.episodes else
                                     f" ({entry.episodes - entry.detected} missed)")
                                  for entry in sorted(critical, key=lambda a: a.alertname))))
    plateaus = _episodes_of(result, "plateau")
    checks.append(_latency_check(
        f"(item 6) plateaus found within {PLATEAU_FOUND_SECONDS / 60:.0f} min of measurable "
        f"(onset + {PLATEAU_MEASURABLE_SECONDS / 60:.0f} min)", plateaus,
        lambda scored, first: first.at - scored.onset - PLATEAU_MEASURABLE_SECONDS <= PLATEAU_FOUND_SECONDS,
        verbose=False))
    signed = {spec.name for spec in result.runs if spec.signed_reward}
    plateau_alerts = FAULT_ALERTS["plateau"][0]
    noise = [f"{run}: {name}" for run, name in result.false_firings if run in signed and name in plateau_alerts]
    checks.append(Check("(item 6) no plateau alert on signed-reward noise", not noise,
                        f"{len(noise)} false firing(s) on {len(signed)} signed-reward run(s){_counted(noise)}"))
    return checks


def _median_minutes(values: list[float]) -> str:
    return f"{statistics.median(values) / 60:.1f} min" if values else "-"


def _latency_check(target: str, episodes: list[ScoredEpisode], in_time: Callable[[ScoredEpisode, FirstFiring], bool],
                   note: Callable[[ScoredEpisode], str] = lambda scored: "", verbose: bool = True) -> Check:
    """PASS if every episode's expected alert fired and `in_time(episode, first firing)` holds."""
    late = [scored for scored in episodes
            if (first := _first_expected(scored)) is None or not in_time(scored, first)]
    details = []
    for scored in episodes if verbose else late:
        first = _first_expected(scored)
        fired = ("missed" if first is None else
                 f"{first.step - scored.episode.at:+d} steps / {(first.at - scored.onset) / 60:+.0f} min from onset")
        details.append(f"{scored.run.name}@{scored.episode.at} {fired}{note(scored)}")
    summary = f"{len(episodes) - len(late)} of {len(episodes)} in time"
    return Check(target, bool(episodes) and not late, summary + (f" ({'; '.join(details)})" if details else ""))


# --- Issues 35 and 40: scenarios from runs nobody tuned the alerts on --------------------------

def healthy(spec: RunSpec) -> bool:
    """A run none of whose events any alert must catch (plateaus, skipped steps, a convergence)."""
    return not any(FAULT_ALERTS[fault.kind][0] for fault in spec.faults)


def scenario_checks(result: Score, scenarios: tuple[tuple[str, tuple[RunSpec, ...]], ...]) -> list[Check]:
    """Per scenario: its healthy runs raise no critical or warning, and its faults' expected alerts
    fire (steps from onset in the detail); each PASS or FAIL."""
    checks = []
    for label, specs in scenarios:
        names = {spec.name for spec in specs}
        quiet = {spec.name for spec in specs if healthy(spec)}
        if quiet:
            pages = [f"{run}: {name}" for run, name in result.false_firings
                     if run in quiet and result.alerts[name].severity in PAGING]
            checks.append(Check(f"{label}: no critical or warning on {len(quiet)} healthy run(s)", not pages,
                                f"{len(pages)} firing(s){_counted(pages)}"))
        faults = [scored for scored in result.episodes if scored.run.name in names
                  and scored.episode in scored.run.faults and FAULT_ALERTS[scored.episode.kind][0]]
        if faults:
            checks.append(_caught_check(f"{label}: caught", faults))
    return checks


def _caught_check(target: str, episodes: list[ScoredEpisode]) -> Check:
    """PASS if every expected alert of every episode fired; the detail names what fired (steps from
    onset) and what did not, then the alerts it may also raise that fired."""
    details, missed = [], 0
    for scored in episodes:
        must = FAULT_ALERTS[scored.episode.kind][0]
        missed += len(must - set(scored.firings))
        fired = [f"{name} " + (f"{scored.firings[name].step - scored.episode.at:+d} steps" if name in scored.firings
                               else "missed") for name in sorted(must)]
        also = [f"{name} {first.step - scored.episode.at:+d}" for name, first in sorted(scored.firings.items())
                if name not in must]
        details.append(f"{scored.run.name}@{scored.episode.at} {', '.join(fired)}"
                       + (f" (also {', '.join(also)})" if also else ""))
    return Check(target, not missed, f"{len(episodes)} episode(s), {missed} missed ({'; '.join(details)})")
