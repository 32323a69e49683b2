"""``memlens diff --json``'s line pairs made by the native formatter
(``memlens._text.format_rows``) are the Python formatter's text, byte for byte: in file order
and ranked, across files, with GPU figures on some files (Python makes those), with changes
and ratios the native one does not make (beyond 64 bits, beyond 2**53: Python does), and
for any ratio of integers (a float's repr, as ``json`` writes it)."""

from __future__ import annotations

import dataclasses
import io
import random
import re
from array import array
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memlens.diff as diff_module
from memlens.diff import FunctionDiff, diff_runs, write_json
from memlens.model import FunctionStats, LineStats, Run
from tests import runs

text = pytest.importorskip("memlens._text", reason="no native modules (free-threaded Python)")


def _lines(rnd: random.Random, n: int, big: bool, gpu: bool) -> dict[int, LineStats]:
    def figure() -> int:
        return rnd.choice([0, 0, 7, 4096, rnd.randint(1, 10**12), *([2**62] if big else [])])

    out = {}
    for line in range(1, n + 1):
        if rnd.random() < 0.7:
            size = figure()
            out[line] = LineStats(
                alloc_bytes=figure(),
                alloc_count=rnd.randint(0, 50),
                live_bytes=size // 3,
                live_count=rnd.randint(0, 2),
                peak_bytes=size,
                incl_alloc_bytes=figure(),
                incl_live_bytes=size // 2,
                incl_peak_bytes=size + 1,
                native_alloc_bytes=size // 5,
                gpu_peak_bytes=rnd.randint(1, 10**6) if gpu and line % 5 == 0 else 0,
            )
    return out


def _functions(rnd: random.Random, big: bool, gpu: bool) -> tuple[FunctionStats, ...]:
    """Functions of a file: some in one run only, one on the GPU (with ``gpu``)."""
    out = []
    for k, name in enumerate(["f", "g", "<lambda>", "<lambda>", 'q"', "ünï"]):
        if rnd.random() < 0.8:
            size = rnd.choice([0, 9, rnd.randint(1, 10**12), *([2**62] if big else [])])
            out.append(
                FunctionStats(
                    name,
                    1 + 5 * k,
                    4 + 5 * k,
                    size,
                    rnd.randint(0, 9),
                    size // 2,
                    size,
                    gpu_peak_bytes=7 if gpu and k == 1 else 0,
                )
            )
    return tuple(out)


def _runs(seed: int, *, big: bool = False, gpu: bool = False) -> tuple[Run, Run]:
    rnd = random.Random(seed)
    names = ["/w/app.py", '/w/q"uote.py', "/w/100%s.py", "/w/ünï.py", "/w/only.py"]
    texts = ["".join(f"v{(i * k) % 13} = {i}\n" for i in range(40)) for k in (1, 3)]
    pair: list[Run] = []
    for side, text in enumerate(texts):
        files = [
            runs.source(name, text, _lines(rnd, 40, big, gpu and f == 0), _functions(rnd, big, gpu))
            for f, name in enumerate(names)
            if not (name == "/w/only.py" and side == 1)
        ]
        pair.append(runs.new_run(files))
    return pair[0], pair[1]


def _both(a: Run, b: Run, monkeypatch: pytest.MonkeyPatch, **how: Any) -> tuple[str, str]:
    """The document by the native formatter (which must have been called) and by Python."""
    d = diff_runs(a, b)
    native = io.StringIO()
    calls: list[int] = []

    def counted(*args: Any) -> Any:
        calls.append(args[5])
        return text.format_rows(*args)

    with monkeypatch.context() as m:
        m.setattr(diff_module, "format_rows", counted)
        write_json(d, native, **how)
    assert sum(calls) > 0
    with monkeypatch.context() as m:
        m.setattr(diff_module, "format_rows", None)
        m.setattr(diff_module, "order_of_changes", None)
        python = io.StringIO()
        write_json(d, python, **how)
    return native.getvalue(), python.getvalue()


HOW: dict[str, dict[str, Any]] = {
    "file-order": {},
    "by-peak": {"by": "peak_bytes"},
    "by-alloc-top-17": {"by": "alloc_bytes", "top": 17},
}


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize(
    "kind", ["plain", "gpu", "beyond-2**53"], ids=["plain", "gpu-in-one-file", "huge-figures"]
)
def test_native_rows_are_pythons(monkeypatch: pytest.MonkeyPatch, how: str, kind: str) -> None:
    a, b = _runs(7, big=kind == "beyond-2**53", gpu=kind == "gpu")
    native, python = _both(a, b, monkeypatch, **HOW[how])
    assert native == python
    assert native.count('"line_a"') >= HOW[how].get("top", 100)
    assert native.count('"qualname"') >= HOW[how].get("top", 20)


def test_rows_of_a_batch_in_any_order_come_in_that_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # Several batches of pairs across files (the native formatter makes each batch's rows in
    # file order and puts them back): small batches, so that the pairs of a batch are scattered.
    monkeypatch.setattr(diff_module, "_BATCH", 7)
    monkeypatch.setattr(diff_module, "_RANKED_BATCH", 13)
    a, b = _runs(11)
    native, python = _both(a, b, monkeypatch, by="peak_bytes")
    assert native == python


def _one_table(a: list[int], b: list[int]) -> list[str]:
    """The ratio of each pair of figures, by the native formatter."""
    rows = array("q", range(len(a)))
    sources = [([array("q", a)], [rows]), ([array("q", b)], [rows])]
    at = (array("q", [0] * len(a)), rows)
    out: list[str] = text.format_rows(["", ""], [("r", 0, 1)], sources, at, 1, len(a))
    return out


EXACT = 2**53


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-EXACT, EXACT).filter(bool),
            st.one_of(st.integers(-EXACT, EXACT), st.integers(-100, 100)),
        ),
        min_size=1,
        max_size=50,
    )
)
def test_a_ratio_is_written_as_python_writes_it(pairs: list[tuple[int, int]]) -> None:
    # The change b - a must fit in 2**53 too (else Python's exact division may round
    # differently, and the native formatter declines: tested above).
    pairs = [(x, y) for x, y in pairs if abs(y - x) <= EXACT]
    if not pairs:
        return
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    assert _one_table(a, b) == [repr((y - x) / x) for x, y in pairs]


def test_ratios_at_the_edges_of_reprs_layout() -> None:
    # repr switches to an exponent below 1e-4 and at 1e16 and above; 0 over 0 is 0.0, a new
    # figure over nothing is null.
    a = [10**5, 10**4, 1, 3, 7, -5, 0, 0, 2**53]
    b = [10**5 + 1, 10**4 + 1, 2**53, 3, 7 * 10**15, 0, 0, 9, 1]
    want = [repr((y - x) / x) for x, y in zip(a[:6], b[:6], strict=True)]
    assert _one_table(a, b) == [*want, "0.0", "null", repr((1 - 2**53) / 2**53)]


def test_what_it_cannot_write_as_python_does_is_refused() -> None:
    with pytest.raises(OverflowError):
        _one_table([3], [2**53 + 10])  # a change beyond 2**53: Python divides exactly
    with pytest.raises(OverflowError):
        _one_table([-(2**63)], [2**63 - 1])  # a change beyond 64 bits


def test_indexes_and_sizes_are_checked() -> None:
    rows = array("q", [0, 1])
    col = array("q", [5, 6])
    fields = [("v", 0)]
    good = ([col], [rows])
    assert text.format_rows(["<", ">"], fields, [good], (array("q", [0, 0]), rows), 1, 2) == [
        "<5>",
        "<6>",
    ]
    with pytest.raises(ValueError, match="out of range"):
        text.format_rows(["", ""], fields, [good], (array("q", [1, 0]), rows), 1, 2)
    with pytest.raises(ValueError, match="out of range"):
        text.format_rows(["", ""], fields, [good], (array("q", [0, 0]), array("q", [0, 2])), 1, 2)
    far = ([col], [array("q", [0, 9])])
    with pytest.raises(ValueError, match="beyond its column"):
        text.format_rows(["", ""], fields, [far], (array("q", [0, 0]), rows), 1, 2)
    with pytest.raises(TypeError, match="item size"):
        text.format_rows(["", ""], fields, [([array("i", [5, 6])], [rows])], (rows, rows), 1, 2)
    with pytest.raises(ValueError, match="fewer"):
        text.format_rows(["", ""], fields, [good], (rows, rows), 1, 3)
    with pytest.raises(ValueError, match="parts"):
        text.format_rows(["only one"], fields, [good], (array("q", [0, 0]), rows), 1, 2)


def test_sources_without_a_column_read_zero() -> None:
    rows = array("q", [0, -1])
    sources: list[Any] = [([None], [rows]), ([array("q", [4])], [rows])]
    at = (array("q", [0, 0]), array("q", [0, 1]))
    fields = [("v", 0), ("v", 1), ("c", 0, 1), ("r", 0, 1), ("c", 0, 1)]
    out = text.format_rows(["", ",", ",", ",", ",", ""], fields, sources, at, 1, 2, ";")
    assert out == "0,4,4,null,4;0,0,0,0.0,0"


def test_the_diffs_columns_are_what_the_formatter_reads() -> None:
    # (It reads a LineTable's columns and a FileDiff's arrays as int64 buffers: anything else
    # would make every diff take the Python formatter's time, or fail.)
    a, b = _runs(3)
    fd = diff_runs(a, b).files[0]
    for column in (fd.line_a, fd.line_b, fd.row_a, fd.row_b, fd.b.column("peak_bytes")):
        assert isinstance(column, array)
        assert column.itemsize == 8


def test_the_stub_names_what_the_module_has() -> None:
    stub = Path(__file__).resolve().parents[2] / "server" / "memlens" / "_text.pyi"
    declared = set(re.findall(r"^def (\w+)", stub.read_text(encoding="utf-8"), re.MULTILINE))
    exported = {n for n in dir(text) if not n.startswith("__") and callable(getattr(text, n))}
    assert declared == exported


def test_order_is_a_stable_sort() -> None:
    keys = [random.Random(5).randint(-3, 3) for _ in range(500)]
    assert list(text.order(array("q", keys))) == sorted(range(500), key=keys.__getitem__)
    assert list(text.order(array("q"))) == []


def test_functions_and_rankings_take_the_native_path() -> None:
    a, b = _runs(7)
    d = diff_runs(a, b)
    assert diff_module._native_function_rows(d.functions) is not None
    assert isinstance(diff_module.line_order(d, "peak_bytes"), array)
    gpu = diff_runs(*_runs(7, gpu=True))
    assert diff_module._native_function_rows(gpu.functions) is None  # (Python's two forms)


def test_order_of_changes_ranks_as_python_and_refuses_beyond_64_bits() -> None:
    a_col, b_col = array("q", [5, 0, 7, -3]), array("q", [1, 9, 7, 2])
    rows = array("q", [0, 1, 2, 3])
    got = text.order_of_changes(([a_col], [rows]), ([b_col], [rows]), [4])
    changes = [abs(y - x) for x, y in zip(a_col, b_col, strict=True)]
    assert list(got) == sorted(range(4), key=lambda k: -changes[k])
    missing = text.order_of_changes(([None], [array("q", [-1])]), ([b_col], [rows]), [1])
    assert list(missing) == [0]
    huge = (array("q", [-(2**63)]), array("q", [2**63 - 1]))
    with pytest.raises(OverflowError):
        text.order_of_changes(([huge[0]], [rows]), ([huge[1]], [rows]), [1])
    with pytest.raises(ValueError, match="beyond its column"):
        text.order_of_changes(([a_col], [array("q", [9])]), ([b_col], [rows]), [1])


def test_a_big_ranked_batch_is_written_in_pieces_as_python_writes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # More pairs than the native formatter writes at a time (a block of at most a megabyte of
    # text, made by several threads at once), ranked: its pieces, each given to write() in
    # order, make Python's text.
    rnd = random.Random(3)
    text = "".join(f"v{i} = {i}\n" for i in range(5000))
    pair = [
        runs.new_run(
            [runs.source(f"/w/m{k}.py", text, _lines(rnd, 5000, False, False)) for k in range(3)]
        )
        for _ in range(2)
    ]
    writes: list[int] = []
    d = diff_runs(*pair)
    native = io.StringIO()

    class Out(io.StringIO):
        def write(self, s: str) -> int:
            writes.append(len(s))
            return native.write(s)

    write_json(d, Out(), by="peak_bytes")
    with monkeypatch.context() as m:
        m.setattr(diff_module, "format_rows", None)
        m.setattr(diff_module, "order_of_changes", None)
        m.setattr(diff_module, "locate", None)
        python = io.StringIO()
        write_json(d, python, by="peak_bytes")
    assert native.getvalue() == python.getvalue()
    assert sum(len(d.files[k]) for k in range(3)) > 8192
    pieces = [w for w in writes if w >= 1 << 18]
    assert len(pieces) >= 2, writes  # (two pieces of lines at least)
    assert max(writes) <= 1 << 20  # (each a piece, not the whole)


def test_locate_finds_each_positions_table_and_index() -> None:
    counts = [3, 0, 2, 5]
    starts = [0, 3, 3, 5]
    positions = array("q", random.Random(4).sample(range(10), 10))
    tables, indexes = text.locate(positions, counts)
    expected = [max(t for t in range(4) if starts[t] <= p and counts[t]) for p in positions]
    assert list(tables) == expected
    assert [starts[t] + x for t, x in zip(tables, indexes, strict=True)] == list(positions)
    with pytest.raises(ValueError, match="beyond the tables"):
        text.locate(array("q", [10]), counts)
    with pytest.raises(ValueError, match="beyond the tables"):
        text.locate(array("q", [-1]), counts)


@given(st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("fgh"), st.integers(-3, 3))))
def test_ranked_functions_are_pythons_ranking(changes: list[tuple[str, str, int]]) -> None:
    # Ties (equal absolute changes) stay in file and name order, as Python's sort of the
    # (change, file, name) keys leaves them.
    last = {(f, name): c for f, name, c in changes}
    a = FunctionStats("x", 1, 2, 10)
    b = [FunctionStats("x", 1, 2, 10 + c) for c in range(-3, 4)]
    functions = tuple(
        FunctionDiff(f"/w/{f}.py", name, a, b[c + 3]) for (f, name), c in sorted(last.items())
    )
    d = dataclasses.replace(diff_runs(*_runs(7)), functions=functions)
    native = diff_module.ranked_functions(d, "alloc_bytes")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(diff_module, "order", None)
        assert native == diff_module.ranked_functions(d, "alloc_bytes")
    with pytest.raises(KeyError):
        diff_module.ranked_functions(d, "live_count")


@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("by", [None, "peak_bytes"])
def test_rows_written_as_bytes_under_a_text_stream_are_the_same_document(
    by: str | None, gpu: bool
) -> None:
    # The command line writes the line pairs' bytes to the binary stream under stdout (no str
    # made of a gigabyte of text): the document is the one written as text, byte for byte,
    # with what comes before and after them in order; GPU files' pairs (Python's) too.
    d = diff_runs(*_runs(7, gpu=gpu))
    text = io.StringIO()
    write_json(d, text, by=by, more={"a": "x"})
    binary = io.BytesIO()
    out = io.TextIOWrapper(binary, encoding="utf-8", newline="\n")
    raw = diff_module.raw_writer(out)
    assert raw is not None
    write_json(d, out, by=by, more={"a": "x"}, raw=raw)
    out.flush()
    assert binary.getvalue().decode("utf-8") == text.getvalue()
    utf16 = io.TextIOWrapper(io.BytesIO(), encoding="utf-16")
    assert diff_module.raw_writer(utf16) is None
    assert diff_module.raw_writer(io.StringIO()) is None


def test_many_rows_are_made_by_several_threads_as_by_one() -> None:
    # Enough rows for several threads to gather and write them (blocks of a megabyte): the
    # text is one thread's, in order; the first failure in table order is the one raised, and
    # nothing is written before it.
    n = 70_000
    rnd = random.Random(9)
    a = array("q", [rnd.randint(-(10**12), 10**12) for _ in range(n)])
    b = array("q", [rnd.randint(-(10**12), 10**12) for _ in range(n)])
    rows = array("q", range(n))
    order = array("q", rnd.sample(range(n), n))
    fields = [("v", 0), ("v", 1), ("c", 0, 1), ("r", 0, 1), ("r", 0, 1)]
    parts = ["[", ",", ",", ",", ",", "]"]
    sources = [([a], [rows]), ([b], [rows])]
    at = (array("q", [0]) * n, order)
    got: list[str] = []
    text.format_rows(parts, fields, sources, at, 1, n, ";", got.append, "<")
    assert len(got) > 4  # (blocks)
    expected = ";".join(
        f"[{a[k]},{b[k]},{b[k] - a[k]},{(b[k] - a[k]) / a[k]!r},{(b[k] - a[k]) / a[k]!r}]"
        for k in order
    )
    assert "".join(got) == "<" + expected
    # A change Python divides exactly, late in the rows: refused before anything is written.
    b[order[-1]] = a[order[-1]] + 2**60
    written: list[str] = []
    with pytest.raises(OverflowError):
        text.format_rows(parts, fields, sources, at, 1, n, ";", written.append)
    assert written == []
    b[order[-1]] = a[order[-1]]
    far = ([a], [array("q", [*range(n - 1), n + 5])])
    with pytest.raises(ValueError, match="beyond its column"):
        text.format_rows(parts, fields, [far, sources[1]], at, 1, n, ";", written.append)
    assert written == []
