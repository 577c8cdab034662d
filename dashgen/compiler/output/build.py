"""Render a project's definitions into the files of rendered/, and compare or write them.

The project is compiled once (dashgen/compiler/project.py), then each artefact's renderer
(dashgen/compiler/output/targets/) turns the compiled project into its files. Everything is rendered
and checked in memory first; only a complete, valid set of files
is written, as a whole (dashgen/compiler/output/tree_writer.py), so a failed or killed build leaves
rendered/ as it was and a Grafana or Prometheus watching it never reads a half-written file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import os
import shutil
import sys
import tempfile

import yaml

from dashgen.compiler.compiled import CompiledProject
from dashgen.compiler.project import compile_project
from dashgen.compiler.output.targets.alertmanager import render_alertmanager
from dashgen.compiler.output.targets.exporter import render_step_statistics
from dashgen.compiler.output.targets.grafana import render_dashboards, render_provisioning
from dashgen.compiler.output.targets.prometheus import render_prometheus_config, render_rule_files
from dashgen.compiler.output.targets.runbook import render_runbook
from dashgen.compiler.output.targets.victoriametrics import render_victoriametrics
from dashgen.compiler.output.tree_writer import existing_files, replace_tree
from dashgen.config import Config
from dashgen.errors import BuildError
from dashgen.records import record

RENDERED = "rendered"
# The files dashgen itself renders are parsed back with libyaml's parser (ten times faster than
# PyYAML's own on them); a file a user names goes through dashgen.bounded_read instead.
_RENDERED_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# rendered/preview/ holds `dashgen preview`'s PNGs: drawn from a backfilled run, not by build, so
# build leaves the folder alone and check does not compare it (see tree_writer.UNMANAGED).
PREVIEW = "preview"


def _render_kubernetes(project: CompiledProject) -> dict[str, str]:
    from dashgen.compiler.output.targets.kubernetes import KubernetesSection, render_kubernetes

    if not project.config.section(KubernetesSection).enabled:  # the objects' schemas only then
        return {}
    return render_kubernetes(project)


# One renderer per artefact (dashgen/compiler/output/targets/), in the order their files are listed.
RENDERERS: tuple[Callable[[CompiledProject], dict[str, str]], ...] = (
    render_rule_files, render_step_statistics, render_runbook, render_dashboards, render_provisioning,
    render_alertmanager, render_prometheus_config, render_victoriametrics, _render_kubernetes)


@record
class Rendered:
    """A compiled project and the files it renders to (path under rendered/ -> content)."""

    project: CompiledProject
    files: dict[str, str]


def render_project(root: Path, config: Config) -> Rendered:
    """The project at `root` compiled, and every artefact rendered from it, in memory."""
    project = compile_project(root, config)
    return Rendered(project, render_files(project))


def render_files(project: CompiledProject) -> dict[str, str]:
    files: dict[str, str] = {}
    for render in RENDERERS:
        files.update(render(project))
    return files


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
        from dashgen.compiler.output.staged_checks import check_with_tools

        check_with_tools(files, changed, out_dir.name)

    return replace_tree(out_dir, files, check)


def validate_rendered(files: dict[str, str]) -> None:
    """Check what a build renders as its consumers will read it: every YAML file parses, and
    `promtool check config` accepts prometheus.yml with the rule files it loads."""
    for rel, content in sorted(files.items()):
        if rel.endswith((".yaml", ".yml")):
            try:
                yaml.load(content, Loader=_RENDERED_YAML_LOADER)
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
    from dashgen.compiler.output.staged_checks import ALERTMANAGER_FILE, check_with_tools

    check_with_tools(files, [ALERTMANAGER_FILE] if ALERTMANAGER_FILE in files else [], RENDERED)


def check_for_vmalert(files: dict[str, str]) -> None:
    """`vmalert -dryRun` of the rule files rendered for VictoriaMetrics, if any, before rendered/
    is replaced; says so when vmalert is not installed."""
    from dashgen.compiler.output.targets.victoriametrics import VMALERT_RULES_DIR, check_with_vmalert

    if any(rel.startswith(f"{VMALERT_RULES_DIR}/") for rel in files) and not check_with_vmalert(files, RENDERED):
        print(f"dashgen: vmalert not found; skipped `vmalert -dryRun` of {RENDERED}/{VMALERT_RULES_DIR}/",
              file=sys.stderr)
