"""Validate rendered dashboards against JSON Schemas generated from Grafana's own types.

The schemas (dashgen/schemas/, made by schema/generate.mjs from npm @grafana/schema) cover
the dashboard model and the options/field config of the panel types dashgen emits.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.output.schema_check import Schema
from dashgen.errors import BuildError

# dashgen/ itself holds the templates and schemas, which several packages read.
_PACKAGE_DIR = Path(__file__).resolve().parents[2]

if TYPE_CHECKING:
    import jsonschema

# panel type -> (options schema, fieldConfig.defaults.custom schema)
_PANEL_SCHEMAS = {
    "timeseries": ("panel-timeseries-options", "panel-timeseries-fieldconfig"),
    "heatmap": ("panel-heatmap-options", "panel-heatmap-fieldconfig"),
    "xychart": ("panel-xychart-options", "panel-xychart-fieldconfig"),
}


@lru_cache(maxsize=None)
def _validator(name: str) -> Schema:
    # Beside this module, read as a file: importlib.resources (and zipfile) cost 15 ms to import.
    text = (_PACKAGE_DIR / "schemas" / f"{name}.schema.json").read_text()
    return Schema(json.loads(text))


# A Prometheus annotation query's own fields: the dashboard schema knows only the core ones
# (name, datasource, enable, iconColor...), as it knows no panel plugin's options.
_PROMETHEUS_ANNOTATION_KEYS = frozenset({"expr", "step", "titleFormat", "textFormat", "tagKeys", "useValueForTime"})


def schema_errors(model: dict[str, Any]) -> list[str]:
    """Every schema violation of a dashboard model, as 'path: message' lines."""
    problems = [_describe(e, "") for e in _validator("grafana-dashboard").iter_errors(_core_annotations(model))]
    for index, panel in enumerate(iter_panels(model)):
        schemas = _PANEL_SCHEMAS.get(panel.get("type"))
        if schemas is None:
            continue
        where = f"panel {panel.get('title', index)!r} "
        options_schema, custom_schema = schemas
        problems += [_describe(e, where + "options") for e in _validator(options_schema).iter_errors(
            panel.get("options", {}))]
        custom = panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})
        problems += [_describe(e, where + "fieldConfig.defaults.custom")
                     for e in _validator(custom_schema).iter_errors(custom)]
    return problems


def _core_annotations(model: dict[str, Any]) -> dict[str, Any]:
    """The model with Prometheus annotation fields set aside (each checked here instead)."""
    annotations = model.get("annotations", {}).get("list")
    if not isinstance(annotations, list):
        return model
    core = []
    for annotation in annotations:
        if isinstance(annotation, dict) and annotation.get("datasource", {}).get("type") == "prometheus":
            annotation = {k: v for k, v in annotation.items() if k not in _PROMETHEUS_ANNOTATION_KEYS}
        core.append(annotation)
    return {**model, "annotations": {**model["annotations"], "list": core}}


def validate_dashboard(model: dict[str, Any], origin: str) -> None:
    problems = schema_errors(model)
    if problems:
        raise BuildError(f"{origin}: the rendered dashboard does not match Grafana's schema:\n  "
                         + "\n  ".join(problems[:10]))


def _describe(error: jsonschema.ValidationError, prefix: str) -> str:
    path = "/".join(str(p) for p in error.absolute_path)
    return f"{prefix}{'/' if prefix and path else ''}{path or ('' if prefix else '(top)')}: {error.message}"
