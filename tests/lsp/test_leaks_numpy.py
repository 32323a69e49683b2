"""The leak rule over plain LSP on a real numpy program profiled with ``memlens run``.

What a user must see: OpenBLAS's buffer (allocated by the first matrix product and kept on
purpose) and a memo filled on the first call are told apart from a leak (information, code
``kept``: no warning), while the line whose live memory grows from call to call is warned
about, and its warning, its hover and its export entry name the module global that holds it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspace import SERVER, start_in_folder
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from tests.cli.memlens_cmd import memlens

pytestmark = pytest.mark.asyncio(loop_scope="module")
pytest.importorskip("numpy")

MIB = 1024 * 1024

APP = """\
import time

import numpy as np

HISTORY = []
_MEMO = {}


def table():
    if "t" not in _MEMO:
        _MEMO["t"] = np.arange(2_000_000, dtype=np.float64)  # filled once, on the first call
    return _MEMO["t"]


def step(i):
    HISTORY.append(np.ones(250_000) * i)  # grows from call to call
    unit = np.random.default_rng(i).random((400, 400))
    sims = unit @ unit.T  # the first product allocates OpenBLAS's buffer
    return float(sims[0, 0]) + float(table()[i])


def main():
    total = 0.0
    for i in range(8):
        total += step(i)
        time.sleep(0.05)
    print(total > 0)


if __name__ == "__main__":
    main()
"""
LINES = APP.splitlines()
MEMO = LINES.index(
    '        _MEMO["t"] = np.arange(2_000_000, dtype=np.float64)  # filled once, on the first call'
)
GROWS = LINES.index("    HISTORY.append(np.ones(250_000) * i)  # grows from call to call")
BLAS = LINES.index("    sims = unit @ unit.T  # the first product allocates OpenBLAS's buffer")


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.app = root / "app.py"
        self.app.write_text(APP, encoding="utf-8")
        proc = memlens("run", "--no-report", "--json", "run.json", "app.py", cwd=root, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "True\n"
        self.export = json.loads((root / "run.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("leaks-numpy"))


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, proj: Project) -> AsyncIterator[None]:
    await start_in_folder(lsp_client, proj.root)
    yield
    await lsp_client.shutdown_session()


async def _diagnostics(client: LanguageClient, uri: str) -> list[lsp.Diagnostic]:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=APP)
        )
    )
    for _ in range(500):
        if client.diagnostics.get(uri):
            return list(client.diagnostics[uri])
        await asyncio.sleep(0.02)
    raise AssertionError("no diagnostics published")


async def test_kept_buffers_are_no_leak_and_the_growing_line_is(
    client: LanguageClient, proj: Project
) -> None:
    lines = proj.export["files"][str(proj.app)]["lines"]
    # The three lines hold memory at exit: OpenBLAS's buffer, the memo, the history.
    assert lines[str(BLAS + 1)]["live_bytes"] >= 8 * MIB
    assert lines[str(MEMO + 1)]["live_bytes"] >= 15 * MIB
    assert lines[str(GROWS + 1)]["live_bytes"] >= 15 * MIB

    uri = proj.app.as_uri()
    by_line = {d.range.start.line: d for d in await _diagnostics(client, uri)}
    warnings = [n for n, d in by_line.items() if d.severity == lsp.DiagnosticSeverity.Warning]
    assert warnings == [GROWS]
    grows = by_line[GROWS]
    assert grows.range == lsp.Range(
        start=lsp.Position(line=GROWS, character=4),
        end=lsp.Position(line=GROWS, character=len(LINES[GROWS])),
    )
    assert grows.code == "leak"
    assert "grew during the run" in grows.message
    assert "; held by __main__.HISTORY[" in grows.message
    for line in (BLAS, MEMO):
        d = by_line[line]
        assert d.severity == lsp.DiagnosticSeverity.Information, d.message
        assert d.code == "kept"
        assert "is kept to the end" in d.message

    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=GROWS, character=10),
        )
    )
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    held = hover.contents.value.split("**Held by**", 1)[1]
    first = held.split("\n\n")[1]  # the first path: the global, then the item, with links
    assert first.startswith("- [`__main__.HISTORY`](file://")
    assert f"[`[7]`]({uri}#L{GROWS + 1} " in first

    # The export names the same holder: the module global HISTORY, a list, then an index.
    (found,) = lines[str(GROWS + 1)]["held_by"]
    assert found["outcome"] == "found"
    assert found["path"].startswith("__main__.HISTORY[")
    assert [(h["kind"], h["name"]) for h in found["hops"][:2]] == [
        ("module", "__main__"),
        ("attribute", "HISTORY"),
    ]
