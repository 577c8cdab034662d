"""The quick schema check (dashgen/compiler/output/schema_check.py) says valid exactly when jsonschema does.

Every schema dashgen validates against is checked on what dashgen renders (valid) and on
mutations of it (a value of another type, a key removed or added, a string changed), and the
keywords' edge cases are checked one by one.
"""

from __future__ import annotations

import copy
import json
import random

import jsonschema
import pytest
import yaml

from dashgen.compiler.output.build import render_project
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.output.schema_check import Schema, Unsupported, compile_schema
from dashgen.compiler.dashboards.schema_validation import _core_annotations
from dashgen.config import config_from

from conftest import REPO

SCHEMAS = REPO / "dashgen" / "schemas"
PANEL_SCHEMAS = {"timeseries": ("panel-timeseries-options", "panel-timeseries-fieldconfig"),
                 "heatmap": ("panel-heatmap-options", "panel-heatmap-fieldconfig"),
                 "xychart": ("panel-xychart-options", "panel-xychart-fieldconfig")}
KUBERNETES = {"kubernetes": {"enabled": True, "act_url": "http://dashgen-act.monitoring:9095/alerts",
                             "alertmanager_page": {"pagerdutyConfigs": [{"routingKey": {"name": "pagerduty",
                                                                                        "key": "key"}}]}}}
REPLACEMENTS = (None, True, False, 0, 1, -1, 1.0, 2.5, "", "x", "timeseries", "auto", [], [1], {}, {"a": 1})
MUTATIONS_PER_INSTANCE = 150


def _load(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _instances() -> list[tuple[str, object]]:
    """(schema name, instance) for everything dashgen renders and validates."""
    files = render_project(REPO, config_from(KUBERNETES)).files
    out: list[tuple[str, object]] = []
    for path, text in sorted(files.items()):
        if path.startswith("dashboards/"):
            model = json.loads(text)
            out.append(("grafana-dashboard", _core_annotations(model)))  # as dashgen/compiler/dashboards/schema_validation.py checks it
            for panel in iter_panels(model):
                if panel.get("type") in PANEL_SCHEMAS:
                    options, custom = PANEL_SCHEMAS[panel["type"]]
                    out.append((options, panel.get("options", {})))
                    out.append((custom, panel.get("fieldConfig", {}).get("defaults", {}).get("custom", {})))
        elif path.startswith("kubernetes/"):
            for obj in yaml.safe_load_all(text):
                out.append((f"kubernetes/{obj['kind']}", obj))
                out.append(("kubernetes/ObjectMeta", obj["metadata"]))
    return out


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, (*prefix, index))


def _mutated(instance, rng: random.Random):
    """A copy of the instance with one change somewhere."""
    out = copy.deepcopy(instance)
    path = rng.choice(list(_paths(out)))
    if not path:
        return rng.choice(REPLACEMENTS)
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    key = path[-1]
    kind = rng.randrange(4)
    if kind == 0 and isinstance(parent, dict):
        del parent[key]
    elif kind == 1 and isinstance(parent[key], dict):
        parent[key][rng.choice(["zzz", "type", "mode", "name", "kind"])] = rng.choice(REPLACEMENTS)
    elif kind == 2 and isinstance(parent[key], str):
        parent[key] = parent[key][:-1] if rng.random() < 0.5 else parent[key].upper() + "-"
    else:
        parent[key] = copy.deepcopy(rng.choice(REPLACEMENTS))
    return out


@pytest.fixture(scope="module")
def instances() -> list[tuple[str, object]]:
    return _instances()


def test_every_schema_dashgen_uses_is_compiled(instances):
    names = {name for name, _ in instances} | {path.name.removesuffix(".schema.json")
                                              for path in SCHEMAS.glob("*.schema.json")}
    assert "kubernetes/PrometheusRule" in names and "grafana-dashboard" in names
    for name in sorted(names):
        compile_schema(_load(name))  # raises Unsupported if jsonschema would be needed


def test_the_quick_check_agrees_with_jsonschema_on_rendered_and_mutated_instances(instances):
    rng = random.Random(19)
    schemas = {name: (compile_schema(_load(name)), jsonschema.Draft7Validator(_load(name)))
               for name in {name for name, _ in instances}}
    invalid = 0
    for name, instance in instances:
        quick, reference = schemas[name]
        assert quick(instance) and reference.is_valid(instance), name
        for _ in range(MUTATIONS_PER_INSTANCE):
            mutated = _mutated(instance, rng)
            expected = reference.is_valid(mutated)
            assert quick(mutated) == expected, (name, json.dumps(mutated)[:2000])
            invalid += not expected
    assert invalid > 1000  # the mutations reach the schemas' constraints, not only open corners


@pytest.mark.parametrize("schema, instance", [
    ({"enum": [1, "a"]}, True), ({"enum": [True]}, 1), ({"enum": [True]}, True), ({"const": 0}, False),
    ({"const": [1, {"a": True}]}, [1, {"a": 1}]), ({"const": [1, {"a": True}]}, [1, {"a": True}]),
    ({"type": "integer"}, 1.0), ({"type": "integer"}, 1.5), ({"type": "integer"}, True),
    ({"type": "number"}, True), ({"type": ["string", "null"]}, None), ({"type": "array"}, (1, 2)),
    ({"$ref": "#/definitions/a", "type": "string", "definitions": {"a": {"type": "integer"}}}, 3),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, "a"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}, "else": {"type": "integer"}}, 2.5),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": False}, {"a": "x", "b": 1}),
    ({"properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}}, {"a": "x", "b": 1}),
    ({"required": ["a"], "maxProperties": 1}, {"a": 1, "b": 2}), ({"required": ["a"]}, [1]),
    ({"pattern": "^a+$"}, "aab"), ({"pattern": "a"}, "bab"), ({"minimum": 1, "maximum": 2}, 2.5),
    ({"oneOf": [{"type": "integer"}, {"type": "number"}]}, 1), ({"not": {"type": "string"}}, 1),
    ({"propertyNames": {"maxLength": 2}}, {"abc": 1}), ({"items": {"type": "string"}, "minItems": 2}, ["a"]),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, 0), ({"x-kubernetes-list-type": "map"}, 5),
    ({"format": "date-time"}, "yesterday"), (True, None), (False, None),
])
def test_each_keyword_means_what_it_means_to_jsonschema(schema, instance):
    assert compile_schema(schema)(instance) == jsonschema.Draft7Validator(schema).is_valid(instance)


def test_a_keyword_it_does_not_compile_is_left_to_jsonschema():
    with pytest.raises(Unsupported, match="uniqueItems"):
        compile_schema({"properties": {"a": {"uniqueItems": True}}})
    schema = Schema({"uniqueItems": True})
    assert schema.iter_errors([1, 2]) == [] and len(schema.iter_errors([1, 1])) == 1


def test_errors_still_come_from_jsonschema():
    schema = Schema({"properties": {"mode": {"enum": ["a", "b"]}}})
    assert schema.iter_errors({"mode": "a"}) == []
    [error] = schema.iter_errors({"mode": "c"})
    assert error.message == "'c' is not one of ['a', 'b']" and list(error.absolute_path) == ["mode"]
