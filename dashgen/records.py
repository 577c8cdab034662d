"""`record`: a dataclass whose __repr__, __eq__ and __hash__ are shared, not compiled per class.

On Python 3.11, `dataclass` compiles every method it generates on its own, and compiling is
what a short command pays for: a build defines about fifty dataclasses, and their methods took
a sixth of its wall time (issue 19). A record is a real dataclass (`fields`, `replace`,
`asdict` and subclassing with `@dataclass` work as before); only __init__ and a frozen class's
__setattr__ and __delattr__ are still generated. The shared methods behave as the generated ones:
equal when of the same class and every compared field is equal, a hash of those fields, and the
same repr.
"""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Callable, TypeVar

T = TypeVar("T", bound=type)


def record(cls: T | None = None, /, *, frozen: bool = True) -> T | Callable[[T], T]:
    """`@record` for a frozen dataclass, `@record(frozen=False)` for a mutable one."""
    def make(cls: T) -> T:
        cls = dataclass(cls, frozen=frozen, repr=False, eq=False)
        every = fields(cls)
        compared = tuple(f.name for f in every if f.compare)
        cls._record_shown = tuple(f.name for f in every if f.repr)
        # Always a tuple, as dataclass compares: (x,) == (x,) holds for x = NaN, x == x does not.
        cls._record_key = attrgetter(*compared) if len(compared) > 1 else _one_tuple(compared)
        for name, method in (("__repr__", _record_repr), ("__eq__", _record_eq)):
            if name not in cls.__dict__:  # as dataclass does, a method the class writes is kept
                setattr(cls, name, method)
        if "__hash__" not in cls.__dict__ or cls.__dict__["__hash__"] is None:
            cls.__hash__ = _record_hash if frozen else None
        return cls

    return make if cls is None else make(cls)


def _one_tuple(names: tuple[str, ...]) -> Callable[[object], tuple]:
    if not names:
        return lambda _obj: ()
    get = attrgetter(names[0])
    return lambda obj: (get(obj),)


@reprlib.recursive_repr()
def _record_repr(self) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self)._record_shown)
    return f"{type(self).__qualname__}({shown})"


def _record_eq(self, other: object):
    if other.__class__ is self.__class__:
        key = type(self)._record_key
        return key(self) == key(other)
    return NotImplemented


def _record_hash(self) -> int:
    return hash(type(self)._record_key(self))
