"""Compile alert and recording rule definitions (alerts/*.py) into typed rule files.

Each module's `rules(config)` returns one RuleGroup or a list of them; its groups become one
`RuleFile` (rendered/rules/<module>.yaml, by dashgen/compiler/output/targets/prometheus.py). Expressions
pass the same catalog checks as panel queries; recorded series join the catalog (with the labels
their expression keeps), so later rules and panels can query them. The compiled rules
(`RecordingRule`, `CompiledAlert` and its `AlertRule`) are what the runbook, the generated tests,
the backtest and a review read: none of them re-reads the YAML written from them.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from dashgen.catalog import SERIES_READERS_METRIC, Catalog, Metric, MetricType, Origin
from dashgen.compiler.compiled import (AlertRule, CompiledAlert, CompiledGroup, CompiledRules, RecordingRule,
                                       RuleFile, UnavailableAlert)
from dashgen.compiler.rules.condition_compiler import BaselineDefaults, ConditionCompiler, expand_group
from dashgen.compiler.loader import DefinitionModule, call_definition, load_modules
from dashgen.compiler.queries.promql import QueryError, label_value, metrics_in
from dashgen.compiler.queries.references import check_alertname_matchers, check_step_statistics_listed, statistics_read
from dashgen.compiler.rules.for_steps import held_for_steps
from dashgen.compiler.rules.definition_checks import check_alert, check_group_names, check_interval, check_record_name
from dashgen.compiler.queries.selectors import checked_expression, expression_info, rule_selectors
from dashgen.compiler.rules.signal_needs import alert_needs, readers_table
from dashgen.compiler.queries.source_queries import Lacking, SourceQueries
from dashgen.conditions import RUN_NAME, VALUE, Steps, comparisons
from dashgen.config import Config, duration_seconds
from dashgen.errors import BuildError
from dashgen.model import ON_RUN, Alert, Recording, RuleGroup, Sustain
from dashgen.records import record
from dashgen.sources.step_statistics import ServedStatistics

SOURCE_RULES_PREFIX = "source-"  # rules/source-<name>.yaml: the metric source's own recordings
SERIES_READERS_FILE = "dashgen-series-readers"  # rules/<it>.yaml: which alerts read each logged series


def _ms(duration: str) -> int:
    return round(duration_seconds(duration) * 1000)


def with_sustain(name: str, condition: str, sustain: str, on: str) -> str:
    """The rule text of an alert with hysteresis (see dashgen.model.Sustain)."""
    return (f"(\n{textwrap.indent(condition, '  ')}\n)\nor\n(\n  (\n{textwrap.indent(sustain, '    ')}\n  )\n"
            f"  and on({on}) ALERTS{{alertname={label_value(name)}, alertstate=\"firing\"}}\n)")


def load_rule_modules(root: Path) -> list[DefinitionModule]:
    return load_modules(root, "alerts", "rules")


@record
class _Written:
    """An alert's rule as written: by hand (`expr=`), or compiled from its condition."""

    alert: Alert
    expr: str
    sustain: Sustain | None
    description: str


def compile_rules(root: Path, config: Config, catalog: Catalog, definitions: list[DefinitionModule] | None = None,
                  queries: SourceQueries | None = None) -> CompiledRules:
    """The project's alert modules (`definitions`, loaded from root/alerts by default) compiled.
    `queries`: the metric source's translation, which the dashboards compiled after share."""
    queries = queries or SourceQueries(config)
    selectors = rule_selectors(config)
    stated = [(definition, _stated_groups(definition, config))
              for definition in (definitions if definitions is not None else load_rule_modules(root))]
    # Signals may name series recorded by hand-written rules, so those join the catalog first;
    # then the conditions compile, adding their baselines' recordings.
    stated_catalog = _with_recordings(catalog, stated, selectors)
    # The source may compute the step windows of the series logged (dashgen/sources/step_statistics.py);
    # where it does not, or with exporter_step_windows off, they compile to PromQL.
    compiler = ConditionCompiler(stated_catalog, baseline_defaults(config),
                                 exporter_statistics=queries.source.computes_step_windows and config.exporter_step_windows)
    modules = [(definition, [expanded for group in groups for expanded in expand_group(
        group, compiler, lambda rule, compiler, d=definition: _written(rule, compiler, d))])
        for definition, groups in stated]
    # Every condition compiled: the step windows the rules read are known, and so their digest
    # (`{step_windows}` in a query, which the exporter serves on verl_exporter_step_windows_info).
    served = ServedStatistics(tuple(sorted(compiler.step_statistics, key=lambda s: (s.series, s.name))),
                              duration_seconds(config.step_window_floor))
    selectors = {**selectors, "step_windows": f"digest={label_value(served.digest)}"}
    # Only what the first pass could not add: the compiled baselines, and hand-written recordings
    # that read them.
    missing = [rule for _, groups in modules for group in groups for rule in group.rules
               if isinstance(rule, Recording) and rule.record not in stated_catalog]
    full_catalog = _with_recordings(stated_catalog, [(None, [RuleGroup("", tuple(missing))])], selectors)
    compilation = _Compilation(config, selectors, full_catalog, queries, served)
    files = [compilation.rule_file(definition, groups, stated_groups)
             for (definition, groups), (_, stated_groups) in zip(modules, stated)]
    compilation.check_references()
    files += compilation.source_files()
    files += _series_readers_file(files, full_catalog, config)
    return CompiledRules(tuple(files), tuple(compilation.unavailable), full_catalog, served, queries.source)


def _series_readers_file(files: list[RuleFile], catalog: Catalog, config: Config) -> list[RuleFile]:
    """dashgen:series_readers, where an alert reads it: the alerts blind without each logged series."""
    alerts = [alert.rule for file in files for alert in file.alerts]
    if not any(SERIES_READERS_METRIC in metrics_in(rule.expr) for rule in alerts):
        return []
    needs = alert_needs(((rule.name, rule.condition or rule.expr) for rule in alerts),
                        ((rule.record, rule.expr) for file in files for rule in file.recordings), catalog)
    rows = tuple(RecordingRule(SERIES_READERS_METRIC, "vector(1)", _ms(config.rule_interval), tuple(sorted(row)))
                 for row in readers_table(needs, catalog))
    rules = rows or (RecordingRule(SERIES_READERS_METRIC, "vector(0) != 0", _ms(config.rule_interval)),)
    return [RuleFile(SERIES_READERS_FILE, "the alerts' compiled rules (dashgen/compiler/rules/signal_needs.py)",
                     (CompiledGroup(SERIES_READERS_FILE, config.rule_interval, rules),))]


def baseline_defaults(config: Config) -> BaselineDefaults:
    return BaselineDefaults(config.baseline_window, config.baseline_recent_window, config.baseline_hold_window,
                            config.baseline_hold_step, config.rhythm_window, config.step_window_floor,
                            config.rule_interval, config.scrape_interval)


def _stated_groups(definition: DefinitionModule, config: Config) -> list[RuleGroup]:
    result = call_definition(definition, "rules", config)
    groups = [result] if isinstance(result, RuleGroup) else result
    if not isinstance(groups, (list, tuple)) or not all(isinstance(g, RuleGroup) for g in groups):
        raise BuildError(f"{definition.path}: rules() must return a RuleGroup or a list of RuleGroups")
    return groups


class _Compilation:
    """The rules of every module compiled in turn: the names seen, the alerts the source cannot give,
    the expressions whose references are checked once every alert is known."""

    def __init__(self, config: Config, selectors: dict[str, str], catalog: Catalog, queries: SourceQueries,
                 served: ServedStatistics):
        self.config, self.selectors, self.catalog, self.queries, self.served = (
            config, selectors, catalog, queries, served)
        self.seen: dict[str, Path] = {}
        self.unavailable: list[UnavailableAlert] = []
        self.notified: dict[str, frozenset[str]] = {}  # alert -> the labels its notifications carry
        self.reading: list[tuple[str, str]] = []  # (where, expanded expression): references checked last

    def rule_file(self, definition: DefinitionModule, groups: list[RuleGroup], stated: list[RuleGroup]) -> RuleFile:
        check_group_names(definition.path, groups, stated)
        compiled = [self.group(definition, group) for group in groups]
        # A group whose every rule the source cannot give is left out.
        kept = tuple(group for group in compiled if group.rules)
        return RuleFile(definition.path.stem, definition.path.as_posix(), kept, self._statistics_of(kept))

    def group(self, definition: DefinitionModule, group: RuleGroup) -> CompiledGroup:
        interval = group.interval or self.config.rule_interval
        check_interval(interval, f"{definition.path}: group {group.name!r}")
        rules = []
        for rule in group.rules:
            alert = rule.alert if isinstance(rule, _Written) else rule
            name = alert.name if isinstance(alert, Alert) else getattr(alert, "record", None)
            if not isinstance(alert, (Alert, Recording)):
                raise BuildError(f"{definition.path}: group {group.name!r} holds {type(alert).__name__}, "
                                 f"not an Alert or Recording")
            where = f"{definition.path}: {'alert' if isinstance(alert, Alert) else 'recording rule'} {name!r}"
            if name in self.seen:
                raise BuildError(f"{where}: the name is already used in {self.seen[name]}; names must be unique")
            self.seen[name] = definition.path
            expr, result_info = checked_expression(rule.expr, self.selectors, self.catalog, where)
            self.reading.append((where, expr))
            if isinstance(rule, Recording):
                compiled = self.recording(rule, expr, where, interval)
            else:
                compiled = self.alert(rule, expr, result_info.labels, where, interval, str(definition.path))
            if compiled is not None:
                rules.append(compiled)
        return CompiledGroup(group.name, interval, tuple(rules))

    def recording(self, rule: Recording, expr: str, where: str, interval: str) -> RecordingRule | None:
        check_record_name(rule.record, where)
        self.queries.remember(rule.record, expr)
        try:
            expr = self.queries.translate(expr, self.catalog, where)
        except Lacking as lack:
            self.queries.lacking[rule.record] = f"it reads {lack.name}: {lack.reason}"
            return None
        return RecordingRule(rule.record, expr, _ms(interval))

    def alert(self, written: _Written, expr: str, labels, where: str, interval: str,
              module: str) -> CompiledAlert | None:
        alert, queries = written.alert, self.queries
        check_alert(alert, written.description, where)
        notified = self.notified[alert.name] = frozenset(
            {*labels, *(name for name, _ in alert.labels), "severity", "alertname"})
        sustain = None
        if written.sustain is not None:
            sustain, _ = checked_expression(written.sustain.expr, self.selectors, self.catalog, f"{where} (sustain)")
        why = queries.source.unavailable_alerts.get(alert.name)
        try:
            losses = queries.losses(expr if sustain is None else f"{expr} or {sustain}")
            expr = queries.translate(expr, self.catalog, where)
            if sustain is not None:
                sustain = queries.translate(sustain, self.catalog, f"{where} (sustain)")
        except Lacking as lack:
            why = why or f"it reads {lack.name}: {lack.reason}"
        if why is not None:
            self.unavailable.append(UnavailableAlert(module, alert, why, notified))
            return None
        condition = expr
        if sustain is not None:
            expr = with_sustain(alert.name, condition, sustain, queries.labels_of(written.sustain.on))
        rule = AlertRule(alert.name, expr, _ms(interval), 0 if isinstance(alert.for_, Steps) else _ms(alert.for_),
                         tuple(sorted(alert_labels(alert).items())), _ms(alert.keep_firing_for), condition, sustain)
        return CompiledAlert(module, alert, rule, queries.template(alert.summary),
                             queries.template(written.description), losses, notified)

    def check_references(self) -> None:
        """A hand-written ALERTS{alertname="..."} names an alert of the project, and a step statistic
        read by hand is one the build lists."""
        for where, expr in self.reading:
            check_alertname_matchers(expr, self.notified, where)
            check_step_statistics_listed(expr, self.served, where)

    def source_files(self) -> list[RuleFile]:
        """The source's recordings of the catalog series it rebuilds, in a rule file named after it."""
        recordings = self.queries.derived_recordings(self.catalog)
        if not recordings:
            return []
        name = f"{SOURCE_RULES_PREFIX}{self.queries.source.name}"
        rules = tuple(RecordingRule(recording.record, recording.expr, _ms(self.config.rule_interval))
                      for recording in recordings)
        return [RuleFile(name, f"dashgen/sources/{self.queries.source.name}.py",
                         (CompiledGroup(name, self.config.rule_interval, rules),))]

    def _statistics_of(self, groups: tuple[CompiledGroup, ...]) -> tuple:
        """The step statistics the groups' rules read, as the build lists them."""
        exprs = [rule.rule.expr if isinstance(rule, CompiledAlert) else rule.expr
                 for group in groups for rule in group.rules]
        read = {statistic for expr in exprs for statistic in statistics_read(expr, self.served)}
        return tuple(sorted(read, key=lambda s: (s.series, s.name)))


def alert_labels(alert: Alert) -> dict[str, str]:
    """The labels an alert's rule gives its notifications: severity first, then its own, sorted."""
    return {"severity": alert.severity.value, **dict(sorted(alert.labels))}


def _with_recordings(catalog: Catalog, modules: list, selectors: dict) -> Catalog:
    """The catalog plus every recorded series, with the labels its expression keeps. A recording
    may read one defined after it (e.g. in a group of another interval); one whose expression
    does not check is left out here and reported where it is compiled."""
    pending = [(definition, rule) for definition, groups in modules for group in groups for rule in group.rules
               if isinstance(rule, Recording)]
    while pending:
        left = []
        for definition, rule in pending:
            if rule.record in catalog:
                where = f"{definition.path}: " if definition is not None else ""
                raise BuildError(f"{where}recording rule {rule.record!r}: the series is already a metric of the "
                                 f"catalog or recorded by another rule; names must be unique")
            try:
                _, result_info = expression_info(rule.expr, selectors, catalog)
            except QueryError:  # its message (and "did you mean" hint) is not made
                left.append((definition, rule))
                continue
            catalog = catalog.with_metrics([Metric(
                rule.record, MetricType.GAUGE, "none", rule.help, result_info.labels, Origin.RECORDING_RULE)])
        if len(left) == len(pending):
            break
        pending = left
    return catalog


def _written(rule, compiler: ConditionCompiler, definition: DefinitionModule):
    """An alert's rule as written: a declarative alert with its condition compiled to PromQL (and its
    keep-firing condition to the hysteresis branch), a hand-written one as it is; any other rule as it is."""
    if not isinstance(rule, Alert):
        return rule
    if rule.condition is None and rule.keep_firing_while is None:
        return _Written(rule, rule.expr, rule.sustain, rule.description)
    where = f"{definition.path}: alert {rule.name!r}"
    if rule.condition is None:
        raise BuildError(f"{where}: keep_firing_while needs a condition to hold; give condition= (Alert.when)")
    if rule.expr.strip():
        raise BuildError(f"{where}: give either condition= (the alert vocabulary) or expr= (PromQL), not both")
    if rule.sustain is not None:
        raise BuildError(f"{where}: with condition=, state hysteresis as keep_firing_while=, not sustain=")
    expr = compiler.compile(rule.condition, where)
    if isinstance(rule.for_, Steps):
        expr = held_for_steps(compiler, rule.condition, expr, rule.name, rule.for_, where)
    sustain = None
    if rule.keep_firing_while is not None:
        sustain = Sustain(compiler.compile(rule.keep_firing_while, f"{where} (keep_firing_while)", rule.condition),
                          ON_RUN)
    return _Written(rule, expr, sustain, rule.description or generated_description(rule))


def generated_description(alert: Alert) -> str:
    """What the condition says, with its thresholds, for an alert written without a description."""
    first = next(comparisons(alert.condition)).signal.describe()
    text = f"Run {RUN_NAME}: {alert.condition.describe()} ({first}: {VALUE})."
    if alert.keep_firing_while is not None:
        text += f" It stays firing while {alert.keep_firing_while.describe()}."
    return text


def compares_with_held_baseline(alert: Alert) -> bool:
    conditions = [c for c in (alert.condition, alert.keep_firing_while) if c is not None]
    return any(c.baseline is not None and c.baseline.is_held
               for condition in conditions for c in comparisons(condition))
