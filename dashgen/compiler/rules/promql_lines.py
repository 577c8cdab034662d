"""How much PromQL a person reads to follow an alert: the lines of its rule's expression, and of
every recording it reads, directly or through another (each once), as Prometheus' and Grafana's
rule views show them (issue 53: a one-line condition should not take a hundred lines at 3 a.m.).
Measured by bench/promql_lines.py and reported in docs/benchmarks.md.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from dashgen.compiler.compiled import CompiledRules
from dashgen.compiler.queries.promql import metrics_in
from dashgen.records import record


@record
class AlertSize:
    """The PromQL of one compiled alert."""

    alert: str
    rule_lines: int  # the alert rule's own expression (with its keep-firing branch)
    lines: int  # that, and every recording it reads
    recordings: int  # how many recordings it reads


def lines_of(expr: str) -> int:
    return expr.count("\n") + 1


def alert_sizes(rules: CompiledRules) -> list[AlertSize]:
    """Each available alert's size, in the order the rule files hold them."""
    recorded: dict[str, list[str]] = {}
    for rule in rules.recording_rules:
        recorded.setdefault(rule.record, []).append(rule.expr)
    return sizes_of([(alert.name, alert.expr) for alert in rules.alert_rules], recorded)


def sizes_of(alerts: Iterable[tuple[str, str]], recorded: Mapping[str, list[str]]) -> list[AlertSize]:
    """The size of each (name, expression) of an alert, given the recordings (record -> the
    expressions of the rules recording it: several, each with labels of its own, for a table)."""
    sizes = []
    for name, expr in alerts:
        read: set[str] = set()
        pending = list(metrics_in(expr) & recorded.keys())
        while pending:
            record_name = pending.pop()
            if record_name not in read:
                read.add(record_name)
                pending.extend(name for text in recorded[record_name] for name in metrics_in(text) & recorded.keys())
        total = lines_of(expr) + sum(lines_of(text) for record_name in read for text in recorded[record_name])
        sizes.append(AlertSize(name, lines_of(expr), total, len(read)))
    return sizes
