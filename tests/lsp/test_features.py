"""End-to-end: hints, hovers, lenses, diagnostics and commands on the fixture workspace."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from conftest import APP, OTHER, SCRIPT, Workspace

pytestmark = pytest.mark.asyncio(loop_scope="session")

APP_LINES = APP.splitlines()


def utf_units(client: LanguageClient, text: str) -> int:
    """Length of ``text`` in the encoding the profile negotiates."""
    if client.profile == "neovim":  # type: ignore[attr-defined]
        return len(text.encode("utf-8"))
    return len(text.encode("utf-16-le")) // 2


def rng(spec: str) -> lsp.Range:
    """``"3:4-3:10"`` -> Range."""
    a, b = spec.split("-")
    (l1, c1), (l2, c2) = (map(int, p.split(":")) for p in (a, b))
    return lsp.Range(start=lsp.Position(line=l1, character=c1), end=lsp.Position(line=l2, character=c2))


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )


def close_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(
        lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )


async def hints(client: LanguageClient, uri: str, spec: str) -> list[tuple[int, int, str]]:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(text_document=lsp.TextDocumentIdentifier(uri=uri), range=rng(spec))
    )
    return [(h.position.line, h.position.character, h.label) for h in result or []]  # type: ignore[misc]


def eol(client: LanguageClient, line: int, lines: list[str] = APP_LINES) -> tuple[int, int]:
    return line, utf_units(client, lines[line])


async def test_inlay_hints_full_file_exact_positions(client: LanguageClient, workspace: Workspace) -> None:
    uri = workspace.uri("proj", "app.py")
    open_doc(client, uri, APP)
    try:
        got = await hints(client, uri, "0:0-24:0")
        assert got == [
            (*eol(client, 4), "▲ 2.0 MiB peak · 1.2k allocs"),
            (*eol(client, 9), "▲ 4.0 KiB peak · 2 allocs"),
            (*eol(client, 17), "▲ 16.0 KiB peak · 1 alloc"),
        ]
        # Line 10 holds "é" and "😀": 18 UTF-16 units, 21 UTF-8 bytes.
        assert got[1][1] == (21 if client.profile == "neovim" else 18)  # type: ignore[attr-defined]
    finally:
        close_doc(client, uri)
