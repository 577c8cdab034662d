"""A record behaves as the dataclass it replaces: same equality, hash, repr, immutability,
and the dataclasses API (fields, replace, asdict, subclassing with @dataclass) still works."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import pytest

from dashgen.records import record


@record
class Point:
    x: float
    y: float = 0.0
    tags: tuple = ()
    note: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class PointDataclass:
    x: float
    y: float = 0.0
    tags: tuple = ()
    note: str = field(default="", compare=False, repr=False)


@record
class Single:
    value: float


@record
class Empty:
    pass


@record(frozen=False)
class Counter:
    name: str
    counts: list = field(default_factory=list)


@pytest.mark.parametrize("args", [(1.0,), (1.0, 2.0), (1.0, 2.0, ("a", "b")), (math.nan, 1.0)])
def test_equality_hash_and_repr_match_a_frozen_dataclass(args):
    a, b, other = Point(*args), Point(*args, note="ignored"), Point(*args[:1], y=99.0)
    da, db = PointDataclass(*args), PointDataclass(*args)
    assert (a == b) == (da == db)
    assert (a == other) is False
    assert (a != b) == (da != db)
    assert hash(a) == hash(b)
    assert repr(a) == repr(da).replace("PointDataclass", "Point")


def test_a_field_that_is_the_same_nan_compares_equal_as_in_a_tuple():
    nan = math.nan
    assert Single(nan) == Single(nan)  # dataclass compares (nan,) == (nan,): identity first
    assert Single(1.0) != Single(2.0)
    assert hash(Single(3.0)) == hash(Single(3.0))


def test_records_of_other_classes_or_plain_tuples_are_never_equal():
    assert Point(1.0) != PointDataclass(1.0)
    assert Point(1.0) != (1.0, 0.0, ())
    assert Empty() == Empty()
    assert hash(Empty()) == hash(Empty())
    assert repr(Empty()) == "Empty()"


def test_a_frozen_record_refuses_assignment_and_deletion():
    point = Point(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.y


def test_the_dataclasses_api_still_works():
    point = Point(1.0, 2.0, ("a",), note="n")
    assert dataclasses.is_dataclass(Point)
    assert [f.name for f in dataclasses.fields(point)] == ["x", "y", "tags", "note"]
    assert dataclasses.replace(point, y=5.0) == Point(1.0, 5.0, ("a",))
    assert dataclasses.asdict(point) == {"x": 1.0, "y": 2.0, "tags": ("a",), "note": "n"}
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        Point()


def test_a_mutable_record_is_unhashable_and_takes_default_factories():
    first, second = Counter("a"), Counter("a")
    first.counts.append(1)
    assert second.counts == []
    assert first != second
    second.counts.append(1)
    assert first == second
    with pytest.raises(TypeError, match="unhashable"):
        hash(first)


def test_a_dataclass_may_subclass_a_record_and_a_record_a_record():
    @dataclass(frozen=True)
    class Labelled(Point):
        label: str = ""

    @record
    class Named(Point):
        name: str = ""

    assert Labelled(1.0, label="a") != Labelled(1.0, label="b")
    assert Named(1.0, name="a") != Named(1.0, name="b")
    assert Named(1.0, name="a") == Named(1.0, name="a")
    assert repr(Named(1.0, name="a")).endswith("Named(x=1.0, y=0.0, tags=(), name='a')")
    assert Named(1.0) != Point(1.0)


def test_methods_a_class_writes_are_kept():
    @record
    class Shouting:
        word: str

        def __repr__(self) -> str:
            return self.word.upper()

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Shouting) and self.word.lower() == other.word.lower()

    assert repr(Shouting("hi")) == "HI"
    assert Shouting("HI") == Shouting("hi")
    hash(Shouting("hi"))  # a frozen class with its own __eq__ still hashes, as a frozen dataclass does


def test_a_record_that_holds_itself_has_a_finite_repr():
    @record(frozen=False)
    class Node:
        children: list = field(default_factory=list)

    node = Node()
    node.children.append(node)
    assert repr(node).endswith(".Node(children=[...])")
