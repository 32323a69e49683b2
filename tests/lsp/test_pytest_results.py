"""Test results in the editor, over plain LSP with a real ``pytest --memlens`` run:
a code lens on each test function with its figures, an error on each test over its limit."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsp_workspace import SERVER, start_in_folder
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from tests.pytest_plugin.session import project, pytest_session, summary

from memlens.annotate import failure_text, label_for_test
from memlens.model import TestStats
from memlens.runfile import reader
from memlens.store import Store
from memlens.units import fmt_bytes

pytestmark = pytest.mark.asyncio(loop_scope="module")

TEST_MEMORY = """\
import pytest

HELD = []


@pytest.mark.memlens(leaks="1 MiB")
def test_leaks_ten_megabytes():
    HELD.append(bytearray(10 * 1024 * 1024))


@pytest.mark.memlens(peak="5 MiB")
def test_peaks_at_twenty_megabytes():
    scratch = bytearray(20 * 1024 * 1024)
    assert len(scratch) == 20 * 1024 * 1024


@pytest.mark.parametrize("kib", [1, 64, 512])
def test_cases(kib):
    assert len(bytearray(kib * 1024)) == kib * 1024


class TestGroup:
    @pytest.mark.memlens(peak="1 MiB", leaks="64 KiB")
    def test_within(self):
        assert self is not None
"""


class Session:
    """A project whose tests ran under ``pytest --memlens``, and the run they left."""

    def __init__(self, root: Path) -> None:
        self.root = project(root, **{"test_memory.py": TEST_MEMORY})
        proc = pytest_session(self.root, "--memlens")
        assert summary(proc) == "2 failed, 4 passed", proc.stdout
        latest = Store(self.root).latest()
        assert latest is not None
        self.tests = {t.nodeid.split("::", 1)[1]: t for t in reader.read(latest).info.tests}
        self.uri = (self.root / "test_memory.py").as_uri()


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    return Session(tmp_path_factory.mktemp("pytest-results"))


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, session: Session) -> AsyncIterator[None]:
    await start_in_folder(lsp_client, session.root)
    yield
    await lsp_client.shutdown_session()


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="python", version=version, text=text
            )
        )
    )


async def test_lenses(client: LanguageClient, session: Session) -> None:
    open_doc(client, session.uri, TEST_MEMORY)
    result = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=session.uri))
    )
    got = [
        (lens.range.start.line, lens.range.start.character, lens.command.title)
        for lens in result or []
        if lens.command is not None and "test" in lens.command.title
    ]
    # One lens per test function: its test's figures, not also its function's (one peak).
    tested = {line for line, _, _ in got}
    others = [(x.range.start.line, x.command.title) for x in result or [] if x.command]
    assert [o for o in others if o[0] in tested and not o[1].startswith(("test ", "3 tests"))] == []
    cases = [session.tests[f"test_cases[{kib}]"] for kib in (1, 64, 512)]
    peak = max(t.peak_bytes for t in cases)
    leaked = max(t.leaked_bytes for t in cases)
    assert got == [
        (5, 0, label_for_test(session.tests["test_leaks_ten_megabytes"])),
        (10, 0, label_for_test(session.tests["test_peaks_at_twenty_megabytes"])),
        (16, 0, f"3 tests: peak up to {fmt_bytes(peak)} · leaked up to {fmt_bytes(leaked)}"),
        (22, 0, label_for_test(session.tests["TestGroup::test_within"])),
    ]
    assert got[0][2] == "test peak 10.0 MiB · leaked 10.0 MiB"
    assert got[1][2].startswith("test peak 20.0 MiB · leaked ")
    assert 512 * 1024 <= peak < 600 * 1024


async def wait_for_diagnostics(client: LanguageClient, uri: str, count: int) -> list[Any]:
    for _ in range(250):
        found = client.diagnostics.get(uri)
        if found is not None and len([d for d in found if d.code == "test"]) == count:
            return [d for d in found if d.code == "test"]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {count} test diagnostics: {client.diagnostics.get(uri)}")


def _failure(test: TestStats) -> str:
    return "; ".join(failure_text(f) for f in test.failures)


async def test_diagnostics_on_tests_over_their_limits(
    client: LanguageClient, session: Session
) -> None:
    client.diagnostics.pop(session.uri, None)
    open_doc(client, session.uri, TEST_MEMORY, version=2)
    diags = await wait_for_diagnostics(client, session.uri, 2)
    leaky = session.tests["test_leaks_ten_megabytes"]
    peaky = session.tests["test_peaks_at_twenty_megabytes"]
    got = [
        (
            d.range.start.line,
            d.range.start.character,
            d.range.end.line,
            d.range.end.character,
            d.severity,
            d.source,
            d.message,
        )
        for d in diags
    ]
    assert got == [
        (
            6,
            4,
            6,
            4 + len("test_leaks_ten_megabytes"),
            lsp.DiagnosticSeverity.Error,
            "memlens",
            f"test_memory.py::test_leaks_ten_megabytes: {_failure(leaky)}",
        ),
        (
            11,
            4,
            11,
            4 + len("test_peaks_at_twenty_megabytes"),
            lsp.DiagnosticSeverity.Error,
            "memlens",
            f"test_memory.py::test_peaks_at_twenty_megabytes: {_failure(peaky)}",
        ),
    ]
    assert got[0][6].startswith(
        "test_memory.py::test_leaks_ten_megabytes: leaked 10.0 MiB, over its limit of 1.0 MiB"
    )
    # The lines responsible, as related information: links to the start of each line.
    related = [
        (r.location.uri, r.location.range.start.line, r.location.range.start.character, r.message)
        for r in diags[0].related_information or []
    ]
    assert related[0][:3] == (session.uri, 7, 0)
    assert related[0][3].startswith("10.0 MiB still held after the test: ")
    assert related[0][3].endswith("HELD.append(bytearray(10 * 1024 * 1024))")
    peak_lines = [
        (r.location.range.start.line, r.message) for r in diags[1].related_information or []
    ]
    assert peak_lines[0][0] == 12
    assert peak_lines[0][1].startswith("20.0 MiB allocated during the test: scratch = bytearray(")


async def test_no_hints_on_decorator_lines(client: LanguageClient, session: Session) -> None:
    open_doc(client, session.uri, TEST_MEMORY, version=2)  # (as run alone, e.g. under xdist)
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=session.uri),
            range=lsp.Range(
                start=lsp.Position(line=0, character=0), end=lsp.Position(line=27, character=0)
            ),
        )
    )
    lines = TEST_MEMORY.splitlines()
    hinted = [h.position.line for h in result or []]
    assert hinted  # the tests' own lines have figures
    assert [n for n in hinted if lines[n].lstrip().startswith("@")] == []


async def test_positions_follow_edits(client: LanguageClient, session: Session) -> None:
    """Two lines inserted at the top: lenses and errors move with their functions."""
    edited = "# a comment\n# another\n" + TEST_MEMORY
    client.diagnostics.pop(session.uri, None)
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=session.uri, version=3),
            content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=edited)],
        )
    )
    diags = await wait_for_diagnostics(client, session.uri, 2)
    assert [(d.range.start.line, d.range.start.character) for d in diags] == [(8, 4), (13, 4)]
    result = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=session.uri))
    )
    lines = [
        lens.range.start.line
        for lens in result or []
        if lens.command is not None and "test" in lens.command.title
    ]
    assert lines == [7, 12, 18, 24]
    assert os.path.exists(session.root / "test_memory.py")
