"""A project's own metrics (metrics.yaml at its root), added to dashgen's catalog.

A team whose verl run logs keys dashgen does not know declares them here instead of editing
the installed package; a key dashgen knows that the run logs under another name (a trainer version
that renamed it) is listed under `aliases:`, the logged name -> dashgen's key. The entries go
through the same checks as the built-in ones: a valid, unused name; a known type; labels that
are label names; verl keys no other metric reads. Everything that reads the catalog for a project
(build, check, list, export, backfill, backtest) then knows them.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import yaml

from dashgen.catalog import CATALOG, TARGET_LABELS, VERL_LABELS, Catalog, Metric, MetricType, Origin
from dashgen.config import load_yaml
from dashgen.errors import BuildError

METRICS_FILE = "metrics.yaml"
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_FIELDS = {"name", "type", "unit", "help", "labels", "verl_keys", "scale"}


def project_catalog(root: Path, base: Catalog = CATALOG) -> Catalog:
    """`base` plus the metrics of root/metrics.yaml, if the project has one, and its aliases."""
    path = root / METRICS_FILE
    metrics = load_project_metrics(path, base)
    catalog = base.with_metrics(metrics) if metrics else base
    aliases = load_aliases(path, catalog)
    if not aliases:
        return catalog
    return Catalog(dataclasses.replace(metric, verl_keys=(*metric.verl_keys, *aliases[metric.name]))
                   if metric.name in aliases else metric for metric in catalog.values())


def load_aliases(path: Path, catalog: Catalog) -> dict[str, list[str]]:
    """metrics.yaml's `aliases:` (a logged key -> the catalog's key it is another name of), as the
    catalog metric -> the keys it also reads."""
    aliases = _read(path).get("aliases") or {}
    if not isinstance(aliases, dict):
        raise BuildError(f"{path}: aliases: expected a mapping, a key the run logs -> the key dashgen reads")
    key_map = catalog.verl_key_map()
    added: dict[str, list[str]] = {}
    for logged, known in aliases.items():
        where = f"{path}: alias {logged!r}"
        if not isinstance(logged, str) or not isinstance(known, str) or not logged or not known:
            raise BuildError(f"{where}: expected a key the run logs -> the key dashgen reads, both strings")
        if known not in key_map:
            raise BuildError(f"{where}: {known!r} is no key dashgen reads (its catalog, and this file's metrics)")
        if logged in key_map:
            raise BuildError(f"{where}: it is already read by {key_map[logged].name}")
        added.setdefault(key_map[known].name, []).append(logged)
    return added


def _read(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = load_yaml(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BuildError(f"{path}: cannot read the project's metrics: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or set(data) - {"metrics", "aliases"} or \
            not isinstance(data.get("metrics") or [], list):
        raise BuildError(f"{path}: expected a mapping with metrics: (a list of metric entries) and aliases:")
    return data


def load_project_metrics(path: Path, base: Catalog = CATALOG) -> list[Metric]:
    data = _read(path)
    metrics: list[Metric] = []
    names: dict[str, int] = {}
    keys = {key: f"{metric.name} (dashgen's catalog)" for key, metric in base.verl_key_map().items()}
    for index, entry in enumerate(data.get("metrics") or [], start=1):
        metric = _metric(entry, f"{path}: metrics entry {index}")
        where = f"{path}: metric {metric.name!r}"
        if metric.name in base or base.resolve(metric.name) is not None:
            raise BuildError(f"{where}: dashgen's catalog already declares it; remove the entry")
        if metric.name in names:
            raise BuildError(f"{where}: declared twice (entries {names[metric.name]} and {index})")
        names[metric.name] = index
        for key in metric.verl_keys:
            if key in keys:
                raise BuildError(f"{where}: verl key {key!r} is already read by {keys[key]}")
            keys[key] = metric.name
        metrics.append(metric)
    return metrics


def _metric(entry: Any, where: str) -> Metric:
    if not isinstance(entry, dict):
        raise BuildError(f"{where}: expected a mapping with name, type, unit, help (and labels, verl_keys, scale)")
    unknown = sorted(set(entry) - _FIELDS, key=str)
    if unknown:
        raise BuildError(f"{where}: unknown field(s) {', '.join(map(str, unknown))}; known: {', '.join(sorted(_FIELDS))}")
    name = entry.get("name")
    if not isinstance(name, str) or not _METRIC_NAME.fullmatch(name):
        raise BuildError(f"{where}: name {name!r} is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)")
    where = f"{where.rsplit(': ', 1)[0]}: metric {name!r}"
    kinds = {t.value: t for t in MetricType}
    if entry.get("type") not in kinds:
        raise BuildError(f"{where}: type {entry.get('type')!r}; expected one of {', '.join(kinds)}")
    for field in ("unit", "help"):
        if not isinstance(entry.get(field), str) or not entry[field].strip():
            raise BuildError(f"{where}: {field} must be a non-empty string")
    labels = _strings(entry.get("labels", []), f"{where}: labels")
    for label in labels:
        if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
            raise BuildError(f"{where}: {label!r} is not a label name")
    verl_keys = _strings(entry.get("verl_keys", []), f"{where}: verl_keys")
    scale = entry.get("scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale != scale:
        raise BuildError(f"{where}: scale {scale!r} is not a number")
    if verl_keys and (kinds[entry["type"]] is not MetricType.GAUGE or labels):
        raise BuildError(f"{where}: a metric read from verl keys is an unlabelled gauge (the exporter serves "
                         f"each step's value); drop its labels or type")
    if verl_keys:  # served by `dashgen export` like every verl key
        return Metric(name, MetricType.GAUGE, entry["unit"], entry["help"], VERL_LABELS, Origin.VERL,
                      tuple(verl_keys), float(scale))
    return Metric(name, kinds[entry["type"]], entry["unit"], entry["help"], TARGET_LABELS | frozenset(labels),
                  Origin.PROJECT)


def _strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise BuildError(f"{where}: expected a list of non-empty strings, got {value!r}")
    return value
