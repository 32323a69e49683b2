"""GPU memory in the editor, over plain LSP with a real run.

The real PyTorch snapshot of tests/data/torch_cuda (a training loop recorded on an H100 as
``/home/dev/proj/train.py``) is imported with ``memlens import torch-snapshot`` into a workspace
that holds ``train.py``: its lines get hints at their exact end-of-line positions, the cache
line (21) says ``GPU 64.0 MiB at peak`` in its hint and its hover holds its GPU figures, and
``step`` gets a lens with its GPU memory.
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

pytestmark = pytest.mark.asyncio(loop_scope="module")

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_cuda"
TRAIN = (DATA / "train.py").read_text()
LINES = TRAIN.splitlines()


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gpu") / "proj"
    root.mkdir()
    shutil.copy(DATA / "train.py", root / "train.py")
    proc = memlens(
        "import", "torch-snapshot", str(DATA / "snapshot-python-stacks.pickle"), cwd=root
    )
    assert proc.returncode == 0, proc.stderr
    return root


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path) -> AsyncIterator[None]:
    class Ws:
        def uri(self, name: str, file: str | None = None) -> str:
            return (workspace if file is None else workspace / file).as_uri()

    await start_session(lsp_client, "visual-studio-code", Ws(), ["proj"])  # type: ignore[arg-type]
    lsp_client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=(workspace / "train.py").as_uri(), language_id="python", version=1, text=TRAIN
            )
        )
    )
    yield
    await lsp_client.shutdown_session()


def _doc(workspace: Path) -> lsp.TextDocumentIdentifier:
    return lsp.TextDocumentIdentifier(uri=(workspace / "train.py").as_uri())


async def test_hints_show_gpu_memory_at_the_ends_of_the_lines(
    client: LanguageClient, workspace: Path
) -> None:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=_doc(workspace),
            range=lsp.Range(
                start=lsp.Position(line=0, character=0),
                end=lsp.Position(line=len(LINES), character=0),
            ),
        )
    )
    got = {h.position.line: (h.position.character, h.label) for h in result or []}
    # 0-based lines: the end of each line (UTF-16 code units), and the GPU figure at the peak.
    assert got[20] == (len(LINES[20]), "GPU 64.0 MiB at peak")  # cache[i] = torch.empty(...)
    assert got[5] == (len(LINES[5]), "GPU 32.0 MiB at peak")  # the model's parameters
    assert got[13] == (len(LINES[13]), "GPU 49.0 MiB at peak")  # y = model(x)
    assert got[16] == (len(LINES[16]), "GPU 64.0 MiB at peak")  # loss.backward()
    assert got[17] == (len(LINES[17]), "GPU 96.1 MiB at peak")  # opt.step(): Adam's state
    # The loop line holds the step's GPU memory through its calls.
    assert got[25] == (len(LINES[25]), "GPU 274.1 MiB in calls")


async def test_the_cache_lines_hover_has_its_gpu_figures(
    client: LanguageClient, workspace: Path
) -> None:
    hover = await client.text_document_hover_async(
        lsp.HoverParams(text_document=_doc(workspace), position=lsp.Position(line=20, character=8))
    )
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    text = hover.contents.value.splitlines()
    assert text[0] == "**memlens** · GPU 64.0 MiB at peak"
    table = text.index("| GPU memory | self | incl. calls |")
    assert text[table + 2 : table + 6] == [
        "| peak | 64.0 MiB | 64.0 MiB |",
        "| allocated | 64.0 MiB | 64.0 MiB |",
        "| live at exit | 64.0 MiB | 64.0 MiB |",
        "| allocations | 4 | |",
    ]
    assert "20.9% of the run's GPU peak" in hover.contents.value
    assert "_Profiled as `/home/dev/proj/train.py` (another checkout)._" in text


async def test_steps_lens_has_its_gpu_memory(client: LanguageClient, workspace: Path) -> None:
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=_doc(workspace))
    )
    titles = {
        lens.range.start.line: lens.command.title
        for lens in lenses or []
        if lens.command is not None and lens.command.title.startswith("memlens:")
    }
    assert titles == {11: "memlens: GPU 274.1 MiB at peak · 1.6 GiB allocated, incl. calls"}
