"""A file's line figures by column (memlens.model.LineTable): every column of LineStats kept
exactly, through the builder and through a run file, read without making an object per line."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from memlens.model import (
    ERRORS,
    GPU_FIGURES,
    LineStats,
    LineTable,
    LineTableBuilder,
    line_values,
)
from memlens.model.lines import INTS
from memlens.runfile import reader, writer
from tests.runs import new_run, source


def stats(seed: int, *, errors: bool = True, gpu: bool = True) -> LineStats:
    """A line whose every figure differs from every other (errors and GPU figures 0 without
    ``errors`` and ``gpu``)."""
    values: dict[str, int | float] = {}
    for i, name in enumerate(LineStats.__slots__):
        if name in ERRORS:
            values[name] = seed + i + 0.25 if errors else 0.0
        elif name in GPU_FIGURES:
            values[name] = (seed << 20) + i if gpu else 0
        else:
            values[name] = (seed << 33) + i  # beyond 32 bits
    return LineStats(**values)  # type: ignore[arg-type]


def test_the_table_has_a_column_for_every_figure_of_a_line() -> None:
    # A figure added to LineStats without a column here fails this test.
    assert sorted((*INTS, *ERRORS, *GPU_FIGURES)) == sorted(LineStats.__slots__)
    assert len({*INTS, *ERRORS, *GPU_FIGURES}) == len(LineStats.__slots__)


def mixed() -> dict[int, LineStats]:
    """Lines without errors and GPU figures before and between lines with them."""
    return {
        1: stats(1, errors=False, gpu=False),
        2: stats(2, errors=False, gpu=False),
        7: stats(7, gpu=False),
        9: stats(9, errors=False),
        40: stats(40),
        41: LineStats(),
        2**31 + 5: stats(3),
    }


@pytest.mark.parametrize(
    "lines",
    [
        mixed(),
        {n: stats(n, errors=False, gpu=False) for n in range(1, 50)},
        {n: stats(n, gpu=False) for n in range(1, 50)},
        {n: stats(n, errors=False) for n in range(1, 50)},
        {5: LineStats()},
        {},
    ],
    ids=["mixed", "exact", "sampling", "gpu", "zeros", "empty"],
)
def test_every_column_round_trips_exactly(lines: dict[int, LineStats]) -> None:
    table = LineTable.of(lines)
    assert table == lines
    assert list(table) == sorted(lines)
    assert list(table.items()) == sorted(lines.items())
    assert list(table.values()) == [lines[n] for n in sorted(lines)]
    for n, st in lines.items():
        got = table[n]
        assert got == st
        assert [type(getattr(got, f)) for f in got.__slots__] == [
            type(getattr(st, f)) for f in st.__slots__
        ]
    assert table.has_errors == any(
        st.alloc_err or st.live_err or st.peak_err for st in lines.values()
    )
    assert table.has_gpu == any(st.has_gpu() for st in lines.values())
    for name in (*INTS, *GPU_FIGURES):
        assert list(table.column(name)) == [getattr(lines[n], name) for n in sorted(lines)]
        assert list(line_values(table, name)) == sorted(line_values(lines, name))


def test_a_run_file_gives_back_every_column_of_every_line(tmp_path: Path) -> None:
    lines = mixed()
    plain = {n: stats(n, errors=False, gpu=False) for n in (3, 4)}
    run = new_run(
        [source("/work/a.py", "x\n" * 10, lines), source("/work/b.py", None, plain)],
        mode="sampling",
    )
    back = reader.read(writer.write(run, tmp_path / "r.mlrun"))
    for path, sf in run.files.items():
        got = back.files[path].lines
        assert isinstance(got, LineTable)
        assert got == sf.lines
        assert dict(got.items()) == sf.lines
    assert not back.files["/work/b.py"].lines.has_gpu  # type: ignore[attr-defined]
    assert back == run


def test_looking_up_lines() -> None:
    table = LineTable.of(mixed())
    assert 9 in table
    for absent in (8, 0, 10**12, "9"):
        assert absent not in table
    assert table.get(8) is None
    with pytest.raises(KeyError):
        table[8]
    assert len(table) == 7


def test_the_builder_wants_lines_in_order_and_whole_rows() -> None:
    builder = LineTableBuilder()
    builder.add(3, (0,) * len(INTS), (0.0,) * len(ERRORS))
    builder.add(3, (0,) * len(INTS), (0.0,) * len(ERRORS))
    with pytest.raises(ValueError, match="increasing order"):
        builder.table()
    with pytest.raises(ValueError, match="as many"):
        builder.add(4, (0,) * (len(INTS) - 1), (0.0,) * len(ERRORS))
    with pytest.raises(ValueError, match="differ in length"):
        builder.frombytes(bytes(16), [bytes(8)] * len(INTS), [bytes(16)] * len(ERRORS))
    with pytest.raises(TypeError):
        builder.add(7, ("many",) * len(INTS), (0.0,) * len(ERRORS))
    table = LineTable.of({1: LineStats()})
    with pytest.raises(ValueError, match="differ in number or length"):
        LineTable(table._lines, table._ints[:-1])


def test_lines_added_by_column_are_the_lines_added_one_by_one() -> None:
    lines = mixed()
    rows = sorted(lines.items())
    builder = LineTableBuilder()

    def column(part: list[tuple[int, LineStats]], name: str) -> bytes:
        code = "d" if name in ERRORS else "q"
        return array(code, [getattr(st, name) for _, st in part]).tobytes()

    for part in (rows[:2], rows[2:3], rows[3:]):
        builder.frombytes(
            array("q", [n for n, _ in part]).tobytes(),
            [column(part, f) for f in INTS],
            [column(part, e) for e in ERRORS],
            [column(part, g) for g in GPU_FIGURES],
        )
    assert builder.table() == lines
    assert list(LineTable.of(lines).rows(errors=True, gpu=True)) == [
        (n, *(getattr(st, f) for f in (*INTS, *ERRORS, *GPU_FIGURES))) for n, st in rows
    ]
    exact = LineTable.of({2: stats(2, errors=False, gpu=False)})
    assert list(exact.rows(errors=True, gpu=True)) == [
        (2, *(getattr(exact[2], f) for f in INTS), 0.0, 0.0, 0.0, *(0,) * len(GPU_FIGURES))
    ]
    assert list(exact.rows(errors=False, gpu=False)) == [(2, *(getattr(exact[2], f) for f in INTS))]
