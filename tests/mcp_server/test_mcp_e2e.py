"""`memlens mcp` end to end: a real server process, driven by the MCP SDK's own client.

Every tool is called over stdio as an agent would, with good and bad arguments and with
unreadable runs; error texts are compared with what the `memlens` command prints for the
same mistake. One test speaks streamable HTTP (`--http`).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest
import tomllib
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent
from packaging.requirements import Requirement

from memlens.cli import mcp as mcp_command
from memlens.model import LineStats, replace
from memlens.runfile import writer
from memlens.store import Store
from tests.cli.memlens_cmd import memlens
from tests.runs import MIB, sample_run

TOOL_ORDER = [
    "list_runs",
    "top_lines",
    "line_figures",
    "function_figures",
    "diff_runs",
    "lines_at_moment",
    "diff_moments",
    "profile_script",
    "attach_process",
]
TOOLS = set(TOOL_ORDER)
#: What a server started without --allow-run lists: the tools it will answer (no running or
#: attaching).
READ_ONLY_TOOLS = TOOLS - {"profile_script", "attach_process"}
ROOT = Path(__file__).resolve().parents[2]
MB = 1_000_000

#: One line keeps 10 MB to the end; another allocates 50 MB in passing and keeps nothing.
KEEPER = """\
kept = []


def keep():
    kept.append(bytearray(10_000_000))


def churn():
    for _ in range(50):
        scratch = bytearray(1_000_000)
        del scratch


keep()
churn()
print("kept", len(kept[0]))
"""
KEEP_LINE, CHURN_LINE = 5, 10


@asynccontextmanager
async def connect(root: Path, *options: str) -> AsyncIterator[Client]:
    """A `memlens mcp` process serving ``root``, and the SDK's client talking to it."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memlens", "mcp", *options], cwd=str(root)
    )
    with anyio.fail_after(300):
        async with Client(params, read_timeout_seconds=120) as client:
            yield client


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    # The same JSON is in the text content, for clients that do not read structured content.
    assert json.loads(_text(result)) == result.structured_content
    return result.structured_content


async def error(client: Client, tool: str, **arguments: Any) -> str:
    """The error a call ends in: one line, `memlens: ...`, no traceback."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert result.structured_content is None
    text = _text(result)
    assert text.startswith("memlens: ")
    assert "\n" not in text
    assert "Traceback" not in text
    return text


def _text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def cli_error(root: Path, *args: str) -> str:
    """The one line the `memlens` command prints for a mistake."""
    out = memlens(*args, cwd=root)
    assert out.returncode == 2, out
    return out.stderr.strip()


def profiled_keeper(root: Path) -> Path:
    """A workspace with one run of KEEPER, made by really running it under `memlens run`."""
    (root / "keeper.py").write_text(KEEPER)
    out = memlens("run", "--no-report", "keeper.py", cwd=root)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "kept 10000000\n"
    latest = Store(root).latest()
    assert latest is not None
    return latest


def two_runs(root: Path) -> tuple[Path, Path]:
    """Run A (baseline) and run B, whose source gained a first line (every line moved by one)
    and whose line 4 (now 5) holds 10 MiB less at the peak."""
    store = Store(root)
    a = store.runs_dir / "20261122-100000-1.mlrun"
    b = store.runs_dir / "20261122-110000-2.mlrun"
    writer.write(sample_run(), a)
    text = "# new header\n" + str(sample_run().files["/work/app.py"].text)
    run_b = sample_run(text=text)
    sf = run_b.files["/work/app.py"]
    lines = {
        5: replace(sf.lines[4], peak_bytes=30 * MIB),
        7: sf.lines[6],
        1: LineStats(peak_bytes=MIB),
    }
    writer.write(replace(run_b, files={sf.path: replace(sf, lines=lines)}), b)
    store.set_pointer("latest", b)
    store.set_pointer("baseline", a)
    return a, b


async def test_tools_and_resources_are_listed_with_schemas(tmp_path: Path) -> None:
    profiled_keeper(tmp_path)
    async with connect(tmp_path) as client:
        # Only the tools this server answers: profile_script needs --allow-run.
        assert {t.name for t in (await client.list_tools()).tools} == READ_ONLY_TOOLS
    async with connect(tmp_path, "--allow-run") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        templates = (await client.list_resource_templates()).resource_templates
        resources = (await client.list_resources()).resources
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        assert tool.output_schema is not None
        assert tool.output_schema["type"] == "object"
    assert tools["line_figures"].input_schema["required"] == ["path"]
    assert tools["top_lines"].input_schema["properties"]["by"]["enum"] == [
        "peak", "alloc", "live", "gpu_peak", "gpu_alloc", "gpu_live",
    ]  # fmt: skip
    assert tools["top_lines"].annotations is not None
    assert tools["top_lines"].annotations.read_only_hint is True
    assert tools["profile_script"].annotations is not None
    assert tools["profile_script"].annotations.read_only_hint is False
    assert [t.uri_template for t in templates] == ["memlens://runs/{id}"]
    run_id = Store(tmp_path).run_files()[0].stem
    assert [(r.uri, r.mime_type) for r in resources] == [
        (f"memlens://runs/{run_id}", "application/json")
    ]


async def test_top_lines_by_live_finds_the_line_that_keeps_10_mb(tmp_path: Path) -> None:
    run_file = profiled_keeper(tmp_path)
    script = str((tmp_path / "keeper.py").resolve())
    async with connect(tmp_path) as client:
        live = await ok(client, "top_lines", by="live")
        alloc = await ok(client, "top_lines", by="alloc", limit=1)
        by_id = await ok(client, "top_lines", run=run_file.stem, by="live", limit=1)
    assert live["run"] == {"id": run_file.stem, "path": str(run_file)}
    assert live["by"] == "live_bytes"
    top = live["lines"][0]
    assert (top["path"], top["line"], top["function"]) == (script, KEEP_LINE, "keep")
    assert top["code"] == "kept.append(bytearray(10_000_000))"
    assert 10.0 * MB <= top["live_bytes"] <= 10.4 * MB
    assert top["live_count"] >= 1
    assert top["alloc_bytes"] >= top["live_bytes"]
    assert top["incl_live_bytes"] >= top["live_bytes"]
    # Ranked by live bytes, largest first; the churning line keeps nothing and is not listed.
    assert [ln["live_bytes"] for ln in live["lines"]] == sorted(
        (ln["live_bytes"] for ln in live["lines"]), reverse=True
    )
    assert all(ln["live_bytes"] > 0 for ln in live["lines"])
    assert CHURN_LINE not in [ln["line"] for ln in live["lines"]]
    # By allocation the churning line leads: 50 x 1 MB.
    assert [(ln["line"], ln["function"]) for ln in alloc["lines"]] == [(CHURN_LINE, "churn")]
    assert alloc["lines"][0]["alloc_bytes"] >= 50 * MB
    assert alloc["lines"][0]["live_bytes"] < MB
    assert by_id["lines"] == live["lines"][:1]


async def test_list_runs_marks_latest_baseline_and_unreadable_runs(tmp_path: Path) -> None:
    a, b = two_runs(tmp_path)
    broken = Store(tmp_path).runs_dir / "20261122-120000-3.mlrun"
    broken.write_bytes(b"not a run at all")
    async with connect(tmp_path) as client:
        listed = await ok(client, "list_runs")
    assert listed["workspace"] == str(tmp_path.resolve())
    rows = {r["id"]: r for r in listed["runs"]}
    assert list(rows) == [a.stem, b.stem, broken.stem]
    assert rows[a.stem] == {
        "id": a.stem,
        "path": str(a),
        "started": "2026-11-22T10:00:00+00:00",
        "command": ["python", "app.py"],
        "mode": "exact",
        "peak_traced_bytes": 48 * MIB,
        "duration_s": 1.5,
        "complete": True,
        "latest": False,
        "baseline": True,
        "error": None,
    }
    assert (rows[b.stem]["latest"], rows[b.stem]["baseline"]) == (True, False)
    assert rows[broken.stem]["error"] == "not a memlens run file"
    assert rows[broken.stem]["peak_traced_bytes"] is None
    # The same list as `memlens runs --json`.
    assert json.loads(memlens("runs", "--json", cwd=tmp_path).stdout) == listed["runs"]


async def test_list_runs_with_a_file_name_that_is_not_utf8(tmp_path: Path) -> None:
    a, b = two_runs(tmp_path)
    odd = os.fsdecode(bytes(Store(tmp_path).runs_dir) + b"/20261122-120000-\xff.mlrun")
    shutil.copy(a, odd)
    async with connect(tmp_path) as client:
        listed = await ok(client, "list_runs")
    rows = listed["runs"]
    assert [r["id"] for r in rows] == [a.stem, b.stem, "20261122-120000-\ufffd"]
    assert rows[2]["peak_traced_bytes"] == 48 * MIB  # read all the same


async def test_line_figures_with_call_paths(tmp_path: Path) -> None:
    a, _ = two_runs(tmp_path)
    async with connect(tmp_path) as client:
        whole = await ok(client, "line_figures", path="app.py", run="baseline")
        one = await ok(client, "line_figures", path="/work/app.py", run=a.stem, start_line=5)
        no_paths = await ok(client, "line_figures", path="app.py", run=a.stem, call_paths=0)
        empty = await ok(client, "line_figures", path="app.py", run=a.stem, end_line=3)
    assert whole["run"] == {"id": a.stem, "path": str(a)}
    assert whole["path"] == "/work/app.py"
    assert [ln["line"] for ln in whole["lines"]] == [4, 6]
    line4 = whole["lines"][0]
    assert line4["code"] == "return [0] * 10"
    assert line4["function"] == "load"
    assert (line4["peak_bytes"], line4["live_bytes"], line4["alloc_count"]) == (
        40 * MIB,
        30 * MIB,
        1200,
    )
    assert line4["call_paths"] == [
        {
            "frames": [
                {"path": "/work/app.py", "line": 6, "function": "<module>"},
                {"path": "/work/app.py", "line": 4, "function": "load"},
            ],
            "frames_left_out": 0,
            "incl_peak_bytes": 40 * MIB,
            "incl_alloc_bytes": 40 * MIB,
        }
    ]
    line6 = whole["lines"][1]
    assert line6["call_paths"][0]["incl_peak_bytes"] == 40 * MIB + 1024  # it called load
    assert one["lines"] == [whole["lines"][1]]
    assert [ln["call_paths"] for ln in no_paths["lines"]] == [[], []]
    assert empty["lines"] == []


async def test_what_holds_a_line(tmp_path: Path) -> None:
    # `memlens run` recorded what holds the line live at exit: the module global `kept`.
    profiled_keeper(tmp_path)
    async with connect(tmp_path) as client:
        lines = await ok(client, "line_figures", path="keeper.py", start_line=KEEP_LINE)
        top = await ok(client, "top_lines", by="live", limit=1)
    keep = lines["lines"][0]
    assert keep["line"] == KEEP_LINE
    found = {h["path"]: h for h in keep["held_by"]}
    # The bytearray object and its data, both made on the line, and the list's item array
    # (`kept.append` grew it on the same line).
    assert set(found) == {
        "__main__.kept[0]",
        "__main__.kept[0] (its data)",
        "__main__.kept (its item array)",
    }
    hops = found["__main__.kept[0] (its data)"]["hops"]
    keeper = str(tmp_path / "keeper.py")
    assert [(h["kind"], h["name"], h["type"]) for h in hops] == [
        ("module", "__main__", "module"),
        ("attribute", "kept", "list"),
        ("index", "0", "bytearray"),
        ("buffer", "data", ""),
    ]
    assert [(h["file"], h["line"]) for h in hops[2:]] == [(keeper, KEEP_LINE), (keeper, KEEP_LINE)]
    assert sum(h["objects"] for h in keep["held_by"]) == 3
    assert top["lines"][0]["held_by"] == keep["held_by"]
    # A line not live at exit has nothing.
    churn = line_of(lines, CHURN_LINE)
    assert churn is None or churn["held_by"] == []


def line_of(answer: dict[str, Any], line: int) -> dict[str, Any] | None:
    return next((ln for ln in answer["lines"] if ln["line"] == line), None)


async def test_function_figures_self_and_inclusive(tmp_path: Path) -> None:
    profiled_keeper(tmp_path)
    async with connect(tmp_path) as client:
        functions = await ok(client, "function_figures", by="live")
        alloc = await ok(client, "function_figures", by="alloc", limit=1)
    assert functions["by"] == "incl_live_bytes"
    by_name = {f["qualname"]: f for f in functions["functions"]}
    assert list(by_name)[:2] == ["<module>", "keep"]  # <module> includes what keep kept
    keep, churn = by_name["keep"], by_name["churn"]
    assert (keep["first_line"], keep["last_line"]) == (4, 5)
    assert 10.0 * MB <= keep["incl_live_bytes"] <= 10.4 * MB
    assert keep["live_bytes"] == keep["incl_live_bytes"]  # keep calls nothing that allocates
    assert churn["incl_alloc_bytes"] >= 50 * MB
    assert churn["incl_live_bytes"] < MB
    module = by_name["<module>"]
    assert module["incl_alloc_bytes"] >= keep["incl_alloc_bytes"] + churn["incl_alloc_bytes"]
    assert module["alloc_bytes"] < MB  # its own lines allocate little: the calls do
    assert [f["qualname"] for f in alloc["functions"]] == ["<module>"]


async def test_diff_runs_follows_moved_lines_as_memlens_diff_json(tmp_path: Path) -> None:
    a, b = two_runs(tmp_path)
    async with connect(tmp_path) as client:
        default = await ok(client, "diff_runs")
        every = await ok(client, "diff_runs", base=a.stem, run="latest", limit=0)
        by_live = await ok(client, "diff_runs", by="live", limit=1)
    assert (default["a"], default["b"], default["by"]) == (str(a), str(b), "peak_bytes")
    moved = default["lines"][0]
    assert (moved["line_a"], moved["line_b"], moved["status"]) == (4, 5, "moved")
    assert moved["figures"]["peak_bytes"] == {
        "a": 40 * MIB,
        "b": 30 * MIB,
        "delta": -10 * MIB,
        "ratio": -0.25,
    }
    cli = memlens("diff", "--json", cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert every == json.loads(cli.stdout)
    cli_live = memlens("diff", "--json", "--by", "live", "--top", "1", cwd=tmp_path)
    assert by_live == json.loads(cli_live.stdout)
    assert len(by_live["lines"]) == len(by_live["functions"]) == 1


SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"


async def test_lines_at_a_moment_and_what_grew_between_two(tmp_path: Path) -> None:
    """A program that holds 30 MB at line 8 for a while and frees it, then keeps 20 MB from
    line 14 to the end, profiled for real: the agent's questions at the peak and at the end."""
    script = tmp_path / "held_then_kept.py"
    script.write_text((SCRIPTS / "held_then_kept.py").read_text())
    out = memlens("run", "--no-report", "held_then_kept.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    path = str(script.resolve())
    async with connect(tmp_path) as client:
        peak = await ok(client, "lines_at_moment", moment="peak", limit=2)
        end = await ok(client, "lines_at_moment", moment="end", limit=1)
        grew = await ok(client, "diff_moments", **{"from": "peak"}, limit=2)
        wrong = await error(client, "lines_at_moment", moment="soon")
        late = await error(client, "lines_at_moment", moment="99s")
    assert peak["moment"]["kind"] == "peak"
    assert peak["moment"]["traced_bytes"] >= 30 * MB
    top = peak["lines"][0]
    assert (top["path"], top["line"], top["function"]) == (path, 8, "load")
    assert top["code"] == "scratch = bytearray(30_000_000)  # 30 MB held for a while"
    assert 30 * MB <= top["live_bytes"] <= 30 * MB + 4096
    assert all(ln["line"] != 14 for ln in peak["lines"])
    assert end["moment"]["kind"] == "end"
    assert (end["lines"][0]["line"], end["lines"][0]["function"]) == (14, "keep")
    assert 20 * MB <= end["lines"][0]["live_bytes"] <= 20 * MB + 4096
    # What grew and shrank from the peak to the end: the diff document, by live bytes.
    assert grew["format"] == "memlens-diff"
    assert grew["by"] == "live_bytes"
    assert (grew["from"]["kind"], grew["to"]["kind"]) == ("peak", "end")
    changes = {
        ln["line_b"] or ln["line_a"]: ln["figures"]["live_bytes"]["delta"] for ln in grew["lines"]
    }
    assert -30 * MB - 4096 <= changes[8] <= -30 * MB
    assert 20 * MB <= changes[14] <= 20 * MB + 4096
    # Mistakes are the CLI's one-line errors.
    assert wrong == cli_error(tmp_path, "show", "--at", "soon")
    assert late == cli_error(tmp_path, "show", "--at", "99s")


async def test_run_resources_are_the_json_export(tmp_path: Path) -> None:
    run_file = profiled_keeper(tmp_path)
    async with connect(tmp_path) as client:
        by_id = await client.read_resource(f"memlens://runs/{run_file.stem}")
        latest = await client.read_resource("memlens://runs/latest")
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("memlens://runs/nope")
        with pytest.raises(MCPError) as encoded:
            await client.read_resource("memlens://runs/..%2F..%2Fetc")
        with pytest.raises(MCPError) as not_an_id:
            await client.read_resource("memlens://runs/../../etc/passwd")
    exported = json.loads(memlens("export", run_file.stem, cwd=tmp_path).stdout)
    for result in (by_id, latest):
        (content,) = result.contents
        assert content.mime_type == "application/json"
        assert json.loads(content.text) == exported  # type: ignore[union-attr]
    assert unknown.value.error.message == cli_error(tmp_path, "export", "nope")
    assert encoded.value.error.message == cli_error(tmp_path, "export", "..%2F..%2Fetc")
    assert not_an_id.value.error.message == (
        "memlens: no run resource 'memlens://runs/../../etc/passwd' (expected memlens://runs/ID)"
    )


async def test_unreadable_runs_are_one_line_tool_errors_as_in_the_cli(tmp_path: Path) -> None:
    run_file = profiled_keeper(tmp_path)
    store = Store(tmp_path)
    data = run_file.read_bytes()
    truncated = store.runs_dir / "20261122-000000-7.mlrun"
    truncated.write_bytes(data[: len(data) // 2])
    (tmp_path / "garbage.mlrun").write_bytes(b"\x00" * 100)
    (tmp_path / "empty.mlrun").write_bytes(b"")
    (tmp_path / "folder.mlrun").mkdir()
    newer = tmp_path / "newer.mlrun"
    writer.write(sample_run(), newer)

    with sqlite3.connect(newer) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    db.close()
    async with connect(tmp_path) as client:
        for spec in (truncated.stem, "garbage.mlrun", "empty.mlrun", "folder.mlrun", "newer.mlrun"):
            expected = cli_error(tmp_path, "show", spec)
            assert "cannot read" in expected
            for tool in ("top_lines", "function_figures"):
                assert await error(client, tool, run=spec) == expected
            assert await error(client, "line_figures", path="keeper.py", run=spec) == expected
            assert await error(client, "diff_runs", base=spec, run="latest") == expected
        assert await error(client, "top_lines", run="nope") == cli_error(tmp_path, "show", "nope")
        assert await error(client, "top_lines", run="missing.mlrun") == cli_error(
            tmp_path, "show", "missing.mlrun"
        )
        # No baseline yet: the CLI's hint.
        assert await error(client, "diff_runs") == cli_error(tmp_path, "diff")
        # The server is still there after all that.
        assert (await ok(client, "top_lines", limit=1))["lines"][0]["line"] == KEEP_LINE


async def test_bad_arguments_are_one_line_tool_errors(tmp_path: Path) -> None:
    profiled_keeper(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    outside.mkdir()
    writer.write(sample_run(), outside / "other.mlrun")
    (tmp_path / "link.mlrun").symlink_to(outside / "other.mlrun")
    root = tmp_path.resolve()
    async with connect(tmp_path) as client:
        calls: list[tuple[str, dict[str, Any], str]] = [
            ("list_runs", {"bogus": 1}, "unknown argument 'bogus' (arguments: none)"),
            ("top_lines", {"limit": -1}, "limit must be at least 0"),
            ("top_lines", {"limit": "10"}, "limit must be an integer, not a string"),
            ("top_lines", {"limit": 2.5}, "limit must be an integer, not a number"),
            ("top_lines", {"limit": True}, "limit must be an integer, not true or false"),
            (
                "top_lines",
                {"by": "size"},
                "by must be one of peak, alloc, live, gpu_peak, gpu_alloc, gpu_live",
            ),
            ("top_lines", {"by": 3}, "by must be a string, not an integer"),
            (
                "top_lines",
                {"include_library": "yes"},
                "include_library must be true or false, not a string",
            ),
            ("top_lines", {"run": ["latest"]}, "run must be a string or null, not a list"),
            (
                "top_lines",
                {"lmit": 3},
                "unknown argument 'lmit' (arguments: run, by, limit, include_library)",
            ),
            ("function_figures", {"limit": -5}, "limit must be at least 0"),
            ("diff_runs", {"limit": -1}, "limit must be at least 0"),
            ("line_figures", {}, "missing argument 'path'"),
            ("line_figures", {"path": ""}, "path must not be empty"),
            (
                "line_figures",
                {"path": "keeper.py", "start_line": 0},
                "start_line must be at least 1",
            ),
            (
                "line_figures",
                {"path": "keeper.py", "start_line": 9, "end_line": 3},
                "start_line must not be greater than end_line",
            ),
            ("line_figures", {"path": "nothere.py"}, "the run has no figures for nothere.py"),
            ("line_figures", {"path": "a\0b.py"}, "path must not contain NUL characters"),
            ("top_lines", {"run": "x" * 300}, f"cannot read {'x' * 300}: File name too long"),
            (
                "line_figures",
                {"path": "keeper.py", "call_paths": -1},
                "call_paths must be at least 0",
            ),
            (
                "top_lines",
                {"run": str(outside / "other.mlrun")},
                f"{outside / 'other.mlrun'}: outside the workspace {root}",
            ),
            ("top_lines", {"run": "link.mlrun"}, f"link.mlrun: outside the workspace {root}"),
            (
                "profile_script",
                {"argv": ["keeper.py"]},
                (
                    "profile_script is off: the server runs programs only when started with "
                    "`memlens mcp --allow-run`"
                ),
            ),
            (
                "attach_process",
                {"pid": 1},
                (
                    "attach_process is off: the server attaches to processes only when started "
                    "with `memlens mcp --allow-run`"
                ),
            ),
            (
                "no_such_tool",
                {},
                f"no tool 'no_such_tool' (tools: {', '.join(TOOL_ORDER)})",
            ),
        ]
        for tool, arguments, message in calls:
            assert await error(client, tool, **arguments) == f"memlens: {message}", (
                tool,
                arguments,
            )
        # The server still answers.
        assert (await ok(client, "top_lines", limit=1.0))["lines"][0]["line"] == KEEP_LINE


async def test_profile_script_runs_a_workspace_script(tmp_path: Path) -> None:
    (tmp_path / "keeper.py").write_text(KEEPER)
    (tmp_path / "fails.py").write_text("import sys\nx = bytearray(2_000_000)\nsys.exit(3)\n")
    (tmp_path / "sleeps.py").write_text("import time\nx = bytearray(1_000_000)\ntime.sleep(120)\n")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-scripts"
    elsewhere.mkdir()
    (elsewhere / "evil.py").write_text("open('pwned', 'w').close()\n")
    (tmp_path / "inner.py").symlink_to(elsewhere / "evil.py")
    root = tmp_path.resolve()
    async with connect(tmp_path, "--allow-run") as client:
        done = await ok(client, "profile_script", argv=["keeper.py"], timeout_s=300)
        sampled = await ok(
            client, "profile_script", argv=["keeper.py"], mode="sample", sample_interval_bytes=4096
        )
        failed = await ok(client, "profile_script", argv=["fails.py", "--flag"])
        stopped = await ok(client, "profile_script", argv=["sleeps.py"], timeout_s=1.5)
        refusals = [
            await error(client, "profile_script", argv=[str(elsewhere / "evil.py")]),
            await error(client, "profile_script", argv=["../" + elsewhere.name + "/evil.py"]),
            await error(client, "profile_script", argv=["inner.py"]),
            await error(client, "profile_script", argv=["-m", "http.server"]),
            await error(client, "profile_script", argv=["nope.py"]),
            await error(client, "profile_script", argv=[]),
            await error(client, "profile_script", argv="keeper.py"),
            await error(client, "profile_script", argv=["keeper.py"], timeout_s=0),
            await error(client, "profile_script", argv=["keeper.py"], mode="fast"),
        ]
        listed = await ok(client, "list_runs")
    store = Store(tmp_path)
    summary = done["run"]
    assert summary["path"] == str(store.runs_dir / f"{summary['id']}.mlrun")
    assert summary["command"] == ["python", "keeper.py"]
    assert (summary["mode"], summary["complete"], summary["exit_code"]) == ("exact", True, 0)
    assert (done["exit_code"], done["timed_out"]) == (0, False)
    assert done["stdout"] == "kept 10000000\n"
    assert summary["peak_traced_bytes"] >= 10 * MB
    assert done["top_lines"][0]["line"] == KEEP_LINE  # it holds 10 MB at the peak
    assert {ln["line"] for ln in done["top_lines"]} >= {KEEP_LINE, CHURN_LINE}
    assert sampled["run"]["mode"] == "sampling"
    assert sampled["run"]["sample_interval_bytes"] == 4096
    assert (failed["exit_code"], failed["run"]["exit_code"]) == (3, 3)
    assert failed["run"]["command"] == ["python", "fails.py", "--flag"]
    assert stopped["timed_out"] is True
    assert stopped["run"]["complete"] is False
    if os.name == "posix":
        assert stopped["exit_code"] == -signal.SIGTERM  # memlens saved the run, then died by it
    # The last run is the store's latest.
    assert store.latest() == Path(stopped["run"]["path"])
    assert sorted(r["id"] for r in listed["runs"]) == sorted(
        r["run"]["id"] for r in (done, sampled, failed, stopped)
    )
    assert refusals == [
        f"memlens: {elsewhere / 'evil.py'}: outside the workspace {root}",
        f"memlens: ../{elsewhere.name}/evil.py: outside the workspace {root}",
        f"memlens: inner.py: outside the workspace {root}",
        "memlens: argv[0] must be a script in the workspace, not '-m'",
        cli_error(tmp_path, "run", "nope.py"),
        "memlens: argv must not be empty",
        "memlens: argv must be a list, not a string",
        "memlens: timeout_s must be more than 0",
        "memlens: mode must be one of exact, sample",
    ]
    assert not (tmp_path / "pwned").exists()
    assert not (elsewhere / "pwned").exists()


@contextmanager
def http_server(root: Path) -> Iterator[str]:
    """`memlens mcp --http --port 0` serving ``root``; yields the URL it prints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlens", "mcp", "--http", "--port", "0"],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.append(proc.stderr.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(120)
        assert said, "the server printed no address"
        prefix = f"memlens: MCP server for {root.resolve()} at http://127.0.0.1:"
        assert said[0].startswith(prefix), said
        url = said[0].split(" at ")[1].strip()
        assert url.endswith("/mcp")
        yield url
    finally:
        proc.terminate()
        proc.wait(60)


def _post_status(url: str, host: str) -> int:
    """The status of a bare JSON-RPC POST to ``url`` sent with the Host header ``host``."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        headers = {
            "Host": host,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        conn.request("POST", parts.path, body, headers)
        return conn.getresponse().status
    finally:
        conn.close()


async def test_streamable_http(tmp_path: Path) -> None:
    run_file = profiled_keeper(tmp_path)
    with http_server(tmp_path) as url, anyio.fail_after(120):
        async with Client(url) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            top = await ok(client, "top_lines", by="live", limit=1)
        # DNS rebinding: a page of another site that resolves to 127.0.0.1 is refused.
        foreign = _post_status(url, "attacker.example:80")
    assert foreign == 421
    assert tools == READ_ONLY_TOOLS
    assert top["run"]["id"] == run_file.stem
    assert top["lines"][0]["line"] == KEEP_LINE


def test_http_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = memlens("mcp", "--http", "--port", str(port), cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith(f"memlens: cannot listen on 127.0.0.1:{port}: ")
    assert len(out.stderr.splitlines()) == 1


@pytest.mark.parametrize("module", ["mcp", "anyio", "pydantic", "uvicorn", "starlette"])
def test_without_the_sdk_memlens_mcp_says_how_to_install_it(tmp_path: Path, module: str) -> None:
    """A normal install (memlens without its [mcp] extra) lacks the SDK and its dependencies;
    whichever is missing first, the message is one line naming a command that installs them."""
    hide = (
        f"import sys; sys.modules[{module!r}] = None; "  # as if it were not installed
        "from memlens.cli import main; raise SystemExit(main(['mcp']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", hide],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr == (
        "memlens: the MCP server needs the MCP Python SDK, which is not installed (no module "
        f"named {module!r}): {sys.executable} -m pip install 'mcp<3,>=2.3'\n"
    )


def test_the_install_named_is_memlens_mcp_extra() -> None:
    """The requirement named comes from the installed metadata, which pyproject.toml's [mcp]
    extra wrote; the fallback (no metadata) says the same."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (extra,) = pyproject["project"]["optional-dependencies"]["mcp"]
    assert Requirement(mcp_command.sdk_requirement()) == Requirement(extra)
    assert Requirement(mcp_command.SDK_REQUIREMENT) == Requirement(extra)


def test_bad_start_up_options_are_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    assert cli_error(tmp_path, "mcp", "--dir", str(missing)) == (
        f"memlens: cannot serve {missing}: not a directory"
    )
    assert cli_error(tmp_path, "mcp", "--http", "--port", "70000") == (
        "memlens: --port must be between 0 and 65535"
    )


TORCH_DATA = Path(__file__).resolve().parents[1] / "data" / "torch_cuda"


async def test_gpu_figures_of_a_pytorch_snapshot(tmp_path: Path) -> None:
    """An agent asks for the lines and functions that hold the most GPU memory of a real
    PyTorch snapshot imported into the workspace (`by`: gpu_live, gpu_peak)."""
    (tmp_path / "train.py").write_text((TORCH_DATA / "train.py").read_text())
    snapshot = str(TORCH_DATA / "snapshot-python-stacks.pickle")
    assert memlens("import", "torch-snapshot", snapshot, cwd=tmp_path).returncode == 0
    async with connect(tmp_path) as client:
        top = await ok(client, "top_lines", by="gpu_live", limit=3)
        assert top["by"] == "gpu_live_bytes"
        assert [(r["line"], r["gpu_live_bytes"], r["code"]) for r in top["lines"]] == [
            (18, 67_149_824, "opt.step()"),
            (17, 67_129_344, "loss.backward()"),
            (
                21,
                67_108_864,
                'cache[i] = torch.empty(2048, 2048, device="cuda")  # leak: 16 MiB every 4th step',
            ),
        ]
        assert top["lines"][2]["function"] == "step"
        fns = await ok(client, "function_figures", by="gpu_peak")
        assert fns["by"] == "incl_gpu_peak_bytes"
        (step,) = fns["functions"]
        assert (step["qualname"], step["incl_gpu_peak_bytes"]) == ("step", 287_391_748)
        runs = await ok(client, "list_runs")
        assert [r["mode"] for r in runs["runs"]] == ["imported"]
