"""The compiled project: what `compile_project` (dashgen/compiler/project.py) makes of a project's
definitions, once, and every renderer and command reads.

A definition module states alerts, recordings, groups, dashboards and inhibitions; compiling checks
them, turns the alert vocabulary into PromQL in the metric source's names, and lists the step
statistics the rules read. What comes out is typed: each renderer (dashgen/compiler/output/targets/)
turns it into files, and `list`, `test`, `preview`, `backtest` and `review` read it, never the
rendered text. `RecordingRule` and `AlertRule` are the rules as Prometheus evaluates them, which a
backtest also reads from rule files it did not compile.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Any, Mapping

from dashgen.records import record

if TYPE_CHECKING:
    from dashgen.catalog import Catalog
    from dashgen.config import Config
    from dashgen.model import Alert, Dashboard, Inhibition
    from dashgen.sources.metric_source import MetricSource
    from dashgen.sources.step_statistics import ServedStatistics, StepStatistic

RULES_DIR = "rules"


@record
class RecordingRule:
    """A recording rule as Prometheus evaluates it: expanded expression, group interval."""

    record: str
    expr: str
    interval_ms: int
    labels: tuple[tuple[str, str], ...] = ()


@record
class AlertRule:
    """An alerting rule as Prometheus evaluates it.

    `expr` is the rule's whole expression; with hysteresis it reads the alert's own ALERTS
    series, so an evaluator without Prometheus' rule state evaluates `condition` and
    `sustain` (held only while the alert fires) separately instead.
    """

    name: str
    expr: str
    interval_ms: int
    for_ms: int
    labels: tuple[tuple[str, str], ...] = ()
    keep_firing_ms: int = 0
    condition: str = ""  # `expr` without the hysteresis; empty: same as expr
    sustain: str | None = None

    @property
    def severity(self) -> str:
        return dict(self.labels).get("severity", "")


class _Defined:
    """What an alert's definition says of it, for the compiled and the unavailable alike."""

    definition: Alert

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def severity(self):
        return self.definition.severity


@record
class CompiledAlert(_Defined):
    """An alert as the build compiled it: its definition, where it is stated, and its rule."""

    module: str  # the definition module, as a path from the project's root (alerts/stability.py)
    definition: Alert  # as the module states it
    rule: AlertRule  # in the metric source's names
    summary: str  # in the metric source's labels
    description: str  # the definition's, or one generated from its condition; in the source's labels
    losses: tuple[str, ...] = ()  # what the source's rebuilt series cost it, for its runbook
    notified_labels: frozenset[str] = frozenset()  # the labels its notifications carry


@record
class UnavailableAlert(_Defined):
    """An alert the metric source cannot give: still defined, so panels and inhibitions may name it."""

    module: str
    definition: Alert
    why: str
    notified_labels: frozenset[str] = frozenset()


@record
class CompiledGroup:
    """A rule group: its rules in the order Prometheus evaluates them, every `interval`."""

    name: str
    interval: str
    rules: tuple[RecordingRule | CompiledAlert, ...]


@record
class RuleFile:
    """The groups one definition module (or the metric source) holds: rendered/rules/<name>.yaml."""

    name: str  # stability, or source-rl_insight for the metric source's own recordings
    origin: str  # what it is rendered from: alerts/stability.py, dashgen/sources/rl_insight.py
    groups: tuple[CompiledGroup, ...]
    step_statistics: tuple[StepStatistic, ...] = ()  # those its rules read

    @property
    def path(self) -> str:
        """Its place under rendered/."""
        return f"{RULES_DIR}/{self.name}.yaml"

    @property
    def recordings(self) -> list[RecordingRule]:
        return [rule for group in self.groups for rule in group.rules if isinstance(rule, RecordingRule)]

    @property
    def alerts(self) -> list[CompiledAlert]:
        return [rule for group in self.groups for rule in group.rules if isinstance(rule, CompiledAlert)]


@record
class CompiledRules:
    """What the alert modules compile to: a backtest and a review need no more."""

    files: tuple[RuleFile, ...]
    unavailable: tuple[UnavailableAlert, ...]
    catalog: Catalog  # the project's catalog plus every recorded series, with the labels each keeps
    step_statistics: ServedStatistics  # what the rules read of the exporter's statistics over steps
    source: MetricSource

    @property
    def alerts(self) -> list[CompiledAlert]:
        return [alert for rule_file in self.files for alert in rule_file.alerts]

    @property
    def recording_rules(self) -> list[RecordingRule]:
        return [rule for rule_file in self.files for rule in rule_file.recordings]

    @property
    def alert_rules(self) -> list[AlertRule]:
        return [alert.rule for alert in self.alerts]

    @property
    def definitions(self) -> dict[str, Alert]:
        """Every alert the modules define, available or not, by name."""
        return {alert.name: alert.definition for alert in (*self.alerts, *self.unavailable)}

    @property
    def notified_labels(self) -> dict[str, frozenset[str]]:
        """The labels each alert's notifications carry (its expression's, its own, severity and
        alertname), available or not, by name."""
        return {alert.name: alert.notified_labels for alert in (*self.alerts, *self.unavailable)}


@record
class CompiledDashboard:
    """A dashboard: its definition (thresholds resolved) and its Grafana model."""

    module: str  # panels/verl_training.py
    definition: Dashboard
    model: dict[str, Any]  # the normalised JSON model, in the metric source's names

    @property
    def uid(self) -> str:
        return self.definition.uid


@record
class StatedInhibition:
    """An inhibition, checked, and the module that states it."""

    module: str
    inhibition: Inhibition


@record
class CompiledProject:
    """Everything a project's definitions compile to, under one config."""

    config: Config
    metrics: Catalog  # the project's catalog: what a run's sources publish (metrics.yaml included)
    rules: CompiledRules
    dashboards: tuple[CompiledDashboard, ...]
    inhibitions: tuple[StatedInhibition, ...]
    routing: dict[str, Any]  # Alertmanager's routes, inhibit rules and receivers, as its config holds them
    notices: tuple[str, ...] = ()  # what the build adapted, for the user to know
    # (dashboard uid, panel title) -> why the metric source cannot show that panel, left out
    left_out: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # alert name -> the panel that shows its signal (dashgen/compiler/dashboards/alert_panels.py)
    alert_panels: Mapping[str, Any] = field(default_factory=dict)

    @property
    def alerts(self) -> list[CompiledAlert]:
        return self.rules.alerts

    @property
    def unavailable(self) -> tuple[UnavailableAlert, ...]:
        return self.rules.unavailable

    @property
    def catalog(self) -> Catalog:
        """The catalog the queries were checked against: the project's, plus the recorded series."""
        return self.rules.catalog

    @property
    def source(self) -> MetricSource:
        return self.rules.source

    @property
    def step_statistics(self) -> ServedStatistics:
        return self.rules.step_statistics
