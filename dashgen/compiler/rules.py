"""Compile alert and recording rule definitions (alerts/*.py) into Prometheus rule files.

Each module's `rules(config)` returns one RuleGroup or a list of them; its groups go to
rendered/rules/<module>.yaml. Expressions pass the same catalog checks as panel queries;
recorded series join the catalog (with the labels their expression keeps), so later rules
and panels can query them. The runbook, rendered/docs/alerts.md, comes from the same
definitions, and so do the compiled rules (`RecordingRule`, `AlertRule`) that the backtest
evaluates: it never re-reads the YAML written here.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import field, replace
from pathlib import Path

from dashgen.catalog import SERIES_READERS_METRIC, Catalog, Metric, MetricType, Source
from dashgen.compiler.block_yaml import rule_yaml
from dashgen.compiler.condition_compiler import BaselineDefaults, ConditionCompiler, expand_group
from dashgen.compiler.loader import DefinitionModule, call_definition, load_modules
from dashgen.compiler.promql import QueryError, label_value, metrics_in
from dashgen.compiler.references import check_alertname_matchers, check_step_statistics_listed
from dashgen.compiler.rule_format import label_name_problem, template_problem
from dashgen.compiler.rendering import runbook_anchor, templates
from dashgen.compiler.selectors import checked_expression, expression_info, rule_selectors
from dashgen.compiler.signal_needs import alert_needs, readers_expression
from dashgen.compiler.source_queries import Lacking, SourceQueries
from dashgen.compiler.targets.victoriametrics import fired_recording, is_fired_recording
from dashgen.conditions import MAX_FOR_STEPS, RUN_NAME, VALUE, Steps, comparisons, windows_in
from dashgen.config import Config, duration_problem, duration_seconds
from dashgen.errors import BuildError
from dashgen.model import ON_RUN, Alert, Recording, RuleGroup, Severity, Sustain
from dashgen.records import record
from dashgen.sources.chosen import metric_source
from dashgen.sources.step_statistics import STEP_STATISTICS_FILE, ServedStatistics, dump_statistics

_ALERT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
_RECORD_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
RULES_DIR = "rules"
DOCS_FILE = "docs/alerts.md"
SERIES_READERS_FILE = "dashgen-series-readers.yaml"  # rules/<it>: which alerts read each logged series
SOURCE_RULES_PREFIX = "source-"  # rules/source-<name>.yaml: the metric source's own recordings


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


@record(frozen=False)
class RulesOutput:
    """What the alert modules render: rule files, the catalog with their recordings, the alerts."""

    files: dict[str, str] = field(default_factory=dict)
    catalog: Catalog | None = None
    alerts: list[tuple[str, Alert, str]] = field(default_factory=list)  # (module path, alert, expanded expr)
    recording_rules: list[RecordingRule] = field(default_factory=list)
    alert_rules: list[AlertRule] = field(default_factory=list)
    # Alerts the metric source cannot give: (module path, alert, why).
    unavailable: list[tuple[str, Alert, str]] = field(default_factory=list)
    queries: SourceQueries | None = None
    # What the source's rebuilt series cost each alert that reads them, by alert name.
    losses: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The labels each alert's notifications carry: its expression's, its own, severity and alertname.
    alert_labels: dict[str, frozenset[str]] = field(default_factory=dict)
    # The statistics over steps the exporter computes for the rules (dashgen/sources/step_statistics.py).
    step_statistics: ServedStatistics = ServedStatistics()


def _ms(duration: str) -> int:
    return round(duration_seconds(duration) * 1000)


def with_sustain(name: str, condition: str, sustain: str, on: str) -> str:
    """The rule text of an alert with hysteresis (see dashgen.model.Sustain)."""
    return (f"(\n{textwrap.indent(condition, '  ')}\n)\nor\n(\n  (\n{textwrap.indent(sustain, '    ')}\n  )\n"
            f"  and on({on}) ALERTS{{alertname={label_value(name)}, alertstate=\"firing\"}}\n)")


def load_rule_modules(root: Path) -> list[DefinitionModule]:
    return load_modules(root, "alerts", "rules")


def render_rules(root: Path, config: Config, catalog: Catalog,
                 definitions: list[DefinitionModule] | None = None) -> RulesOutput:
    selectors = rule_selectors(config)
    stated = []
    for definition in definitions if definitions is not None else load_rule_modules(root):
        result = call_definition(definition, "rules", config)
        groups = [result] if isinstance(result, RuleGroup) else result
        if not isinstance(groups, (list, tuple)) or not all(isinstance(g, RuleGroup) for g in groups):
            raise BuildError(f"{definition.path}: rules() must return a RuleGroup or a list of RuleGroups")
        stated.append((definition, groups))
    # Signals may name series recorded by hand-written rules, so those join the catalog first;
    # then the conditions compile, adding their baselines' recordings.
    stated_catalog = _with_recordings(catalog, stated, selectors)
    defaults = BaselineDefaults(config.baseline_window, config.baseline_recent_window, config.baseline_hold_window,
                                config.baseline_hold_step, config.rhythm_window, config.step_window_floor,
                                config.rule_interval, config.scrape_interval)
    exporter_source = metric_source(config).is_catalog
    compiler = ConditionCompiler(stated_catalog, defaults,
                                 exporter_statistics=exporter_source and config.exporter_step_windows)
    modules = [(definition, [expanded for group in groups for expanded in expand_group(
        group, compiler, lambda rule, compiler, d=definition: _compiled_alert(rule, compiler, d))])
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
    out = RulesOutput(catalog=_with_recordings(stated_catalog, [(None, [RuleGroup("", tuple(missing))])],
                                               selectors), queries=SourceQueries(config))
    queries = out.queries
    seen: dict[str, Path] = {}
    reading_alerts: list[tuple[str, str]] = []  # (where, expanded expression): its ALERTS matchers are checked last
    for definition, groups in modules:
        rendered_groups = []
        _check_group_names(definition.path, groups, next(g for d, g in stated if d is definition))
        for group in groups:
            interval = group.interval or config.rule_interval
            problem = duration_problem(interval)
            if problem is None and duration_seconds(interval) <= 0:
                problem = f"{interval!r} must be longer than 0s (Prometheus evaluates the group every interval)"
            if problem:
                raise BuildError(f"{definition.path}: group {group.name!r}: interval {problem}")
            rendered_rules = []
            for rule in group.rules:
                name = rule.name if isinstance(rule, Alert) else rule.record
                where = f"{definition.path}: {'alert' if isinstance(rule, Alert) else 'recording rule'} {name!r}"
                if name in seen:
                    raise BuildError(f"{where}: the name is already used in {seen[name]}; names must be unique")
                seen[name] = definition.path
                expr, result_info = checked_expression(rule.expr, selectors, out.catalog, where)
                reading_alerts.append((where, expr))
                if isinstance(rule, Recording):
                    if not _RECORD_NAME.fullmatch(rule.record):
                        raise BuildError(f"{where}: not a valid metric name")
                    if is_fired_recording(rule.record):
                        raise BuildError(f"{where}: a name of the form {fired_recording('<alert>')} is dashgen's own "
                                         f"(the recording of when an alert fired, under vmalert): rename it")
                    queries.remember(rule.record, expr)
                    try:
                        expr = queries.translate(expr, out.catalog, where)
                    except Lacking as lack:
                        queries.lacking[rule.record] = f"it reads {lack.name}: {lack.reason}"
                        continue
                    rendered_rules.append({"record": rule.record, "expr": expr})
                    out.recording_rules.append(RecordingRule(rule.record, expr, _ms(interval)))
                elif isinstance(rule, Alert):
                    _check_alert(rule, where)
                    out.alert_labels[rule.name] = frozenset(
                        {*result_info.labels, *(name for name, _ in rule.labels), "severity", "alertname"})
                    sustain = None
                    if rule.sustain is not None:
                        sustain, _ = checked_expression(rule.sustain.expr, selectors, out.catalog,
                                                        f"{where} (sustain)")
                    why = queries.source.unavailable_alerts.get(rule.name)
                    try:
                        losses = queries.losses(expr if sustain is None else f"{expr} or {sustain}")
                        expr = queries.translate(expr, out.catalog, where)
                        if sustain is not None:
                            sustain = queries.translate(sustain, out.catalog, f"{where} (sustain)")
                    except Lacking as lack:
                        why = why or f"it reads {lack.name}: {lack.reason}"
                    if why is not None:
                        out.unavailable.append((str(definition.path), rule, why))
                        continue
                    rule = replace(rule, summary=queries.template(rule.summary),
                                   description=queries.template(rule.description))
                    if losses:
                        out.losses[rule.name] = losses
                    condition = expr
                    if sustain is not None:
                        expr = with_sustain(rule.name, condition, sustain, queries.labels_of(rule.sustain.on))
                    out.alerts.append((str(definition.path), rule, expr))
                    rendered = _alert_yaml(rule, expr, config)
                    rendered_rules.append(rendered)
                    out.alert_rules.append(AlertRule(
                        rule.name, expr, _ms(interval), 0 if isinstance(rule.for_, Steps) else _ms(rule.for_),
                        tuple(sorted(rendered["labels"].items())),
                        _ms(rule.keep_firing_for), condition, sustain))
                else:
                    raise BuildError(f"{definition.path}: group {group.name!r} holds {type(rule).__name__}, "
                                     f"not an Alert or Recording")
            if rendered_rules:  # a group whose every rule the source cannot give is left out
                rendered_groups.append({"name": group.name, "interval": interval, "rules": rendered_rules})
        header = f"# Rendered by `dashgen build` from {definition.path.as_posix()}; do not edit.\n"
        out.files[f"{RULES_DIR}/{definition.path.stem}.yaml"] = header + rule_yaml({"groups": rendered_groups})
    for where, expr in reading_alerts:  # a hand-written ALERTS{alertname="..."} names an alert of the project
        check_alertname_matchers(expr, out.alert_labels, where)
        check_step_statistics_listed(expr, served, where)
    _render_derived(out, config)
    _render_series_readers(out, config)
    if exporter_source:  # the exporter reads the list, empty or not
        out.step_statistics = served
        out.files[STEP_STATISTICS_FILE] = dump_statistics(served)
    if out.alerts or out.unavailable:
        out.files[DOCS_FILE] = _render_docs(out, config)
    return out


def _render_derived(out: RulesOutput, config: Config) -> None:
    """The source's recordings of the catalog series it rebuilds, in a rule file named after it."""
    recordings = out.queries.derived_recordings(out.catalog)
    if not recordings:
        return
    name = out.queries.source.name
    rules = []
    for recording in recordings:
        rules.append({"record": recording.record, "expr": recording.expr})
        out.recording_rules.append(RecordingRule(recording.record, recording.expr, _ms(config.rule_interval)))
    header = f"# Rendered by `dashgen build` from dashgen/sources/{name}.py; do not edit.\n"
    out.files[f"{RULES_DIR}/{SOURCE_RULES_PREFIX}{name}.yaml"] = header + rule_yaml(
        {"groups": [{"name": f"{SOURCE_RULES_PREFIX}{name}", "interval": config.rule_interval, "rules": rules}]})


def _render_series_readers(out: RulesOutput, config: Config) -> None:
    """dashgen:series_readers, where an alert reads it: the alerts blind without each logged series."""
    if not any(SERIES_READERS_METRIC in metrics_in(rule.expr) for rule in out.alert_rules):
        return
    needs = alert_needs(((rule.name, rule.condition or rule.expr) for rule in out.alert_rules),
                        ((rule.record, rule.expr) for rule in out.recording_rules), out.catalog)
    rule = RecordingRule(SERIES_READERS_METRIC, readers_expression(needs, out.catalog), _ms(config.rule_interval))
    out.recording_rules.append(rule)
    header = "# Rendered by `dashgen build` from the alerts' compiled rules (dashgen/compiler/signal_needs.py); do not edit.\n"
    out.files[f"{RULES_DIR}/{SERIES_READERS_FILE}"] = header + rule_yaml(
        {"groups": [{"name": "dashgen-series-readers", "interval": config.rule_interval,
                     "rules": [{"record": rule.record, "expr": rule.expr}]}]})


def _with_recordings(catalog: Catalog, modules: list, selectors: dict) -> Catalog:
    """The catalog plus every recorded series, with the labels its expression keeps. A recording
    may read one defined after it (e.g. in a group of another interval); one whose expression
    does not check is left out here and reported where it is rendered."""
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
                rule.record, MetricType.GAUGE, "none", rule.help, result_info.labels, Source.RECORDING_RULE)])
        if len(left) == len(pending):
            break
        pending = left
    return catalog


def _compiled_alert(rule, compiler: ConditionCompiler, definition: DefinitionModule):
    """A declarative alert with its condition compiled to PromQL (and its keep-firing condition
    to the hysteresis branch); any other rule as it is."""
    if not isinstance(rule, Alert) or (rule.condition is None and rule.keep_firing_while is None):
        return rule
    where = f"{definition.path}: alert {rule.name!r}"
    if rule.condition is None:
        raise BuildError(f"{where}: keep_firing_while needs a condition to hold; give condition= (Alert.when)")
    if rule.expr.strip():
        raise BuildError(f"{where}: give either condition= (the alert vocabulary) or expr= (PromQL), not both")
    if rule.sustain is not None:
        raise BuildError(f"{where}: with condition=, state hysteresis as keep_firing_while=, not sustain=")
    expr = compiler.compile(rule.condition, where)
    if isinstance(rule.for_, Steps):
        expr = compiler.held_for_steps(expr, rule.name, rule.for_)
    sustain = None
    if rule.keep_firing_while is not None:
        sustain = Sustain(compiler.compile(rule.keep_firing_while, f"{where} (keep_firing_while)", rule.condition),
                          ON_RUN)
    description = rule.description or generated_description(rule)
    return replace(rule, expr=expr, sustain=sustain, description=description)


def generated_description(alert: Alert) -> str:
    """What the condition says, with its thresholds, for an alert written without a description."""
    first = next(comparisons(alert.condition)).signal.describe()
    text = f"Run {RUN_NAME}: {alert.condition.describe()} ({first}: {VALUE})."
    if alert.keep_firing_while is not None:
        text += f" It stays firing while {alert.keep_firing_while.describe()}."
    return text


def _check_group_names(path: Path, groups: list[RuleGroup], stated: list[RuleGroup]) -> None:
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


def _check_alert(alert: Alert, where: str) -> None:
    if not _ALERT_NAME.fullmatch(alert.name):
        raise BuildError(f"{where}: alert names are CamelCase (letters and digits, starting upper-case)")
    if not isinstance(alert.severity, Severity):
        raise BuildError(f"{where}: severity {alert.severity!r} is not one of "
                         f"{', '.join(s.value for s in Severity)}; use dashgen.model.Severity")
    if not alert.summary.strip():
        raise BuildError(f"{where}: summary is empty; say in one line what is wrong")
    if not alert.description.strip():
        raise BuildError(f"{where}: description is empty")
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
    if alert.sustain is not None and not isinstance(alert.sustain, Sustain):
        raise BuildError(f"{where}: sustain must be a dashgen.model.Sustain")
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
    for field_name, text in (*((f"label {name}", value) for name, value in alert.labels),
                             ("summary", alert.summary), ("description", alert.description)):
        problem = template_problem(text)
        if problem:
            raise BuildError(f"{where}: {field_name}: not a valid Prometheus template: {problem}")


def _alert_yaml(alert: Alert, expr: str, config: Config) -> dict:
    rule: dict = {"alert": alert.name, "expr": expr}
    if isinstance(alert.for_, str) and alert.for_ not in ("0s", "0m"):  # steps are in the expression
        rule["for"] = alert.for_
    if alert.keep_firing_for not in ("0s", "0m"):
        rule["keep_firing_for"] = alert.keep_firing_for
    rule["labels"] = {"severity": alert.severity.value, **dict(sorted(alert.labels))}
    rule["annotations"] = {
        "summary": alert.summary.strip(),
        "description": textwrap.dedent(alert.description).strip(),
        "runbook_url": f"{config.runbook_base_url}#{runbook_anchor(alert.name)}",
    }
    return rule


def _render_docs(out: RulesOutput, config: Config) -> str:
    ordered = sorted(out.alerts, key=lambda item: (item[1].severity.rank, item[1].name))
    held_alerts = [alert.name for _, alert, _ in ordered if _compares_with_held_baseline(alert)]
    unavailable = sorted(out.unavailable, key=lambda item: (item[1].severity.rank, item[1].name))
    return templates().get_template("alerts.md.j2").render(
        alerts=[{"module": module, "alert": alert, "expr": expr, "anchor": runbook_anchor(alert.name),
                 "windows": windows_in(alert.condition, alert.for_), "losses": out.losses.get(alert.name, ())}
                for module, alert, expr in ordered], config=config, held_alerts=held_alerts,
        source=out.queries.source,
        unavailable=[{"module": module, "alert": alert, "why": why, "anchor": runbook_anchor(alert.name)}
                     for module, alert, why in unavailable])


def _compares_with_held_baseline(alert: Alert) -> bool:
    conditions = [c for c in (alert.condition, alert.keep_firing_while) if c is not None]
    return any(c.baseline is not None and c.baseline.is_held for condition in conditions for c in comparisons(condition))
