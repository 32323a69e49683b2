"""A healthy folder beside hostile ones: the server serves the healthy one, says once
what it ignores in each hostile one, and exits on shutdown.

Hostile folders carry a `latest` that is a FIFO, a link to /dev/zero or to the server's own
stdin (the LSP pipe), bytes that are not UTF-8, and run files whose `meta` is an endless view
or whose column DEFAULT multiplies the file.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsp_workspace import APP, SERVER, Workspace, app_run, start_session, write_run
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from tests.hostile import default_bomb, hostile_pointer, view_bomb

from memlens.store import Store

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero"),
]

HOSTILE = {
    "fifo": "not a regular file",
    "dev-zero": "is a symbolic link",
    "stdin": "is a symbolic link",
    "non-utf8": "not UTF-8 text",
    "view": "corrupt file (unexpected schema: meta is a view)",
    "default": "corrupt",
}


def build(root: Path) -> Workspace:
    ws = Workspace(root)
    for name in ("healthy", *HOSTILE):
        (root / name).mkdir()
        ws.folders[name] = (root / name).resolve()
    healthy = ws.folders["healthy"]
    (healthy / "app.py").write_text(APP, encoding="utf-8")
    write_run(healthy, app_run(healthy / "app.py"), "20261122-100000-1")
    for kind in ("fifo", "dev-zero", "stdin", "non-utf8"):
        hostile_pointer(Store(ws.folders[kind]).runs_dir, "latest", kind)
        hostile_pointer(Store(ws.folders[kind]).runs_dir, "baseline", kind)
    for kind, make in (("view", view_bomb), ("default", default_bomb)):
        runs = Store(ws.folders[kind]).runs_dir
        runs.mkdir(parents=True)
        bomb = make(runs / "20261122-100000-1.mlrun")
        (runs / "latest").write_text(bomb.name + "\n")
        (runs / "baseline").write_text(bomb.name + "\n")
    return ws


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(
    lsp_client: LanguageClient, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[None]:
    ws = build(tmp_path_factory.mktemp("lsp-hostile"))
    lsp_client.ws = ws  # type: ignore[attr-defined]
    # The hostile folders come first: none of them may hold up the healthy one.
    await start_session(lsp_client, "visual-studio-code", ws, [*HOSTILE, "healthy"])
    yield
    # The test shuts the server down itself (and checks that it exits); if it failed first:
    server = lsp_client._server  # type: ignore[attr-defined]
    if server is not None and server.returncode is None:
        await asyncio.wait_for(lsp_client.shutdown_session(), 20)


def _messages(client: LanguageClient) -> list[str]:
    """What the server logged (window/logMessage): every problem, once a minute at most.
    (Window messages are also rate limited across problems: at most 3 a minute.)"""
    return [m.message for m in client.log_messages]


async def test_healthy_folder_is_served_beside_hostile_ones(client: LanguageClient) -> None:
    ws: Workspace = client.ws  # type: ignore[attr-defined]
    loaded: list[dict[str, Any]] = client.recorder.run_loaded  # type: ignore[attr-defined]
    by_folder = {r["workspace"]: r for r in loaded}
    assert (by_folder[ws.uri("healthy")]["run"] or {}).get("id") == "20261122-100000-1"
    for kind in HOSTILE:
        assert by_folder[ws.uri(kind)]["run"] is None

    uri = ws.uri("healthy", "app.py")
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=APP)
        )
    )
    result = await asyncio.wait_for(
        client.text_document_inlay_hint_async(
            lsp.InlayHintParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=lsp.Range(start=lsp.Position(0, 0), end=lsp.Position(24, 0)),
            )
        ),
        10,
    )
    ends = {n: len(line.encode("utf-16-le")) // 2 for n, line in enumerate(APP.splitlines())}
    assert [(h.position.line, h.position.character, h.label) for h in result or []] == [
        (4, ends[4], "2.0 MiB at peak · 1.2k allocs"),
        (9, ends[9], "4.0 KiB at peak · 2 allocs"),
        (17, ends[17], "2.0 MiB at peak in calls"),
        (22, ends[22], "2.0 MiB at peak in calls"),
    ]

    # Each hostile folder is reported, once per problem, in one line that says why.
    messages = _messages(client)
    assert 1 <= len(client.messages) <= 3  # shown to the user: the first few only
    for kind, reason in HOSTILE.items():
        folder = str(ws.folders[kind])
        about = [m for m in messages if folder + "/" in m]
        assert about, (kind, messages)
        assert all(reason in m and "\n" not in m for m in about), (kind, about)
        assert len(about) == len(set(about))
    # Polling the store again (every 0.2 s here) repeats nothing.
    count = len(messages)
    await asyncio.sleep(1.0)
    assert len(_messages(client)) == count

    await asyncio.wait_for(client.shutdown_session(), 20)
    server = client._server  # type: ignore[attr-defined]
    assert server is not None
    assert server.returncode == 0
