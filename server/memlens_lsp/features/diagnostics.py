"""Leak warnings: lines that still hold a lot at exit (push diagnostics, source ``memlens``).

Published when a document opens or changes and after every reload or settings change. The
threshold is ``memlens.leakWarning.minBytes``. Publishing waits a moment (``DELAY_S``) and for
the document's line re-mapping, which runs off the event loop. The warnings are background
work (:meth:`~memlens_lsp.state.MemlensServer.background_turn`): they are worked out when the
client is quiet (or, while it keeps asking, soon after), a few milliseconds at a time
(``SLICE_S``), and the message coming in and the requests are dealt with first between two
slices; so a file's first hints never wait for, nor share the CPU with, the warnings of the
file opened before it. They are sent as JSON written here (no lsprotocol objects: a big file
has thousands). Per document only the newest publication runs (an edit cancels the one for
the version before).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from lsprotocol import types as lsp

from memlens_lsp import convert, views
from memlens_lsp.features import pytest_results
from memlens_lsp.state import MemlensServer, Method

_I = TypeVar("_I")
_O = TypeVar("_O")


async def diagnostics_for(
    ls: MemlensServer, uri: str, since: float
) -> tuple[int | None, list[Any]]:
    """The document's version and its diagnostics (JSON values), in line order: background
    work asked for at ``since`` (:meth:`~memlens_lsp.state.MemlensServer.background_turn`)."""
    ctx = await ls.context(uri)
    if ctx is None:
        doc = ls.document(uri)
        return (doc.version if doc is not None else None), []
    leaks = views.leak_item_iter(ctx.view, ctx.mapping, ctx.lines, ls.settings)
    items = views.in_line_order(await in_slices(ls, since, leaks, lambda item: item))
    items += pytest_results.diagnostic_items(
        ctx.view, ctx.mapping, ctx.lines, related=ls.features.related_information
    )
    if views.comparing(ctx.view, ls.settings, ctx.folder.baseline is not None):
        items += views.gone_items(ctx.view, ctx.mapping, ctx.lines, ls.settings)

    def make(item: views.DiagnosticItem) -> Any:
        return convert.diagnostic_json(item, ctx.codec, ctx.lines)

    return ctx.version, await in_slices(ls, since, items, make)


async def in_slices(
    ls: MemlensServer, since: float, items: Iterable[_I], make: Callable[[_I], _O]
) -> list[_O]:
    """``make(item)`` for each of ``items`` (an item that fails is left out, as
    :meth:`~memlens_lsp.state.MemlensServer.each`), ``SLICE_S`` seconds of work at a time,
    the client first in between (background work asked for at ``since``)."""
    out: list[_O] = []
    it = iter(items)
    while True:
        part = _Slice(it, time.perf_counter() + SLICE_S)
        out += ls.each("diagnostic", part, make)
        ls.background_done()
        if not part.cut:
            return out
        await ls.background_turn(since)


class _Slice(Generic[_I]):
    """The items of ``it`` while the clock is before ``deadline`` (at least one, if any);
    ``cut`` says whether items may be left."""

    __slots__ = ("cut", "deadline", "it")

    def __init__(self, it: Iterator[_I], deadline: float) -> None:
        self.it = it
        self.deadline = deadline
        self.cut = False

    def __iter__(self) -> Iterator[_I]:
        clock = time.perf_counter
        for item in self.it:
            yield item
            if clock() >= self.deadline:
                self.cut = True
                return


#: Seconds of work between two turns of the event loop (the longest a message that comes in
#: meanwhile waits for the warnings).
SLICE_S = 0.005


#: Seconds a publication waits before it computes: a newer edit (typing) replaces it for free,
#: and the requests a client makes as it opens a file (its first hints) are answered first.
DELAY_S = 0.1


async def _publish(ls: MemlensServer, uri: str) -> None:
    since = time.monotonic()
    try:
        await asyncio.sleep(DELAY_S)
        await ls.background_turn(since)
        version, diags = await diagnostics_for(ls, uri, since)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - failures isolated: log, publish nothing
        ls.log_message(f"memlens: diagnostics for {uri} failed: {exc}", "error")
        doc = ls.document(uri)
        version, diags = (doc.version if doc is not None else None), []
    if ls.document(uri) is not None:
        _send(ls, uri, version, diags)


def _send(ls: MemlensServer, uri: str, version: int | None, diags: list[Any]) -> None:
    ls.notify_json(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, convert.publish_json(uri, version, diags))


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
    _send(ls, uri, None, [])


#: Documents -> diagnostics (push).
METHODS: tuple[Method, ...] = (
    (lsp.TEXT_DOCUMENT_DID_OPEN, did_open, None),
    (lsp.TEXT_DOCUMENT_DID_CHANGE, did_change, None),
    (lsp.TEXT_DOCUMENT_DID_CLOSE, did_close, None),
)
