"""A run with a hundred thousand line rows read, shown and exported without an object per row:
memory measured in-process (tracemalloc's peak), against what the same rows cost as objects."""

from __future__ import annotations

import io
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from memlens.export import write_json
from memlens.model import ERRORS, LineStats, LineTable, LineTableBuilder, Run
from memlens.report import render
from memlens.runfile import reader, writer
from tests.runs import new_run, source

FILES = 10
LINES = 10_000  # per file


def figures(rnd: random.Random) -> tuple[int, ...]:
    size = rnd.randint(2_000, 5_000_000)
    return (size * 2, rnd.randint(1, 5000), size // 3, 3, size, size * 2, size // 3, size, 0, 0, 0)


def table(rnd: random.Random) -> LineTable:
    builder = LineTableBuilder()
    for line in range(1, LINES + 1):
        builder.add(line, figures(rnd), (0.0,) * len(ERRORS))
    return builder.table()


def peak(work: Callable[[], object]) -> tuple[int, object]:
    """The most memory ``work`` held at once above what was held before it, and its result."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        return tracemalloc.get_traced_memory()[1] - before, result
    finally:
        tracemalloc.stop()


class Sink(io.StringIO):
    """Counts what is written, keeping none of it."""

    written = 0

    def write(self, text: str) -> int:
        self.written += len(text)
        return len(text)


@pytest.mark.slow
def test_a_big_run_is_read_shown_and_exported_in_memory_that_grows_little_per_row(
    tmp_path: Path,
) -> None:
    rnd = random.Random(3)
    made = new_run([source(f"/work/m{i}.py", None, table(rnd)) for i in range(FILES)])
    path = writer.write(made, tmp_path / "big.mlrun")
    del made
    rows = FILES * LINES

    # What one file's rows cost as objects (a dict of LineStats, as runs were read before).
    as_objects, held = peak(lambda: {n: LineStats(*figures(rnd)) for n in range(1, LINES + 1)})
    del held
    per_row_as_objects = as_objects / LINES

    read_peak, run = peak(lambda: reader.read(path))
    assert isinstance(run, Run)
    assert sum(len(sf.lines) for sf in run.files.values()) == rows
    # (As objects the rows took more than that alone, before the reader's own chunks of rows,
    # a few megabytes whatever the run's size.)
    assert read_peak / rows < 0.7 * per_row_as_objects, (read_peak / rows, per_row_as_objects)

    sink = Sink()
    export_peak, _ = peak(lambda: write_json(run, sink))
    # Written piece by piece: a small part of the text is ever held, and no object per row.
    assert sink.written > 200 * rows
    assert export_peak < 0.1 * sink.written, (export_peak, sink.written)
    assert export_peak < 0.1 * per_row_as_objects * rows

    shown = io.StringIO()
    show_peak, _ = peak(lambda: render(run, shown, rich_output=False))
    assert "m" in shown.getvalue()
    # The listing of the hottest file makes its lines' objects; the ranking makes none.
    assert show_peak < 0.2 * per_row_as_objects * rows, (show_peak, per_row_as_objects)
