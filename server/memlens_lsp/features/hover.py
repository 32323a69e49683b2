"""Hover on a line with figures: a Markdown table of every figure (self and inclusive),
average size, share of the peak, the change against the baseline and the heaviest call
paths. Says so when the figures come from an earlier version of the file."""

from __future__ import annotations

from lsprotocol import types as lsp

from memlens_lsp import convert, views
from memlens_lsp.state import MemlensServer, Method, guarded


async def hover(ls: MemlensServer, params: lsp.HoverParams) -> lsp.Hover | None:
    ctx = await ls.context(params.text_document.uri)
    if ctx is None:
        return None
    line = params.position.line
    recorded = ctx.mapping.recorded_line(line + 1)
    if recorded is None:
        return None
    text = views.hover_markdown(
        ctx.view,
        recorded,
        ls.settings,
        stale=ctx.mapping.stale,
        has_baseline=ctx.folder.baseline is not None,
        local_path=ctx.path,
        moment=ls.moment,
    )
    if text is None:
        return None
    return convert.hover(text, ctx.codec, ctx.lines, line)


METHODS: tuple[Method, ...] = ((lsp.TEXT_DOCUMENT_HOVER, guarded(hover), None),)
