"""A JSON Schema compiled once into plain Python checks that answer one question: valid or not.

`dashgen build` validates every dashboard; jsonschema takes 50-70 ms to import and builds a
validator object for each subschema it descends into (about 2,600 a build). A dashboard that
passes needs none of that: `compile_schema` turns the schema into nested closures that say
whether an instance conforms, and dashgen/compiler/validate.py asks jsonschema only for the messages
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
        if keyword == "type":
            names = [value] if isinstance(value, str) else list(value)
            if not all(name in _TYPES for name in names):
                raise Unsupported(f"type {value!r}")
            if len(names) == 1:
                return _TYPES[names[0]]
            checks = [_TYPES[name] for name in names]
            return lambda instance: any(check(instance) for check in checks)
        if keyword == "enum":
            return lambda instance: any(_equal(instance, option) for option in value)
        if keyword == "const":
            return lambda instance: _equal(instance, value)
        if keyword == "required":
            def required(instance: Any) -> bool:
                if isinstance(instance, dict):
                    for name in value:
                        if name not in instance:
                            return False
                return True
            return required
        if keyword == "maxProperties":
            return lambda instance: not isinstance(instance, dict) or len(instance) <= value
        if keyword == "properties":
            properties = {name: self.compile(subschema) for name, subschema in value.items()}

            def each_property(instance: Any) -> bool:
                if isinstance(instance, dict):
                    for name, item in instance.items():
                        check = properties.get(name)
                        if check is not None and not check(item):
                            return False
                return True
            return each_property
        if keyword == "additionalProperties":
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
        if keyword == "items":
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
        if keyword == "anyOf":
            checks = [self.compile(subschema) for subschema in value]
            return lambda instance: any(check(instance) for check in checks)
        if keyword == "if":
            condition = self.compile(value)
            then = self.compile(schema.get("then", True))
            otherwise = self.compile(schema.get("else", True))
            return lambda instance: then(instance) if condition(instance) else otherwise(instance)
        if keyword == "allOf":
            checks = [self.compile(subschema) for subschema in value]
            return lambda instance: all(check(instance) for check in checks)
        if keyword == "oneOf":
            checks = [self.compile(subschema) for subschema in value]
            return lambda instance: sum(1 for check in checks if check(instance)) == 1
        if keyword == "not":
            check = self.compile(value)
            return lambda instance: not check(instance)
        if keyword == "propertyNames":
            check = self.compile(value)
            return lambda instance: not isinstance(instance, dict) or all(check(name) for name in instance)
        if keyword == "minLength":
            return lambda instance: not isinstance(instance, str) or len(instance) >= value
        if keyword == "maxLength":
            return lambda instance: not isinstance(instance, str) or len(instance) <= value
        if keyword == "pattern":
            # Compiled when first used, as jsonschema does: a pattern Python refuses fails only there.
            return lambda instance: not isinstance(instance, str) or re.search(value, instance) is not None
        if keyword == "minimum":
            return lambda instance: not _TYPES["number"](instance) or instance >= value
        if keyword == "maximum":
            return lambda instance: not _TYPES["number"](instance) or instance <= value
        if keyword == "minItems":
            return lambda instance: not isinstance(instance, list) or len(instance) >= value
        if keyword in _NOT_COMPILED:
            raise Unsupported(f"keyword {keyword!r}")
        return None  # "then"/"else" (applied with "if"), "format", annotations, keywords Draft 7 does not define


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
