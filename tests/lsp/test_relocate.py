"""Runs made in another folder show in the folder that is opened, over plain LSP with a real run.

A program is profiled with ``memlens run`` in one folder; the folder is then copied elsewhere
and only the copy is opened: its lines get their hints at the exact end-of-line positions. The
call line whose callee holds 10 MiB at the peak shows that figure by default.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspace import SERVER, start_session
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from tests.cli.memlens_cmd import memlens

from memlens.annotate import line_label
from memlens.model import replace
from memlens.runfile import reader, writer
from memlens.store import Store

pytestmark = pytest.mark.asyncio(loop_scope="module")

PROGRAM = """\
def fill(n):
    return [bytearray(1024) for _ in range(n)]


def work():
    data = fill(10 * 1024)
    return len(data)


print(work())
"""
MiB = 1024 * 1024


class Copied:
    def __init__(self, root: Path) -> None:
        self.original = root / "original" / "proj"
        self.original.mkdir(parents=True)
        (self.original / "app.py").write_text(PROGRAM)
        proc = memlens("run", "--no-report", "app.py", cwd=self.original)
        assert proc.returncode == 0, proc.stderr
        self.copy = root / "elsewhere" / "copy-of-proj"
        shutil.copytree(self.original, self.copy)
        run = reader.read(Store(self.copy).latest())  # type: ignore[arg-type]
        assert run.info.workspace_root == str(self.original.resolve())
        self.run = run
        # A second copy whose run does not know its root (an older run, a checkpoint): its
        # files are found by path suffix (the original is still there: not shown instead).
        self.legacy = root / "legacy" / "proj"
        shutil.copytree(self.original, self.legacy)
        latest = Store(self.legacy).latest()
        assert latest is not None
        writer.write(replace(run, info=replace(run.info, workspace_root="")), latest)


@pytest.fixture(scope="module")
def copied(tmp_path_factory: pytest.TempPathFactory) -> Copied:
    return Copied(tmp_path_factory.mktemp("relocate"))


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, copied: Copied) -> AsyncIterator[None]:
    folders = {"copy": copied.copy, "legacy": copied.legacy}

    class Ws:
        def uri(self, name: str, file: str | None = None) -> str:
            path = folders[name] if file is None else folders[name] / file
            return path.as_uri()

    await start_session(lsp_client, "visual-studio-code", Ws(), ["copy", "legacy"])  # type: ignore[arg-type]
    yield
    await lsp_client.shutdown_session()


def expected(copied: Copied) -> list[tuple[int, int, str]]:
    sf = next(iter(copied.run.files.values()))
    lines = PROGRAM.splitlines()
    out = []
    for line, calls in ((2, False), (6, True), (10, True)):
        st = sf.lines[line]
        out.append((line - 1, len(lines[line - 1]), line_label(st, "peak", calls=calls)))
    return out


async def hints(client: LanguageClient, uri: str) -> list[tuple[int, int, str]]:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(
                start=lsp.Position(line=0, character=0), end=lsp.Position(line=11, character=0)
            ),
        )
    )
    return [(h.position.line, h.position.character, h.label) for h in result or []]  # type: ignore[misc]


def open_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=PROGRAM
            )
        )
    )


@pytest.mark.parametrize("folder", ["copy", "legacy"])
async def test_a_copied_folder_shows_hints_on_the_profiled_lines(
    client: LanguageClient, copied: Copied, folder: str
) -> None:
    path = (copied.copy if folder == "copy" else copied.legacy) / "app.py"
    uri = path.as_uri()
    open_doc(client, uri)
    got = await hints(client, uri)
    want = expected(copied)
    assert got == want
    # The call line's callee holds the 10 MiB list at the peak: the hint says so by default.
    call = got[1]
    assert call[:2] == (5, len("    data = fill(10 * 1024)"))
    assert call[2].endswith(" MiB at peak in calls")
    sf = next(iter(copied.run.files.values()))
    assert sf.lines[6].incl_peak_bytes >= 10 * MiB
    assert sf.lines[6].peak_bytes * 10 < sf.lines[6].incl_peak_bytes
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=5, character=4),
        )
    )
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    text = hover.contents.value
    assert text.splitlines()[0] == f"**memlens** · {call[2]}"
    assert f"_Profiled as `{copied.original.resolve() / 'app.py'}` (another checkout)._" in text
