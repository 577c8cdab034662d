"""Render a project's definitions into the files of rendered/, and compare or write them.

Everything is rendered and checked in memory first; only a complete, valid set of files
is written, one file at a time by atomic rename, so a failed build leaves rendered/ as it
was and a Grafana or Prometheus watching the directory never reads a half-written file.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

from dashgen.catalog import CATALOG, Catalog
from dashgen.config import Config
from dashgen.dashboards import compile_dashboard, dashboard_to_text
from dashgen.errors import BuildError
from dashgen.loader import call_definition, load_modules
from dashgen.model import Dashboard
from dashgen.validate import validate_dashboard

RENDERED = "rendered"
DEFAULT_DASHBOARDS_PATH = "/etc/dashgen/dashboards"
DEFAULT_PROMETHEUS_URL = "http://localhost:9090"


@dataclass
class Rendered:
    files: dict[str, str] = field(default_factory=dict)  # path under rendered/ -> content
    dashboards: list[tuple[str, Dashboard]] = field(default_factory=list)  # (module path, definition)
    alerts: list = field(default_factory=list)  # (module path, Alert, expanded expr)


def templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("dashgen", "templates"), undefined=jinja2.StrictUndefined,
                              keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)


def render_project(root: Path, config: Config) -> Rendered:
    from dashgen.rules import render_rules  # alerts and recording rules

    out = Rendered()
    rules = render_rules(root, config, CATALOG)
    out.files.update(rules.files)
    out.alerts = rules.alerts
    # Panels may query recorded series, so they are checked against the catalog plus the recordings.
    catalog: Catalog = rules.catalog

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
        model = compile_dashboard(dashboard, config, catalog, str(definition.path))
        validate_dashboard(model, f"{definition.path}: dashboard {dashboard.uid!r}")
        out.files[f"dashboards/{dashboard.uid}.json"] = dashboard_to_text(model)
        out.dashboards.append((str(definition.path), dashboard))

    env = templates()
    out.files["provisioning/dashboards/dashgen.yaml"] = env.get_template("provisioning-dashboards.yaml.j2").render(
        folder=config.grafana_folder, default_dashboards_path=DEFAULT_DASHBOARDS_PATH)
    out.files["provisioning/datasources/prometheus.yaml"] = env.get_template(
        "provisioning-datasources.yaml.j2").render(
        name=config.datasource_name, uid=config.datasource_uid, scrape_interval=config.scrape_interval,
        default_prometheus_url=DEFAULT_PROMETHEUS_URL)
    out.files["prometheus/prometheus.yml"] = env.get_template("prometheus.yml.j2").render(config=config)
    return out


def differences(out_dir: Path, files: dict[str, str]) -> list[str]:
    """What in out_dir does not match `files`: one line per differing, missing or extra file."""
    problems = []
    for rel, content in sorted(files.items()):
        path = out_dir / rel
        if not path.is_file():
            problems.append(f"{out_dir.name}/{rel}: missing")
        elif path.read_text() != content:
            problems.append(f"{out_dir.name}/{rel}: differs from its sources")
    for rel in sorted(_existing_files(out_dir) - set(files)):
        problems.append(f"{out_dir.name}/{rel}: not produced by the sources (left over?)")
    return problems


def write_rendered(out_dir: Path, files: dict[str, str]) -> list[str]:
    """Write changed files atomically and remove left-over ones; returns the paths changed."""
    changed = []
    for rel, content in sorted(files.items()):
        path = out_dir / rel
        if path.is_file() and path.read_text() == content:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(content)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        changed.append(rel)
    for rel in sorted(_existing_files(out_dir) - set(files)):
        (out_dir / rel).unlink()
        changed.append(rel)
    for directory in sorted((d for d in out_dir.rglob("*") if d.is_dir()), reverse=True):
        if not any(directory.iterdir()):
            directory.rmdir()
    return changed


def _existing_files(out_dir: Path) -> set[str]:
    if not out_dir.is_dir():
        return set()
    return {p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if p.is_file()}
