"""Diffs between runs: moved lines follow their code, fallbacks are flagged."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memlens import diff as diff_module
from memlens.diff import (
    MATCHED_BY_LINE_NUMBER,
    MATCHED_BY_SHA256,
    MATCHED_BY_TEXT,
    ONLY_IN_A,
    ONLY_IN_B,
    Change,
    diff_runs,
    match_lines,
    matching,
    to_json_dict,
)
from memlens.model import FunctionStats, LineStats, Run, replace
from tests.runs import MIB, sample_run

P = "/work/app.py"


def _run(text: str | None, lines: dict[int, LineStats], sha: str = "ab" * 32, **kw: object) -> Run:
    run = sample_run(**kw)
    sf = run.files[P]
    return replace(run, files={P: replace(sf, text=text, sha256=sha, lines=lines)})


def test_change_absolute_and_relative() -> None:
    assert (Change(100, 150).delta, Change(100, 150).ratio) == (50, 0.5)
    assert (Change(100, 0).delta, Change(100, 0).ratio) == (-100, -1.0)
    assert Change(0, 5).ratio is None  # new
    assert Change(0, 0).ratio == 0.0
    assert Change(4, 3).as_dict() == {"a": 4, "b": 3, "delta": -1, "ratio": -0.25}


def test_diff_follows_a_line_that_moved() -> None:
    old_text = "a = 1\nbig = make()\nz = 2\n"
    new_text = "# comment\n# another\na = 1\nbig = make()\nz = 2\n"
    a = _run(old_text, {2: LineStats(peak_bytes=10 * MIB, alloc_bytes=10 * MIB)})
    b = _run(new_text, {4: LineStats(peak_bytes=8 * MIB, alloc_bytes=8 * MIB)}, sha="cd" * 32)
    d = diff_runs(a, b)
    assert len(d.lines) == 1
    ld = d.lines[0]
    assert (ld.file, ld.line_a, ld.line_b, ld.status) == (P, 2, 4, "moved")
    assert ld.matched_by == MATCHED_BY_TEXT
    assert ld.change("peak_bytes") == -2 * MIB
    assert ld.relative("peak_bytes") == -0.2
    assert ld.figure("alloc_bytes") == Change(10 * MIB, 8 * MIB)
    assert ld.relative("live_bytes") == 0.0
    assert d.unmatched_sources == ()


def test_moved_block_with_unchanged_line_numbers_elsewhere() -> None:
    # Two functions swap places: each line is compared with itself, not its old number.
    old = "def f():\n    return [1] * 10\n\ndef g():\n    return [2] * 10\n"
    new = "def g():\n    return [2] * 10\n\ndef f():\n    return [1] * 10\n"
    a = _run(old, {2: LineStats(peak_bytes=100), 5: LineStats(peak_bytes=200)})
    b = _run(new, {2: LineStats(peak_bytes=260), 5: LineStats(peak_bytes=110)}, sha="cd" * 32)
    d = diff_runs(a, b)
    pairs = {(ld.line_a, ld.line_b): ld.change("peak_bytes") for ld in d.lines}
    # difflib keeps f as the matched block (moved from lines 1-2 to 4-5); g moved the other
    # way, past f, and is followed by the second look at the left-over lines. The blank line
    # between them is not distinctive and stays unmatched.
    assert match_lines(a.files[P], b.files[P]) == {1: 4, 2: 5, 4: 1, 5: 2}
    assert pairs == {(2, 5): 10, (5, 2): 60}
    assert all(ld.status == "moved" for ld in d.lines)


def test_diff_keeps_changed_lines_apart() -> None:
    a = _run("x = load(1)\n", {1: LineStats(peak_bytes=MIB)})
    b = _run("x = load(2)\n", {1: LineStats(peak_bytes=3 * MIB)}, sha="cd" * 32)
    d = diff_runs(a, b)
    sides = {(ld.line_a, ld.line_b, ld.status) for ld in d.lines}
    assert sides == {(1, None, "gone"), (None, 1, "new")}
    gone = next(ld for ld in d.lines if ld.line_b is None)
    new = next(ld for ld in d.lines if ld.line_a is None)
    assert gone.change("peak_bytes") == -MIB
    assert gone.relative("peak_bytes") == -1.0
    assert new.change("peak_bytes") == 3 * MIB
    assert new.relative("peak_bytes") is None


def test_line_without_figures_on_one_side_counts_as_zero() -> None:
    text = "a = 1\nb = 2\n"
    a = _run(text, {1: LineStats(peak_bytes=100)})
    b = _run(text, {2: LineStats(peak_bytes=50)})
    d = diff_runs(a, b)
    assert [(ld.line_a, ld.line_b, ld.a is None, ld.b is None) for ld in d.lines] == [
        (1, 1, False, True),
        (2, 2, True, False),
    ]
    assert [ld.change("peak_bytes") for ld in d.lines] == [-100, 50]


def test_missing_text_same_hash_is_identity() -> None:
    a = _run(None, {4: LineStats(peak_bytes=1)})
    b = _run("l1\nl2\nl3\nl4\n", {4: LineStats(peak_bytes=2)})
    mapping, how = matching(a.files[P], b.files[P])
    assert how == MATCHED_BY_SHA256
    assert mapping == {1: 1, 2: 2, 3: 3, 4: 4}
    d = diff_runs(a, b)
    assert d.unmatched_sources == ()
    assert d.lines[0].matched_by == MATCHED_BY_SHA256


def test_missing_text_other_hash_matches_by_number_and_is_flagged() -> None:
    a = _run(None, {4: LineStats(peak_bytes=1), 6: LineStats(peak_bytes=5)})
    b = _run(None, {4: LineStats(peak_bytes=2)}, sha="cd" * 32)
    assert match_lines(a.files[P], b.files[P]) == {4: 4, 6: 6}
    d = diff_runs(a, b)
    assert d.unmatched_sources == (P,)
    assert d.files[0].matched_by == MATCHED_BY_LINE_NUMBER
    assert {ld.matched_by for ld in d.lines} == {MATCHED_BY_LINE_NUMBER}
    assert [(ld.line_a, ld.line_b) for ld in d.lines] == [(4, 4), (6, 6)]


def test_files_only_in_one_run() -> None:
    a = sample_run()
    b = sample_run(path="/work/other.py")
    d = diff_runs(a, b)
    assert [(fd.path, fd.matched_by) for fd in d.files] == [
        (P, ONLY_IN_A),
        ("/work/other.py", ONLY_IN_B),
    ]
    gone = [ld for ld in d.lines if ld.file == P]
    assert all(ld.line_b is None and ld.b is None for ld in gone)
    assert gone[0].change("peak_bytes") == -40 * MIB


def test_function_diffs_pair_duplicates_in_order() -> None:
    a = sample_run()
    sf = a.files[P]
    fns_a = (
        FunctionStats("<lambda>", 1, 1, 10, 1, 0, 10),
        FunctionStats("<lambda>", 5, 5, 20, 1, 0, 20),
    )
    fns_b = (FunctionStats("<lambda>", 2, 2, 15, 1, 0, 15),)
    ra = replace(a, files={P: replace(sf, functions=fns_a)})
    rb = replace(a, files={P: replace(sf, functions=fns_b)})
    d = diff_runs(ra, rb)
    assert [(f.qualname, f.change("peak_bytes"), f.b is None) for f in d.functions] == [
        ("<lambda>", 5, False),
        ("<lambda>", -20, True),
    ]
    with pytest.raises(KeyError):
        d.functions[0].figure("live_count")


@given(
    st.lists(st.sampled_from("abcdef"), max_size=6),
    st.lists(st.sampled_from("abcdef"), max_size=6),
)
def test_functions_of_one_name_each_pair_as_duplicates_do(a: list[str], b: list[str]) -> None:
    # Names held once on each side take a shorter way; it pairs them as the general one does.
    def fns(names: list[str], base: int) -> tuple[FunctionStats, ...]:
        return tuple(FunctionStats(n, 10 - k, 11, base + k) for k, n in enumerate(names))

    fns_a, fns_b = fns(a, 100), fns(b, 200)
    general = diff_module._paired_in_order(P, fns_a, fns_b)
    assert diff_module._diff_functions(P, fns_a, fns_b) == general
    if len(set(a)) == len(a) and len(set(b)) == len(b):
        assert [f.qualname for f in general] == sorted(set(a) | set(b))


def test_same_run_has_no_changes() -> None:
    d = diff_runs(sample_run(), sample_run())
    assert all(ld.is_unchanged() and ld.status == "same-line" for ld in d.lines)
    assert [(f.qualname, f.change("peak_bytes")) for f in d.functions] == [("load", 0)]
    assert d.totals()["peak_traced_bytes"] == Change(48 * MIB, 48 * MIB)


def test_diff_json_shape() -> None:
    a = _run("a\nb\n", {2: LineStats(peak_bytes=100, alloc_bytes=100)})
    b = _run(
        "x\na\nb\n",
        {3: LineStats(peak_bytes=150, alloc_bytes=100)},
        sha="cd" * 32,
        peak_traced_bytes=50 * MIB,
    )
    doc = to_json_dict(diff_runs(a, b))
    assert doc["format"] == "memlens-diff"
    assert doc["version"] == 1
    assert doc["totals"]["peak_traced_bytes"] == {
        "a": 48 * MIB,
        "b": 50 * MIB,
        "delta": 2 * MIB,
        "ratio": 2 / 48,
    }
    assert doc["files"] == {P: {"matched_by": "text"}}
    (line,) = doc["lines"]
    assert (line["file"], line["line_a"], line["line_b"], line["status"]) == (P, 2, 3, "moved")
    assert line["figures"]["peak_bytes"] == {"a": 100, "b": 150, "delta": 50, "ratio": 0.5}
    assert line["change"]["alloc_bytes"] == 0
    assert line["relative"]["peak_bytes"] == 0.5
    (fn,) = doc["functions"]
    assert fn["qualname"] == "load"
    assert fn["lines_a"] == [3, 4]
    assert set(fn["figures"]) == {"alloc_bytes", "alloc_count", "live_bytes", "peak_bytes"}
