"""Notebook documents (LSP 3.17): each Python cell shows the figures of its last profiled run.

pygls keeps the notebooks and their cells' texts (``notebookDocument/didOpen``, ``didChange``,
``didClose``; the sync options are :data:`memlens_lsp.state.NOTEBOOK_SYNC`); the hints,
hovers, lenses and warnings of a cell are those of any document (``MemlensServer.context``
finds the cell's run through :mod:`memlens_lsp.notebooks`). Here: when a notebook was opened
(a run made since then is matched to its cells by their URIs), its cells' diagnostics, and a
watch on the stores its cells' runs are in: when a kernel writes a run, the client is asked
to refresh hints and lenses.
"""

from __future__ import annotations

import asyncio
import contextlib

from lsprotocol import types as lsp

from memlens_lsp.features import diagnostics, runs
from memlens_lsp.state import MemlensServer, Method


def _cells(ls: MemlensServer) -> list[str]:
    return [
        cell.document
        for notebook in ls.workspace.notebook_documents.values()
        for cell in notebook.cells
        if cell.kind == lsp.NotebookCellKind.Code
    ]


def did_open(ls: MemlensServer, params: lsp.DidOpenNotebookDocumentParams) -> None:
    ls.notebooks.open(params.notebook_document.uri)
    for cell in params.cell_text_documents:
        diagnostics.publish(ls, cell.uri)
    if ls.notebook_poll is None or ls.notebook_poll.done():
        ls.notebook_poll = asyncio.ensure_future(watch(ls))


def did_change(ls: MemlensServer, params: lsp.DidChangeNotebookDocumentParams) -> None:
    cells = params.change.cells
    if cells is None:
        return
    changed = [t.document.uri for t in cells.text_content or []]
    if cells.structure is not None:
        changed += [d.uri for d in cells.structure.did_open or []]
    for uri in changed:
        diagnostics.publish(ls, uri)


def did_close(ls: MemlensServer, params: lsp.DidCloseNotebookDocumentParams) -> None:
    ls.notebooks.close(params.notebook_document.uri)
    for cell in params.cell_text_documents:
        task = ls.publishing.pop(cell.uri, None)
        if task is not None:
            task.cancel()
        ls.mappings.forget(cell.uri)
        ls.hint_cache.pop(cell.uri, None)
    if not ls.workspace.notebook_documents and ls.notebook_poll is not None:
        ls.notebook_poll.cancel()
        ls.notebook_poll = None


async def watch(ls: MemlensServer) -> None:
    """While notebooks are open: when a store their cells' runs are in changes (a kernel
    wrote a run), scan it again and have the cells' figures shown anew."""
    while ls.workspace.notebook_documents:
        await asyncio.sleep(ls.poll_interval)
        try:
            changed = ls.notebooks.changed()
            for root in changed:
                await ls.notebooks.cells(root)
            if changed:
                for uri in _cells(ls):
                    diagnostics.publish(ls, uri)
                with contextlib.suppress(asyncio.TimeoutError):
                    await runs.refresh(ls)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - never let the watcher die
            ls.log_message(f"memlens: notebook runs: {exc}", "error")


#: Notebook documents.
METHODS: tuple[Method, ...] = (
    (lsp.NOTEBOOK_DOCUMENT_DID_OPEN, did_open, None),
    (lsp.NOTEBOOK_DOCUMENT_DID_CHANGE, did_change, None),
    (lsp.NOTEBOOK_DOCUMENT_DID_CLOSE, did_close, None),
)
