"""rendered/alertmanager/alertmanager.yml: Alertmanager's configuration, rendered from the compiled
routing (dashgen/compiler/alerting/routing.py: routes by severity, grouping by run, inhibition, receivers),
and prometheus.yml's `alerting:` block that points Prometheus at it. Routing fixtures
(tests/alertmanager/*.yaml) are checked with `amtool config routes test`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from dashgen.compiler.output.block_yaml import indented_yaml
from dashgen.compiler.queries.promql import label_value
from dashgen.compiler.alerting.routing import AlertmanagerSection
from dashgen.config import Config
from dashgen.errors import BuildError

if TYPE_CHECKING:
    from dashgen.compiler.compiled import CompiledProject

ALERTMANAGER_FILE = "alertmanager/alertmanager.yml"
ROUTE_FIXTURES = Path("tests") / "alertmanager"

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_HEADER = ("# Rendered by `dashgen build` from dashgen/config.py and the inhibitions in alerts/*.py; do not edit.\n"
           "# Run: prometheus-alertmanager --config.file=rendered/alertmanager/alertmanager.yml\n"
           "# Receivers `page` and `channel` deliver nothing until the config's alertmanager_page and\n"
           "# alertmanager_channel say where (secrets only through *_file fields).\n")


def render_alertmanager(project: CompiledProject) -> dict[str, str]:
    return {ALERTMANAGER_FILE: _HEADER + indented_yaml(project.routing)}


def prometheus_alerting(config: Config) -> str:
    """The `alerting:` block of prometheus.yml: where Prometheus sends the alerts."""
    return indented_yaml({"alerting": {"alertmanagers": [
        {"static_configs": [{"targets": [config.section(AlertmanagerSection).address]}]}]}})


# --- Routing fixtures ---------------------------------------------------------------------------

def run_route_fixtures(root: Path) -> tuple[bool, str]:
    """Each fixture case's labels through `amtool config routes test`; (all passed, report)."""
    files = sorted((root / ROUTE_FIXTURES).glob("*.yaml"))
    if not files:
        return True, ""
    lines, passed = [], True
    for path in files:
        shown = path.relative_to(root).as_posix()
        config_file, cases = _read_fixture(path, shown)
        lines.append(f"Routing {shown}")
        for case in cases:
            resolved = route(config_file, case["labels"], f"{shown}: {case['name']}")
            if sorted(resolved) == sorted(case["receivers"]):
                lines.append(f"  PASS    {case['name']}")
            else:
                passed = False
                lines.append(f"  FAILED  {case['name']}: {_labels_text(case['labels'])} goes to "
                             f"{', '.join(resolved) or 'no receiver'}; expected {', '.join(case['receivers'])}")
    lines.append("SUCCESS" if passed else "FAILED")
    return passed, "\n".join(lines) + "\n"


def route(config_file: Path, labels: dict[str, str], where: str) -> list[str]:
    """The receivers Alertmanager's routing tree sends `labels` to, as amtool resolves them."""
    from dashgen.promtool import run_tool  # subprocess, for `dashgen test` only

    args = [f"{name}={json.dumps(value)}" for name, value in sorted(labels.items())]
    result = run_tool("amtool", ["config", "routes", "test", f"--config.file={config_file}", *args], timeout=60)
    if result.returncode != 0:
        raise BuildError(f"{where}: amtool config routes test failed:\n{result.stdout}{result.stderr}".rstrip())
    first = result.stdout.strip().splitlines()[0] if result.stdout.strip() else ""
    return [name for name in first.split(",") if name]


def _read_fixture(path: Path, shown: str) -> tuple[Path, list[dict]]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BuildError(f"{shown}: cannot read routing fixtures: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("config_file"), str) \
            or not isinstance(data.get("tests"), list):
        raise BuildError(f"{shown}: expected config_file: PATH and tests: [{{name, labels, receivers}}, ...]")
    config_file = (path.parent / data["config_file"]).resolve()
    if not config_file.is_file():
        raise BuildError(f"{shown}: config_file {data['config_file']} does not exist; run `dashgen build` first")
    for index, case in enumerate(data["tests"]):
        ok = (isinstance(case, dict) and isinstance(case.get("name"), str)
              and isinstance(case.get("labels"), dict)
              and all(isinstance(k, str) and _LABEL_NAME.fullmatch(k) and isinstance(v, str)
                      for k, v in case["labels"].items())
              and isinstance(case.get("receivers"), list) and all(isinstance(r, str) for r in case["receivers"]))
        if not ok:
            raise BuildError(f"{shown}: test {index + 1} needs name: TEXT, labels: {{label: 'value'}} and "
                             f"receivers: [NAME, ...]")
    return config_file, data["tests"]


def _labels_text(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f"{k}={label_value(v)}" for k, v in sorted(labels.items())) + "}"
