"""Code lenses: each function's inclusive peak and allocated figures (and the change against
the baseline) above its first line, and "Run under memlens" above a script's main block."""

from __future__ import annotations

from lsprotocol import types as lsp

from memlens_lsp import convert, notebooks, views
from memlens_lsp.features import pytest_results
from memlens_lsp.staleness import buffer_lines
from memlens_lsp.state import MemlensServer, Method, guarded

OPTIONS = convert.CODE_LENS_OPTIONS


async def code_lens(ls: MemlensServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens] | None:
    uri = params.text_document.uri
    ctx = await ls.context(uri)
    items: list[views.LensItem] = []
    if ctx is not None:
        lines = ctx.lines
        # A test function has one lens, its test's figures (not also its function's).
        tests = pytest_results.tests_by_line(ctx.view.run, ctx.view.key)
        items.extend(
            views.function_lenses(
                ctx.view,
                ctx.mapping,
                len(lines),
                ls.settings,
                has_baseline=ctx.folder.baseline is not None,
                moment=ls.moment,
                skip=tests.keys(),
            )
        )
        items.extend(pytest_results.lens_items(ctx.view, ctx.mapping, len(lines)))
        quiet = views.peak_elsewhere_lens(ctx.view, ls.settings)
        if quiet is not None:
            items.append(quiet)
        cell = notebooks.cell_lens(ctx.view)  # a profiled notebook cell: its totals
        if cell is not None:
            items.append(views.LensItem(0, cell))
    else:
        doc = ls.document(uri)
        if doc is None:
            return None
        lines = buffer_lines(doc.source)
    items.extend(views.main_block_lenses(uri, lines))
    items.sort(key=lambda item: item.line)
    return ls.each("code lens", items, convert.code_lens)


METHODS: tuple[Method, ...] = ((lsp.TEXT_DOCUMENT_CODE_LENS, guarded(code_lens), OPTIONS),)
