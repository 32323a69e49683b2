"""Leak warnings: lines that still hold a lot at exit (push diagnostics, source ``memlens``).

Published when a document opens or changes and after every reload or settings change. The
threshold is ``memlens.leakWarning.minBytes``. Publishing waits a moment (``DELAY_S``) and for
the document's line re-mapping, which runs off the event loop; the warnings are then worked
out a slice of lines at a time, so that requests that come in meanwhile (another file's first
hints) are answered between two slices. Per document only the newest publication runs (an edit cancels
the one for the version before).
"""

from __future__ import annotations

import asyncio
from itertools import islice

from lsprotocol import types as lsp

from memlens_lsp import convert, views
from memlens_lsp.features import pytest_results
from memlens_lsp.state import MemlensServer, Method


async def diagnostics_for(ls: MemlensServer, uri: str) -> tuple[int | None, list[lsp.Diagnostic]]:
    ctx = await ls.context(uri)
    if ctx is None:
        doc = ls.document(uri)
        return (doc.version if doc is not None else None), []
    leaks = views.leak_item_iter(ctx.view, ctx.mapping, ctx.lines, ls.settings)
    items: list[views.DiagnosticItem] = []
    while part := list(islice(leaks, SLICE)):
        items += part
        await asyncio.sleep(0)  # requests that came in meanwhile go first
    items.sort(key=lambda d: d.line)
    items += pytest_results.diagnostic_items(
        ctx.view, ctx.mapping, ctx.lines, related=ls.features.related_information
    )
    if views.comparing(ctx.view, ls.settings, ctx.folder.baseline is not None):
        items += views.gone_items(ctx.view, ctx.mapping, ctx.lines, ls.settings)
    out: list[lsp.Diagnostic] = []
    for start in range(0, len(items), SLICE):
        if start:
            await asyncio.sleep(0)
        out += ls.each(
            "diagnostic",
            items[start : start + SLICE],
            lambda item: convert.diagnostic(item, ctx.codec, ctx.lines),
        )
    return ctx.version, out


#: Diagnostics made between two turns of the event loop.
SLICE = 256


#: Seconds a publication waits before it computes: a newer edit (typing) replaces it for free,
#: and the requests a client makes as it opens a file (its first hints) are answered first.
DELAY_S = 0.1


async def _publish(ls: MemlensServer, uri: str) -> None:
    try:
        await asyncio.sleep(DELAY_S)
        version, diags = await diagnostics_for(ls, uri)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - failures isolated: log, publish nothing
        ls.log_message(f"memlens: diagnostics for {uri} failed: {exc}", "error")
        doc = ls.document(uri)
        version, diags = (doc.version if doc is not None else None), []
    if ls.document(uri) is not None:
        ls.text_document_publish_diagnostics(convert.publish(uri, version, diags))


def publish(ls: MemlensServer, uri: str) -> None:
    """Publish the diagnostics of ``uri`` soon (replacing a publication still pending)."""
    old = ls.publishing.pop(uri, None)
    if old is not None:
        old.cancel()
    task = asyncio.ensure_future(_publish(ls, uri))
    ls.publishing[uri] = task

    def done(t: asyncio.Task[None]) -> None:
        if ls.publishing.get(uri) is t:
            del ls.publishing[uri]

    task.add_done_callback(done)


def publish_all(ls: MemlensServer) -> None:
    for uri in ls.open_uris():
        publish(ls, uri)


def did_open(ls: MemlensServer, params: lsp.DidOpenTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


def did_change(ls: MemlensServer, params: lsp.DidChangeTextDocumentParams) -> None:
    publish(ls, params.text_document.uri)


def did_close(ls: MemlensServer, params: lsp.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    task = ls.publishing.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.mappings.forget(uri)
    ls.hint_cache.pop(uri, None)
    ls.text_document_publish_diagnostics(convert.publish(uri, None, []))


#: Documents -> diagnostics (push).
METHODS: tuple[Method, ...] = (
    (lsp.TEXT_DOCUMENT_DID_OPEN, did_open, None),
    (lsp.TEXT_DOCUMENT_DID_CHANGE, did_change, None),
    (lsp.TEXT_DOCUMENT_DID_CLOSE, did_close, None),
)
