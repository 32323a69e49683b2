"""The model's value types: fields declared once (annotated, with defaults), slots and
``__init__`` made from them, immutable, compared and hashed by value."""

from __future__ import annotations

import inspect

import pytest

from memlens.model import (
    CallNode,
    FunctionStats,
    HeldBy,
    LineStats,
    Run,
    RunInfo,
    SourceFile,
    TestStats,
    replace,
)
from memlens.model.figures import ERRORS, FIGURES, GPU_FIGURES, NATIVE
from memlens.model.value import Value

MADE = (CallNode, FunctionStats, HeldBy, LineStats, RunInfo, TestStats)


@pytest.mark.parametrize("cls", MADE, ids=lambda c: c.__name__)
def test_init_takes_the_declared_fields_in_order_with_their_defaults(cls: type[Value]) -> None:
    declared = [f for f in cls.__annotations__ if not f.startswith("__")]
    params = list(inspect.signature(cls).parameters.values())
    assert [p.name for p in params] == declared
    assert sorted(cls.__slots__) == sorted(declared)
    # Once a field has a default, every later one has one (as a def requires).
    firsts = [p.default is inspect.Parameter.empty for p in params]
    assert firsts == sorted(firsts, reverse=True)


def test_slots_are_alphabetical_unless_the_type_names_its_order() -> None:
    assert FunctionStats.__slots__ == tuple(sorted(FunctionStats.__slots__))
    assert LineStats.__slots__ == (*FIGURES, *NATIVE, *ERRORS, *GPU_FIGURES)


def test_values_are_immutable_equal_by_value_and_replaceable() -> None:
    a = FunctionStats("f", 1, 9, alloc_bytes=10)
    b = FunctionStats(qualname="f", first_line=1, last_line=9, alloc_bytes=10)
    assert a == b
    assert hash(a) == hash(b)
    assert a.peak_bytes == 0
    assert replace(a, peak_bytes=5) == FunctionStats("f", 1, 9, 10, peak_bytes=5)
    with pytest.raises(AttributeError, match="immutable"):
        a.alloc_bytes = 1  # type: ignore[misc]
    with pytest.raises(AttributeError):
        a.other = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        FunctionStats("f", 1)  # type: ignore[call-arg]
    assert repr(LineStats(alloc_bytes=3)).startswith("LineStats(alloc_bytes=3, alloc_count=0")


def test_a_type_with_its_own_init_keeps_it() -> None:
    assert SourceFile("a.py", "0" * 64, None).lines == {}  # its own: None becomes {}
    assert Run.__init__.__module__ == "memlens.model"


def test_slots_that_are_not_the_fields_are_refused() -> None:
    with pytest.raises(TypeError, match="__slots__ are not its fields"):

        class Wrong(Value):
            __slots__ = ("a",)
            b: int
