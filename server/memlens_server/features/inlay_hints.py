"""Inlay hints at the end of each line with figures; ``inlayHint/resolve`` adds the tooltip.

The label is :func:`memlens.annotate.line_label` of the figure chosen in the settings (or the
change against the baseline when ``memlens.compareWithBaseline`` is on). Hints sit at the end
of the line in the negotiated position encoding. The range is taken literally: a range ending
at ``(E, 0)`` does not include line ``E``'s end, so it gets no hint.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from memlens_server import convert, views
from memlens_server.server import MemlensServer

OPTIONS = convert.INLAY_HINT_OPTIONS


def inlay_hints(ls: MemlensServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint] | None:
    uri = params.text_document.uri
    ctx = ls.context(uri)
    if ctx is None:
        return None
    start, end = params.range.start, params.range.end
    last = end.line if (end.character > 0 or end.line == start.line) else end.line - 1
    items = views.hint_items(
        ctx.view,
        ctx.mapping,
        ls.settings,
        start.line,
        last + 1,
        has_baseline=ctx.folder.baseline is not None,
    )
    run_id = ctx.view.run.id
    return [
        convert.inlay_hint(
            item, ctx.codec, ctx.lines, {"uri": uri, "line": item.recorded_line, "run": run_id}
        )
        for item in items
    ]


def resolve(ls: MemlensServer, hint: lsp.InlayHint) -> lsp.InlayHint:
    data: Any = hint.data
    if not isinstance(data, dict) or not isinstance(data.get("uri"), str):
        return hint
    ctx = ls.context(data["uri"])
    if ctx is None or ctx.view.run.id != data.get("run"):
        return hint
    text = views.hover_markdown(
        ctx.view,
        int(data["line"]),
        stale=ctx.mapping.stale,
        has_baseline=ctx.folder.baseline is not None,
    )
    return convert.with_tooltip(hint, text)
