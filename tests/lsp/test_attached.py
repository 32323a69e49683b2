"""The hover of a run made by ``memlens attach`` says that objects from before attaching are
not counted, over plain LSP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspace import APP, SERVER, app_run, start_session, write_run
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from memlens.model import replace

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("attached") / "proj"
    root.mkdir()
    (root / "app.py").write_text(APP)
    run = app_run(root / "app.py")
    write_run(root, replace(run, info=replace(run.info, attached=True)), "20261122-100000-1")
    return root


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, folder: Path) -> AsyncIterator[None]:
    class Ws:
        def uri(self, name: str, file: str | None = None) -> str:
            return (folder if file is None else folder / file).as_uri()

    await start_session(lsp_client, "visual-studio-code", Ws(), ["proj"])  # type: ignore[arg-type]
    yield
    await lsp_client.shutdown_session()


async def test_the_hover_of_an_attached_run_says_what_is_not_counted(
    client: LanguageClient, folder: Path
) -> None:
    uri = (folder / "app.py").as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=APP)
        )
    )
    try:
        hover = await client.text_document_hover_async(
            lsp.HoverParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                position=lsp.Position(line=4, character=4),
            )
        )
        assert hover is not None
        assert hover.range == lsp.Range(
            start=lsp.Position(line=4, character=0),
            end=lsp.Position(line=4, character=len(APP.splitlines()[4])),
        )
        assert isinstance(hover.contents, lsp.MarkupContent)
        lines = hover.contents.value.splitlines()
        assert lines[0] == "**memlens** · 2.0 MiB at peak · 1.2k allocs"
        assert lines[-3:] == [
            (
                "_Attached to a running process: only what it allocated while memlens was "
                "attached is counted (objects from before are not); live at exit means still "
                "held when memlens detached._"
            ),
            "",
            "Run `20261122-100000-1` (exact)",
        ]
    finally:
        client.text_document_did_close(
            lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        )
