"""Backtest the alerts on recorded runs with Prometheus' own query engine.

1. The runs are backfilled (only the series the rules select) into a temporary TSDB with
   promtool, as `dashgen backfill` does.
2. A real `prometheus` is started on loopback over it.
3. Recording rules are filled by evaluating each one with `query_range` at its group's
   interval, on the same timestamps the group's alerts are evaluated at, and writing the
   result back as blocks with promtool; then Prometheus is restarted to load them.
   `promtool tsdb create-blocks-from rules` does the same queries, but picks its own
   timestamps (newer versions shift them by the group's hash offset), so an alert at t could
   read the recording of the evaluation before t, one interval late, whereas Prometheus
   evaluates a group's recordings and alerts at one timestamp. It also cannot fill a
   recording that reads another; here such recordings are filled level by level.
4. Each alert's expression is evaluated with `query_range` at its group's interval over the
   run; the condition holds at t when the result has a sample at t. `for:` is applied like
   Prometheus' rule manager does: pending from the first evaluation that holds, firing from
   the first evaluation at least `for` later while it still holds, inactive (resolved) at
   the first evaluation that does not, or, with `keep_firing_for`, at the first evaluation
   that long after the condition last held.

Templated alert labels are not applied (no rule here uses them).
"""

from __future__ import annotations

import json
import math
import tempfile
import urllib.error
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

import yaml

from dashgen.backfill import (RecordedRun, Timing, check_unique_runs, create_blocks, label_text, read_run,
                              run_labels, series_names, write_openmetrics)
from dashgen.config import Config, duration_seconds
from dashgen.errors import BuildError
from dashgen.prometheus_server import PrometheusServer
from dashgen.promql import metrics_in
from dashgen.promtool import find_binary, run_promtool
from dashgen.rules import RULES_DIR, AlertRule, RecordingRule

# Prometheus refuses range queries of more than 11,000 points.
MAX_POINTS_PER_QUERY = 10_000
# Backfilled runs may be years old; the default 15 d retention would delete them at start-up.
SERVER_ARGS = ("--storage.tsdb.retention.time=100y", "--log.level=warn")
SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}


@dataclass(frozen=True)
class Firing:
    start_step: int
    end_step: int | None  # None: still firing at the run's end
    start: float
    end: float | None


@dataclass
class AlertOutcome:
    alertname: str
    severity: str
    labels: dict[str, str]
    firing: list[Firing] = field(default_factory=list)
    note: str = ""  # why the alert cannot fire in a backtest, if it cannot


@dataclass
class RunOutcome:
    run: RecordedRun
    alerts: list[AlertOutcome]


def load_rules(files: dict[str, str]) -> tuple[list[RecordingRule], list[AlertRule]]:
    """The recording and alerting rules of Prometheus rule files (path under rendered/ -> text).

    For rule files that dashgen did not compile; an alert that reads ALERTS for hysteresis is
    evaluated without it here (dashgen's own rules carry their condition and sustain apart)."""
    recordings, alerts = [], []
    for path, text in sorted(files.items()):
        if not (path.startswith(f"{RULES_DIR}/") and path.endswith(".yaml")):
            continue
        for group in (yaml.safe_load(text) or {}).get("groups", []):
            interval_ms = round(duration_seconds(group.get("interval", "1m")) * 1000)
            for rule in group["rules"]:
                labels = tuple(sorted((rule.get("labels") or {}).items()))
                if "record" in rule:
                    recordings.append(RecordingRule(rule["record"], rule["expr"], interval_ms, labels))
                else:
                    for_ms = round(duration_seconds(rule.get("for", "0s")) * 1000)
                    keep_ms = round(duration_seconds(rule.get("keep_firing_for", "0s")) * 1000)
                    alerts.append(AlertRule(rule["alert"], rule["expr"], interval_ms, for_ms, labels, keep_ms))
    return recordings, alerts


def read_rule_files(paths: list[Path]) -> tuple[list[RecordingRule], list[AlertRule]]:
    """Any Prometheus rule files (a team's own, another project's), checked by promtool first."""
    for path in paths:
        if not path.is_file():
            raise BuildError(f"--rules {path}: no such file")
    result = run_promtool(["check", "rules", *map(str, paths)])
    if result.returncode != 0:
        raise BuildError("--rules: promtool check rules refused them:\n" + (result.stdout + result.stderr).strip())
    recordings, alerts = load_rules({f"{RULES_DIR}/{index}.yaml": path.read_text()
                                     for index, path in enumerate(paths)})
    if not alerts:
        raise BuildError(f"--rules {' '.join(map(str, paths))}: no alerting rules to backtest")
    return recordings, alerts


def recording_levels(recordings: list[RecordingRule]) -> list[list[RecordingRule]]:
    """Recordings in fill order: each level reads only raw series and earlier levels."""
    recorded = {rule.record for rule in recordings}
    done: set[str] = set()
    remaining, levels = list(recordings), []
    while remaining:
        level = [rule for rule in remaining if (metrics_in(rule.expr) & recorded) <= done]
        if not level:
            raise BuildError("recording rules read each other in a cycle: "
                             + ", ".join(rule.record for rule in remaining))
        levels.append(level)
        done |= {rule.record for rule in level}
        remaining = [rule for rule in remaining if rule not in level]
    return levels


# --- Evaluation timestamps -----------------------------------------------------------------

def evaluation_times(run: RecordedRun, interval_ms: int) -> list[int]:
    """Evaluation times (ms) of a group over the run, on multiples of its interval."""
    first = math.ceil(run.times[0] * 1000 / interval_ms) * interval_ms
    return list(range(first, math.floor(run.end * 1000) + 1, interval_ms))


def query_spans(times: list[int], interval_ms: int) -> list[tuple[int, int]]:
    """(start, end) of range queries covering sorted evaluation times, each contiguous and small enough."""
    spans: list[tuple[int, int]] = []
    start = previous = None
    for at in times:
        if start is None or at - previous != interval_ms or (at - start) // interval_ms >= MAX_POINTS_PER_QUERY:
            if start is not None:
                spans.append((start, previous))
            start = at
        previous = at
    if start is not None:
        spans.append((start, previous))
    return spans


def query_range(server: PrometheusServer, expr: str, span: tuple[int, int], interval_ms: int,
                where: str) -> list[dict]:
    try:
        data = server.api("query_range", query=expr, start=f"{span[0] / 1000:.3f}", end=f"{span[1] / 1000:.3f}",
                          step=f"{interval_ms / 1000:.3f}")
    except urllib.error.HTTPError as exc:
        try:
            message = json.load(exc).get("error", exc.reason)
        except ValueError:
            message = exc.reason
        raise BuildError(f"{where}: prometheus refused the expression: {message}") from None
    return data["result"]


def _series_key(metric: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, value) for name, value in metric.items() if name != "__name__"))


# --- Recording rules -------------------------------------------------------------------------

def recorded_openmetrics(server: PrometheusServer, rules: list[RecordingRule], runs: list[RecordedRun]) -> str:
    """The rules' results over every run, as OpenMetrics text ('' if they produced nothing)."""
    out: list[str] = []
    for rule in rules:
        times = sorted({at for run in runs for at in evaluation_times(run, rule.interval_ms)})
        samples: dict[tuple, list[str]] = {}
        for span in query_spans(times, rule.interval_ms):
            for series in query_range(server, rule.expr, span, rule.interval_ms, f"recording rule {rule.record}"):
                key = tuple(sorted({**dict(_series_key(series["metric"])), **dict(rule.labels)}.items()))
                samples.setdefault(key, []).extend(f" {value} {at}\n" for at, value in series["values"])
        if samples:
            out.append(f"# TYPE {rule.record} gauge\n")
            for key, lines in samples.items():
                prefix = rule.record + label_text(dict(key))
                out.extend(prefix + line for line in lines)
    return "".join(out) + "# EOF\n" if out else ""


# --- Alerts ----------------------------------------------------------------------------------

def firing_intervals(times: list[int], held: set[int], for_ms: int, keep_firing_ms: int = 0,
                     sustained: set[int] = frozenset()) -> list[tuple[int, int | None]]:
    """(firing from, resolved at or None) of one alert series, by Prometheus' pending/firing rule.

    `sustained`: times at which the alert's sustain condition holds; it counts as held while
    the alert was firing at the previous evaluation (what its ALERTS series tells Prometheus).
    """
    intervals: list[tuple[int, int | None]] = []
    active_at = firing_since = keep_since = None
    for at in times:
        if at in held or (firing_since is not None and at in sustained):
            keep_since = None
            if active_at is None:
                active_at = at
            if firing_since is None and at - active_at >= for_ms:
                firing_since = at
        elif firing_since is not None and keep_firing_ms > 0 and (keep_since is None
                                                                  or at - keep_since < keep_firing_ms):
            if keep_since is None:
                keep_since = at
        else:
            if firing_since is not None:
                intervals.append((firing_since, at))
            active_at = firing_since = keep_since = None
    if firing_since is not None:
        intervals.append((firing_since, None))
    return intervals


def _belongs_to(labels: dict[str, str], run: RecordedRun) -> bool:
    """A series is the run's if it carries its instance or its project and experiment, or no run label."""
    if "instance" in labels:
        return labels["instance"] == run.labels["instance"]
    if "project" in labels or "experiment" in labels:
        return (labels.get("project"), labels.get("experiment")) == (run.labels["project"],
                                                                    run.labels["experiment"])
    return True


def _held_times(server: PrometheusServer, expr: str, times: list[int], interval_ms: int, run: RecordedRun,
                where: str) -> dict[tuple, set[int]]:
    """For each of the run's result series: the evaluation times (ms) at which `expr` returned it."""
    held: dict[tuple, set[int]] = {}
    for span in query_spans(times, interval_ms):
        for series in query_range(server, expr, span, interval_ms, where):
            key = _series_key(series["metric"])
            if _belongs_to(dict(key), run):
                held.setdefault(key, set()).update(round(at * 1000) for at, _ in series["values"])
    return held


def evaluate_alert(server: PrometheusServer, alert: AlertRule, run: RecordedRun) -> list[AlertOutcome]:
    times = evaluation_times(run, alert.interval_ms)
    held = _held_times(server, alert.condition or alert.expr, times, alert.interval_ms, run, f"alert {alert.name}")
    sustained = {} if alert.sustain is None else _held_times(server, alert.sustain, times, alert.interval_ms, run,
                                                             f"alert {alert.name} (sustain)")
    outcomes = []
    extra_labels = {name: value for name, value in alert.labels if name != "severity"}
    for key, held_times in sorted(held.items()):
        intervals = firing_intervals(times, held_times, alert.for_ms, alert.keep_firing_ms,
                                     sustained.get(key, frozenset()))
        if intervals:
            firing = [Firing(run.step_at(start / 1000), None if end is None else run.step_at(end / 1000),
                             start / 1000, None if end is None else end / 1000) for start, end in intervals]
            outcomes.append(AlertOutcome(alert.name, alert.severity, {**dict(key), **extra_labels}, firing))
    return outcomes or [AlertOutcome(alert.name, alert.severity, dict(run.labels))]


# --- The whole backtest ----------------------------------------------------------------------

@contextmanager
def serve_tsdb(workdir: Path) -> Iterator[PrometheusServer]:
    """A Prometheus over workdir/tsdb that scrapes nothing and evaluates no rule: queries only."""
    config_file = workdir / "prometheus.yml"
    if not config_file.exists():
        config_file.write_text("# dashgen backtest: no scrapes, no rules; queries only.\nglobal: {}\n")
    with PrometheusServer(config_file, workdir / "tsdb", SERVER_ARGS) as server:
        yield server


def backtest(paths: list[Path], root: Path, config: Config, timing: Timing,
             say: Callable[[str], None] = lambda message: None,
             timings: dict[Path, Timing] | None = None, rule_files: list[Path] | None = None) -> list[RunOutcome]:
    """Backtest every alert of the project at `root` on the runs; cleans up after itself.

    `timings` gives some runs their own timing (e.g. how each ended) instead of `timing`.
    `rule_files`: backtest these Prometheus rule files instead of the project's alerts."""
    from dashgen.project_metrics import project_catalog
    from dashgen.rules import render_rules

    find_binary("promtool")
    find_binary("prometheus")
    catalog = project_catalog(root)
    if rule_files:
        recordings, alerts = read_rule_files(rule_files)
    else:
        compiled = render_rules(root, config, catalog)
        recordings, alerts = compiled.recording_rules, compiled.alert_rules
    selected = set().union(*(metrics_in(rule.expr) for rule in [*recordings, *alerts]))
    runs = [read_run(path, run_labels(path, config.verl_job), (timings or {}).get(path, timing), keep=selected,
                     catalog=catalog)
            for path in paths]
    check_unique_runs(runs)
    for run in runs:
        for note in run.notes:
            say(f"{run.path}: {note}")
    span = max(run.end for run in runs) - min(run.times[0] for run in runs)
    with tempfile.TemporaryDirectory(prefix="dashgen-backtest-") as tmp:
        workdir = Path(tmp)
        scraped = workdir / "runs.om"
        with open(scraped, "w") as handle:
            write_openmetrics(runs, handle, timing.scrape_interval, only=selected)
        create_blocks(scraped, workdir / "tsdb", span)
        recorded_names: set[str] = set()  # recordings that produced samples (GPU ones cannot: no GPU series)
        for level, rules in enumerate(recording_levels(recordings)):
            with serve_tsdb(workdir) as server:
                text = recorded_openmetrics(server, rules, runs)
            if text:
                recorded = workdir / f"recorded-{level}.om"
                recorded.write_text(text)
                create_blocks(recorded, workdir / "tsdb", span)
                recorded_names |= {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
        available = series_names(runs) | recorded_names
        with serve_tsdb(workdir) as server:
            outcomes = []
            for run in runs:
                results = []
                for alert in alerts:
                    alert_outcomes = evaluate_alert(server, alert, run)
                    if not metrics_in(alert.expr) & available:
                        alert_outcomes[0].note = (f"needs {', '.join(sorted(metrics_in(alert.expr)))}, which "
                                                  f"verl's step log does not hold: it cannot fire in a backtest")
                    results.extend(alert_outcomes)
                outcomes.append(RunOutcome(run, results))
    return outcomes


# --- Output ----------------------------------------------------------------------------------

def iso_time(when: float | None) -> str:
    if when is None:
        return ""
    return datetime.fromtimestamp(when, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def to_json(outcomes: list[RunOutcome]) -> dict:
    return {
        "runs": [{"path": str(o.run.path), "labels": o.run.labels, "first_step": o.run.steps[0],
                  "last_step": o.run.steps[-1], "steps": len(o.run.steps), "start": iso_time(o.run.times[0]),
                  "end": iso_time(o.run.end), "unparseable_lines": o.run.parse_errors, "notes": o.run.notes}
                 for o in outcomes],
        "alerts": [{"alertname": a.alertname, "severity": a.severity, "labels": a.labels,
                    "firing": [{"start_step": f.start_step, "end_step": f.end_step, "start": iso_time(f.start),
                                "end": iso_time(f.end) or None} for f in a.firing],
                    **({"note": a.note} if a.note else {})}
                   for o in outcomes for a in o.alerts],
    }


def format_table(outcomes: list[RunOutcome]) -> str:
    lines = []
    for outcome in outcomes:
        run = outcome.run
        lines.append(f"run {run.name} ({run.path}): steps {run.steps[0]}-{run.steps[-1]}, "
                     f"{iso_time(run.times[0])} to {iso_time(run.end)}")
        rows = [("ALERT", "SEVERITY", "FIRED", "FROM STEP", "FROM", "TO STEP", "TO", "")]
        by_alert: dict[str, list[AlertOutcome]] = {}
        for alert in outcome.alerts:
            by_alert.setdefault(alert.alertname, []).append(alert)
        ordered = sorted(by_alert.values(), key=lambda group: (SEVERITY_ORDER.get(group[0].severity, 9),
                                                               group[0].alertname))
        for group in ordered:
            count = sum(len(alert.firing) for alert in group)
            head = [group[0].alertname, group[0].severity, str(count)]
            if not count:
                rows.append((*head, "", "", "", "", group[0].note))
            for alert in group:
                which = ", ".join(f"{k}={v}" for k, v in alert.labels.items() if k not in run.labels)
                for firing in alert.firing:
                    rows.append((*head, str(firing.start_step), iso_time(firing.start),
                                 "" if firing.end_step is None else str(firing.end_step),
                                 iso_time(firing.end) or "(still firing at the run's end)", which))
                    head = ["", "", ""]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines.extend("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     + (f"  {row[-1]}" if row[-1] else "") for row in rows)
        lines.append("")
    return "\n".join(lines)


PLOTTED = (("verl_critic_score_mean", "reward (critic/score/mean)"), ("verl_actor_ppo_kl", "KL (actor/ppo_kl)"),
           ("verl_actor_entropy", "entropy (actor/entropy)"), ("verl_actor_grad_norm", "grad norm (actor/grad_norm)"))
SEVERITY_COLOURS = {"critical": "tab:red", "warning": "tab:orange", "info": "tab:blue"}


def require_matplotlib() -> None:
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        raise BuildError("--plot needs matplotlib; install it with: pip install 'dashgen[plot]'")


def plot(outcomes: list[RunOutcome], path: Path) -> None:
    """Reward, KL, entropy and grad norm over the steps, one column per run, firing intervals shaded."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(PLOTTED), len(outcomes), sharex="col", squeeze=False,
                                figsize=(8 * len(outcomes), 2.4 * len(PLOTTED)))
    for column, outcome in enumerate(outcomes):
        run = outcome.run
        for row, (metric, title) in enumerate(PLOTTED):
            ax = axes[row][column]
            points = [(step, values[metric]) for step, values in zip(run.steps, run.values) if metric in values]
            ax.plot([p[0] for p in points], [p[1] for p in points], linewidth=0.8, color="black")
            ax.set_ylabel(title, fontsize=8)
            # Critical alerts last, so they are drawn on top.
            for alert in sorted(outcome.alerts, key=lambda a: -SEVERITY_ORDER.get(a.severity, 9)):
                for firing in alert.firing:
                    end = run.steps[-1] if firing.end_step is None else firing.end_step
                    ax.axvspan(firing.start_step, end, alpha=0.2, linewidth=0,
                               color=SEVERITY_COLOURS.get(alert.severity, "tab:gray"), label=alert.alertname)
        axes[0][column].set_title(run.name)
        axes[-1][column].set_xlabel("step")
        handles = {label: handle for handle, label in zip(*axes[0][column].get_legend_handles_labels())}
        if handles:
            axes[0][column].legend(handles.values(), handles.keys(), fontsize=7, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
