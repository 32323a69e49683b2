"""The run file's JSON text is json.dumps's, byte for byte (memlens.runfile.jsontext writes it
without importing json: digests of files written before must still match)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlens.runfile import jsontext

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@given(VALUES)
def test_compact_is_json_dumps_compact_without_ascii_escapes(value: object) -> None:
    expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert jsontext.compact(value) == expected


@given(VALUES)
def test_plain_is_json_dumps(value: object) -> None:
    assert jsontext.plain(value) == json.dumps(value)


@pytest.mark.parametrize("value", [{1, 2}, b"x", object()], ids=["set", "bytes", "object"])
def test_what_json_cannot_encode_is_refused_alike(value: object) -> None:
    with pytest.raises(TypeError) as theirs:
        json.dumps(value)
    with pytest.raises(TypeError, match=str(theirs.value)):
        jsontext.plain(value)
