"""End-to-end: hints, hovers, lenses, diagnostics and commands on the fixture workspace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lsp_workspace import APP, OTHER, SCRIPT, Workspace, plain
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="session")

APP_LINES = APP.splitlines()
DOWN = "−1.0 MiB (−33%)"
LESS = "−1.0 MiB vs baseline"


def utf_units(client: LanguageClient, text: str) -> int:
    """Length of ``text`` in the encoding the profile negotiates."""
    if client.profile == "neovim":  # type: ignore[attr-defined]
        return len(text.encode("utf-8"))
    return len(text.encode("utf-16-le")) // 2


def rng(spec: str) -> lsp.Range:
    """``"3:4-3:10"`` -> Range."""
    a, b = spec.split("-")
    (l1, c1), (l2, c2) = (map(int, p.split(":")) for p in (a, b))
    return lsp.Range(
        start=lsp.Position(line=l1, character=c1), end=lsp.Position(line=l2, character=c2)
    )


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=text
            )
        )
    )


def close_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(
        lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )


async def hints(client: LanguageClient, uri: str, spec: str) -> list[tuple[int, int, str]]:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng(spec))
    )
    return [(h.position.line, h.position.character, h.label) for h in result or []]  # type: ignore[misc]


def eol(client: LanguageClient, line: int, lines: list[str] = APP_LINES) -> tuple[int, int]:
    return line, utf_units(client, lines[line])


async def test_inlay_hints_full_file_exact_positions(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = workspace.uri("proj", "app.py")
    open_doc(client, uri, APP)
    try:
        got = await hints(client, uri, "0:0-24:0")
        assert got == [
            (*eol(client, 4), "2.0 MiB at peak · 1.2k allocs"),
            (*eol(client, 9), "4.0 KiB at peak · 2 allocs"),
            # Call lines: their own figures are small, their callees hold 2 MiB at the peak.
            (*eol(client, 17), "2.0 MiB at peak in calls"),
            (*eol(client, 22), "2.0 MiB at peak in calls"),
        ]
        # Line 10 holds "é" and "😀": 18 UTF-16 units, 21 UTF-8 bytes.
        assert got[1][1] == (21 if client.profile == "neovim" else 18)  # type: ignore[attr-defined]
    finally:
        close_doc(client, uri)


async def wait_until(predicate: Any, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"condition not met in time: {predicate.__code__.co_names}")


async def test_visible_range_is_absolute_and_end_exclusive(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = workspace.uri("proj", "app.py")
    open_doc(client, uri, APP)
    try:
        assert await hints(client, uri, "8:0-12:0") == [
            (*eol(client, 9), "4.0 KiB at peak · 2 allocs")
        ]
        assert await hints(client, uri, "0:0-4:0") == []
        assert await hints(client, uri, "4:3-4:5") == [
            (*eol(client, 4), "2.0 MiB at peak · 1.2k allocs")
        ]
        assert await hints(client, uri, "18:0-24:0") == [
            (*eol(client, 22), "2.0 MiB at peak in calls")
        ]
    finally:
        close_doc(client, uri)


async def test_resolve_adds_markdown_tooltip(client: LanguageClient, workspace: Workspace) -> None:
    uri = workspace.uri("proj", "app.py")
    open_doc(client, uri, APP)
    try:
        result = await client.text_document_inlay_hint_async(
            lsp.InlayHintParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng("4:0-5:0")
            )
        )
        assert result is not None
        assert len(result) == 1
        assert result[0].tooltip is None
        resolved = await client.inlay_hint_resolve_async(result[0])
        assert isinstance(resolved.tooltip, lsp.MarkupContent)
        assert resolved.tooltip.kind == lsp.MarkupKind.Markdown
        assert "| peak | 2.0 MiB | 2.0 MiB |" in resolved.tooltip.value
        assert resolved.position == result[0].position
        assert resolved.label == "2.0 MiB at peak · 1.2k allocs"
    finally:
        close_doc(client, uri)


async def hover_at(client: LanguageClient, uri: str, line: int, char: int = 2) -> lsp.Hover | None:
    return await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=line, character=char),
        )
    )


async def test_hover_table_baseline_and_call_paths(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = workspace.uri("proj", "app.py")
    open_doc(client, uri, APP)
    try:
        hover = await hover_at(client, uri, 4)
        assert hover is not None
        assert hover.range == lsp.Range(
            start=lsp.Position(line=4, character=0), end=lsp.Position(*eol(client, 4))
        )
        assert isinstance(hover.contents, lsp.MarkupContent)
        lines = hover.contents.value.splitlines()
        assert lines[0] == "**memlens** · 2.0 MiB at peak · 1.2k allocs"
        assert lines[2:9] == [
            "| | self | incl. calls |",
            "|:--|--:|--:|",
            "| peak | 2.0 MiB | 2.0 MiB |",
            "| allocated | 3.0 MiB | 3.0 MiB |",
            "| live at exit | 2.0 MiB | 2.0 MiB |",
            "| allocations | 1.2k | |",
            "| live objects | 1.0k | |",
        ]
        assert "Average size 2.6 KiB · 99.0% of the run's peak" in lines
        assert "vs baseline: peak −1.0 MiB (−33%) · allocated ±0 B (±0%) · live ±0 B (±0%)" in lines
        assert (
            "1. `<module>` (`app.py:23`) → `main` (`app.py:18`) → `build` (line 5) — 2.0 MiB peak, 3.0 MiB allocated"
            in lines
        )
        assert not any("earlier version" in line for line in lines)
        assert lines[-1] == "Run `20261122-100000-1` (exact)"

        new_line = await hover_at(client, uri, 17)
        assert new_line is not None
        assert isinstance(new_line.contents, lsp.MarkupContent)
        assert (
            "vs baseline: new (no figures on this line in the baseline)" in new_line.contents.value
        )
        assert await hover_at(client, uri, 0) is None
        assert await hover_at(client, uri, 2) is None
    finally:
        close_doc(client, uri)


async def test_hover_names_what_holds_a_line(client: LanguageClient, workspace: Workspace) -> None:
    uri = workspace.uri("proj", "app.py")
    app = workspace.folders["proj"] / "app.py"
    open_doc(client, uri, APP)
    try:
        hover = await hover_at(client, uri, 4)
        assert hover is not None
        assert isinstance(hover.contents, lsp.MarkupContent)
        lines = hover.contents.value.splitlines()
        start = lines.index("**Held by** (what keeps it alive at exit; 5 sampled objects):")
        at = app.as_uri()
        assert lines[start + 2] == (
            f'- [`__main__.CACHE`]({at}#L14 "list, allocated at line 14") → '
            f'[`[0]`]({at}#L5 "list, allocated at line 5") → '
            f'[`[3]`]({at}#L5 "bytearray, allocated at line 5") · 5 of 5'
        )
        # The line that grows the list: its own bytes are the list's item array.
        appended = await hover_at(client, uri, 17)
        assert appended is not None
        assert isinstance(appended.contents, lsp.MarkupContent)
        assert (
            f'- [`__main__.CACHE`]({at}#L14 "list, allocated at line 14") → '
            f'[`(its item array)`]({at}#L18 "allocated at line 18") · 1 of 1'
        ) in appended.contents.value.splitlines()
        # A line the run recorded nothing about says nothing.
        greet = await hover_at(client, uri, 9)
        assert greet is not None
        assert isinstance(greet.contents, lsp.MarkupContent)
        assert "Held by" not in greet.contents.value
    finally:
        close_doc(client, uri)


async def lenses(client: LanguageClient, uri: str) -> list[tuple[int, str, str, Any]]:
    result = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    out = []
    for lens in result or []:
        assert lens.range.start == lens.range.end
        assert lens.command is not None
        out.append(
            (
                lens.range.start.line,
                lens.command.title,
                lens.command.command,
                plain(lens.command.arguments),
            )
        )
    return out


async def test_code_lenses_functions_and_main_block(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = workspace.uri("proj", "app.py")
    open_doc(client, uri, APP)
    try:
        assert await lenses(client, uri) == [
            # greet (8.5 KiB) is below codeLens.minBytes; the module gets no lens.
            (3, f"memlens: 2.0 MiB at peak ({LESS}) · 3.0 MiB allocated, incl. calls", "", None),
            (16, f"memlens: 2.0 MiB at peak ({LESS}) · 3.0 MiB allocated, incl. calls", "", None),
            (21, "▶ Run under memlens", "memlens.runFile", [{"uri": uri, "args": []}]),
        ]
    finally:
        close_doc(client, uri)


async def test_leak_diagnostics(client: LanguageClient, workspace: Workspace) -> None:
    uri = workspace.uri("proj", "app.py")
    client.diagnostics.pop(uri, None)
    open_doc(client, uri, APP)
    try:
        # A late empty publish from an earlier test's close may arrive first: wait for ours.
        await wait_until(lambda: bool(client.diagnostics.get(uri)))
        diags = client.diagnostics[uri]
        assert len(diags) == 1
        d = diags[0]
        assert d.range == rng(f"4:4-4:{len(APP_LINES[4])}")
        assert d.severity == lsp.DiagnosticSeverity.Warning
        assert d.source == "memlens"
        assert d.message == (
            "2.0 MiB allocated here in 1.0k objects is still live at exit "
            "(likely leak; 3.0 MiB allocated in total); held by __main__.CACHE[0][3]"
        )
    finally:
        close_doc(client, uri)
    await wait_until(lambda: not client.diagnostics.get(uri))


EDITED = "# new first line\n# new second line\n" + APP.replace('s = "héllo 😀"', 's = "bonjour 😀"')


async def test_edited_buffer_remaps_and_hides_changed_lines(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = workspace.uri("proj", "app.py")
    edited = EDITED.splitlines()
    open_doc(client, uri, EDITED)
    try:
        assert await hints(client, uri, "0:0-26:0") == [
            (*eol(client, 6, edited), "2.0 MiB at peak · 1.2k allocs"),
            (*eol(client, 19, edited), "2.0 MiB at peak in calls"),
            (*eol(client, 24, edited), "2.0 MiB at peak in calls"),
        ]
        hover = await hover_at(client, uri, 6)
        assert hover is not None
        assert isinstance(hover.contents, lsp.MarkupContent)
        assert (
            "_The source differs from the profiled version (line 5 when profiled): "
            "edited lines show no figures._"
        ) in hover.contents.value
        assert await hover_at(client, uri, 11) is None  # the edited line
        assert [(line, title[:20]) for line, title, _, _ in await lenses(client, uri)] == [
            (5, "memlens: 2.0 MiB at "),
            (18, "memlens: 2.0 MiB at "),
            (23, "▶ Run under memlens"),
        ]
        await wait_until(lambda: bool(client.diagnostics.get(uri)))
        assert [d.range.start.line for d in client.diagnostics[uri]] == [6]

        # Typing on the line with figures hides them; other lines keep theirs.
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[
                    lsp.TextDocumentContentChangePartial(range=rng("6:4-6:8"), text="items")
                ],
            )
        )
        assert await hints(client, uri, "0:0-26:0") == [
            (*eol(client, 19, edited), "2.0 MiB at peak in calls"),
            (*eol(client, 24, edited), "2.0 MiB at peak in calls"),
        ]
        await wait_until(lambda: not client.diagnostics.get(uri))
    finally:
        close_doc(client, uri)


BUILD = "def build(n):\n    data = [bytearray(1024) for _ in range(n)]\n    return data\n\n\n"
#: build() moved below main(), past the rest of the file.
MOVED = APP.replace(BUILD, "").replace("if __name__", BUILD + "if __name__")


async def test_moved_block_keeps_its_figures(client: LanguageClient, workspace: Workspace) -> None:
    """A function moved past other code keeps its figures on its new lines (the matcher that
    memlens diff uses); the lines it moved past keep theirs."""
    uri = workspace.uri("proj", "app.py")
    moved = MOVED.splitlines()
    assert moved[16:19] == BUILD.splitlines()[:3]
    open_doc(client, uri, MOVED)
    try:
        assert await hints(client, uri, "0:0-26:0") == [
            (*eol(client, 4, moved), "4.0 KiB at peak · 2 allocs"),
            (*eol(client, 12, moved), "2.0 MiB at peak in calls"),
            (*eol(client, 17, moved), "2.0 MiB at peak · 1.2k allocs"),
            (*eol(client, 22, moved), "2.0 MiB at peak in calls"),
        ]
        hover = await hover_at(client, uri, 17)
        assert hover is not None
        assert isinstance(hover.contents, lsp.MarkupContent)
        assert "(line 5 when profiled)" in hover.contents.value
        assert [(line, title[:20]) for line, title, _, _ in await lenses(client, uri)] == [
            (11, "memlens: 2.0 MiB at "),
            (16, "memlens: 2.0 MiB at "),
            (21, "▶ Run under memlens"),
        ]
    finally:
        close_doc(client, uri)


async def test_multi_root_each_folder_has_its_store(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = workspace.uri("lib", "other.py")
    open_doc(client, uri, OTHER)
    try:
        assert await hints(client, uri, "0:0-3:0") == [
            (1, len(OTHER.splitlines()[1]), "781.3 KiB at peak · 1 alloc"),
        ]
        assert await lenses(client, uri) == []  # below codeLens.minBytes
    finally:
        close_doc(client, uri)


async def test_folder_without_runs_is_silent(client: LanguageClient, workspace: Workspace) -> None:
    uri = workspace.uri("empty", "script.py")
    client.diagnostics.pop(uri, None)
    open_doc(client, uri, SCRIPT)
    try:
        assert not await hints(client, uri, "0:0-5:0")
        assert await hover_at(client, uri, 0) is None
        assert await lenses(client, uri) == [
            (2, "▶ Run under memlens", "memlens.runFile", [{"uri": uri, "args": []}])
        ]
        await wait_until(lambda: uri in client.diagnostics)
        assert list(client.diagnostics[uri]) == []
    finally:
        close_doc(client, uri)


async def test_bad_run_file_is_reported_once(client: LanguageClient, workspace: Workspace) -> None:
    await asyncio.sleep(0.6)  # a few poll intervals: must not report again
    bad = [m for m in client.messages if "cannot read" in m.message]
    assert len(bad) == 1
    assert bad[0].type == lsp.MessageType.Warning
    assert bad[0].message.endswith("20261122-000000-1.mlrun: not a memlens run file")
    uri = workspace.uri("broken", "x.py")
    open_doc(client, uri, "x = 1\n")
    try:
        assert not await hints(client, uri, "0:0-1:0")
    finally:
        close_doc(client, uri)


async def test_run_loaded_notifications_at_start(
    client: LanguageClient, workspace: Workspace
) -> None:
    rec = client.recorder  # type: ignore[attr-defined]
    first = {}
    for params in rec.run_loaded:
        first.setdefault(params["workspace"], params)
    proj = first[workspace.uri("proj")]
    assert proj["run"] == {
        "id": "20261122-100000-1",
        "path": str(workspace.folders["proj"] / ".memlens" / "runs" / "20261122-100000-1.mlrun"),
        "started": "2026-11-22T10:00:00+00:00",
        "command": "app.py",
        "peak_traced_bytes": 2 * 1024 * 1024 + 4096 + 16384,
        "duration_s": 1.5,
        "complete": True,
        "mode": "exact",
        "kind": "program",
        "checkpoint": False,
        "gpu_peak_bytes": 0,
    }
    assert proj["baseline"]["id"] == "20261121-100000-1"
    assert proj["tests"] == {"run": None, "baseline": None, "problem": None}
    assert first[workspace.uri("lib")]["baseline"] is None
    assert proj["problem"] is None
    assert first[workspace.uri("empty")] == {
        "workspace": workspace.uri("empty"),
        "run": None,
        "baseline": None,
        "problem": None,
        "moment": None,  # no moment set (memlens.setMoment): the run's own figures
        "tests": {"run": None, "baseline": None, "problem": None},
    }
    # A corrupt latest run: the folder says why it shows nothing (the status bar names it).
    broken = first[workspace.uri("broken")]
    assert broken["run"] is None
    assert broken["problem"].endswith("20261122-000000-1.mlrun: not a memlens run file")


async def execute(client: LanguageClient, command: str, *args: Any) -> Any:

    return plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=command, arguments=list(args))
        )
    )


async def test_list_runs_and_summary(client: LanguageClient, workspace: Workspace) -> None:
    runs = await execute(client, "memlens.listRuns", {"workspace": workspace.uri("proj")})
    assert [(r["id"], r["kind"], r["isBaseline"], r["isLoaded"], r["error"]) for r in runs] == [
        ("20261121-100000-1", "program", True, False, None),
        ("20261122-100000-1", "program", False, True, None),
    ]
    summary = await execute(client, "memlens.summary", {"workspace": workspace.uri("proj")})
    assert summary["run"]["id"] == "20261122-100000-1"
    assert summary["baseline"]["id"] == "20261121-100000-1"
    assert summary["top"][:2] == [
        {
            "file": str(workspace.folders["proj"] / "app.py"),
            "line": 5,
            "label": "2.0 MiB at peak · 1.2k allocs",
            "text": "data = [bytearray(1024) for _ in range(n)]",
            "delta": -1024 * 1024,
        },
        {
            "file": str(workspace.folders["proj"] / "app.py"),
            "line": 18,
            "label": "16.0 KiB at peak · 1 alloc",
            "text": "CACHE.append(build(100))",
            "delta": None,  # new since the baseline
        },
    ]
    assert summary["delta"] == -1024 * 1024
    assert summary["gone"] == []
    broken = await execute(client, "memlens.listRuns", {"workspace": workspace.uri("broken")})
    assert [(r["id"], r["error"]) for r in broken] == [
        ("20261122-000000-1", "not a memlens run file")
    ]


async def test_settings_change_figure_and_compare(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = workspace.uri("proj", "app.py")
    open_doc(client, uri, APP)
    try:
        client.set_configuration(
            {"compareWithBaseline": True, "inlayHints": {"minBytes": 0}}, section="memlens"
        )
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        for _ in range(100):
            got = await hints(client, uri, "0:0-24:0")
            if got and "(" in got[0][2]:
                break
            await asyncio.sleep(0.02)
        assert got == [
            (*eol(client, 4), f"2.0 MiB at peak, {DOWN}"),
            (*eol(client, 9), "4.0 KiB at peak, same as baseline"),
            (*eol(client, 10), "512 B at peak, same as baseline"),
            # 44 characters with ", new since baseline": the short form fits VS Code's 43.
            (*eol(client, 17), "2.0 MiB at peak in calls (new)"),
            (*eol(client, 22), f"2.0 MiB at peak in calls, {DOWN}"),
        ]
        client.set_configuration(
            {"inlayHints": {"figure": "nonsense", "minBytes": -3}}, section="memlens"
        )
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        await wait_until(lambda: any("bad settings" in m.message for m in client.messages))
        bad = [m.message for m in client.messages if "bad settings" in m.message]
        assert bad == [
            (
                "memlens: bad settings: memlens.inlayHints.figure: expected one of peak, alloc, live, "
                "gpu_peak, gpu_alloc, gpu_live, incl_peak, incl_alloc, incl_live, incl_gpu_peak, "
                "incl_gpu_alloc, incl_gpu_live (got 'nonsense'); using the default 'peak'; "
                "memlens.inlayHints.minBytes: expected a whole number of bytes >= 0 (got -3); "
                "using the default 1024"
            )
        ]
        assert [label for _, _, label in await hints(client, uri, "0:0-24:0")] == [
            "2.0 MiB at peak · 1.2k allocs",
            "4.0 KiB at peak · 2 allocs",
            "2.0 MiB at peak in calls",
            "2.0 MiB at peak in calls",
        ]
    finally:
        client.set_configuration({}, section="memlens")
        client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
        close_doc(client, uri)
