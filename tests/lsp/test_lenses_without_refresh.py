"""Code lenses in a client that does not advertise ``workspace/codeLens/refresh`` (Neovim 0.11;
Neovim itself is not installed here, so its LSP profile stands in): it asks for lenses as it
opens a file, before the server has read the folder's runs, and again when
``memlens/runLoaded`` says a new run came (docs/editors/neovim.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspace import APP, SERVER, MiB, app_run, install_recorder, write_run
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("no-refresh").resolve()
    (root / "app.py").write_text(APP, encoding="utf-8")
    write_run(root, app_run(root / "app.py", peak5=2 * MiB), "20261122-100000-1")
    return root


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, folder: Path) -> AsyncIterator[None]:
    install_recorder(lsp_client)
    caps = client_capabilities("neovim")
    assert not (
        caps.workspace and caps.workspace.code_lens and caps.workspace.code_lens.refresh_support
    )
    # No waiting for the first memlens/runLoaded: the client asks at once, as Neovim does.
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=caps,
            root_uri=folder.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=folder.as_uri(), name="proj")],
        )
    )
    yield
    await lsp_client.shutdown_session()


async def _lenses(client: LanguageClient, uri: str) -> list[tuple[int, str]]:
    result = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    return [(x.range.start.line, x.command.title) for x in result or [] if x.command]


async def test_lenses_on_open_and_after_each_run(client: LanguageClient, folder: Path) -> None:
    uri = (folder / "app.py").as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=APP)
        )
    )
    # Asked before the runs were read: the answer waits for them and carries the figures.
    first = await _lenses(client, uri)
    assert first == [
        (3, "memlens: 2.0 MiB at peak · 3.0 MiB allocated, incl. calls"),
        (16, "memlens: 2.0 MiB at peak · 3.0 MiB allocated, incl. calls"),
        (21, "▶ Run under memlens"),
    ]
    rec = client.recorder  # type: ignore[attr-defined]
    seen = len(rec.run_loaded)
    assert seen >= 1
    # A new run: the server says so (memlens/runLoaded), and lenses asked for then are new.
    write_run(folder, app_run(folder / "app.py", peak5=6 * MiB), "20261122-110000-1")
    for _ in range(500):
        if any(r["run"] and r["run"]["id"] == "20261122-110000-1" for r in rec.run_loaded[seen:]):
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError(f"no memlens/runLoaded for the new run: {rec.run_loaded}")
    assert rec.lens_refreshes == 0  # never asked of a client that does not support it
    after = await _lenses(client, uri)
    assert after[0] == (3, "memlens: 6.0 MiB at peak · 3.0 MiB allocated, incl. calls")
