"""The checks of a rule as its module states it, before it is compiled: names, group names and
intervals, an alert's severity, texts, durations, labels and templates. Each error names the place."""

from __future__ import annotations

import re
from pathlib import Path

from dashgen.compiler.rules.prometheus_limits import label_name_problem, template_problem
from dashgen.conditions import MAX_FOR_STEPS, Steps
from dashgen.config import duration_problem, duration_seconds
from dashgen.errors import BuildError
from dashgen.model import Alert, RuleGroup, Severity, Sustain

_ALERT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
_RECORD_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def fired_recording(alertname: str) -> str:
    """The recording of when an alert fired that its hold reads (a valid metric name: alert names are)."""
    return f"dashgen:{alertname}:fired"


def is_fired_recording(name: str) -> bool:
    """Whether a recording's name is of fired_recording's form: a team's recording so named would be
    read as an alert's hold (it would fire under vmalert and not under Prometheus)."""
    return name.startswith("dashgen:") and name.endswith(":fired")


def check_interval(interval: str, where: str) -> None:
    """A group's interval: a duration longer than 0s."""
    problem = duration_problem(interval)
    if problem is None and duration_seconds(interval) <= 0:
        problem = f"{interval!r} must be longer than 0s (Prometheus evaluates the group every interval)"
    if problem:
        raise BuildError(f"{where}: interval {problem}")


def check_record_name(record: str, where: str) -> None:
    if not _RECORD_NAME.fullmatch(record):
        raise BuildError(f"{where}: not a valid metric name")
    if is_fired_recording(record):
        raise BuildError(f"{where}: a name of the form {fired_recording('<alert>')} is dashgen's own "
                         f"(the recording of when an alert fired, under vmalert): rename it")


def check_group_names(path: Path, groups: list[RuleGroup], stated: list[RuleGroup]) -> None:
    """Group names as Prometheus takes them: non-empty, each once in a file, the `<group>-hold`
    groups the compiler adds (`groups`, besides the `stated` ones) included."""
    stated_names = [group.name for group in stated]
    seen: set[str] = set()
    for group in groups:
        if not isinstance(group.name, str) or not group.name.strip():
            raise BuildError(f"{path}: a rule group has the empty name {group.name!r}; give each group a name")
        if group.name in seen:
            held = group.name.removesuffix("-hold")
            if stated_names.count(group.name) < 2:
                raise BuildError(f"{path}: group {group.name!r}: the compiler names the group that steps the held "
                                 f"baselines of group {held!r} so; rename your group")
            raise BuildError(f"{path}: group {group.name!r} is defined twice; Prometheus refuses two groups of "
                             f"one name in a rule file")
        seen.add(group.name)


def check_alert(alert: Alert, description: str, where: str) -> None:
    """An alert's fields; `description` is the one it is rendered with (generated from its condition
    when it gives none)."""
    if not _ALERT_NAME.fullmatch(alert.name):
        raise BuildError(f"{where}: alert names are CamelCase (letters and digits, starting upper-case)")
    if not isinstance(alert.severity, Severity):
        raise BuildError(f"{where}: severity {alert.severity!r} is not one of "
                         f"{', '.join(s.value for s in Severity)}; use dashgen.model.Severity")
    if not alert.summary.strip():
        raise BuildError(f"{where}: summary is empty; say in one line what is wrong")
    if not description.strip():
        raise BuildError(f"{where}: description is empty")
    _check_durations(alert, where)
    if alert.sustain is not None and not isinstance(alert.sustain, Sustain):
        raise BuildError(f"{where}: sustain must be a dashgen.model.Sustain")
    _check_labels(alert, where)
    for field_name, text in (*((f"label {name}", value) for name, value in alert.labels),
                             ("summary", alert.summary), ("description", description)):
        problem = template_problem(text)
        if problem:
            raise BuildError(f"{where}: {field_name}: not a valid Prometheus template: {problem}")


def _check_durations(alert: Alert, where: str) -> None:
    durations = [("keep_firing_for", alert.keep_firing_for)]
    if not isinstance(alert.for_, Steps):
        durations.insert(0, ("for_", alert.for_))
    elif alert.condition is None:
        raise BuildError(f"{where}: for_=steps(N) counts the steps of a condition= (Alert.when); with a "
                         f"hand-written expr, give a duration")
    elif alert.for_.count > MAX_FOR_STEPS:
        raise BuildError(f"{where}: for_=steps({alert.for_.count}) holds the alert back more than {MAX_FOR_STEPS} "
                         f"steps: a condition held that long is a level; state it as one, e.g. "
                         f"Signal(...).median_over(steps({alert.for_.count})).above(...), with a short for_")
    for name, value in durations:
        problem = duration_problem(value)
        if problem:
            raise BuildError(f"{where}: {name} = {problem}")


def _check_labels(alert: Alert, where: str) -> None:
    if not isinstance(alert.labels, (tuple, list)) or not all(
            isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
            for pair in alert.labels):
        raise BuildError(f"{where}: labels are a tuple of (name, value) string pairs, e.g. (('team', 'rl'),)")
    if "severity" in dict(alert.labels):
        raise BuildError(f"{where}: set severity with the severity field, not in labels")
    for name, value in alert.labels:
        problem = label_name_problem(name)
        if problem:
            raise BuildError(f"{where}: {problem}")
