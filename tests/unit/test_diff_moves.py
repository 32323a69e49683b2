"""Diffs follow code that moved *past* other code, not only code shifted by an insertion.

The in-order stage of the line matcher (:func:`memlens.mapping.in_order`) follows only one of
two blocks that swapped places; :func:`memlens.mapping.line_map` pairs the rest, for diffs and
for the editor alike.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memlens.diff import MATCHED_BY_TEXT, diff_runs, match_lines, matching
from memlens.mapping import in_order, line_map
from memlens.model import LineStats, Run, SourceFile, replace
from memlens_lsp.index import FolderState, RunData, canonical
from memlens_lsp.staleness import map_lines
from tests.runs import MIB, sample_run, source

P = "/work/app.py"


def _file(lines: list[str], figures: dict[int, LineStats] | None = None) -> SourceFile:
    return source(P, "\n".join(lines) + "\n", figures, sha256="ab" * 32)


def moved_only(old: list[str], new: list[str]) -> dict[int, int]:
    """What the matcher adds to the in-order matches: the moved blocks it follows."""
    ordered = in_order(old, new)
    found = line_map(old, new)
    assert ordered.items() <= found.items()  # the in-order matches are never undone
    return {i: j for i, j in found.items() if i not in ordered}


def _run(sf: SourceFile) -> Run:
    return replace(sample_run(), files={P: sf})


LOAD = [
    "def load(path):",
    "    data = open(path).read()",
    "    return data.split()",
]
CACHE = [
    "def cache(items):",
    "    table = {i: [i] * 100 for i in items}",
    "    return table",
]
REPORT = [
    "def report(table):",
    "    lines = [str(v) for v in table.values()]",
    "    return '\\n'.join(lines)",
]


def test_three_functions_rotated_are_all_followed() -> None:
    # load, cache, report  ->  report, load, cache: report moved up past two functions.
    old = [*LOAD, "", *CACHE, "", *REPORT]
    new = [*REPORT, "", *LOAD, "", *CACHE]
    assert in_order(old, new) == {1: 5, 2: 6, 3: 7, 4: 8, 5: 9, 6: 10, 7: 11}
    extra = moved_only(old, new)
    # report's three lines (9-11 in old) are now lines 1-3; the blank line 8 between cache
    # and report has no distinctive text and is left alone.
    assert extra == {9: 1, 10: 2, 11: 3}


def test_swapped_blocks_compare_hot_lines_with_themselves() -> None:
    old = [*CACHE, "", *LOAD]
    new = [*LOAD, "", *CACHE]
    a = _file(old, {2: LineStats(peak_bytes=10 * MIB), 6: LineStats(peak_bytes=2 * MIB)})
    b = _file(new, {2: LineStats(peak_bytes=3 * MIB), 6: LineStats(peak_bytes=12 * MIB)})
    mapping, how = matching(a, b)
    assert how == MATCHED_BY_TEXT
    assert mapping == {1: 5, 2: 6, 3: 7, 5: 1, 6: 2, 7: 3}
    d = diff_runs(_run(a), _run(b))
    got = {(ld.line_a, ld.line_b): (ld.status, ld.change("peak_bytes")) for ld in d.lines}
    # cache's table line: 10 MiB at line 2 before, 12 MiB at line 6 now; load's read line:
    # 2 MiB at line 6 before, 3 MiB at line 2 now. Nothing is reported as gone or new.
    assert got == {(2, 6): ("moved", 2 * MIB), (6, 2): ("moved", 1 * MIB)}


def test_edited_line_inside_a_moved_block_stays_unmatched() -> None:
    edited = [CACHE[0], "    table = {i: [i] * 200 for i in items}", CACHE[2]]
    old = [*CACHE, "", *LOAD]
    new = [*LOAD, "", *edited]
    mapping = match_lines(_file(old), _file(new))
    # load moved down with difflib (in order); cache moved up: its def line is followed, its
    # edited line is not the same code, and its "return table" is distinctive, so followed.
    assert mapping == {1: 5, 3: 7, 5: 1, 6: 2, 7: 3}
    assert 2 not in mapping


def test_repeated_or_blank_lines_never_pair_on_their_own() -> None:
    old = ["keep = 1", "also = 2", "more = 3", "cache = []", "cache = []", ")"]
    new = ["cache = []", "cache = []", ")", "keep = 1", "also = 2", "more = 3"]
    # difflib follows the first of two equally long blocks; the left-overs are two identical
    # lines (not unique) and a lone bracket (no letters): too weak to call the same code.
    assert in_order(old, new) == {1: 4, 2: 5, 3: 6}
    assert match_lines(_file(old), _file(new)) == {1: 4, 2: 5, 3: 6}
    # One distinctive line in the block is enough to take the whole contiguous block.
    old[5] = ") # end of cache"
    new[2] = ") # end of cache"
    assert match_lines(_file(old), _file(new)) == {1: 4, 2: 5, 3: 6, 4: 1, 5: 2, 6: 3}


def test_identical_texts_need_no_second_look() -> None:
    text = [*LOAD, *CACHE]
    assert moved_only(text, text) == {}
    assert match_lines(_file(text), _file(text)) == {i: i for i in range(1, 7)}


def test_moves_never_map_two_old_lines_to_one_new_line() -> None:
    old = [*LOAD, *CACHE, *REPORT, *LOAD]
    new = [*REPORT, *CACHE, *LOAD]
    mapping = match_lines(_file(old), _file(new))
    assert len(set(mapping.values())) == len(mapping)
    assert all(old[i - 1] == new[j - 1] for i, j in mapping.items())


@settings(max_examples=200, deadline=None)
@given(
    old=st.lists(st.sampled_from(["", "pass", "x = 1", "y = [0] * 9", "z = {}", ")"]), max_size=30),
    new=st.lists(st.sampled_from(["", "pass", "x = 1", "y = [0] * 9", "w = ()", ")"]), max_size=30),
)
def test_matching_is_one_to_one_on_identical_text_and_keeps_difflib(
    old: list[str], new: list[str]
) -> None:
    base = in_order(old, new)
    mapping = match_lines(_file(old), _file(new)) if old and new else base
    assert base.items() <= mapping.items()  # the in-order matches are never undone
    assert len(set(mapping.values())) == len(mapping)
    assert all(old[i - 1] == new[j - 1] for i, j in mapping.items())


_LINES = ["", "pass", "x = 1", "y = [0] * 9", "z = {}", "w = ()", "def f():", "    return x"]


@settings(max_examples=200, deadline=None)
@given(
    old=st.lists(st.sampled_from(_LINES), min_size=1, max_size=25),
    new=st.lists(st.sampled_from(_LINES), min_size=1, max_size=25),
    data=st.data(),
)
def test_every_figure_is_counted_once_on_each_side(
    old: list[str], new: list[str], data: st.DataObject
) -> None:
    def figures(n: int) -> dict[int, LineStats]:
        chosen = data.draw(st.sets(st.integers(1, n)))
        return {i: LineStats(peak_bytes=data.draw(st.integers(1, 10**9))) for i in chosen}

    a, b = _file(old, figures(len(old))), _file(new, figures(len(new)))
    d = diff_runs(_run(a), _run(b))
    # Each recorded line of A is line_a of exactly one diff, carrying its figures; same for B.
    a_side = [(ld.line_a, ld.a) for ld in d.lines if ld.a is not None]
    b_side = [(ld.line_b, ld.b) for ld in d.lines if ld.b is not None]
    assert sorted(a_side, key=lambda p: p[0] or 0) == sorted(a.lines.items())
    assert sorted(b_side, key=lambda p: p[0] or 0) == sorted(b.lines.items())
    assert sum(ld.change("peak_bytes") for ld in d.lines) == sum(
        s.peak_bytes for s in b.lines.values()
    ) - sum(s.peak_bytes for s in a.lines.values())
    mapping = match_lines(a, b)
    for ld in d.lines:
        if ld.line_a is not None and ld.line_b is not None:
            assert mapping[ld.line_a] == ld.line_b  # a pair is always a matched line


def test_editor_and_diff_follow_the_same_moved_block(tmp_path: Path) -> None:
    """One matcher: the server's mapping of a run onto an edited buffer and the diff of two
    runs follow a block that moved past other code to the same lines."""
    old = [*CACHE, "", *LOAD, "", *REPORT]
    new = [*REPORT, "", *CACHE, "", *LOAD]  # report moved to the top, past cache and load
    expected = {1: 5, 2: 6, 3: 7, 4: 8, 5: 9, 6: 10, 7: 11, 9: 1, 10: 2, 11: 3}
    assert in_order(old, new) != expected  # the in-order stage alone leaves report behind

    # memlens diff: run A recorded `old`, run B `new`.
    a, b = _file(old, {10: LineStats(peak_bytes=MIB)}), _file(new, {2: LineStats(peak_bytes=MIB)})
    diff_map, how = matching(a, b)
    assert (diff_map, how) == (expected, MATCHED_BY_TEXT)
    changes = {(ld.line_a, ld.line_b): ld.status for ld in diff_runs(_run(a), _run(b)).lines}
    assert changes == {(10, 2): "moved"}

    # The language server: a run recorded `old`, the open buffer holds `new`.
    folder = FolderState(tmp_path, tmp_path.as_uri(), RunData(tmp_path / "r.mlrun", _run(a)))
    view = folder.view(canonical(P))
    assert view is not None
    editor = map_lines(view, "\n".join(new) + "\n")
    assert editor.stale
    assert editor.to_buffer == expected
    assert [editor.buffer_line(r) for r in (9, 10, 11, 8)] == [1, 2, 3, None]  # 8: a blank line
