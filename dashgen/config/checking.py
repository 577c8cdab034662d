"""Checking a config class's values against its annotations (and normalising them)."""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import types
import typing
import weakref
from typing import Annotated, Any, Literal

from dashgen.config.duration import PrometheusDuration
from dashgen.config.fields import ConfigError
from dashgen.errors import BuildError

# --- Checking values against the annotations --------------------------------------------------

# Weak: an area's config class is made anew each time its module runs, at every build.
_SCHEMAS: weakref.WeakKeyDictionary[type, dict[dataclasses.Field, Any]] = weakref.WeakKeyDictionary()


def _schema(cls: type) -> dict[dataclasses.Field, Any]:
    """Each field of a config class with its type annotation."""
    if cls not in _SCHEMAS:
        hints = type_hints(cls)
        _SCHEMAS[cls] = {f: hints[f.name] for f in dataclasses.fields(cls)}
    return _SCHEMAS[cls]


def type_hints(cls: type) -> dict[str, Any]:
    """typing.get_type_hints(cls, include_extras=True) for annotations that are plain expressions,
    with each one's text compiled once: typing compiles every annotation again for each new class,
    and a build makes each area's class anew (about a tenth of its compile time, with the others)."""
    hints: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        module_names = getattr(sys.modules.get(base.__module__), "__dict__", {})
        for name, value in base.__dict__.get("__annotations__", {}).items():
            # Looked up as typing does: the module's names before the class's own.
            hints[name] = eval(_annotation_code(value), dict(vars(base)), module_names) \
                if isinstance(value, str) else type(None) if value is None else value
    return hints


@functools.lru_cache(maxsize=None)
def _annotation_code(text: str) -> types.CodeType:
    return compile(text, "<annotation>", "eval")


def _check_fields(instance: Any) -> None:
    """Check (and normalise, e.g. "80GiB" -> bytes, 1 -> 1.0) every field of a config instance."""
    for f, hint in _schema(type(instance)).items():
        value = _checked(f.name, hint, getattr(instance, f.name))
        if value is not getattr(instance, f.name):
            object.__setattr__(instance, f.name, value)



def _type_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if hint is type(None):
        return "null"
    return {str: "a string", PrometheusDuration: "a string", int: "an integer", float: "a number",
            bool: "true or false"}.get(
        hint, getattr(hint, "__name__", str(hint)))


def _checked(name: str, hint: Any, value: Any) -> Any:
    """`value` checked against `hint` (and normalised); ConfigError naming the field if it does not fit."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        base, kinds = args[0], args[1:]
        for kind in kinds:
            if hasattr(kind, "parse"):
                try:
                    value = kind.parse(value)
                except ConfigError as exc:
                    raise ConfigError(f"{name}: {exc.message}") from None
        value = _checked(name, base, value)
        for kind in kinds:
            problem = kind.problem(value)
            if problem:
                raise ConfigError(f"{name}: {problem}")
        return value
    if origin is Literal:
        if not any(value == a and type(value) is type(a) for a in args):
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(repr(a) for a in args)}")
        return value
    if origin in (typing.Union, types.UnionType):
        near_miss = None  # the problem of an option of the value's own type: the one worth showing
        for option in args:
            try:
                return _checked(name, option, value)
            except ConfigError as exc:
                base = typing.get_args(option)[0] if typing.get_origin(option) is Annotated else option
                if near_miss is None and isinstance(base, type) and isinstance(value, base):
                    near_miss = (option, exc.message)
        if near_miss is not None:
            others = " or ".join(_type_name(a) for a in args if a is not near_miss[0])
            raise ConfigError(f"{near_miss[1]} (or {others})")
        raise ConfigError(f"{name}: expected {_type_name(hint)}, got {_describe(value)}")
    if hint is type(None):
        if value is not None:
            raise ConfigError(f"{name}: expected null, got {_describe(value)}")
        return value
    if origin in (tuple, list, frozenset):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {_describe(value)}")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise ConfigError(f"{name}: expected a list of {len(args)} items, got {len(value)}")
            return tuple(_checked(f"{name}[{i}]", a, v) for i, (a, v) in enumerate(zip(args, value)))
        items = [_checked(f"{name}[{i}]", args[0], v) for i, v in enumerate(value)] if args else list(value)
        return origin(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a mapping, got {_describe(value)}")
        key_type, value_type = args or (Any, Any)
        return {_checked(f"{name} key", key_type, k): _checked(f"{name}[{k!r}]", value_type, v)
                for k, v in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: expected true or false, got {_describe(value)}")
        return value
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name}: expected an integer, got {_describe(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}: expected a number, got {_describe(value)}")
        if not math.isfinite(value):
            raise ConfigError(f"{name}: expected a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected a string, got {_describe(value)}")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ConfigError(f"{name}: {value!r} holds a control character (newline, tab, ...)")
        return value
    if hint is Any:
        return value
    if isinstance(hint, type) and not isinstance(value, hint):
        raise ConfigError(f"{name}: expected {_type_name(hint)}, got {_describe(value)}")
    return value


def _describe(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "the string", list: "a list",
            dict: "a mapping", type(None): "null"}.get(type(value), type(value).__name__)
    shown = repr(value)
    return f"{kind} {shown if len(shown) <= 60 else shown[:57] + '...'}"


def _defined_in(cls: type) -> str:
    """Where a config class is defined: a project's file (alerts/x.py) or an installed module."""
    prefix = "dashgen_definitions."
    if cls.__module__.startswith(prefix):
        return cls.__module__[len(prefix):].replace(".", "/") + ".py"
    return cls.__module__


def _refuse_raw_text(cls: type) -> None:
    """An area's tunables reach PromQL (windows, thresholds, names in selectors), so none may be any
    text at all: a string from dashgen.yaml such as `5m]) or vector(1)` would change the rule."""
    for f, hint in _schema(cls).items():
        if _admits_raw_text(hint):
            raise BuildError(f"{_defined_in(cls)}: {cls.__qualname__}.{f.name} is typed {_type_name(hint)}, any text: "
                             f"a value from dashgen.yaml would reach PromQL as written. Type it Duration or Interval "
                             f"(a window), StepCount, a number kind (Fraction, Factor, NonNegative, float), or "
                             f"Annotated[str, Matches(pattern, example)] (a name); see dashgen/config/fields.py")


def _admits_raw_text(hint: Any) -> bool:
    """Whether a field of this type takes any string, unchecked by a kind (Matches, PrometheusDuration, ...)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return not any(hasattr(kind, "problem") for kind in args[1:]) and _admits_raw_text(args[0])
    if origin is Literal:
        return False
    if hint is str or hint is Any:
        return True
    return any(_admits_raw_text(a) for a in args if a is not Ellipsis)


def _kinds(hint: Any) -> list[Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return [k for k in args[1:] if hasattr(k, "describe")] + _kinds(args[0])
    if origin in (typing.Union, types.UnionType):
        return [k for a in args for k in _kinds(a)]
    return []


