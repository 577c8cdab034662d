"""The rules a backtest evaluates, when they come as Prometheus rule files rather than compiled
from the project's definitions, and the order in which recordings are filled."""

from __future__ import annotations

from pathlib import Path

import yaml

from dashgen.compiler.queries.promql import metrics_in
from dashgen.compiler.compiled import RULES_DIR, AlertRule, RecordingRule
from dashgen.config import duration_seconds
from dashgen.errors import BuildError
from dashgen.promtool import run_promtool
from dashgen.sources.step_statistics import statistics_in


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
    recordings, alerts = [], []
    for path in paths:
        file_recordings, file_alerts = load_rules({f"{RULES_DIR}/given.yaml": path.read_text()})
        for rule in file_recordings:
            _check_step_windows(path, f"recording {rule.record}", rule.expr)
        for rule in file_alerts:
            _check_step_windows(path, f"alert {rule.name}", rule.expr)
        recordings += file_recordings
        alerts += file_alerts
    if not alerts:
        raise BuildError(f"--rules {' '.join(map(str, paths))}: no alerting rules to backtest")
    return recordings, alerts


def _check_step_windows(path: Path, rule: str, expr: str) -> None:
    """BuildError naming the file and rule if `expr` reads a step window no exporter computes."""
    try:
        statistics_in([expr])
    except ValueError as exc:
        raise BuildError(f"--rules {path}: {rule}: {exc}") from None


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
