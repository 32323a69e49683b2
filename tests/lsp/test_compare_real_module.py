"""Comparison mode over plain LSP on code nobody wrote for these tests: the ``tabulate``
module from PyPI (a test dependency, pinned) copied into a project as the program's own
code, profiled with ``memlens run``, made the baseline, one of its hot lines edited in place,
profiled again; then ``pytest --memlens`` run in the same folder.

What a user must see: no comparison reports a change of a few bytes, every hint fits VS Code's
default width (43 characters), the edited line tells its baseline figure, and the test run
is kept apart from the program's runs (its own latest and baseline)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
import tabulate
from lsp_workspace import SERVER, plain, start_in_folder
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from tests.cli.memlens_cmd import memlens
from tests.pytest_plugin.session import project, pytest_session, summary

from memlens.annotate import HINT_WIDTH
from memlens.runfile import reader
from memlens.store import Store
from memlens.units import fmt_bytes

pytestmark = pytest.mark.asyncio(loop_scope="module")

REPORT = """\
import tabulate

ROWS = [[i, f"item-{i:06d}", i * 0.25, "x" * (i % 17)] for i in range(5_000)]


def main():
    table = tabulate.tabulate(ROWS, headers=["n", "name", "value", "pad"], tablefmt="github")
    print(len(table.splitlines()), "lines")


if __name__ == "__main__":
    main()
"""

TEST_REPORT = """\
import tabulate


def test_small_table():
    rows = [[i, str(i) * 10] for i in range(2_000)]
    assert tabulate.tabulate(rows).count("\\n") == 2_001  # a rule, 2,000 rows
"""

#: The hot line of tabulate 0.10.0 (a table with headers) edited in place: rows become lists
#: instead of tuples (the same table, more memory).
HOT = """\
        ]
        rows = list(zip(*cols))
    else:
"""
EDITED = HOT.replace("rows = list(zip(*cols))", "rows = [list(row) for row in zip(*cols)]")

#: A change in a label: ``(+1.2 MiB)``, ``−12.0 KiB``, ``+300 B``.
CHANGE = re.compile(r"[+\u2212](\d+(?:\.\d)?) (B|KiB|MiB|GiB)")
UNIT = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


class Project:
    """The profiled project: tabulate.py (the module as published), report.py, a test file."""

    def __init__(self, root: Path) -> None:
        text = Path(tabulate.__file__).read_text(encoding="utf-8")
        assert text.count(HOT) == 1, "tabulate changed: pin the version the test was made for"
        self.root = project(root, **{"report.py": REPORT, "test_report.py": TEST_REPORT})
        self.module = root / "tabulate.py"
        self.module.write_text(text, encoding="utf-8")
        self.line = text[: text.index(HOT)].count("\n") + 1  # 0-based
        self._run()
        store = Store(root)
        baseline = store.latest("program")
        assert baseline is not None
        proc = memlens("baseline", "set", baseline.stem, cwd=root)
        assert proc.returncode == 0, proc.stderr
        self.module.write_text(text.replace(HOT, EDITED), encoding="utf-8")
        self.edited = self.module.read_text(encoding="utf-8")
        self._run()
        latest = store.latest("program")
        assert latest is not None
        assert latest != baseline
        self.old = self._peak(baseline)
        self.new = self._peak(latest)
        self.program_run = latest.stem
        # A test suite's run: the newest run, of the other kind.
        proc = pytest_session(root, "--memlens", "test_report.py")
        assert summary(proc) == "1 passed", proc.stdout
        tests = store.latest("tests")
        assert tests is not None
        assert store.latest() == tests
        self.test_run = tests.stem

    def _run(self) -> None:
        proc = memlens("run", "--no-report", "report.py", cwd=self.root, timeout=300)
        assert proc.returncode == 0, proc.stderr

    def _peak(self, run: Path) -> int:
        sf = next(f for f in reader.read(run).files.values() if f.path.endswith("tabulate.py"))
        return sf.lines[self.line + 1].peak_bytes


@pytest.fixture(scope="module")
def proj(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("real-module"))


@pytest_lsp.fixture(scope="module", config=SERVER)
async def client(lsp_client: LanguageClient, proj: Project) -> AsyncIterator[None]:
    await start_in_folder(lsp_client, proj.root, options={"compareWithBaseline": True})
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, path: Path) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=path.read_text(encoding="utf-8")
            )
        )
    )
    return uri


async def _hints(client: LanguageClient, uri: str, lines: int) -> dict[int, str]:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            range=lsp.Range(
                start=lsp.Position(line=0, character=0), end=lsp.Position(line=lines, character=0)
            ),
        )
    )
    return {h.position.line: h.label for h in result or []}  # type: ignore[misc]


async def test_comparison_hints_show_change_and_fit(client: LanguageClient, proj: Project) -> None:
    uri = _open(client, proj.module)
    hints = await _hints(client, uri, proj.edited.count("\n") + 1)
    assert len(hints) > 10
    for line, label in hints.items():
        assert len(label) <= HINT_WIDTH, (line + 1, label)
        for number, unit in CHANGE.findall(label):
            # No change of a few bytes: anything shown is beyond the noise threshold.
            assert float(number) * UNIT[unit] >= 4096, (line + 1, label)
    assert any("same as baseline" in label for label in hints.values())
    # The edited line tells its baseline figure.
    assert proj.new != proj.old
    label = hints[proj.line]
    assert label.startswith(f"{fmt_bytes(proj.new)} at peak, was {fmt_bytes(proj.old)}"), label
    hover = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri),
            position=lsp.Position(line=proj.line, character=10),
        )
    )
    assert hover is not None
    assert isinstance(hover.contents, lsp.MarkupContent)
    text = hover.contents.value
    code = "rows = list(zip(*cols))"
    assert f"Edited since the baseline: there, line {proj.line + 1} `{code}` held " in text
    assert f"held {fmt_bytes(proj.old)} at peak" in text
    # The figures come from the program's run, not from the newer test run.
    assert text.splitlines()[-1] == f"Run `{proj.program_run}` (exact)"


async def execute(client: LanguageClient, command: str, *args: Any) -> Any:
    return plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=command, arguments=list(args))
        )
    )


async def test_test_runs_are_kept_apart(client: LanguageClient, proj: Project) -> None:
    rec = client.recorder  # type: ignore[attr-defined]
    loaded = rec.run_loaded[-1]
    assert (loaded["run"]["id"], loaded["run"]["kind"]) == (proj.program_run, "program")
    assert loaded["baseline"] is not None
    tests_shown = loaded["tests"]
    assert (tests_shown["run"]["id"], tests_shown["run"]["kind"]) == (proj.test_run, "tests")
    assert tests_shown["baseline"] is None  # never the program's baseline
    module = proj.module.as_uri()
    tests = _open(client, proj.root / "test_report.py")
    assert (await execute(client, "memlens.documentRun", {"uri": module}))["kind"] == "program"
    found = await execute(client, "memlens.documentRun", {"uri": tests})
    assert (found["kind"], found["run"]["id"]) == ("tests", proj.test_run)
    # The test file: its test's lens, no comparison (no baseline of test runs).
    lenses = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=tests))
    )
    titles = [(x.range.start.line, x.command.title) for x in lenses or [] if x.command]
    assert [line for line, _ in titles] == [3]
    assert titles[0][1].startswith("test peak ")
    hints = await _hints(client, tests, 7)
    assert all("baseline" not in label for label in hints.values())
    # The summary of the test file is the test run's.
    got = await execute(client, "memlens.summary", {"uri": tests})
    assert (got["run"]["id"], got["baseline"]) == (proj.test_run, None)
