"""Hover splits a line's figures by process when several processes contributed,
over plain LSP with a real run of a program that forks two children."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspace import SERVER, start_in_folder
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from tests.cli.memlens_cmd import memlens

from memlens.model import Run
from memlens.runfile import reader
from memlens.store import Store

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="children are followed on POSIX"),
]

PROGRAM = """\
import os

def fill(mib):
    return bytearray(mib << 20)

keep = fill(1)
for mib in (2, 3):
    pid = os.fork()
    if pid == 0:
        block = fill(mib)
        os._exit(0)
    os.waitpid(pid, 0)
"""


class Profiled:
    def __init__(self, root: Path) -> None:
        self.folder = root / "proj"
        self.folder.mkdir()
        (self.folder / "app.py").write_text(PROGRAM)
        proc = memlens("run", "--no-report", "app.py", cwd=self.folder)
        assert proc.returncode == 0, proc.stderr
        latest = Store(self.folder).latest()
        assert latest is not None
        self.run: Run = reader.read(latest)


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Profiled:
    return Profiled(tmp_path_factory.mktemp("processes"))


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, profiled: Profiled) -> AsyncIterator[None]:
    await start_in_folder(lsp_client, profiled.folder)
    yield
    await lsp_client.shutdown_session()


async def hover_text(client: LanguageClient, uri: str, line: int) -> tuple[lsp.Range, str]:
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=line, character=4),
        )
    )
    assert hover is not None
    assert hover.range is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    return hover.range, hover.contents.value


async def test_hover_splits_a_shared_line_by_process(
    client: LanguageClient, profiled: Profiled
) -> None:
    uri = (profiled.folder / "app.py").as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=PROGRAM
            )
        )
    )
    root, first, second = profiled.run.info.processes
    assert first.parent_pid == second.parent_pid == root.pid
    # Line 4 allocated in the three processes: 1, 2 and 3 MiB, each held at its own end.
    where, text = await hover_text(client, uri, 3)
    assert where == lsp.Range(
        start=lsp.Position(line=3, character=0),
        end=lsp.Position(line=3, character=len("    return bytearray(mib << 20)")),
    )
    lines = text.splitlines()
    start = lines.index("By process:")
    assert lines[start + 2 : start + 7] == [
        "| process | peak | allocated | live at exit |",
        "|:--|--:|--:|--:|",
        f"| {root.pid} (the program) | 1.0 MiB | 1.0 MiB | 1.0 MiB |",
        f"| {first.pid} | 2.0 MiB | 2.0 MiB | 2.0 MiB |",
        f"| {second.pid} | 3.0 MiB | 3.0 MiB | 3.0 MiB |",
    ]
    assert "| allocated | 6.0 MiB | 6.0 MiB |" in lines  # the merged figures above it
    # Line 6 ran in the program alone: no split.
    _, alone = await hover_text(client, uri, 5)
    assert "By process:" not in alone
