"""`compile_project`: a project's definitions, loaded once and compiled into the typed project
(dashgen/compiler/compiled.py) that every renderer and command reads.

The path: the alert modules (alerts/*.py) compile first, into rule files and the catalog plus
their recorded series; the dashboards (panels/*.py) are checked against that catalog, their
thresholds and alert names against the alerts; the inhibitions and the config's routing
against the alerts' labels. Everything is checked here; rendering (dashgen/compiler/output/targets/)
only writes what was checked.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Iterator, Mapping

from dashgen.compiler.compiled import CompiledDashboard, CompiledProject, CompiledRules
from dashgen.compiler.dashboards.dashboard_json import compile_dashboard
from dashgen.compiler.loader import call_definition, load_modules
from dashgen.compiler.queries.references import check_dashboard_links, resolve_dashboard_references
from dashgen.compiler.alerting.routing import alertmanager_config, check_routing_config, collect_inhibitions
from dashgen.compiler.rules.rule_files import compile_rules, load_rule_modules
from dashgen.compiler.sections import deploy_sections
from dashgen.compiler.queries.source_queries import SourceQueries
from dashgen.compiler.dashboards.alert_panels import alert_panels
from dashgen.compiler.dashboards.schema_validation import validate_dashboard
from dashgen.config import Config, areas_of
from dashgen.errors import BuildError
from dashgen.model import Alert, Dashboard, RuleGroup
from dashgen.project_metrics import project_catalog


def compile_project(root: Path, config: Config) -> CompiledProject:
    """Every definition module of the project at `root`, loaded once and compiled under `config`;
    BuildError naming the file (and panel, alert or line) at the first problem."""
    alert_modules = load_rule_modules(root)
    config.check_sections([*deploy_sections(), *areas_of(definition.module for definition in alert_modules)])
    metrics = project_catalog(root)
    queries = SourceQueries(config)
    rules = compile_rules(root, config, metrics, alert_modules, queries)
    notices: list[str] = []
    dashboards = compile_dashboards(root, config, rules, queries, notices)
    inhibitions = collect_inhibitions(alert_modules, config, rules.notified_labels)
    check_routing_config(config, {alert.name for alert in (*rules.alerts, *rules.unavailable)})
    if config.victoriametrics and rules.source.victoriametrics_caveat:
        notices.append(f"victoriametrics: true with source: {rules.source.name}: "
                       f"{rules.source.victoriametrics_caveat}")
    return CompiledProject(config, metrics, rules, dashboards, inhibitions, alertmanager_config(config, inhibitions),
                           tuple(notices), dict(queries.left_out), alert_panels(rules, dashboards))


def compile_dashboards(root: Path, config: Config, rules: CompiledRules, queries: SourceQueries,
                       notices: list[str]) -> tuple[CompiledDashboard, ...]:
    """Each dashboard module's dashboard, checked against the catalog with the rules' recordings (a
    panel may query a recorded series) and against the alerts it names; `notices` gets what was adapted."""
    alerts = rules.definitions  # an alert the source cannot give is still defined: panels may name it
    withdrawn = _WithdrawnDefaults(set(alerts), config)
    uids: dict[str, Path] = {}
    compiled = []
    for definition in load_modules(root, "panels", "dashboard"):
        dashboard = call_definition(definition, "dashboard", config)
        if not isinstance(dashboard, Dashboard):
            raise BuildError(f"{definition.path}: dashboard() returned {type(dashboard).__name__}, "
                             f"not a dashgen.model.Dashboard")
        if dashboard.uid in uids:
            raise BuildError(f"{definition.path}: dashboard uid {dashboard.uid!r} is already used by "
                             f"{uids[dashboard.uid]}; uids must be unique")
        uids[dashboard.uid] = definition.path
        where = f"{definition.path}: dashboard {dashboard.uid!r}"
        dashboard = resolve_dashboard_references(dashboard, alerts, where, withdrawn, notices)
        model = compile_dashboard(dashboard, config, rules.catalog, str(definition.path), queries)
        validate_dashboard(model, where)
        compiled.append(CompiledDashboard(str(definition.path), dashboard, model))
    check_dashboard_links(compiled)
    return tuple(compiled)


class _WithdrawnDefaults(Mapping[str, str]):
    """dashgen's default alerts the project does not define (an area it replaced or removed): name ->
    the default alert module (`rollout` for dashgen_alerts.rollout) that does. Read only when a
    threshold names an alert the project does not define, so a build calls no default module's
    `rules(config)` otherwise."""

    def __init__(self, defined: set[str], config: Config):
        self._defined, self._config = defined, config
        self._found: dict[str, str] | None = None

    def _names(self) -> dict[str, str]:
        if self._found is None:
            from dashgen.compiler.scaffold import default_modules

            self._found = {}
            for name in default_modules("dashgen_alerts"):
                result = importlib.import_module(f"dashgen_alerts.{name}").rules(self._config)
                for group in [result] if isinstance(result, RuleGroup) else result:
                    self._found.update({rule.name: name for rule in group.rules
                                        if isinstance(rule, Alert) and rule.name not in self._defined})
        return self._found

    def __getitem__(self, name: str) -> str:
        return self._names()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

