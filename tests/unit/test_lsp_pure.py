"""The language server's pure layers: settings, line mapping, views, index, conversion.

View tests use annotated fixtures: a line ``# ^ LABEL`` under a source line says that line
gets a hint with that label; ``check`` strips the markers and compares (line, label) pairs.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.workspace.position_codec import PositionCodec
from pytest_lsp import client_capabilities

from memlens.cli import build_parser
from memlens.model import (
    NAMED_FIGURES,
    CallNode,
    FunctionStats,
    LineStats,
    LineTable,
    RunInfo,
    SourceFile,
    replace,
)
from memlens_lsp import convert, state, views
from memlens_lsp.features import inlay_hints
from memlens_lsp.index import FolderState, Index, RunData, canonical
from memlens_lsp.server import create_server
from memlens_lsp.settings import Settings, parse
from memlens_lsp.staleness import (
    IDENTITY,
    NOTHING,
    LineMapping,
    MappingCache,
    Superseded,
    map_lines,
)
from memlens_lsp.state import ClientFeatures
from tests import runs
from tests.runs import new_run, source

KiB = 1024
MiB = 1024 * 1024


def info(peak: int = 10 * MiB, cwd: str = "") -> RunInfo:
    return runs.info(peak_traced_bytes=peak, peak_rss_bytes=peak, cwd=cwd)


def folder_with(
    tmp_path: Path,
    text: str | None,
    lines: dict[int, LineStats],
    *,
    base: SourceFile | None = None,
    functions: tuple[FunctionStats, ...] = (),
    tree: tuple[CallNode, ...] = (),
    peak: int = 10 * MiB,
) -> tuple[FolderState, str]:
    path = str(tmp_path / "m.py")
    run = RunData(
        tmp_path / "r.mlrun",
        new_run([source(path, text, lines, functions)], tree, run_info=info(peak)),
    )
    baseline = None
    if base is not None:
        baseline = RunData(
            tmp_path / "b.mlrun", new_run([replace(base, path=path)], run_info=info(peak))
        )
    return FolderState(tmp_path, tmp_path.as_uri(), run, baseline), canonical(path)


def peak(n: int, count: int = 1, live: int = 0) -> LineStats:
    return LineStats(
        alloc_bytes=n, alloc_count=count, peak_bytes=n, live_bytes=live, live_count=1 if live else 0
    )


# -- settings ---------------------------------------------------------------------------------
def test_settings_defaults_and_shapes() -> None:
    assert parse(None) == (Settings(), [])
    nested, problems = parse(
        {
            "inlayHints": {"figure": "alloc", "minBytes": 0, "minShare": 0.5},
            "compareWithBaseline": True,
        }
    )
    assert problems == []
    assert (nested.figure, nested.min_bytes, nested.min_share, nested.compare_with_baseline) == (
        "alloc",
        0,
        0.5,
        True,
    )
    dotted, _ = parse({"inlayHints.figure": "incl_peak", "leakWarning.minBytes": 5})
    assert (dotted.figure, dotted.leak_min_bytes) == ("incl_peak", 5)
    wrapped, _ = parse({"memlens": {"trace": {"server": "verbose"}}})
    assert wrapped.trace_server == "verbose"


def test_bad_settings_fall_back_to_defaults_with_one_problem_each() -> None:
    got, problems = parse(
        {"inlayHints": {"enabled": "yes", "minShare": 2}, "leakWarning": {"minBytes": True}}
    )
    assert got == Settings()
    assert problems == [
        "memlens.inlayHints.enabled: expected true or false (got 'yes'); using the default True",
        "memlens.inlayHints.minShare: expected a number from 0 to 1 (got 2); using the default 0.0",
        "memlens.leakWarning.minBytes: expected a whole number of bytes >= 0 (got True); using the default 1048576",
    ]
    assert parse([1, 2]) == (Settings(), ["memlens settings must be an object; using defaults"])


# -- staleness ----------------------------------------------------------------------------------
def test_identical_or_line_ending_only_changes_are_identity(tmp_path: Path) -> None:
    folder, key = folder_with(tmp_path, "a = 1\nb = 2\n", {1: peak(MiB)})
    view = folder.view(key)
    assert view is not None
    assert map_lines(view, "a = 1\nb = 2\n") is IDENTITY
    assert map_lines(view, "a = 1\r\nb = 2") is IDENTITY


def test_edits_shift_lines_and_hide_changed_ones(tmp_path: Path) -> None:
    folder, key = folder_with(tmp_path, "a = 1\nb = 2\nc = 3\n", {1: peak(MiB)})
    view = folder.view(key)
    assert view is not None
    m = map_lines(view, "# new\na = 1\nb = 22\nc = 3\n")
    assert m.stale
    assert [m.buffer_line(r) for r in (1, 2, 3)] == [2, None, 4]
    assert [m.recorded_line(b) for b in (1, 2, 3, 4)] == [None, 1, None, 3]


def test_without_recorded_text_only_the_hash_decides(tmp_path: Path) -> None:
    text = "x = [0] * 10\n"
    path = str(tmp_path / "m.py")
    recorded = source(path, None, {1: peak(MiB)}, sha256=hashlib.sha256(text.encode()).hexdigest())
    folder = FolderState(
        tmp_path, "file:///", RunData(tmp_path / "r.mlrun", new_run([recorded], run_info=info()))
    )
    view = folder.view(canonical(path))
    assert view is not None
    assert map_lines(view, text) is IDENTITY
    assert map_lines(view, text + "y = 1\n") is NOTHING


def test_mapping_cache_is_per_version(tmp_path: Path) -> None:
    folder, key = folder_with(tmp_path, "a = 1\n", {1: peak(MiB)})
    view = folder.view(key)
    assert view is not None
    cache = MappingCache()

    async def go() -> None:
        lines, m1 = await cache.get("file:///m.py", 1, view, "a = 1\n")
        assert (lines, m1) == (["a = 1"], IDENTITY)
        assert (await cache.get("file:///m.py", 1, view, "ignored: same version"))[1] is IDENTITY
        assert (await cache.get("file:///m.py", 2, view, "b\na = 1\n"))[1].buffer_line(1) == 2
        # A version replaced before its turn is not computed: its waiters learn so.
        first = asyncio.ensure_future(cache.get("file:///m.py", 3, view, "c\na = 1\n"))
        second = asyncio.ensure_future(cache.get("file:///m.py", 4, view, "d\na = 1\n"))
        assert (await second)[1].buffer_line(1) == 2
        with pytest.raises(Superseded):
            await first

    asyncio.run(go())


# -- views: annotated fixtures --------------------------------------------------------------------
def check(
    tmp_path: Path,
    annotated: str,
    figures: dict[int, LineStats],
    settings: Settings | None = None,
    **kw: object,
) -> None:
    """``# ^ LABEL`` under a line: that line's expected hint (lines counted without markers)."""
    source: list[str] = []
    expected: list[tuple[int, str]] = []
    for raw in annotated.splitlines():
        if raw.lstrip().startswith("# ^ "):
            expected.append((len(source) - 1, raw.split("# ^ ", 1)[1]))
        else:
            source.append(raw)
    text = "\n".join(source) + "\n"
    folder, key = folder_with(tmp_path, text, figures, **kw)  # type: ignore[arg-type]
    view = folder.view(key)
    assert view is not None
    items = views.hint_items(
        view,
        IDENTITY,
        settings or Settings(),
        0,
        len(source),
        has_baseline=folder.baseline is not None,
    )
    assert [(i.line, i.label) for i in items] == expected


def test_hints_filter_by_min_bytes(tmp_path: Path) -> None:
    check(
        tmp_path,
        """\
small = [0] * 10
big = [0] * 1_000_000
# ^ 7.6 MiB at peak · 1 alloc
exact = bytearray(1024)
# ^ 1.0 KiB at peak · 3 allocs
""",
        {1: peak(100), 2: peak(8_000_056), 3: peak(1024, 3)},
    )


def test_hints_filter_by_share_of_peak_and_choose_figure(tmp_path: Path) -> None:
    figures = {
        1: LineStats(alloc_bytes=4 * MiB, alloc_count=2, peak_bytes=MiB),
        2: LineStats(alloc_bytes=2 * KiB, alloc_count=1, peak_bytes=2 * KiB),
    }
    check(
        tmp_path,
        """\
a = f()
# ^ 4.0 MiB allocated · 2 allocs
b = g()
""",
        figures,
        Settings(figure="alloc", min_share=0.05),
        peak=10 * MiB,
    )


def test_hints_compare_with_baseline_mapped_through_source_changes(tmp_path: Path) -> None:
    base_text = "a = f()\nb = g()\n"
    base = source("m.py", base_text, {1: peak(2 * MiB), 2: peak(MiB)})
    check(
        tmp_path,
        """\
# a comment the baseline did not have
a = f()
# ^ 1.0 MiB at peak, −1.0 MiB (−50%)
b = g()
# ^ 1.0 MiB at peak, same as baseline
c = h()
# ^ 3.0 MiB at peak, new since baseline
""",
        {2: peak(MiB), 3: peak(MiB), 4: peak(3 * MiB)},
        Settings(compare_with_baseline=True),
        base=base,
    )


def test_hint_ranges_are_absolute_on_both_paths(tmp_path: Path) -> None:
    text = "".join(f"x{i} = 1\n" for i in range(1, 101))
    folder, key = folder_with(tmp_path, text, {10: peak(MiB), 50: peak(MiB), 90: peak(MiB)})
    view = folder.view(key)
    assert view is not None
    # Range wider than the number of figures (walks figures) and narrower (walks lines).
    assert [
        i.line for i in views.hint_items(view, IDENTITY, Settings(), 0, 100, has_baseline=False)
    ] == [9, 49, 89]
    assert [
        i.line for i in views.hint_items(view, IDENTITY, Settings(), 49, 50, has_baseline=False)
    ] == [49]
    assert [
        i.line for i in views.hint_items(view, IDENTITY, Settings(), 10, 49, has_baseline=False)
    ] == []
    assert (
        views.hint_items(
            view, IDENTITY, Settings(inlay_hints_enabled=False), 0, 100, has_baseline=False
        )
        == []
    )


@pytest.mark.parametrize("table", [True, False])
def test_hints_of_an_unedited_file_are_those_of_a_line_by_line_mapping(
    tmp_path: Path, table: bool
) -> None:
    """An unedited file's hints (the identity mapping: the table's lines in range are read
    directly) are those a mapping of each line to itself gives, for every range."""
    text = "".join(f"x{i} = 1\n" for i in range(1, 101))
    figures = {n: peak(n * 4096) for n in (1, 2, 10, 50, 51, 90, 100)}
    folder, key = folder_with(tmp_path, text, LineTable.of(figures) if table else figures)
    view = folder.view(key)
    assert view is not None
    assert isinstance(view.lines, LineTable) == table
    each = {n: n for n in range(1, 101)}
    itself = LineMapping(False, False, each, each)
    for start, end in [(0, 100), (0, 1), (1, 2), (9, 10), (10, 49), (49, 51), (89, 100), (0, 500)]:
        fast = views.hint_items(view, IDENTITY, Settings(), start, end, has_baseline=False)
        assert fast == views.hint_items(view, itself, Settings(), start, end, has_baseline=False)
        assert [i.line for i in fast] == [n - 1 for n in figures if start < n <= end]


def test_call_paths_merge_and_rank(tmp_path: Path) -> None:
    path = str(tmp_path / "m.py")
    tree = (
        CallNode(0, -1, path, 30, "<module>"),
        CallNode(1, 0, path, 20, "main"),
        CallNode(2, 1, path, 5, "build", alloc_bytes=MiB, peak_bytes=MiB),
        CallNode(3, 0, path, 21, "other"),
        CallNode(4, 3, path, 5, "build", alloc_bytes=3 * MiB, peak_bytes=2 * MiB),
        CallNode(5, 4, path, 40, "leaf", alloc_bytes=MiB, peak_bytes=MiB),
        CallNode(6, 1, path, 5, "build", alloc_bytes=MiB, peak_bytes=MiB),  # same path as node 2
    )
    folder, _key = folder_with(tmp_path, "x\n", {5: peak(MiB)}, tree=tree)
    assert folder.run is not None
    assert views.call_paths(folder.run, path, 5) == [
        ("`<module>` (`m.py:30`) → `other` (`m.py:21`) → `build` (line 5)", 3 * MiB, 4 * MiB),
        ("`<module>` (`m.py:30`) → `main` (`m.py:20`) → `build` (line 5)", 2 * MiB, 2 * MiB),
    ]
    assert views.call_paths(folder.run, path, 99) == []


def test_function_lenses_follow_edits_and_compare(tmp_path: Path) -> None:
    text = "def f():\n    a = 1\n\ndef g():\n    b = 2\n"
    fns = (
        FunctionStats("f", 1, 2, alloc_bytes=4 * MiB, peak_bytes=2 * MiB),
        FunctionStats("g", 4, 5, peak_bytes=0),
    )
    base = source(
        "m.py", text, {}, (FunctionStats("f", 1, 2, alloc_bytes=MiB, peak_bytes=3 * MiB),)
    )
    folder, key = folder_with(tmp_path, text, {}, functions=fns, base=base)
    view = folder.view(key)
    assert view is not None
    settings = Settings()
    assert views.function_lenses(view, IDENTITY, 100, settings, has_baseline=True) == [
        views.LensItem(
            0, "memlens: 2.0 MiB at peak (−1.0 MiB vs baseline) · 4.0 MiB allocated, incl. calls"
        )
    ]
    moved = map_lines(view, "import os\n" + text)
    lenses = views.function_lenses(view, moved, 100, settings, has_baseline=False)
    assert [lens.line for lens in lenses] == [1]
    renamed = map_lines(view, text.replace("def f():", "def f2():"))
    assert views.function_lenses(view, renamed, 100, settings, has_baseline=False) == []


def test_lenses_only_on_functions_and_methods_above_the_threshold(tmp_path: Path) -> None:
    text = (
        "import json\n"  # 1
        "class Cache:\n"  # 2
        "    table = {k: [0] * 99 for k in range(9)}\n"  # 3
        "    @staticmethod\n"  # 4
        "    def fill(n):\n"  # 5
        "        return [lambda: 1 for _ in range(n)]\n"  # 6
        "async def load():\n"  # 7
        "    return (x for x in range(3))\n"  # 8
        "def tiny():\n"  # 9
        "    return []\n"  # 10
    )
    big = {"alloc_bytes": 5 * MiB, "peak_bytes": 2 * MiB}
    fns = (
        FunctionStats("<module>", 1, 10, **big),
        FunctionStats("Cache", 2, 6, **big),
        FunctionStats("Cache.<dictcomp>", 3, 3, **big),
        FunctionStats("Cache.fill", 4, 6, **big),
        FunctionStats("Cache.fill.<locals>.<listcomp>", 6, 6, **big),
        FunctionStats("Cache.fill.<locals>.<lambda>", 6, 6, **big),
        FunctionStats("load", 7, 8, **big),
        FunctionStats("load.<locals>.<genexpr>", 8, 8, **big),
        FunctionStats("tiny", 9, 10, alloc_bytes=96, peak_bytes=0),
    )
    folder, key = folder_with(tmp_path, text, {}, functions=fns)
    view = folder.view(key)
    assert view is not None
    lenses = views.function_lenses(view, IDENTITY, 10, Settings(), has_baseline=False)
    assert [lens.line for lens in lenses] == [3, 6]  # Cache.fill (decorated), load
    everything = Settings(lens_min_bytes=0)
    lenses = views.function_lenses(view, IDENTITY, 10, everything, has_baseline=False)
    assert [lens.line for lens in lenses] == [3, 6, 8]


def test_module_state_is_not_a_leak(tmp_path: Path) -> None:
    text = (
        "import numpy\n"  # 1: an import
        "TABLE = [0] * 10**6\n"  # 2: a module constant
        "class C:\n"  # 3
        "    cache = bytearray(10**7)\n"  # 4: a class body
        "def f():\n"  # 5
        "    KEEP.append(bytearray(10**7))\n"  # 6: a real leak
        "    import json\n"  # 7: an import inside a function
    )
    live = LineStats(alloc_bytes=9 * MiB, alloc_count=1, live_bytes=9 * MiB, live_count=1)
    fns = (
        FunctionStats("<module>", 1, 7, alloc_bytes=9 * MiB),
        FunctionStats("C", 3, 4, alloc_bytes=9 * MiB),
        FunctionStats("f", 5, 7, alloc_bytes=9 * MiB),
    )
    folder, key = folder_with(
        tmp_path, text, {n: live for n in range(1, 8) if n not in (3, 5)}, functions=fns
    )
    view = folder.view(key)
    assert view is not None
    lines = text.splitlines()
    assert [d.line for d in views.leak_items(view, IDENTITY, lines, Settings())] == [5]
    hover = views.hover_markdown(view, 2, Settings(), stale=False, has_baseline=False)
    assert hover is not None
    assert "Held by the module" in hover
    hover = views.hover_markdown(view, 6, Settings(), stale=False, has_baseline=False)
    assert hover is not None
    assert "Held by the module" not in hover


def test_lines_between_nested_functions_are_module_state(tmp_path: Path) -> None:
    """A line is inside a function when any function's range holds it, nested or not; a
    line between two functions is module state."""
    text = (
        "def outer():\n"  # 1
        "    def inner():\n"  # 2
        "        return bytearray(10**7)\n"  # 3: in inner and outer
        "    return [inner()]\n"  # 4: in outer, after inner's end
        "BETWEEN = bytearray(10**7)\n"  # 5: module level
        "def g():\n"  # 6
        "    return bytearray(10**7)\n"  # 7
        "AFTER = bytearray(10**7)\n"  # 8: module level
    )
    live = LineStats(alloc_bytes=9 * MiB, alloc_count=1, live_bytes=9 * MiB, live_count=1)
    fns = (
        FunctionStats("<module>", 1, 8, alloc_bytes=9 * MiB),
        FunctionStats("outer.<locals>.inner", 2, 3, alloc_bytes=9 * MiB),
        FunctionStats("outer", 1, 4, alloc_bytes=9 * MiB),
        FunctionStats("g", 6, 7, alloc_bytes=9 * MiB),
    )
    folder, key = folder_with(tmp_path, text, dict.fromkeys((3, 4, 5, 7, 8), live), functions=fns)
    view = folder.view(key)
    assert view is not None
    assert [views.held_by_module(view, n) for n in range(1, 9)] == [
        False,
        False,
        False,
        False,
        True,
        False,
        False,
        True,
    ]


_FEED = LineStats(
    alloc_count=1, peak_bytes=200, incl_peak_bytes=10 * MiB, incl_alloc_bytes=40 * MiB
)
_LOAD = LineStats(alloc_bytes=3 * MiB, alloc_count=9, peak_bytes=2 * MiB, incl_peak_bytes=12 * MiB)
_TINY = LineStats(peak_bytes=10, incl_peak_bytes=512 * 1024)


@pytest.mark.parametrize(
    ("settings", "feed", "load"),
    [
        (Settings(), "10.0 MiB at peak in calls", "2.0 MiB at peak · 9 allocs"),
        (Settings(call_hints=False), None, "2.0 MiB at peak · 9 allocs"),
        (Settings(hint_style="compact"), "10.0 MiB in calls", "2.0 MiB peak"),
    ],
)
def test_call_lines_show_what_their_callees_hold(
    tmp_path: Path, settings: Settings, feed: str | None, load: str
) -> None:
    # `analyzer.feed(lines)` holds 10 MiB at the peak through its callees, nothing itself;
    # `tiny()`'s callees hold too little to mention.
    lines = ["analyzer.feed(lines)", *([f"# ^ {feed}"] if feed else [])]
    lines += ["data = load(path)", f"# ^ {load}", "tiny()"]
    check(tmp_path, "\n".join(lines) + "\n", {1: _FEED, 2: _LOAD, 3: _TINY}, settings)


def test_the_hover_of_a_call_line_leads_with_its_callees(tmp_path: Path) -> None:
    call = _FEED
    folder, key = folder_with(tmp_path / "hover", "analyzer.feed(lines)\n", {1: call})
    view = folder.view(key)
    assert view is not None
    hover = views.hover_markdown(view, 1, Settings(), stale=False, has_baseline=False)
    assert hover is not None
    assert hover.splitlines()[0] == "**memlens** · 10.0 MiB at peak in calls"


def test_the_hover_shows_what_c_libraries_allocated(tmp_path: Path) -> None:
    # `conn.execute(...)`: SQLite's own malloc calls are part of the line's self figures.
    stats = LineStats(
        alloc_bytes=20 * MiB,
        alloc_count=40,
        peak_bytes=16 * MiB,
        native_alloc_bytes=18 * MiB,
        native_peak_bytes=15 * MiB,
        native_live_bytes=1 * MiB,
        live_bytes=2 * MiB,
    )
    folder, key = folder_with(tmp_path, "conn.execute(sql)\n", {1: stats})
    view = folder.view(key)
    assert view is not None
    hover = views.hover_markdown(view, 1, Settings(), stale=False, has_baseline=False)
    assert hover is not None
    rows = hover.splitlines()
    assert "| | self | of which native | incl. calls |" in rows
    assert "| peak | 16.0 MiB | 15.0 MiB | 0 B |" in rows
    assert "| allocated | 20.0 MiB | 18.0 MiB | 0 B |" in rows
    assert "| live at exit | 2.0 MiB | 1.0 MiB | 0 B |" in rows
    assert any(r.startswith("_Native_:") for r in rows)
    # A pure-Python line keeps the two-column table.
    folder, key = folder_with(tmp_path / "py", "x = [0] * 10\n", {1: peak(MiB)})
    view = folder.view(key)
    assert view is not None
    hover = views.hover_markdown(view, 1, Settings(), stale=False, has_baseline=False)
    assert hover is not None
    assert "| | self | incl. calls |" in hover.splitlines()
    assert "native" not in hover.lower()


def test_main_block_lenses() -> None:
    lines = [
        'if __name__ == "__main__":',
        "    if __name__ == '__main__':",
        "if '__main__' == __name__ :",
        "if __name__ == '__main__' and x:",
    ]
    assert [
        (i.line, i.command, i.arguments) for i in views.main_block_lenses("file:///a.py", lines)
    ] == [
        (0, "memlens.runFile", ({"uri": "file:///a.py", "args": []},)),
        (2, "memlens.runFile", ({"uri": "file:///a.py", "args": []},)),
    ]


def test_leak_items_threshold_and_columns(tmp_path: Path) -> None:
    text = "x = 1\n    cache.append(b)\n"
    folder, key = folder_with(
        tmp_path, text, {1: peak(MiB, live=MiB - 1), 2: peak(4 * MiB, live=2 * MiB)}
    )
    view = folder.view(key)
    assert view is not None
    items = views.leak_items(view, IDENTITY, text.splitlines(), Settings())
    assert items == [
        views.DiagnosticItem(
            1,
            4,
            19,
            "2.0 MiB allocated here in 1 objects is still live at exit (likely leak; 4.0 MiB allocated in total)",
        )
    ]
    assert len(views.leak_items(view, IDENTITY, text.splitlines(), Settings(leak_min_bytes=1))) == 2


# -- index ------------------------------------------------------------------------------------------
def test_index_resolves_relative_paths_and_picks_deepest_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text("x\n")
    run = new_run([source("m.py", "x\n", {1: peak(MiB)})], run_info=info(cwd=str(tmp_path / "sub")))
    inner = FolderState(tmp_path / "sub", "file:///inner", RunData(tmp_path / "r.mlrun", run))
    outer = FolderState(tmp_path, "file:///outer")
    index = Index((outer, inner))
    target = canonical(tmp_path / "sub" / "m.py")
    assert index.folder_for(target) is inner
    found = index.lookup(target)
    assert found is not None
    assert found[0] is inner
    assert found[1].key == "m.py"
    assert index.lookup(canonical(tmp_path / "other.py")) is None


# -- conversion -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("encoding", "column"),
    [
        (lsp.PositionEncodingKind.Utf16, 18),
        (lsp.PositionEncodingKind.Utf8, 21),
        (lsp.PositionEncodingKind.Utf32, 17),
    ],
)
def test_hint_sits_at_end_of_line_in_the_negotiated_encoding(
    encoding: lsp.PositionEncodingKind, column: int
) -> None:
    lines = ["x = 1", '    s = "héllo 😀"']
    hint = convert.inlay_hint(
        views.HintItem(1, "1.0 KiB at peak", 2), PositionCodec(encoding), lines, {"line": 2}
    )
    assert (hint.position.line, hint.position.character, hint.label, hint.padding_left) == (
        1,
        column,
        "1.0 KiB at peak",
        True,
    )


def test_client_features_of_the_two_profiles() -> None:
    assert ClientFeatures.from_capabilities(
        client_capabilities("visual-studio-code")
    ) == ClientFeatures(
        inlay_hint_refresh=False,
        code_lens_refresh=True,
        watched_files_dynamic=True,
        configuration=True,
        work_done_progress=True,
        related_information=True,
    )
    assert ClientFeatures.from_capabilities(client_capabilities("neovim")) == ClientFeatures(
        inlay_hint_refresh=True,
        code_lens_refresh=False,
        watched_files_dynamic=False,
        configuration=True,
        work_done_progress=True,
        related_information=True,
    )


def test_memlens_lsp_command_is_registered() -> None:
    args = build_parser().parse_args(["lsp", "--tcp", "2087"])
    assert (args.command, args.tcp, args.host) == ("lsp", 2087, "127.0.0.1")


def test_moved_files_match_by_longest_suffix_then_content_hash(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    files = [
        source("/ci/build/src/pkg/util.py", "a = 1\n", {1: peak(MiB)}),
        source("/ci/build/tools/util.py", "b = 2\n", {1: peak(MiB)}),
        source("/ci/build/other/util.py", "c = 3\n", {1: peak(MiB)}),
    ]
    run = RunData(tmp_path / "r.mlrun", new_run(files, run_info=info()), root=root)
    local = canonical(root / "src" / "pkg" / "util.py")
    assert run.match(local) == "/ci/build/src/pkg/util.py"  # pkg/util.py: the longest suffix
    assert run.local_path("/ci/build/src/pkg/util.py") == local
    # Only the file name in common with two recorded files: the content decides, or nothing.
    elsewhere = canonical(root / "util.py")
    assert run.match(elsewhere) is None
    digest = hashlib.sha256(b"c = 3\n").hexdigest()
    assert run.match(elsewhere, lambda: digest) == "/ci/build/other/util.py"
    # Never a file outside the folder the run belongs to.
    assert run.match(canonical(tmp_path / "util.py"), lambda: digest) is None


def test_comparison_colours_and_gone_lines(tmp_path: Path) -> None:
    base_text = "a = f()\nold = load(9)\nb = g()\n"
    base = source("m.py", base_text, {1: peak(2 * MiB), 2: peak(5 * MiB), 3: peak(MiB)})
    text = "# new comment\na = f()\nb = g()\nc = h()\n"
    folder, key = folder_with(
        tmp_path, text, {2: peak(MiB), 3: peak(MiB), 4: peak(3 * MiB)}, base=base
    )
    view = folder.view(key)
    assert view is not None
    settings = Settings(compare_with_baseline=True)
    changes = views.line_changes(view, IDENTITY, settings, 4)
    # Unchanged lines are not listed; the level grows with the change's share of the peak.
    assert [(c.line, c.kind, c.delta, c.level) for c in changes] == [
        (1, "less", -MiB, 3),
        (3, "new", 3 * MiB, 3),
    ]
    gone = views.gone_lines(view, IDENTITY, settings, 4)
    assert [(g.line, g.baseline_line, g.text, g.label) for g in gone] == [
        (2, 2, "old = load(9)", "5.0 MiB at peak · 1 alloc")
    ]
    notes = views.gone_items(view, IDENTITY, text.splitlines(), settings)
    assert [(d.line, d.code, d.message) for d in notes] == [
        (
            2,
            "gone",
            "Gone since the baseline: line 2 (old = load(9)) held 5.0 MiB at peak · 1 alloc",
        )
    ]
    top, gone_rows = views.compare_summary(
        folder,
        views.top_lines(folder.run, "peak"),
        settings,  # type: ignore[arg-type]
    )
    assert [(r["line"], r["delta"]) for r in top] == [(4, None), (2, -MiB), (3, 0)]
    assert [(r["baselineLine"], r["text"]) for r in gone_rows] == [(2, "old = load(9)")]


def test_the_hover_says_where_free_lists_may_move_live_memory(tmp_path: Path) -> None:
    # Runs made by memlens before Python 3.13 leave objects CPython reuses from its free lists
    # on the line that first allocated them: the hover of a line live at exit says so.
    assert views.reuse_caveat("3.12.1", "exact")
    assert views.reuse_caveat("3.10.13", "sampling")
    assert not views.reuse_caveat("3.13.0", "exact")
    assert not views.reuse_caveat("3.15.2", "exact")
    assert not views.reuse_caveat("3.11.7", "imported")  # tracemalloc's own figures
    assert not views.reuse_caveat("", "exact")
    live = LineStats(alloc_bytes=MiB, alloc_count=1, live_bytes=MiB, live_count=1)
    gone = LineStats(alloc_bytes=MiB, alloc_count=1)
    folder, key = folder_with(tmp_path, "a = f()\nb = g()\n", {1: live, 2: gone})  # (3.11.7)
    view = folder.view(key)
    assert view is not None
    note = views.REUSE_CAVEAT.format(python="3\\.11\\.7")
    assert note in (
        views.hover_markdown(view, 1, Settings(), stale=False, has_baseline=False) or ""
    )
    assert note not in (
        views.hover_markdown(view, 2, Settings(), stale=False, has_baseline=False) or ""
    )


def _random_line(rnd: random.Random, sampled: bool) -> LineStats:
    """A line's figures as runs have them: small and big, call sites (own figure under a tenth
    of the inclusive one), no allocation at all, sampled with an error estimate or exact."""
    kind = rnd.choice(("small", "big", "call", "empty", "one"))
    own = {"small": rnd.randint(0, 5000), "big": rnd.randint(10**5, 10**10), "empty": 0}.get(
        kind, rnd.randint(0, 10**5)
    )
    incl = own + (rnd.randint(2**20, 2**33) if kind == "call" else rnd.randint(0, 2000))
    count = 1 if kind == "one" else rnd.choice((0, 1, 7, 1234, 2_500_000))
    err = (lambda v: rnd.choice((0.0, v * rnd.random() / 3))) if sampled else (lambda v: 0.0)
    return LineStats(
        alloc_bytes=own * 2, alloc_count=count, live_bytes=own // 3, live_count=1,
        peak_bytes=own, incl_alloc_bytes=incl * 2, incl_live_bytes=incl // 3,
        incl_peak_bytes=incl, native_alloc_bytes=own // 2, native_live_bytes=own // 5,
        native_peak_bytes=own // 4, alloc_err=err(own * 2), live_err=err(own // 3),
        peak_err=err(own),
    )  # fmt: skip


@pytest.mark.parametrize("sampled", [False, True])
def test_hints_read_by_column_are_the_labels_of_each_line(sampled: bool) -> None:
    """A whole file's first hints are made column by column (views.table_labels), without a
    LineStats per line: for every host figure, style and threshold, and for import and
    decorator lines, they are exactly the labels hint_label gives each line."""
    rnd = random.Random(5)
    lines = {n: _random_line(rnd, sampled) for n in range(1, 400)}
    table = LineTable.of(lines)
    text = [
        rnd.choice(("    x = f(y)", "import numpy", "from a import b", "@cache", "  @dec(1)"))
        for _ in range(420)
    ]
    peak = 2**31
    host = [name for name, fig in NAMED_FIGURES.items() if not fig.device]
    for figure in host:
        for settings in (
            Settings(figure=figure),
            Settings(figure=figure, hint_style="compact"),
            Settings(figure=figure, call_hints=False, min_bytes=0),
            Settings(figure=figure, min_share=0.001, import_min_bytes=10**6),
        ):
            assert views.by_column(table, settings) is table
            got = dict(views.table_labels(table, list(lines), settings, peak, text))
            want = {
                n: views.hint_label(st, None, settings, peak, False, text=text[n - 1])
                for n, st in lines.items()
            }
            assert got == want, (figure, settings)
            assert any(label is not None for label in got.values())
    assert views.by_column(table, Settings(figure="gpu_peak")) is None
    assert views.by_column(lines, Settings()) is None  # a hand-made run's dict: line by line


@pytest.mark.parametrize(
    "text", ["", "plain", "é", "😀", "a😀b😀", "\ud800 lone", "x\udfff😀", "漢字" * 50]
)
def test_utf16_width_of_any_line(text: str) -> None:
    """A line's width in UTF-16 code units (where VS Code puts a hint), lone surrogates
    included, as the plain little-endian encoding counts it."""
    width = convert.counter(PositionCodec(lsp.PositionEncodingKind.Utf16))
    assert width(text) == len(text.encode("utf-16-le", "surrogatepass")) // 2


def test_gc_is_paused_in_the_block_and_back_after_it() -> None:
    seen: list[bool] = []

    def block() -> None:
        with state.gc_paused():
            seen.append(gc.isenabled())
            with state.gc_paused():  # nested: the outer block turns it back on
                seen.append(gc.isenabled())
            seen.append(gc.isenabled())
            raise RuntimeError

    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        block()
    assert seen == [False, False, False]
    assert gc.isenabled()


def test_a_hint_that_cannot_be_written_is_left_out_not_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the one-pass JSON of a file's hints fails, they are written one at a time and only
    the bad one is left out (one bad record never empties a response)."""
    text = "".join(f"x{i} = 1\n" for i in range(1, 11))
    folder, key = folder_with(tmp_path, text, {n: peak(n * MiB) for n in (2, 5, 7)})
    view = folder.view(key)
    assert view is not None
    write = convert.inlay_hint_texts

    def fragile(items: list[views.HintItem], *args: Any) -> list[str]:
        if any(item.recorded_line == 5 for item in items):
            raise ValueError("cannot write this one")
        return write(items, *args)

    monkeypatch.setattr(convert, "inlay_hint_texts", fragile)
    ls = create_server()
    codec = PositionCodec()
    ctx = state.DocContext("file:///m.py", key, 1, folder, view, text.splitlines(), IDENTITY, codec)
    cache = inlay_hints.HintCache(("key",), 1)
    answer = json.loads(inlay_hints._answer(ls, ctx, cache, 0, 10))
    assert [(h["position"]["line"], h["label"]) for h in answer] == [
        (1, "2.0 MiB at peak · 1 alloc"),
        (6, "7.0 MiB at peak · 1 alloc"),
    ]
