"""A JSON Schema compiled once into plain Python checks that answer one question: valid or not.

`dashgen build` validates every dashboard; jsonschema takes 50-70 ms to import and builds a
validator object for each subschema it descends into (about 2,600 a build). A dashboard that
passes needs none of that: `compile_schema` turns the schema into nested closures that say
whether an instance conforms, and dashgen/compiler/dashboards/schema_validation.py asks jsonschema only for the messages
of one that does not.

The Draft 7 keywords dashgen's schemas use are compiled, with jsonschema's meaning (its type
checks, its equality that tells `true` from `1`, `$ref` hiding its siblings, `format` unchecked
as a validator without a format checker leaves it). A schema with another Draft 7 assertion
raises Unsupported, and the caller uses jsonschema for it; a keyword Draft 7 does not define
(`x-kubernetes-*`, annotations) is ignored, as jsonschema ignores it.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Mapping, Sequence
from typing import Any, Callable
from urllib.parse import unquote

Check = Callable[[Any], bool]

# Draft 7's assertions that are not compiled: a schema using one is left to jsonschema.
_NOT_COMPILED = frozenset({"additionalItems", "contains", "dependencies", "exclusiveMaximum", "exclusiveMinimum",
                           "maxItems", "minProperties", "multipleOf", "patternProperties", "uniqueItems"})
_TYPES: dict[str, Check] = {
    "array": lambda value: isinstance(value, list),
    "boolean": lambda value: isinstance(value, bool),
    "integer": lambda value: (isinstance(value, int) and not isinstance(value, bool)
                              or isinstance(value, float) and value.is_integer()),
    "null": lambda value: value is None,
    "number": lambda value: isinstance(value, numbers.Number) and not isinstance(value, bool),
    "object": lambda value: isinstance(value, dict),
    "string": lambda value: isinstance(value, str),
}


class Unsupported(ValueError):
    """The schema uses something compile_schema does not compile; validate with jsonschema instead."""


def compile_schema(schema: dict | bool) -> Check:
    """A function telling whether an instance is valid against `schema` (its `$ref`s local to it)."""
    return _Compiler(schema).compile(schema)


class _Compiler:
    def __init__(self, root: dict | bool):
        self.root = root
        self.refs: dict[str, Check] = {}

    def compile(self, schema: dict | bool) -> Check:
        if schema is True:
            return lambda value: True
        if schema is False:
            return lambda value: False
        if not isinstance(schema, dict):
            raise Unsupported(f"a schema that is a {type(schema).__name__}")
        if "$id" in schema and schema is not self.root:
            raise Unsupported("$id below the root (another base for $ref)")
        if "$ref" in schema:  # Draft 7: $ref's siblings are ignored
            return self._ref(schema["$ref"])
        checks = [check for keyword, value in schema.items()
                  if (check := self._keyword(keyword, value, schema)) is not None]
        if len(checks) == 1:
            return checks[0]

        def every(value: Any) -> bool:
            for check in checks:
                if not check(value):
                    return False
            return True
        return every

    def _ref(self, ref: str) -> Check:
        if ref not in self.refs:
            if not ref.startswith("#"):
                raise Unsupported(f"$ref {ref!r} outside the schema")
            target: Any = self.root
            for part in filter(None, ref[1:].split("/")):
                part = unquote(part).replace("~1", "/").replace("~0", "~")
                try:
                    target = target[int(part)] if isinstance(target, list) else target[part]
                except (KeyError, IndexError, ValueError, TypeError):
                    raise Unsupported(f"$ref {ref!r} does not resolve") from None
            slot: list[Check] = []
            self.refs[ref] = lambda value: slot[0](value)  # a recursive schema reaches itself through here
            slot.append(self.compile(target))
        return self.refs[ref]

    def _keyword(self, keyword: str, value: Any, schema: dict) -> Check | None:
        of_value = _VALUE_CHECKS.get(keyword)
        if of_value is not None:
            return of_value(value)
        of_schemas = _SCHEMA_CHECKS.get(keyword)
        if of_schemas is not None:
            return of_schemas(self, value, schema)
        if keyword in _NOT_COMPILED:
            raise Unsupported(f"keyword {keyword!r}")
        return None  # "then"/"else" (applied with "if"), "format", annotations, keywords Draft 7 does not define

    # --- keywords holding schemas, compiled in turn -------------------------------------------

    def _properties(self, value: dict, schema: dict) -> Check:
        properties = {name: self.compile(subschema) for name, subschema in value.items()}

        def each_property(instance: Any) -> bool:
            if isinstance(instance, dict):
                for name, item in instance.items():
                    check = properties.get(name)
                    if check is not None and not check(item):
                        return False
            return True
        return each_property

    def _additional_properties(self, value: Any, schema: dict) -> Check:
        if "patternProperties" in schema:
            raise Unsupported("patternProperties")
        known = frozenset(schema.get("properties", {}))
        check = self.compile(value)

        def each_other_property(instance: Any) -> bool:
            if isinstance(instance, dict):
                for name, item in instance.items():
                    if name not in known and not check(item):
                        return False
            return True
        return each_other_property

    def _items(self, value: Any, schema: dict) -> Check:
        if not isinstance(value, (dict, bool)):
            raise Unsupported("items as a list of schemas")
        check = self.compile(value)

        def each_item(instance: Any) -> bool:
            if isinstance(instance, list):
                for item in instance:
                    if not check(item):
                        return False
            return True
        return each_item

    def _if(self, value: Any, schema: dict) -> Check:
        condition = self.compile(value)
        then = self.compile(schema.get("then", True))
        otherwise = self.compile(schema.get("else", True))
        return lambda instance: then(instance) if condition(instance) else otherwise(instance)

    def _any_of(self, value: list, schema: dict) -> Check:
        checks = [self.compile(subschema) for subschema in value]
        return lambda instance: any(check(instance) for check in checks)

    def _all_of(self, value: list, schema: dict) -> Check:
        checks = [self.compile(subschema) for subschema in value]
        return lambda instance: all(check(instance) for check in checks)

    def _one_of(self, value: list, schema: dict) -> Check:
        checks = [self.compile(subschema) for subschema in value]
        return lambda instance: sum(1 for check in checks if check(instance)) == 1

    def _not(self, value: Any, schema: dict) -> Check:
        check = self.compile(value)
        return lambda instance: not check(instance)

    def _property_names(self, value: Any, schema: dict) -> Check:
        check = self.compile(value)
        return lambda instance: not isinstance(instance, dict) or all(check(name) for name in instance)


_SCHEMA_CHECKS: dict[str, Callable[[_Compiler, Any, dict], Check]] = {
    "properties": _Compiler._properties, "additionalProperties": _Compiler._additional_properties,
    "items": _Compiler._items, "anyOf": _Compiler._any_of, "if": _Compiler._if, "allOf": _Compiler._all_of,
    "oneOf": _Compiler._one_of, "not": _Compiler._not, "propertyNames": _Compiler._property_names,
}


# --- keywords whose check depends on their value alone ------------------------------------------

def _type(value: str | list[str]) -> Check:
    names = [value] if isinstance(value, str) else list(value)
    if not all(name in _TYPES for name in names):
        raise Unsupported(f"type {value!r}")
    if len(names) == 1:
        return _TYPES[names[0]]
    checks = [_TYPES[name] for name in names]
    return lambda instance: any(check(instance) for check in checks)


def _required(value: list[str]) -> Check:
    def required(instance: Any) -> bool:
        if isinstance(instance, dict):
            for name in value:
                if name not in instance:
                    return False
        return True
    return required


_VALUE_CHECKS: dict[str, Callable[[Any], Check]] = {
    "type": _type,
    "enum": lambda value: lambda instance: any(_equal(instance, option) for option in value),
    "const": lambda value: lambda instance: _equal(instance, value),
    "required": _required,
    "maxProperties": lambda value: lambda instance: not isinstance(instance, dict) or len(instance) <= value,
    "minLength": lambda value: lambda instance: not isinstance(instance, str) or len(instance) >= value,
    "maxLength": lambda value: lambda instance: not isinstance(instance, str) or len(instance) <= value,
    # Compiled when first used, as jsonschema does: a pattern Python refuses fails only there.
    "pattern": lambda value: lambda instance: not isinstance(instance, str) or re.search(value, instance) is not None,
    "minimum": lambda value: lambda instance: not _TYPES["number"](instance) or instance >= value,
    "maximum": lambda value: lambda instance: not _TYPES["number"](instance) or instance <= value,
    "minItems": lambda value: lambda instance: not isinstance(instance, list) or len(instance) >= value,
}


def _equal(one: Any, two: Any) -> bool:
    """JSON equality as jsonschema has it: `true` is not `1`, nor `false` `0`, at any depth."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, Sequence) and isinstance(two, Sequence):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return one.keys() == two.keys() and all(_equal(one[key], two[key]) for key in one)
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return one == two


class Schema:
    """One Draft 7 schema: the quick check first; jsonschema (imported then) only for the errors
    of an instance that fails it, or for a schema the quick check does not cover."""

    def __init__(self, schema: dict):
        self.schema = schema
        try:
            self._conforms: Check | None = compile_schema(schema)
        except Unsupported:
            self._conforms = None
        self._validator = None

    def iter_errors(self, instance: Any) -> list:
        """jsonschema's ValidationErrors of the instance (none when the quick check passes it)."""
        if self._conforms is not None and self._conforms(instance):
            return []
        if self._validator is None:
            import jsonschema  # its import alone costs 50-70 ms

            self._validator = jsonschema.Draft7Validator(self.schema)
        return list(self._validator.iter_errors(instance))
