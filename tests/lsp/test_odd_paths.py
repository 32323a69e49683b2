"""Paths as they come: a workspace folder whose name has a space and a non-ASCII letter (the
client sends its documents' URIs percent-encoded: `%20`, `%C3%BC`), runs that record a path
with a NUL byte or of 4,096 characters beside the real files, and a line reached 3,000 frames
deep. The server shows the real files' figures (exact positions), says nothing about the
others, and answers the deep hover with the path's outermost and innermost frames.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspace import APP, SERVER, Workspace, app_run, start_session, write_run
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from tests import runs

from memlens.model import CallNode, LineStats, replace

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX file names"),
]

FOLDER = "odd dir ü"
DEPTH = 3000
DEEP = """\
def down(n):
    if n:
        return down(n - 1)
    return bytearray(1 << 20)


down(3000)
"""
MiB = 1024 * 1024


def deep_run(path: Path) -> list[CallNode]:
    """`down` recursing DEPTH times from line 7, the bytearray at the bottom (line 4)."""
    key = str(path)
    nodes = [CallNode(0, -1, key, 7, "<module>")]
    for i in range(1, DEPTH + 1):
        nodes.append(CallNode(i, i - 1, key, 3, "down"))
    nodes.append(CallNode(DEPTH + 1, DEPTH, key, 4, "down", MiB, 1, MiB, MiB))
    return nodes


def build(root: Path) -> Workspace:
    ws = Workspace(root)
    folder = root / FOLDER
    folder.mkdir()
    ws.folders["odd"] = folder.resolve()
    (folder / "app.py").write_text(APP, encoding="utf-8")
    (folder / "deep.py").write_text(DEEP, encoding="utf-8")
    run = app_run(folder / "app.py")
    deep = folder / "deep.py"
    figures = LineStats(MiB, 1, MiB, 1, MiB, MiB, MiB, MiB)
    hostile = [
        runs.source("/tmp/x\0y.py", "x = 1\n", {1: figures}),
        runs.source("/" + "a" * 4095, None, {1: figures}),
        runs.source(
            str(deep), DEEP, {3: replace(figures, alloc_bytes=0, alloc_count=0), 4: figures}
        ),
    ]
    tree = list(run.call_tree)
    offset = len(tree)
    tree += [
        replace(n, id=n.id + offset, parent=n.parent + offset if n.parent >= 0 else -1)
        for n in deep_run(deep)
    ]
    files = {**run.files, **{sf.path: sf for sf in hostile}}
    write_run(folder, replace(run, files=files, call_tree=tuple(tree)), "20261122-100000-1")
    return ws


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(
    lsp_client: LanguageClient, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[None]:
    ws = build(tmp_path_factory.mktemp("lsp-odd"))
    lsp_client.ws = ws  # type: ignore[attr-defined]
    await start_session(lsp_client, "visual-studio-code", ws, ["odd"])
    yield
    await asyncio.wait_for(lsp_client.shutdown_session(), 20)


def _open(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )


async def _hover(client: LanguageClient, uri: str, line: int) -> lsp.Hover | None:
    return await asyncio.wait_for(
        client.text_document_hover_async(
            lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=lsp.Position(line=line, character=2),
            )
        ),
        60,
    )


async def test_folder_with_a_space_and_a_non_ascii_letter(client: LanguageClient) -> None:
    ws: Workspace = client.ws  # type: ignore[attr-defined]
    uri = ws.uri("odd", "app.py")
    assert "%20" in uri  # as VS Code sends it
    assert "%C3%BC" in uri
    _open(client, uri, APP)
    result = await asyncio.wait_for(
        client.text_document_inlay_hint_async(
            lsp.InlayHintParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=lsp.Range(start=lsp.Position(0, 0), end=lsp.Position(24, 0)),
            )
        ),
        30,
    )
    ends = {n: len(line.encode("utf-16-le")) // 2 for n, line in enumerate(APP.splitlines())}
    assert [(h.position.line, h.position.character, h.label) for h in result or []] == [
        (4, ends[4], "2.0 MiB at peak · 1.2k allocs"),
        (9, ends[9], "4.0 KiB at peak · 2 allocs"),
        (17, ends[17], "2.0 MiB at peak in calls"),
        (22, ends[22], "2.0 MiB at peak in calls"),
    ]
    hover = await _hover(client, uri, 4)
    assert hover is not None
    assert hover.range == lsp.Range(start=lsp.Position(4, 0), end=lsp.Position(4, ends[4]))
    assert isinstance(hover.contents, lsp.MarkupContent)
    assert hover.contents.value.splitlines()[0] == "**memlens** · 2.0 MiB at peak · 1.2k allocs"
    # The paths no file can have are left out without a word: no error, no warning.
    assert client.messages == []
    assert not [m.message for m in client.log_messages if m.type <= lsp.MessageType.Warning]


async def test_hover_on_a_line_reached_3000_frames_deep(client: LanguageClient) -> None:
    ws: Workspace = client.ws  # type: ignore[attr-defined]
    uri = ws.uri("odd", "deep.py")
    _open(client, uri, DEEP)
    hover = await _hover(client, uri, 3)  # the bytearray, at the bottom
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    lines = hover.contents.value.splitlines()
    frame = "`down` (`deep.py:3`)"
    path = [ln for ln in lines if ln.startswith("1. ")]
    assert path == [
        "1. `<module>` (`deep.py:7`) → "
        + " → ".join([frame] * 9)
        + f" → … {DEPTH + 2 - 20:,} more frames … → "
        + " → ".join([frame] * 9)
        + " → `down` (line 4) — 1.0 MiB peak, 1.0 MiB allocated"
    ]
    # The recursing line: one path per depth, the shortest first (all hold the same).
    hover = await _hover(client, uri, 2)
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    lines = hover.contents.value.splitlines()
    assert [ln for ln in lines if ln[:3] in ("1. ", "2. ", "3. ", "4. ")] == [
        f"{i}. `<module>` (`deep.py:7`) → "
        + "".join([f"{frame} → "] * (i - 1))
        + "`down` (line 3) — 1.0 MiB peak, 1.0 MiB allocated"
        for i in (1, 2, 3)
    ]
