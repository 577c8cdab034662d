"""Render a project's definitions into the files of rendered/, and compare or write them.

Everything is rendered and checked in memory first; only a complete, valid set of files
is written, as a whole (dashgen/compiler/tree_writer.py), so a failed or killed build leaves
rendered/ as it was and a Grafana or Prometheus watching it never reads a half-written file.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

import os
import shutil
import sys
import tempfile

import yaml

from dashgen.catalog import Catalog
from dashgen.compiler.dashboards import compile_dashboard, dashboard_to_text
from dashgen.compiler.loader import call_definition, load_modules
from dashgen.compiler.references import check_dashboard_links, resolve_dashboard_references
from dashgen.compiler.rendering import markdown_text, templates
from dashgen.compiler.tree_writer import existing_files, replace_tree
from dashgen.compiler.validate import validate_dashboard
from dashgen.config import Config, areas_of
from dashgen.errors import BuildError
from dashgen.model import Alert, Dashboard, RuleGroup
from dashgen.project_metrics import project_catalog
from dashgen.records import record

if TYPE_CHECKING:  # render_project imports rules.py where it uses it
    from dashgen.compiler.rules import AlertRule, RecordingRule

RENDERED = "rendered"
# rendered/preview/ holds `dashgen preview`'s PNGs: drawn from a backfilled run, not by build, so
# build leaves the folder alone and check does not compare it (see tree_writer.UNMANAGED).
PREVIEW = "preview"
DEFAULT_DASHBOARDS_PATH = "/etc/dashgen/dashboards"
DEFAULT_PROMETHEUS_URL = "http://localhost:9090"


@record(frozen=False)
class Rendered:
    """Everything one build renders, with what was rendered from."""

    files: dict[str, str] = field(default_factory=dict)  # path under rendered/ -> content
    dashboards: list[tuple[str, Dashboard]] = field(default_factory=list)  # (module path, definition)
    alerts: list = field(default_factory=list)  # (module path, Alert, expanded expr)
    catalog: Catalog | None = None  # what the queries were checked against, recordings included
    recording_rules: list[RecordingRule] = field(default_factory=list)  # as rendered: a preview evaluates them
    alert_rules: list[AlertRule] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # what the build adapted, for the user to know
    unavailable: list = field(default_factory=list)  # (module path, Alert, why) the metric source cannot give
    left_out: dict = field(default_factory=dict)  # (dashboard uid, panel title) -> why the source cannot show it


def render_project(root: Path, config: Config) -> Rendered:
    from dashgen.compiler.rules import DOCS_FILE, load_rule_modules, render_rules  # alerts and recording rules
    from dashgen.compiler.targets.alertmanager import alertmanager_config, render_alerting

    out = Rendered()
    alert_modules = load_rule_modules(root)
    config.check_sections(areas_of(definition.module for definition in alert_modules))
    rules = render_rules(root, config, project_catalog(root), alert_modules)
    out.files.update(rules.files)
    out.alerts = rules.alerts
    out.recording_rules, out.alert_rules = rules.recording_rules, rules.alert_rules
    # Alerts the metric source cannot give are still defined: panels and inhibitions may name them.
    alerts_by_name = {alert.name: alert for _, alert, *_ in (*rules.alerts, *rules.unavailable)}
    out.unavailable = rules.unavailable
    out.left_out = rules.queries.left_out
    # Panels may query recorded series, so they are checked against the catalog plus the recordings.
    catalog: Catalog = rules.catalog
    out.catalog = catalog
    withdrawn = withdrawn_default_alerts(set(alerts_by_name), config)

    uids: dict[str, Path] = {}
    for definition in load_modules(root, "panels", "dashboard"):
        dashboard = call_definition(definition, "dashboard", config)
        if not isinstance(dashboard, Dashboard):
            raise BuildError(f"{definition.path}: dashboard() returned {type(dashboard).__name__}, "
                             f"not a dashgen.model.Dashboard")
        if dashboard.uid in uids:
            raise BuildError(f"{definition.path}: dashboard uid {dashboard.uid!r} is already used by "
                             f"{uids[dashboard.uid]}; uids must be unique")
        uids[dashboard.uid] = definition.path
        dashboard = resolve_dashboard_references(dashboard, alerts_by_name,
                                                 f"{definition.path}: dashboard {dashboard.uid!r}",
                                                 withdrawn, out.notices)
        model = compile_dashboard(dashboard, config, catalog, str(definition.path), rules.queries)
        validate_dashboard(model, f"{definition.path}: dashboard {dashboard.uid!r}")
        out.files[f"dashboards/{dashboard.uid}.json"] = dashboard_to_text(model)
        out.dashboards.append((str(definition.path), dashboard))
    check_dashboard_links(out.dashboards)

    env = templates()
    out.files["provisioning/dashboards/dashgen.yaml"] = env.get_template("provisioning-dashboards.yaml.j2").render(
        folder=config.grafana_folder, default_dashboards_path=DEFAULT_DASHBOARDS_PATH)
    out.files["provisioning/datasources/prometheus.yaml"] = env.get_template(
        "provisioning-datasources.yaml.j2").render(
        name=config.datasource_name, uid=config.datasource_uid, scrape_interval=config.scrape_interval,
        default_prometheus_url=DEFAULT_PROMETHEUS_URL, is_default=config.datasource_is_default)
    alerting = render_alerting(alert_modules, config, list(alerts_by_name.values()), rules.alert_labels)
    out.files.update(alerting.files)
    if DOCS_FILE in out.files:
        out.files[DOCS_FILE] += alerting.runbook_section
        if config.grafana_base_url:
            out.files[DOCS_FILE] += "\n## Dashboards\n\n" + "".join(
                f"- [{markdown_text(d.title)}]({config.grafana_base_url}/d/{d.uid})\n" for _, d in out.dashboards)
    out.files["prometheus/prometheus.yml"] = env.get_template("prometheus.yml.j2").render(
        config=config, alerting=alerting.prometheus_alerting, source=rules.queries.source)
    alertmanager = alertmanager_config(config, alerting.inhibitions)
    if config.victoriametrics:
        from dashgen.compiler.targets.victoriametrics import render_victoriametrics

        if rules.queries.source.victoriametrics_caveat:
            out.notices.append(f"victoriametrics: true with source: {rules.queries.source.name}: "
                               f"{rules.queries.source.victoriametrics_caveat}")

        out.files.update(render_victoriametrics(rules.files, config.rule_interval))
    if config.kubernetes:  # the objects' schemas only then
        from dashgen.compiler.targets.kubernetes import render_kubernetes

        out.files.update(render_kubernetes(config, out.files, out.dashboards, alertmanager))
    return out


def withdrawn_default_alerts(defined: set[str], config: Config) -> dict[str, str]:
    """dashgen's default alerts the project does not define (an area it replaced or removed):
    name -> the default alert module (`rollout` for dashgen_alerts.rollout) that does."""
    import importlib

    from dashgen.compiler.scaffold import default_modules

    withdrawn = {}
    for name in default_modules("dashgen_alerts"):
        result = importlib.import_module(f"dashgen_alerts.{name}").rules(config)
        for group in [result] if isinstance(result, RuleGroup) else result:
            withdrawn.update({rule.name: name for rule in group.rules
                              if isinstance(rule, Alert) and rule.name not in defined})
    return withdrawn


def differences(out_dir: Path, files: dict[str, str]) -> list[str]:
    """What in out_dir does not match `files`: one line per differing, missing or extra file."""
    problems = []
    for rel, content in sorted(files.items()):
        path = out_dir / rel
        if not path.is_file():
            problems.append(f"{out_dir.name}/{rel}: missing")
        elif path.read_text() != content:
            problems.append(f"{out_dir.name}/{rel}: differs from its sources")
    for rel in sorted(existing_files(out_dir) - set(files)):
        problems.append(f"{out_dir.name}/{rel}: not produced by the sources (left over?)")
    return problems


def write_rendered(out_dir: Path, files: dict[str, str]) -> list[str]:
    """Replace out_dir's files by `files` as a whole (see tree_writer), once promtool and amtool
    accept the rule files and Alertmanager config that change (staged_checks); returns the paths changed."""
    def check(changed: list[str]) -> None:  # imported only when something changes: a build is benchmarked
        from dashgen.compiler.staged_checks import check_with_tools

        check_with_tools(files, changed, out_dir.name)

    return replace_tree(out_dir, files, check)


def validate_rendered(files: dict[str, str]) -> None:
    """Check what a build renders as its consumers will read it: every YAML file parses, and
    `promtool check config` accepts prometheus.yml with the rule files it loads."""
    for rel, content in sorted(files.items()):
        if rel.endswith((".yaml", ".yml")):
            try:
                yaml.safe_load(content)
            except yaml.YAMLError as exc:
                raise BuildError(f"{RENDERED}/{rel}: the rendered file is not valid YAML: {exc}") from None
    if "prometheus/prometheus.yml" not in files:
        return
    from dashgen.promtool import run_promtool

    if shutil.which("promtool") is None and not os.environ.get("PROMTOOL"):
        print("dashgen check: promtool not found; skipped `promtool check config` of the rendered files",
              file=sys.stderr)
        return
    with tempfile.TemporaryDirectory(prefix="dashgen-check-") as tmp:
        for rel, content in files.items():
            path = Path(tmp) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
        result = run_promtool(["check", "config", "prometheus/prometheus.yml"], cwd=tmp)
    if result.returncode != 0:
        raise BuildError(f"promtool check config rejects {RENDERED}/prometheus/prometheus.yml or its rule files:\n"
                         f"{(result.stdout + result.stderr).strip()}")
    from dashgen.compiler.staged_checks import ALERTMANAGER_FILE, check_with_tools

    check_with_tools(files, [ALERTMANAGER_FILE] if ALERTMANAGER_FILE in files else [], RENDERED)


def check_for_vmalert(files: dict[str, str]) -> None:
    """`vmalert -dryRun` of the rule files rendered for VictoriaMetrics, if any, before rendered/
    is replaced; says so when vmalert is not installed."""
    from dashgen.compiler.targets.victoriametrics import VMALERT_RULES_DIR, check_with_vmalert

    if any(rel.startswith(f"{VMALERT_RULES_DIR}/") for rel in files) and not check_with_vmalert(files, RENDERED):
        print(f"dashgen: vmalert not found; skipped `vmalert -dryRun` of {RENDERED}/{VMALERT_RULES_DIR}/",
              file=sys.stderr)
