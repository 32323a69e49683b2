"""The line matcher (memlens.mapping.line_map) within a work budget proportional to its input,
and the server's message framing (bounded bodies, bad headers survived) and rate-limited
warnings, without a server."""

from __future__ import annotations

import difflib
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlens import mapping
from memlens.mapping import in_order, line_map
from memlens_lsp import markdown as md
from memlens_lsp.state import Notices
from memlens_lsp.transport import MAX_BODY, _Frames

REPEATED = ["x = [0] * 1000"] * 20_000


def _valid(old: list[str], new: list[str], m: dict[int, int]) -> None:
    pairs = sorted(m.items())
    assert all(old[i - 1] == new[j - 1] for i, j in pairs)
    assert all(a[1] < b[1] for a, b in itertools.pairwise(pairs))


def _one_to_one(old: list[str], new: list[str], m: dict[int, int]) -> None:
    assert all(old[i - 1] == new[j - 1] for i, j in m.items())
    assert len(set(m.values())) == len(m)


def test_one_edit_in_20k_repeated_lines_maps_every_other_line() -> None:
    inserted = ["# new", *REPEATED]
    assert line_map(REPEATED, inserted) == {i: i + 1 for i in range(1, 20_001)}
    edited = [*REPEATED[:9_999], "y = 1", *REPEATED[10_000:]]
    got = line_map(REPEATED, edited)
    assert 10_000 not in got
    assert len(got) == 19_999
    assert got[10_001] == 10_001


def test_repeated_lines_without_anchors_use_a_bounded_edit_search() -> None:
    old = ["a", "b"] * 5_000
    new = ["b", "a"] * 5_000
    got = in_order(old, new)  # a shift by one: two edits
    _valid(old, new, got)
    assert len(got) == 9_999


def test_hostile_input_gives_up_instead_of_spending(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(1)
    old = [f"v{rnd.randrange(3)}" for _ in range(60_000)]
    new = [f"v{rnd.randrange(3)}" for _ in range(60_000)]
    work: list[int] = []
    real = mapping._Matcher.run

    def counted(self: mapping._Matcher) -> dict[int, int]:
        out = real(self)
        work.append(self.budget)
        return out

    monkeypatch.setattr(mapping._Matcher, "run", counted)
    got = line_map(old, new)
    _one_to_one(old, new, got)
    assert len(got) < 60_000  # lines it could not afford stay unmatched (stale)
    # The budget held (one step of slack), over both stages: the moved-block stage only spends
    # what the in-order stage left.
    assert min(work) >= -(mapping.MAX_WORK // 10) - 60_000


@settings(max_examples=300, deadline=None)
@given(
    old=st.lists(
        st.sampled_from(["", "pass", "x = 1", "y = 2", "def f():", "a", "b"]), max_size=60
    ),
    edits=st.lists(
        st.tuples(st.integers(0, 80), st.sampled_from(["ins", "del", "sub"])), max_size=8
    ),
)
def test_matches_are_identical_lines_in_order_and_keep_most(
    old: list[str], edits: list[tuple[int, str]]
) -> None:
    new = list(old)
    for pos, op in edits:
        if op == "ins":
            new.insert(min(pos, len(new)), "new line")
        elif new and op == "del":
            del new[pos % len(new)]
        elif new:
            new[pos % len(new)] = "changed"
    got = in_order(old, new)
    _valid(old, new, got)
    full = line_map(old, new)
    _one_to_one(old, new, full)
    assert got.items() <= full.items()
    best = sum(b.size for b in difflib.SequenceMatcher(None, old, new, False).get_matching_blocks())
    assert len(got) >= best - 2 * len(edits)


# -- framing -------------------------------------------------------------------------------------
def _msg(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def test_frames_recover_after_bad_headers_and_skip_oversized_bodies() -> None:
    f = _Frames()
    stream = (
        b'Content-Length: abc\r\n\r\n{"lost": 1}'
        + _msg(b'{"a": 1}')
        + b"Content-Type: x\r\n\r\n{}"
        + _msg(b'{"b": 2}')
        + b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 10)
    )
    got = f.feed(stream)
    assert got == [b'{"a": 1}', b'{"b": 2}']
    # The oversized body is dropped as it arrives, never buffered whole.
    size = MAX_BODY + 10
    for part in [size // 10] * 10 + [size % 10]:
        assert f.feed(b" " * part) == []
        assert len(f.buf) == 0
    assert f.feed(_msg(b'{"c": 3}')) == [b'{"c": 3}']
    # Byte by byte, headers split anywhere.
    out: list[bytes] = []
    for byte in _msg(b'{"d": 4}') + b"Content-Length: 1e3\r\n\r\nxx" + _msg(b"{}"):
        out.extend(f.feed(bytes([byte])))
    assert out == [b'{"d": 4}', b"{}"]
    # Garbage with no header end at all is dropped, bounded.
    assert f.feed(b"z" * 100_000) == []
    assert len(f.buf) < 20_000
    assert f.feed(_msg(b"[]")) == [b"[]"]


def test_notices_rate_limit_per_key_and_overall() -> None:
    now = [0.0]
    n = Notices(clock=lambda: now[0])
    assert n.may_show("a")
    assert not n.may_show("a")
    now[0] += 30
    assert not n.may_show("a")
    assert n.may_show("b")
    assert n.may_show("c")
    assert not n.may_show("d")  # three a minute at most
    now[0] += Notices.SHOW_EVERY_S
    assert n.may_show("a")
    assert n.may_log("x")
    assert not n.may_log("x")


def test_markdown_text_and_code_escape_everything() -> None:
    assert md.text("a*b_[c](d)") == r"a\*b\_\[c\]\(d\)"
    assert md.code("x`y") == "``x`y``"
    assert md.code("`") == "`` ` ``"
    assert md.text("a\x1b[0m\nb") == "a\ufffd\\[0m\ufffdb"
    assert len(md.plain("x" * 10_000)) == md.MAX_CHARS
