"""memlens.imports.plain_pickle: plain data read back exactly; everything else refused with one
line, before anything runs; damaged, huge and deeply nested pickles refused or read within
bounds, never a crash or a hang."""

from __future__ import annotations

import os
import pickle
import pickletools
import struct
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlens.imports.plain_pickle import (
    MAX_DIGITS,
    MAX_MAPPING_ITEMS,
    MAX_MARKS,
    MAX_STRING_BYTES,
    REFUSED,
    PickleRefused,
    loads,
)

SNAPSHOT = (
    Path(__file__).resolve().parents[1] / "data" / "torch_cuda" / "snapshot-python-stacks.pickle"
)

plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=5) | st.integers(), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(value=plain, protocol=st.integers(3, 5))
def test_plain_data_reads_back_as_pickle_reads_it(value: object, protocol: int) -> None:
    data = pickle.dumps(value, protocol=protocol)
    assert loads(data) == pickle.loads(data)


@pytest.mark.parametrize("protocol", [0, 1, 2])
def test_old_protocols(protocol: int) -> None:
    value = {"a": [1, -2, 2**70, 1.5, None, True, "é", (1, 2, 3), (), {"k": [{}]}]}
    assert loads(pickle.dumps(value, protocol=protocol)) == value


def test_sets_and_shared_objects() -> None:
    shared = [1, 2]
    value = {"s": {1, "x"}, "f": frozenset({(1, 2)}), "a": shared, "b": shared}
    got = loads(pickle.dumps(value, protocol=4))
    assert got == value
    assert isinstance(got, dict)
    assert got["a"] is got["b"]  # memo references stay references: no copies


def test_the_real_snapshot_reads_as_pickle_reads_it() -> None:
    data = SNAPSHOT.read_bytes()
    assert loads(data) == pickle.loads(data)


class Runs:
    """``__reduce__`` to os.system: the classic pickle exploit."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


class Builds:
    def __init__(self) -> None:
        self.x = 1


class WithState:
    def __getstate__(self) -> dict[str, int]:
        return {"x": 1}

    def __setstate__(self, state: dict[str, int]) -> None:
        self.__dict__.update(state)


class NewArgs:
    def __getnewargs_ex__(self) -> tuple[tuple[int], dict[str, int]]:
        return (1,), {"y": 2}


def _opcode_names(data: bytes) -> set[str]:
    return {op.name for op, _, _ in pickletools.genops(data)}


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_reduce_to_os_system_is_refused_and_never_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "ran"
    data = pickle.dumps([Runs(marker)], protocol=protocol)
    with pytest.raises(PickleRefused, match=r"opcode (STACK_)?GLOBAL \(imports a Python object\)"):
        loads(data)
    assert not marker.exists()


def _raw(*ops: bytes) -> bytes:
    return b"\x80\x02" + b"".join(ops) + b"."


@pytest.mark.parametrize(
    ("data", "opcode"),
    [
        (b"cos\nsystem\n(S'touch x'\ntR.", "GLOBAL"),  # protocol 0: GLOBAL, then REDUCE
        (_raw(b"\x8c\x02os\x8c\x06system\x93"), "STACK_GLOBAL"),
        (_raw(b"N)R"), "REDUCE"),  # a callable from anywhere: refused as REDUCE itself
        (_raw(b"}}b"), "BUILD"),
        (b"(ios\nsystem\nS'touch x'\n.", "INST"),
        (_raw(b"(N)o"), "OBJ"),
        (_raw(b"N)\x81"), "NEWOBJ"),
        (_raw(b"N)}\x92"), "NEWOBJ_EX"),
        (_raw(b"\x82\x01"), "EXT1"),
        (_raw(b"\x83\x01\x00"), "EXT2"),
        (_raw(b"\x84\x01\x00\x00\x00"), "EXT4"),
        (b"P0\n.", "PERSID"),
        (_raw(b"NQ"), "BINPERSID"),
        (_raw(b"\x97"), "NEXT_BUFFER"),
        (_raw(b"N\x98"), "READONLY_BUFFER"),
    ],
)
def test_every_opcode_that_runs_or_names_an_object_is_refused(data: bytes, opcode: str) -> None:
    with pytest.raises(PickleRefused) as refused:
        loads(data)
    message = str(refused.value)
    assert message.startswith(f"opcode {opcode} (")
    assert message.endswith(": only plain data is read")
    assert "\n" not in message


def test_objects_of_classes_are_refused_at_any_protocol() -> None:
    for protocol in range(6):
        for value in (Builds(), WithState(), NewArgs(), Path("/x"), range(3), bytearray(b"x")):
            if protocol < 2 and isinstance(value, NewArgs):
                continue
            if protocol == 5 and isinstance(value, bytearray):
                continue  # BYTEARRAY8: plain bytes (read as bytes)
            data = pickle.dumps(value, protocol=protocol)
            with pytest.raises(PickleRefused, match="only plain data is read"):
                loads(data)
            assert _opcode_names(data) & {REFUSED[k].split()[0] for k in REFUSED}


def test_unknown_opcodes_are_refused() -> None:
    with pytest.raises(PickleRefused, match=r"^unknown opcode 0xff at byte 2$"):
        loads(b"\x80\x04\xff.")


def test_every_cut_of_a_real_snapshot_is_refused_quickly() -> None:
    data = SNAPSHOT.read_bytes()
    for end in [*range(0, 4096, 7), *range(4096, len(data), 9973), len(data) - 1]:
        with pytest.raises(PickleRefused):
            loads(data[:end])


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        # A string of 2**60 bytes, a BINBYTES8 of 2**63: refused from their length alone.
        (_raw(b"\x8d" + struct.pack("<Q", 2**60)), f"a value of {2**60:,} bytes"),
        (_raw(b"\x8e" + struct.pack("<Q", 2**63)), f"a value of {2**63:,} bytes"),
        (_raw(b"X" + struct.pack("<I", MAX_STRING_BYTES + 1)), "a value of"),
        # Lengths within the limits but beyond the data: cut short, nothing allocated.
        (_raw(b"X" + struct.pack("<I", 1000) + b"abc"), "the data is cut short"),
        (_raw(b"\x8b" + struct.pack("<i", 2**31 - 1)), "an integer of"),
        (b"L" + b"9" * 100_000 + b"L\n.", "a text argument is too long"),
        (b"I" + b"9" * (MAX_DIGITS + 1) + b"\n.", f"a number of more than {MAX_DIGITS} digits"),
        (_raw(b"\x95" + struct.pack("<Q", 2**62)), "the data is cut short"),
        (_raw(b"h\x07"), "refers to an object it never stored"),
        (_raw(b"j" + struct.pack("<I", 2**32 - 1)), "refers to an object it never stored"),
        (_raw(b"a"), "pops more than it pushed"),
        (_raw(b"Ne"), "adds items to nothing"),
        (_raw(b"N(u"), "sets items of something that is not a dict"),
        (_raw(b"NN"), "ends with a damaged stack"),
        (b"\x80\x06N.", "a pickle protocol newer than 5"),
        (_raw(b"}(]Nu"), "a dict key of type list"),
        (_raw(b"}(]\x85Nu"), "a dict key that holds a list or dict"),
    ],
)
def test_damaged_and_hostile_pickles_get_one_line(data: bytes, reason: str) -> None:
    with pytest.raises(PickleRefused) as refused:
        loads(data)
    assert reason in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_memo_index_of_four_billion_allocates_nothing() -> None:
    # The C unpickler grows its memo table to the index: here the memo is a dict.
    assert (
        loads(
            _raw(b"N" + b"r" + struct.pack("<I", 2**32 - 1) + b"0j" + struct.pack("<I", 2**32 - 1))
        )
        is None
    )


def test_deep_nesting_never_recurses() -> None:
    # A million nested lists: built without recursion, freed without it (CPython's trashcan).
    depth = 1_000_000
    data = b"\x80\x04" + b"]" * depth + b"a" * (depth - 1) + b"."
    value = loads(data)
    for _ in range(1000):
        assert isinstance(value, list)
        value = value[0]
    # Marks nest a bounded number of levels.
    with pytest.raises(PickleRefused, match="marks nest too deeply"):
        loads(_raw(b"(" * (MAX_MARKS + 1)))


def test_repeating_one_object_is_bounded() -> None:
    # BINGET costs the file two bytes: a small pickle could repeat an object billions of times.
    data = _raw(b"]q\x00(" + b"h\x00" * 5000 + b"e")
    with pytest.raises(PickleRefused, match="too many items"):
        loads(data, max_items=1000)
    assert len(loads(data, max_items=10_000)) == 5000  # type: ignore[arg-type]


def test_keys_whose_hashes_collide_cannot_make_insertion_quadratic() -> None:
    # Integers equal modulo 2**61 - 1 share a hash: a dict of them would take quadratic time.
    keys = [i * (2**61 - 1) for i in range(MAX_MAPPING_ITEMS + 1)]
    data = pickle.dumps(dict.fromkeys(keys, 0), protocol=4)
    began = time.monotonic()
    with pytest.raises(PickleRefused, match=f"a dict of more than {MAX_MAPPING_ITEMS:,} entries"):
        loads(data)
    assert time.monotonic() - began < 30  # bounded by the limit (no absolute timing: a hang)
    with pytest.raises(PickleRefused, match="a set of more than"):
        loads(pickle.dumps(set(keys), protocol=4))


def test_many_short_text_arguments_take_linear_time() -> None:
    # Protocol 0 strings end at a newline: finding it must not copy what follows each time.
    data = pickle.dumps(["x"] * 50_000, protocol=0)
    began = time.monotonic()
    assert loads(data) == ["x"] * 50_000
    assert time.monotonic() - began < 60  # quadratic copying would take hours
