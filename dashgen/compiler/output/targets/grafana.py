"""rendered/dashboards/<uid>.json, one file per compiled dashboard, and the provisioning files
that load them into Grafana with the Prometheus data source they query.

A dashboard is written as it is committed: sorted keys, 2-space indent, and an object or list
that fits on one line kept on one, so a diff reads well.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from dashgen.compiler.output.rendering import templates

if TYPE_CHECKING:
    from dashgen.compiler.compiled import CompiledProject

DEFAULT_DASHBOARDS_PATH = "/etc/dashgen/dashboards"
DEFAULT_PROMETHEUS_URL = "http://localhost:9090"
LINE_WIDTH = 110


def dashboard_path(uid: str) -> str:
    """A dashboard's file under rendered/."""
    return f"dashboards/{uid}.json"


def render_dashboards(project: CompiledProject) -> dict[str, str]:
    return {dashboard_path(dashboard.uid): dashboard_to_text(dashboard.model) for dashboard in project.dashboards}


def render_provisioning(project: CompiledProject) -> dict[str, str]:
    """Grafana's provisioning: the dashboards' folder, and the Prometheus data source they query."""
    config, env = project.config, templates()
    return {
        "provisioning/dashboards/dashgen.yaml": env.get_template("provisioning-dashboards.yaml.j2").render(
            folder=config.grafana_folder, default_dashboards_path=DEFAULT_DASHBOARDS_PATH),
        "provisioning/datasources/prometheus.yaml": env.get_template("provisioning-datasources.yaml.j2").render(
            name=config.datasource_name, uid=config.datasource_uid, scrape_interval=config.scrape_interval,
            default_prometheus_url=DEFAULT_PROMETHEUS_URL, is_default=config.datasource_is_default),
    }


def dashboard_to_text(model: dict[str, Any]) -> str:
    """The committed form: sorted keys, 2-space indent, trailing newline; an object or list
    that fits on one line of LINE_WIDTH stays on one (a gridPos, a query, a threshold step),
    so a reviewer reads a panel in a screenful and a diff shows the changed query whole."""
    return _json_text(model, 0) + "\n"


# json.dumps' encoders for these options, made once (json.dumps makes one a call).
_FLAT = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(", ", ": "))
_KEY = json.JSONEncoder(ensure_ascii=False)


def _json_text(value: Any, indent: int, start: int | None = None) -> str:
    """`value` at `indent`, its first line starting at column `start` (after its key)."""
    return _laid_out(_with_flat_texts(value), indent, start)


# A value with its one-line text; for a non-empty object or list, its items' (key text or None, node).
_Node = tuple[str, "list[tuple[str | None, _Node]] | None"]


def _with_flat_texts(value: Any) -> _Node:
    """The one-line text of `value` and of each object and list in it, each made once from its
    items' (encoding each subtree again at every level was most of a dashboard's writing)."""
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value):
        items = [(_KEY.encode(key), _with_flat_texts(item)) for key, item in sorted(value.items())]
        return "{" + ", ".join(f"{key}: {node[0]}" for key, node in items) + "}", items
    if isinstance(value, list) and value:
        items = [(None, _with_flat_texts(item)) for item in value]
        return "[" + ", ".join(node[0] for _, node in items) + "]", items
    return _scalar_text(value), None


def _scalar_text(value: Any) -> str:
    """json.dumps of a scalar, without building an encoder's iterator for each number."""
    if isinstance(value, str):
        return _FLAT.encode(value)
    if value is None or value is True or value is False:
        return "null" if value is None else "true" if value else "false"
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return repr(value)
    return _FLAT.encode(value)


def _laid_out(node: _Node, indent: int, start: int | None) -> str:
    flat, items = node
    if items is None or (indent if start is None else start) + len(flat) + 1 <= LINE_WIDTH:  # +1: a comma
        return flat
    inner = " " * (indent + 2)
    if items[0][0] is None:
        return "[\n" + ",\n".join(inner + _laid_out(item, indent + 2, None) for _, item in items) + "\n" + " " * indent + "]"
    lines = []
    for key, item in items:
        head = f"{inner}{key}: "
        lines.append(head + _laid_out(item, indent + 2, len(head)))
    return "{\n" + ",\n".join(lines) + "\n" + " " * indent + "}"
