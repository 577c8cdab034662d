"""Check Kubernetes objects as the API server would: names, the vendored schemas, apply limits.

The schemas are in dashgen/schemas/kubernetes/ (README.md there says their version and
origin): the Prometheus Operator's CRD schemas, Kubernetes' ConfigMap, and the ObjectMeta
fields dashgen writes. Nothing is downloaded.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from dashgen.compiler.output.schema_check import Schema
from dashgen.errors import BuildError

if TYPE_CHECKING:
    import jsonschema

# metadata.name of every kind dashgen renders: a DNS-1123 subdomain.
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_SUBDOMAIN_MAX = 253
# `kubectl apply` (client-side) keeps the whole object in this annotation, and the API server
# caps an object's annotations (keys and values) at this many bytes.
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
LAST_APPLIED_ANNOTATION_MAX = 262_144
# Characters Go's encoding/json (which kubectl writes the annotation with) escapes as \u00XX or
# \u20XX, beyond JSON's own escapes: HTML's special characters and the line separators.
_GO_ESCAPED = frozenset("<>&\u2028\u2029")
_JSON_SHORT_ESCAPES = frozenset('"\\\n\r\t')


def object_name(wanted: str, source: str) -> str:
    """A DNS-1123 subdomain made from `wanted` (lower case; `_`, spaces and other characters
    become `-`); BuildError naming `source` when nothing valid is left or it is too long."""
    name = re.sub(r"[^a-z0-9.-]+", "-", wanted.lower())
    name = re.sub(r"-{2,}", "-", name)
    name = ".".join(part.strip("-") for part in name.split(".") if part.strip("-"))
    if not DNS_SUBDOMAIN.fullmatch(name) or len(name) > DNS_SUBDOMAIN_MAX:
        raise BuildError(f"{source}: {wanted!r} cannot be made a Kubernetes name (a DNS-1123 subdomain: up to "
                         f"{DNS_SUBDOMAIN_MAX} of a-z 0-9 - ., starting and ending with a letter or digit); "
                         f"rename it")
    return name


@lru_cache(maxsize=None)
def _validator(kind: str) -> Schema:
    text = resources.files("dashgen").joinpath(f"schemas/kubernetes/{kind}.schema.json").read_text()
    return Schema(json.loads(text))


def _route_schema() -> dict[str, Any]:
    return _validator("AlertmanagerConfig").schema["properties"]["spec"]["properties"]["route"]


def receiver_schema() -> dict[str, Any]:
    """The AlertmanagerConfig CRD's schema of one receiver (slackConfigs, webhookConfigs, ...)."""
    return _validator("AlertmanagerConfig").schema["properties"]["spec"]["properties"]["receivers"]["items"]


@lru_cache(maxsize=None)
def _route_validator() -> Schema:
    return Schema(_route_schema())


def schema_problems(obj: dict[str, Any]) -> list[str]:
    """Every violation of the object's schema (by its kind) and of ObjectMeta, as 'path: message'."""
    kind = obj.get("kind", "")
    problems = [_describe(error, "") for error in _validator(kind).iter_errors(obj)]
    problems += [_describe(error, "metadata") for error in _validator("ObjectMeta").iter_errors(obj.get("metadata"))]
    if kind == "AlertmanagerConfig":
        # The CRD leaves nested routes open (x-kubernetes-preserve-unknown-fields); the Operator
        # checks them as routes when it reads the object, so they are checked here the same way.
        route_validator = _route_validator()
        for path, route in _nested_routes(obj.get("spec", {}).get("route", {}), "spec.route"):
            problems += [_describe(error, path) for error in route_validator.iter_errors(route)]
    return problems


def _nested_routes(route: dict[str, Any], path: str):
    for index, child in enumerate(route.get("routes", [])):
        yield f"{path}.routes[{index}]", child
        yield from _nested_routes(child, f"{path}.routes[{index}]")


def _describe(error: jsonschema.ValidationError, prefix: str) -> str:
    path = ".".join([prefix] * bool(prefix) + [str(p) for p in error.absolute_path])
    return f"{path or '(object)'}: {error.message}"


def check_object(obj: dict[str, Any], where: str) -> None:
    """BuildError naming `where` (the rendered file) unless the object is valid and fits
    client-side `kubectl apply`."""
    problems = schema_problems(obj)
    if problems:
        raise BuildError(f"{where}: the {obj.get('kind')} does not fit its schema "
                         f"(dashgen/schemas/kubernetes/):\n  " + "\n  ".join(problems))
    size = stored_annotations_size(obj)
    if size > LAST_APPLIED_ANNOTATION_MAX:
        raise BuildError(f"{where}: the {obj['kind']} takes {size:,} bytes of annotations once client-side `kubectl "
                         f"apply` keeps it in its last-applied-configuration annotation, more than the "
                         f"{LAST_APPLIED_ANNOTATION_MAX:,} bytes the API server allows; apply it with "
                         f"`kubectl apply --server-side -f {where}`, or split the dashboard")


def stored_annotations_size(obj: dict[str, Any]) -> int:
    """The bytes of annotations the API server counts after client-side `kubectl apply`: the
    object's own annotations, and the object as Go's encoding/json writes it (one line) under
    the last-applied-configuration key."""
    own = obj.get("metadata", {}).get("annotations") or {}
    own_size = sum(len(key.encode()) + len(str(value).encode()) for key, value in own.items())
    return own_size + len(LAST_APPLIED_ANNOTATION) + go_json_size(obj) + len("\n")


def go_json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON from Go's encoding/json: like Python's json.dumps, but
    '<', '>', '&', U+2028 and U+2029 are written as 6-byte \\u escapes, and so are control
    characters other than newline, return and tab."""
    if isinstance(value, str):
        return 2 + sum(_go_char_size(char) for char in value)
    if isinstance(value, dict):
        items = sum(go_json_size(str(key)) + 1 + go_json_size(item) for key, item in value.items())
        return 2 + items + max(len(value) - 1, 0)
    if isinstance(value, (list, tuple)):
        return 2 + sum(go_json_size(item) for item in value) + max(len(value) - 1, 0)
    return len(json.dumps(value))


def _go_char_size(char: str) -> int:
    if char in _JSON_SHORT_ESCAPES:
        return 2
    if char in _GO_ESCAPED or char < " ":
        return 6
    return len(char.encode())
