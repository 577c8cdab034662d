"""Several rule sets (e.g. the rules before and after a change) as one, for one backtest pass.

A recording or alert that is the same in every set (same expression, interval, labels, and the
same recordings under the names it reads) is evaluated once and its outcome shared; a recording
that differs is renamed in every set but the first (`<record>:set<N>`) and so is each reference
to it in that set, so both versions are filled side by side in one Prometheus.
"""

from __future__ import annotations

import dataclasses
import re

from dashgen.compiler.compiled import AlertRule, RecordingRule
from dashgen.compiler.queries.promql import metrics_in
from dashgen.errors import BuildError
from dashgen.records import record
from dashgen.sources.step_statistics import ServedStatistics, StepStatistic, statistics_in


@record
class RuleSet:
    """The rules of one revision, and the statistics over steps they read as their build listed them;
    None for rules whose build is not known (rule files given as they are), which read what their
    expressions select."""
    recordings: list[RecordingRule]
    alerts: list[AlertRule]
    step_statistics: ServedStatistics | None = None

    def statistics_read(self) -> set[StepStatistic]:
        if self.step_statistics is not None:
            return set(self.step_statistics.statistics)
        return statistics_in(rule.expr for rule in [*self.recordings, *self.alerts])


def served_statistics(rule_sets: list[RuleSet], floor_seconds: float) -> ServedStatistics:
    """What a backfill of a run computes for the sets' rules: every statistic over steps any of them reads."""
    read = set().union(*(rule_set.statistics_read() for rule_set in rule_sets))
    return ServedStatistics(tuple(sorted(read, key=lambda s: (s.series, s.name))), floor_seconds)


@record
class MergedRules:
    """The union of the sets, each rule once; `alerts_of[i]`: set i's alerts as indexes into `alerts`."""
    recordings: list[RecordingRule]
    alerts: list[AlertRule]
    alerts_of: list[list[int]]


# A PromQL string literal: what a rename must not touch.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')


def renamed(expr: str, names: dict[str, str]) -> str:
    """`expr` with each series name in `names` replaced, outside string literals."""
    if not names:
        return expr
    name = re.compile(r"(?<![\w:])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")(?![\w:])")
    out, at = [], 0
    for literal in _STRING.finditer(expr):
        out.append(name.sub(lambda m: names[m.group(1)], expr[at:literal.start()]) + literal.group(0))
        at = literal.end()
    out.append(name.sub(lambda m: names[m.group(1)], expr[at:]))
    return "".join(out)


def merge(rule_sets: list[RuleSet]) -> MergedRules:
    """One list of recordings and alerts that evaluates every set's rules."""
    recordings = list(rule_sets[0].recordings)
    alerts = list(rule_sets[0].alerts)
    alerts_of = [list(range(len(alerts)))]
    for number, rule_set in enumerate(rule_sets[1:], start=2):
        names = _renames(_families(recordings), rule_set.recordings, f":set{number}")
        for rule in rule_set.recordings:
            if rule.record in names:
                recordings.append(_renamed_recording(rule, names))
        own = []
        for alert in rule_set.alerts:
            alert = _renamed_alert(alert, names)
            if alert not in alerts:
                alerts.append(alert)
            own.append(alerts.index(alert))
        alerts_of.append(own)
    return MergedRules(recordings, alerts, alerts_of)


def _families(recordings: list[RecordingRule]) -> dict[str, list[RecordingRule]]:
    """The rules recording each name (a name may be recorded by several rules, with other labels)."""
    families: dict[str, list[RecordingRule]] = {}
    for rule in recordings:
        families.setdefault(rule.record, []).append(rule)
    return families


def _renames(shared: dict[str, list[RecordingRule]], recordings: list[RecordingRule], suffix: str) -> dict[str, str]:
    """The names of `recordings` whose rules differ from those recorded under the name in `shared`,
    once the names they read are renamed too, each with its new name."""
    own = _families(recordings)
    names: dict[str, str] = {}
    changed = True
    while changed:  # renaming a name changes what reads it: until nothing more differs
        changed = False
        for name, family in own.items():
            if name in names:
                continue
            if [_renamed_recording(rule, names) for rule in family] != shared.get(name):
                names[name] = name + suffix
                changed = True
    taken = set(shared) | set(own)
    clash = sorted(new for new in names.values() if new in taken)
    if clash:
        raise BuildError(f"recording rules already named {', '.join(clash)}: cannot backtest two rule sets side by side")
    return names


def _renamed_recording(rule: RecordingRule, names: dict[str, str]) -> RecordingRule:
    return dataclasses.replace(rule, record=names.get(rule.record, rule.record), expr=_checked(rule.expr, names))


def _renamed_alert(alert: AlertRule, names: dict[str, str]) -> AlertRule:
    return dataclasses.replace(alert, expr=_checked(alert.expr, names), condition=_checked(alert.condition, names),
                               sustain=None if alert.sustain is None else _checked(alert.sustain, names))


def _checked(expr: str, names: dict[str, str]) -> str:
    """The renamed expression, proven to select exactly the renamed series."""
    if not expr or not names.keys() & metrics_in(expr):
        return expr
    out = renamed(expr, names)
    if metrics_in(out) != {names.get(name, name) for name in metrics_in(expr)}:
        raise BuildError(f"cannot rename the recordings {', '.join(sorted(names.keys() & metrics_in(expr)))} "
                         f"in {expr!r}: name them outside string literals")
    return out
