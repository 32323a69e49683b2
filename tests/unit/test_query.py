"""memlens.query, memlens.calltree and the MCP server's argument checks, without a server."""

from __future__ import annotations

from typing import Any

import pytest

from memlens import query
from memlens.calltree import CallTreeIndex
from memlens.errors import MemlensError
from memlens.model import CallNode, FunctionStats, LineStats, Run
from memlens_mcp.arguments import check_arguments
from memlens_mcp.schemas import TOOLS
from memlens_mcp.tools import CALLS
from tests.runs import MIB, new_run, source


def _line(alloc: int = 0, live: int = 0, peak: int = 0) -> LineStats:
    return LineStats(
        alloc_bytes=alloc,
        alloc_count=1 if alloc else 0,
        live_bytes=live,
        live_count=1 if live else 0,
        peak_bytes=peak,
        incl_alloc_bytes=alloc,
        incl_live_bytes=live,
        incl_peak_bytes=peak,
    )


@pytest.mark.parametrize(
    ("path", "library"),
    [
        ("/work/app.py", False),
        ("/home/me/lib/app.py", False),
        ("/home/me/python3.11/app.py", False),
        ("<frozen posixpath>", True),
        ("<string>", True),
        ("/venv/lib/python3.12/site-packages/numpy/core/numeric.py", True),
        ("/usr/lib/python3/dist-packages/yaml/reader.py", True),
        ("/usr/lib/python3.11/json/encoder.py", True),
        ("/opt/py/lib/python3.13t/json/encoder.py", True),
        ("C:\\Users\\me\\venv\\Lib\\site-packages\\pandas\\frame.py", True),
    ],
)
def test_is_library_path(path: str, library: bool) -> None:
    assert query.is_library_path(path) is library


def _run_with_library_files() -> Run:
    files = [
        source("/work/app.py", "x = f()\ny = g()\n", {1: _line(peak=3 * MIB), 2: _line(peak=MIB)}),
        source("/usr/lib/python3.11/json/encoder.py", None, {10: _line(peak=9 * MIB)}),
        source("<frozen posixpath>", None, {5: _line(peak=2 * MIB)}),
    ]
    return new_run(files)


def test_top_lines_leave_library_files_out_unless_asked() -> None:
    run = _run_with_library_files()
    mine = query.top_lines(run, "peak", None)
    assert [(r["path"], r["line"], r["code"], r["peak_bytes"]) for r in mine] == [
        ("/work/app.py", 1, "x = f()", 3 * MIB),
        ("/work/app.py", 2, "y = g()", MIB),
    ]
    every = query.top_lines(run, "peak", 2, include_library=True)
    assert [(r["path"], r["line"], r["code"]) for r in every] == [
        ("/usr/lib/python3.11/json/encoder.py", 10, ""),  # no recorded source
        ("/work/app.py", 1, "x = f()"),
    ]
    assert query.top_lines(run, "live", None) == []  # nothing is live: no line is listed


def test_function_self_figures_leave_nested_functions_and_namesakes_apart() -> None:
    path = "/work/m.py"
    text = "def outer():\n    def inner():\n        return [0] * 9\n    return inner()\n" * 2
    fns = (
        FunctionStats("outer", 1, 4, alloc_bytes=5 * MIB, alloc_count=2, peak_bytes=5 * MIB),
        FunctionStats("outer.<locals>.inner", 2, 3, alloc_bytes=4 * MIB, alloc_count=1),
        FunctionStats("outer", 5, 8, alloc_bytes=7 * MIB, alloc_count=1, peak_bytes=7 * MIB),
    )
    tree = (
        CallNode(0, -1, path, 9, "<module>"),
        CallNode(1, 0, path, 4, "outer", alloc_bytes=MIB, alloc_count=1, peak_bytes=MIB),
        CallNode(2, 1, path, 3, "outer.<locals>.inner", alloc_bytes=4 * MIB, alloc_count=1),
        CallNode(3, 0, path, 8, "outer", alloc_bytes=7 * MIB, alloc_count=1, peak_bytes=7 * MIB),
    )
    run = new_run([source(path, text, {}, fns, sha256="")], tree)
    rows = query.function_figures(run, "alloc", None)
    assert [
        (r["qualname"], r["first_line"], r["incl_alloc_bytes"], r["alloc_bytes"], r["peak_bytes"])
        for r in rows
    ] == [
        ("outer", 5, 7 * MIB, 7 * MIB, 7 * MIB),
        ("outer", 1, 5 * MIB, MIB, MIB),
        ("outer.<locals>.inner", 2, 4 * MIB, 4 * MIB, 0),
    ]
    assert [r["qualname"] for r in query.function_figures(run, "peak", 1)] == ["outer"]


def test_heaviest_paths_merge_rank_and_refuse_a_looping_tree() -> None:
    path = "/work/m.py"
    tree = CallTreeIndex(
        (
            CallNode(0, -1, path, 30, "<module>"),
            CallNode(1, 0, path, 20, "main"),
            CallNode(2, 1, path, 5, "build", alloc_bytes=MIB, peak_bytes=MIB),
            CallNode(3, 0, path, 21, "other"),
            CallNode(4, 3, path, 5, "build", alloc_bytes=3 * MIB, peak_bytes=2 * MIB),
            CallNode(5, 4, path, 40, "leaf", alloc_bytes=MIB, peak_bytes=MIB),
            CallNode(6, 1, path, 5, "build", alloc_bytes=MIB, peak_bytes=MIB),
        )
    )
    paths = tree.heaviest_paths(path, 5)
    assert [([n.id for n in p.frames], p.incl_peak_bytes, p.incl_alloc_bytes) for p in paths] == [
        ([0, 3, 4], 3 * MIB, 4 * MIB),
        ([0, 1, 2], 2 * MIB, 2 * MIB),  # nodes 2 and 6 share their callers: one path
    ]
    assert tree.heaviest_paths(path, 5, limit=1) == paths[:1]
    assert tree.heaviest_paths(path, 99) == []
    # A loop cannot be a call tree: refused when the tree is made (readers say "corrupt file").
    with pytest.raises(ValueError, match="loop"):
        CallTreeIndex((CallNode(0, 1, path, 1, "a"), CallNode(1, 0, path, 2, "b")))


def _schema(tool: str) -> dict[str, Any]:
    return next(t.input_schema for t in TOOLS if t.name == tool)


def test_arguments_get_defaults_and_json_integers() -> None:
    assert check_arguments(_schema("top_lines"), {}) == {
        "run": None,
        "by": "peak",
        "limit": 20,
        "include_library": False,
    }
    checked = check_arguments(_schema("top_lines"), {"limit": 5.0, "run": None, "by": "live"})
    assert checked["limit"] == 5
    assert isinstance(checked["limit"], int)
    assert (
        check_arguments(_schema("profile_script"), {"argv": ["a.py", "-x"], "timeout_s": 2})[
            "timeout_s"
        ]
        == 2
    )


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("top_lines", {"limit": True}, "limit must be an integer, not true or false"),
        ("top_lines", {"limit": 100_001}, "limit must be at most 100000"),
        ("top_lines", {"limit": {}}, "limit must be an integer, not an object"),
        (
            "top_lines",
            {"by": None, "x": 1},
            "unknown argument 'x' (arguments: run, by, limit, include_library)",
        ),
        ("list_runs", {"all": True}, "unknown argument 'all' (arguments: none)"),
        ("line_figures", {"path": None}, "missing argument 'path'"),
        ("line_figures", {"path": "a\0b"}, "path must not contain NUL characters"),
        ("profile_script", {"argv": ["a.py", "x\0"]}, "argv[1] must not contain NUL characters"),
        ("profile_script", {"argv": ["a.py", 3]}, "argv[1] must be a string, not an integer"),
        ("profile_script", {"argv": ["a.py"] * 1001}, "argv must have at most 1000 items"),
        ("profile_script", {"argv": ["a.py"], "timeout_s": -1}, "timeout_s must be more than 0"),
        (
            "profile_script",
            {"argv": ["a.py"], "sample_interval_bytes": 0},
            "sample_interval_bytes must be at least 1",
        ),
    ],
)
def test_bad_arguments_are_named_in_one_line(
    tool: str, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(MemlensError) as exc:
        check_arguments(_schema(tool), arguments)
    assert str(exc.value) == message


def test_every_mcp_tool_has_one_answering_function() -> None:
    assert [t.name for t in TOOLS] == list(CALLS)
