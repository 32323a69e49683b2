"""The notebook magics' pure parts: where a cell's code sits in its text, the options of
``%memlens STATEMENT``, the names a cell bound, a cell's run header (written, read back,
refused when hostile), and which run a notebook cell shows in the editor."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memlens.errors import RunFileError
from memlens.export import to_json_dict
from memlens.model import LineStats, NotebookCell
from memlens.notebook import cells
from memlens.notebook.magic import CELL_OPTIONS, parser, split_statement
from memlens.runfile import reader, writer
from memlens.source import text_digest
from memlens_lsp.notebooks import CellRun, StoreCells, choose, scan, store_root
from tests import runs


def test_a_cell_magics_text_is_the_raw_cell_when_it_holds_the_body() -> None:
    raw = "\n%%memlens --sample 1MiB\nx = 1\ny = 2"
    found = cells.cell_magic_text(raw, "memlens", "--sample 1MiB", "x = 1\ny = 2\n")
    assert found == cells.CellText(raw, 3)  # the body starts on the cell's line 3
    # A raw cell that is not this one (an older history entry): the cell written out again.
    other = cells.cell_magic_text("print(1)", "memlens", "", "x = 1\n")
    assert other == cells.CellText("%%memlens\nx = 1\n", 2)


def test_a_line_magic_is_on_the_line_that_called_it() -> None:
    raw = "import os\n%memlens x = [0] * 10\nprint(x)"
    assert cells.line_magic_text(raw, "memlens", "x = [0] * 10", 2) == cells.CellText(raw, 2)
    assert cells.line_magic_text(raw, "memlens", "x = 1", 1) == cells.CellText("%memlens x = 1", 1)


def test_numbered_code_keeps_the_cells_line_numbers() -> None:
    code = cells.numbered("x = 1\n", 3)
    assert code.splitlines()[2] == "x = 1"
    shown = cells.with_header("\n%%memlens\nx = 1", code, 3)
    assert shown.splitlines() == ["", "%%memlens", "x = 1"]


@pytest.mark.parametrize(
    ("line", "words", "statement"),
    [
        ("x = f()", [], "x = f()"),
        ("--sample 1MiB --seed 3 x = f()", ["--sample", "1MiB", "--seed", "3"], "x = f()"),
        ("--libraries -- -x", ["--libraries"], "-x"),
        ("--include 'a b/*' y = 'c  d'", ["--include", "a b/*"], "y = 'c  d'"),
        ("--by live", ["--by", "live"], ""),
    ],
)
def test_a_line_magic_splits_its_options_from_its_statement(
    line: str, words: list[str], statement: str
) -> None:
    assert split_statement(line) == (words, statement)


def test_the_magic_takes_memlens_runs_options_that_apply_to_a_cell() -> None:
    flags = {flag for action in parser("%%memlens")._actions for flag in action.option_strings}
    assert {
        "--sample",
        "--seed",
        "-o",
        "--output",
        "--dir",
        "--top",
        "--by",
        "--no-native",
    } <= flags
    assert {"-m", "--json", "--no-follow", "--checkpoint-interval"}.isdisjoint(flags)
    assert len(CELL_OPTIONS) == len(set(CELL_OPTIONS))


def test_bindings_never_keep_an_object_alive() -> None:
    class Thing:
        pass

    namespace: dict[str, object] = {"a": Thing(), "n": 10**30, "_": 1, "_i3": "x", "Out": {}}
    before = {"a": 0}
    found = cells.bound(before, namespace)
    assert sorted(b.name for b in found) == ["a", "n"]
    assert all(b.held(namespace) for b in found)
    namespace["a"] = Thing()  # rebound: the cell's object is gone
    del namespace["n"]
    assert [b.name for b in found if b.held(namespace)] == []


def cell_run(text: str, cell: NotebookCell, started: str = "2026-11-22T10:00:00+00:00") -> object:
    stats = LineStats(alloc_bytes=10, alloc_count=1, live_bytes=10, live_count=1, peak_bytes=10)
    return runs.new_run(
        [runs.source(cell.file, text, {2: stats})],
        run_info=runs.info(command=("%%memlens",), started=started, cell=cell),
    )


def test_a_cells_header_round_trips_and_is_exported(tmp_path: Path) -> None:
    text = "%%memlens\nx = [0] * 10"
    cell = NotebookCell(
        "In [4]", 4, "/nb/a.ipynb", "vscode-notebook-cell:/nb/a.ipynb#W1", text_digest(text)
    )
    path = writer.write(cell_run(text, cell), tmp_path / "a.mlrun")  # type: ignore[arg-type]
    assert reader.read_info(path).cell == cell
    assert reader.read(path).info.cell == cell
    assert to_json_dict(reader.read(path))["run"]["cell"]["cell_id"] == cell.cell_id
    # A program's run has no cell, in the file as in the export.
    plain = writer.write(runs.new_run([]), tmp_path / "b.mlrun")
    assert reader.read_info(plain).cell is None


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"file": 1, "execution_count": 1, "notebook": "", "cell_id": "", "sha256": ""},
        {"file": "In [1]", "execution_count": True, "notebook": "", "cell_id": "", "sha256": ""},
        {"file": "In [1]", "execution_count": -1, "notebook": "", "cell_id": "", "sha256": ""},
        {
            "file": "In [1]",
            "execution_count": 1,
            "notebook": "x" * 5000,
            "cell_id": "",
            "sha256": "",
        },
        {"file": "In [1]", "execution_count": 1, "notebook": ""},
    ],
)
def test_a_hostile_cell_header_is_one_line_error(tmp_path: Path, bad: object) -> None:
    text = "%%memlens\nx = 1"
    cell = NotebookCell("In [1]", 1, "", "", text_digest(text))
    path = writer.write(cell_run(text, cell), tmp_path / "a.mlrun")  # type: ignore[arg-type]
    with sqlite3.connect(path) as db:
        header = json.loads(db.execute("SELECT value FROM meta WHERE key = 'run'").fetchone()[0])
        header["cell"] = bad
        db.execute("UPDATE meta SET value = ? WHERE key = 'run'", (json.dumps(header),))
    with pytest.raises(RunFileError) as raised:
        reader.read_info(path)
    assert "\n" not in str(raised.value)
    assert "cell" in str(raised.value) or "digest" in str(raised.value)


def test_a_cell_shows_its_own_runs_by_uri_then_runs_of_the_same_text() -> None:
    opened = datetime(2026, 11, 22, 12, tzinfo=timezone.utc)

    def entry(
        name: str, hour: int, cell_id: str, digest: str, notebook: str = "/nb/a.ipynb"
    ) -> CellRun:
        cell = NotebookCell("In [1]", 1, notebook, cell_id, digest)
        return CellRun(Path(name), datetime(2026, 11, 22, hour, tzinfo=timezone.utc), cell)

    uri = "vscode-notebook-cell:/nb/a.ipynb#W1"
    found = [
        entry(
            "old-same-uri", 10, uri, "d1"
        ),  # before the notebook opened: its URI may be another cell's
        entry("same-text", 11, "", "now"),
        entry("same-text-other-notebook", 13, "", "now", "/other.ipynb"),
        entry("same-uri", 13, uri, "d2"),
    ]
    store = StoreCells(Path("/s"), (), {f.path: ((0, 0, 0), f) for f in found})
    assert choose(store, uri, "now", "/nb/a.ipynb", opened).path.name == "same-uri"  # type: ignore[union-attr]
    assert choose(store, "other-uri", "now", "/nb/a.ipynb", opened).path.name == "same-text"  # type: ignore[union-attr]
    # The old run of that URI still counts by its text; no run has this text.
    assert choose(store, "other-uri", "d1", "/nb/a.ipynb", opened).path.name == "old-same-uri"  # type: ignore[union-attr]
    assert choose(store, "other-uri", "unseen", "/nb/a.ipynb", opened) is None


def test_a_store_is_scanned_once_per_file_and_its_folder_found(tmp_path: Path) -> None:
    (tmp_path / "nb").mkdir()
    text = "%%memlens\nx = 1"
    cell = NotebookCell("In [1]", 1, "", "", text_digest(text))
    runs_dir = tmp_path / ".memlens" / "runs"
    runs_dir.mkdir(parents=True)
    writer.write(cell_run(text, cell), runs_dir / "20261122-100000-1.mlrun")  # type: ignore[arg-type]
    writer.write(runs.new_run([]), runs_dir / "20261122-100001-1.mlrun")
    (runs_dir / "20261122-100002-1.mlrun").write_bytes(b"garbage")
    assert store_root(tmp_path / "nb" / "a.ipynb", tmp_path) == tmp_path
    assert store_root(tmp_path / "nb" / "a.ipynb", tmp_path / "nb") is None
    first = scan(tmp_path, None)
    assert [c is not None for _, c in first.runs.values()] == [True, False, False]
    again = scan(tmp_path, first)
    assert again.runs == first.runs
