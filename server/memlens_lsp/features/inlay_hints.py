"""Inlay hints at the end of each line with figures; ``inlayHint/resolve`` adds the tooltip.

The label is :func:`memlens.annotate.line_label` of the figure chosen in the settings (or the
change against the baseline when ``memlens.compareWithBaseline`` is on; or, once a moment is
set with ``memlens.setMoment``, the line's live bytes then). Hints sit at the end
of the line in the negotiated position encoding. The range is taken literally: a range ending
at ``(E, 0)`` does not include line ``E``'s end, so it gets no hint.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from memlens_lsp import convert, views
from memlens_lsp.state import DocContext, MemlensServer, Method, gc_paused, guarded

OPTIONS = convert.INLAY_HINT_OPTIONS


async def inlay_hints(ls: MemlensServer, params: lsp.InlayHintParams) -> convert.Prebuilt | None:
    uri = params.text_document.uri
    ctx = await ls.context(uri)
    if ctx is None:
        return None
    start, end = params.range.start, params.range.end
    last = end.line if (end.character > 0 or end.line == start.line) else end.line - 1
    last = min(last, len(ctx.lines) - 1)  # never past the end of the document
    has_baseline = ctx.folder.baseline is not None
    # Converted hints are kept per document version, run and settings: scrolling back and
    # forth, or asking for the whole file again, reuses them.
    key = (ctx.version, ctx.view, ls.settings, has_baseline, ctx.codec.encoding, ls.moment)
    cache = ls.hint_cache.get(uri)
    if cache is None or cache.key != key:
        cache = ls.hint_cache[uri] = HintCache(key, _token(ls, uri, ctx.view.run.id))
    whole = start.line == 0 and last >= len(ctx.lines) - 1
    if whole and cache.whole is not None:
        return cache.whole
    with gc_paused():
        out = _answer(ls, ctx, cache, start.line, last + 1)
    if whole:
        cache.whole = out
    return out


def _answer(
    ls: MemlensServer, ctx: DocContext, cache: HintCache, start: int, end: int
) -> convert.Prebuilt:
    """The hints of buffer lines ``start <= line < end`` as sent, made where not in ``cache``
    (and kept there)."""
    items = views.hint_items(
        ctx.view,
        ctx.mapping,
        ls.settings,
        start,
        end,
        has_baseline=ctx.folder.baseline is not None,
        moment=ls.moment,
    )
    made = cache.lines
    new = [item for item in items if item.line not in made] if made else items
    texts = None
    if new:
        # data = [document state, recorded line]: compact, as big files send many hints.
        try:
            texts = convert.inlay_hint_texts(new, ctx.codec, ctx.lines, cache.token)
            made.update(zip((item.line for item in new), texts, strict=True))
        except Exception:  # noqa: BLE001 - then one at a time, leaving out a bad one
            texts = None
            made.update(
                ls.each(
                    "inlay hint",
                    new,
                    lambda item: (
                        item.line,
                        convert.inlay_hint_texts([item], ctx.codec, ctx.lines, cache.token)[0],
                    ),
                )
            )
    # Written as JSON here, once per line: a whole file's answer is kept as it is sent.
    if texts is not None and new is items:  # (all made just now, in order)
        return convert.prebuilt_array(texts)
    return convert.prebuilt_array([made[item.line] for item in items if item.line in made])


class HintCache:
    """Converted hints of one document state (version, run, settings, encoding): per line (its
    JSON text), and the whole file's answer as sent."""

    __slots__ = ("key", "lines", "token", "whole")

    def __init__(self, key: tuple[Any, ...], token: int) -> None:
        self.key = key
        self.token = token
        self.lines: dict[int, str] = {}
        self.whole: convert.Prebuilt | None = None


#: How many document states' tokens resolve still understands.
MAX_TOKENS = 256


def _token(ls: MemlensServer, uri: str, run_id: str) -> int:
    """A small number standing for (uri, run id) in the hints' ``data``."""
    ls.hint_token_seq += 1
    tokens = ls.hint_tokens
    tokens[ls.hint_token_seq] = (uri, run_id)
    while len(tokens) > MAX_TOKENS:
        del tokens[next(iter(tokens))]
    return ls.hint_token_seq


async def resolve(ls: MemlensServer, hint: lsp.InlayHint) -> lsp.InlayHint:
    data: Any = hint.data
    if not (isinstance(data, (list, tuple)) and len(data) == 2):
        return hint
    found = ls.hint_tokens.get(data[0])
    if found is None:
        return hint
    (uri, run_id), line = found, data[1]
    ctx = await ls.context(uri)
    if ctx is None or ctx.view.run.id != run_id:
        return hint
    text = views.hover_markdown(
        ctx.view,
        int(line),
        ls.settings,
        stale=ctx.mapping.stale,
        has_baseline=ctx.folder.baseline is not None,
        local_path=ctx.path,
        moment=ls.moment,
    )
    return convert.with_tooltip(hint, text)


METHODS: tuple[Method, ...] = (
    (lsp.TEXT_DOCUMENT_INLAY_HINT, guarded(inlay_hints), OPTIONS),
    (lsp.INLAY_HINT_RESOLVE, guarded(resolve), None),
)
