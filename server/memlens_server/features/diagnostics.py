"""Leak warnings: lines that still hold a lot at exit (push diagnostics, source ``memlens``).

Published when a document opens or changes and after every reload or settings change. The
threshold is ``memlens.leakWarning.minBytes``.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from memlens_server import convert, views
from memlens_server.server import MemlensServer


def diagnostics_for(ls: MemlensServer, uri: str) -> list[lsp.Diagnostic]:
    ctx = ls.context(uri)
    if ctx is None:
        return []
    items = views.leak_items(ctx.view, ctx.mapping, ctx.lines, ls.settings)
    return [convert.diagnostic(item, ctx.codec, ctx.lines) for item in items]


def publish(ls: MemlensServer, uri: str) -> None:
    try:
        diags = diagnostics_for(ls, uri)
    except Exception as exc:  # noqa: BLE001 - failures isolated: log, publish nothing
        ls.log_message(f"memlens: diagnostics for {uri} failed: {exc}", "error")
        diags = []
    doc = ls.document(uri)
    ls.text_document_publish_diagnostics(
        convert.publish(uri, doc.version if doc is not None else None, diags)
    )


def publish_all(ls: MemlensServer) -> None:
    for uri in list(ls.workspace.text_documents):
        publish(ls, uri)


def did_open(ls: MemlensServer, params: lsp.DidOpenTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


def did_change(ls: MemlensServer, params: lsp.DidChangeTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


def did_close(ls: MemlensServer, params: lsp.DidCloseTextDocumentParams) -> None:
    ls.mappings.forget(params.text_document.uri)
    ls.hint_cache.pop(params.text_document.uri, None)
    ls.text_document_publish_diagnostics(convert.publish(params.text_document.uri, None, []))
