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

from dashgen.compiler.schema_check import Schema
from dashgen.errors import BuildError

if TYPE_CHECKING:
    import jsonschema

# metadata.name of every kind dashgen renders: a DNS-1123 subdomain.
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_SUBDOMAIN_MAX = 253
# `kubectl apply` (client-side) keeps the whole object in this annotation, and the API server
# caps an object's annotations at this many bytes.
LAST_APPLIED_ANNOTATION_MAX = 262_144


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
    size = len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())
    if size > LAST_APPLIED_ANNOTATION_MAX:
        raise BuildError(f"{where}: the {obj['kind']} is {size:,} bytes, more than the {LAST_APPLIED_ANNOTATION_MAX:,} "
                         f"bytes client-side `kubectl apply` can keep in its last-applied-configuration annotation; "
                         f"apply it with `kubectl apply --server-side -f {where}`, or split the dashboard")
