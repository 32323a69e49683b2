"""End-to-end over LSP 3.17 notebook documents: a cell profiled with ``%%memlens`` in a real
IPython process shows its figures on its own lines (hint, hover, the cell's lens), a run made
after the notebook was opened is found by the cell's URI and picked up live, and the figures
follow the cell's lines as it is edited."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspace import PROFILES, SERVER, Workspace, start_session
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from tests import runs

from memlens.annotate import line_label
from memlens.layout import RUN_SUFFIX
from memlens.model import LineStats, NotebookCell
from memlens.runfile import reader, writer
from memlens.source import text_digest
from memlens.store import Store

pytestmark = pytest.mark.asyncio(loop_scope="module")

DRIVER = Path(__file__).parents[1] / "notebooks" / "driver.py"
CELL = "%%memlens\nkeep = bytearray(10_000_000)\ntmp = bytearray(5_000_000)\ndel tmp"
OTHER = "import os\n%memlens table = [0] * 1_000_000\nprint(len(table))"
MiB = 1024 * 1024


def cell_uri(notebook: Path, n: int) -> str:
    return f"vscode-notebook-cell:{notebook}#W{n}sZmlsZQ%3D%3D"


def profile_in_ipython(folder: Path, notebook: Path) -> None:
    """``%%memlens`` on CELL in a real IPython process, as Jupyter would send it."""
    cells = ["%load_ext memlens", {"code": CELL, "cell_id": "", "notebook": str(notebook)}]
    (folder / "cells.json").write_text(json.dumps(cells), encoding="utf-8")
    subprocess.run(
        [sys.executable, str(DRIVER), str(folder / "cells.json")],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": ""},
    )


@pytest_lsp.fixture(scope="module", params=PROFILES, config=SERVER)
async def notebook_client(
    lsp_client: LanguageClient,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[None]:
    root = tmp_path_factory.mktemp("lsp-notebook").resolve()
    folder = root / "work"
    (folder / "nb").mkdir(parents=True)
    notebook = folder / "nb" / "analysis.ipynb"
    notebook.write_text("{}", encoding="utf-8")
    profile_in_ipython(folder / "nb", notebook)  # the kernel's folder: the notebook's
    ws = Workspace(root, {"work": folder})
    await start_session(lsp_client, request.param, ws, ["work"])
    lsp_client.notebook = notebook  # type: ignore[attr-defined]
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    lsp_client.notebook_document_did_open(
        lsp.DidOpenNotebookDocumentParams(
            notebook_document=lsp.NotebookDocument(
                uri=notebook.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    lsp.NotebookCell(kind=lsp.NotebookCellKind.Code, document=cell_uri(notebook, n))
                    for n in (0, 1)
                ],
            ),
            cell_text_documents=[
                lsp.TextDocumentItem(
                    uri=cell_uri(notebook, n), language_id="python", version=1, text=text
                )
                for n, text in ((0, CELL), (1, OTHER))
            ],
        )
    )
    yield
    await lsp_client.shutdown_session()


async def hints(client: LanguageClient, uri: str, lines: int = 10) -> list[lsp.InlayHint]:
    for _ in range(100):  # the store is scanned off the event loop
        result = await client.text_document_inlay_hint_async(
            lsp.InlayHintParams(
                text_document=lsp.TextDocumentIdentifier(uri=uri),
                range=lsp.Range(lsp.Position(0, 0), lsp.Position(lines, 0)),
            )
        )
        if result:
            return result
        await asyncio.sleep(0.1)
    return []


async def test_a_profiled_cell_shows_its_figures_on_its_lines(
    notebook_client: LanguageClient,
) -> None:
    notebook: Path = notebook_client.notebook  # type: ignore[attr-defined]
    uri = cell_uri(notebook, 0)
    [path] = Store(notebook.parent).run_files()
    run = reader.read(path)
    keeping = run.files["In [2]"].lines[2]
    assert 10_000_000 <= keeping.live_bytes < 10_000_000 + 4096
    found = await hints(notebook_client, uri)
    by_line = {h.position.line: h for h in found}
    # The keeping line (line 1 of the cell, 0-based), at the end of the line, exactly.
    hint = by_line[1]
    assert hint.position == lsp.Position(1, len("keep = bytearray(10_000_000)"))
    assert hint.label == line_label(keeping, "peak")
    assert str(hint.label).startswith("9.5 MiB at peak")
    assert set(by_line) == {1, 2}  # del tmp and the magic's line hold nothing
    hover = await notebook_client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(1, 3)
        )
    )
    assert hover is not None
    text = hover.contents.value  # type: ignore[union-attr]
    assert "9.5 MiB" in text
    assert path.stem in text
    lenses = await notebook_client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    titles = [(lens.range.start.line, lens.command.title) for lens in lenses or [] if lens.command]
    [(line, title)] = [t for t in titles if t[1].startswith("memlens: In [2]")]
    assert line == 0
    assert "9.5 MiB kept" in title
    assert "14.3 MiB at peak" in title
    # The other cell has no run: nothing there.
    assert await notebook_client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=cell_uri(notebook, 1)),
            range=lsp.Range(lsp.Position(0, 0), lsp.Position(3, 0)),
        )
    ) in (None, [])


async def test_a_run_made_later_is_found_by_the_cells_uri_and_follows_edits(
    notebook_client: LanguageClient,
) -> None:
    notebook: Path = notebook_client.notebook  # type: ignore[attr-defined]
    uri = cell_uri(notebook, 1)
    # The kernel profiles cell 1 as VS Code sent it (its URI), with a text that is no longer
    # the cell's exactly (edited since): the URI finds it, the lines are mapped.
    recorded = "import os\n%memlens table = [0] * 1_000_000\n"
    stats = LineStats(
        alloc_bytes=8 * MiB, alloc_count=1, live_bytes=8 * MiB, live_count=1, peak_bytes=8 * MiB
    )
    cell = NotebookCell("In [7]", 7, str(notebook), uri, text_digest(recorded))
    run = runs.new_run(
        [runs.source("In [7]", recorded, {2: stats})],
        run_info=runs.info(
            command=("%memlens", "table = [0] * 1_000_000"),
            started="2099-01-01T00:00:00+00:00",
            peak_traced_bytes=8 * MiB,
            cell=cell,
        ),
    )
    store = Store(notebook.parent)
    writer.write(run, store.runs_dir / f"20990101-000000-7{RUN_SUFFIX}")
    found = await hints(notebook_client, uri)
    assert [(h.position, h.label) for h in found] == [
        (lsp.Position(1, len("%memlens table = [0] * 1_000_000")), "8.0 MiB at peak · 1 alloc")
    ]
    # A line inserted above: the figures move down with their line.
    notebook_client.notebook_document_did_change(
        lsp.DidChangeNotebookDocumentParams(
            notebook_document=lsp.VersionedNotebookDocumentIdentifier(
                version=2, uri=notebook.as_uri()
            ),
            change=lsp.NotebookDocumentChangeEvent(
                cells=lsp.NotebookDocumentCellChanges(
                    text_content=[
                        lsp.NotebookDocumentCellContentChanges(
                            document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
                            changes=[
                                lsp.TextDocumentContentChangePartial(
                                    range=lsp.Range(lsp.Position(0, 0), lsp.Position(0, 0)),
                                    text="x = 1\n",
                                )
                            ],
                        )
                    ]
                )
            ),
        )
    )
    for _ in range(100):
        found = await hints(notebook_client, uri)
        if found and found[0].position.line == 2:
            break
        await asyncio.sleep(0.1)
    assert [h.position for h in found] == [lsp.Position(2, len("%memlens table = [0] * 1_000_000"))]
