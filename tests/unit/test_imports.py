"""Importing tracemalloc snapshots and pymemtrace logs."""

from __future__ import annotations

import os
import pickle
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlens.errors import MemlensError
from memlens.imports.pymemtrace_import import import_log
from memlens.imports.tracemalloc_import import PICKLE_WARNING, import_snapshot
from memlens.runfile import reader, writer

HERE = str(Path(__file__).resolve())


def _allocate() -> list[bytearray]:
    return [bytearray(1 << 20) for _ in range(4)]  # the line under test


def _outer() -> list[bytearray]:
    return _allocate()  # calls the allocating line


def test_tracemalloc_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tracemalloc.start(10)
    try:
        keep = _outer()
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    path = tmp_path / "snap.pickle"
    snap.dump(str(path))
    run = import_snapshot(str(path))
    assert PICKLE_WARNING in capsys.readouterr().err
    assert run.info.mode == "imported"
    assert run.info.source == "tracemalloc"
    assert run.info.complete is True
    sf = run.files[HERE]
    assert sf.text == Path(HERE).read_text()
    line = _allocate.__code__.co_firstlineno + 1
    outer_line = _outer.__code__.co_firstlineno + 1
    st = sf.lines[line]
    # Four 1 MiB bytearrays (plus their small object headers) live at the snapshot.
    assert 4 << 20 <= st.live_bytes < (4 << 20) + 4096
    assert st.live_count >= 4
    assert st.alloc_bytes == st.live_bytes == st.peak_bytes
    assert st.incl_live_bytes >= st.live_bytes
    # The caller's line holds the same blocks inclusively, none of them itself.
    caller = sf.lines[outer_line]
    assert caller.incl_live_bytes >= 4 << 20
    assert caller.live_bytes < 4096
    # Functions are named and bounded from the source, like the tracer does.
    fns = {fn.qualname: fn for fn in sf.functions}
    alloc_fn = fns["_allocate"]
    assert (alloc_fn.first_line, alloc_fn.last_line) == (line - 1, line)
    assert alloc_fn.live_bytes >= 4 << 20
    assert fns["_outer"].live_bytes >= 4 << 20
    # The call tree follows the tracebacks: the allocating node's parent is the caller's.
    by_id = {n.id: n for n in run.call_tree}
    leaf = max(
        (n for n in run.call_tree if n.file == HERE and n.line == line),
        key=lambda n: n.live_bytes,
    )
    assert leaf.function == "_allocate"
    parent = by_id[leaf.parent]
    while parent.line == line:  # a comprehension's own frame (Python < 3.12) is on that line
        parent = by_id[parent.parent]
    assert (parent.file, parent.line, parent.function) == (HERE, outer_line, "_outer")
    # Pseudo files are kept as they are, never made into paths of the current directory.
    assert not any("<" in p and p.startswith("/") for p in run.files)
    # The imported run is a normal run file.
    writer.write(run, tmp_path / "i.mlrun")
    assert reader.read(tmp_path / "i.mlrun") == run
    assert keep


@pytest.mark.parametrize(
    "blob",
    [b"garbage", b"", pickle.dumps({"a": 1})],
)
def test_not_a_snapshot(tmp_path: Path, blob: bytes) -> None:
    bad = tmp_path / "x.pickle"
    bad.write_bytes(blob)
    with pytest.raises(MemlensError, match="not a tracemalloc snapshot") as err:
        import_snapshot(str(bad))
    assert str(err.value).startswith(f"cannot read {bad}: ")
    assert "\n" not in str(err.value)
    with pytest.raises(MemlensError, match="no such file"):
        import_snapshot(str(tmp_path / "missing"))


LOG = """\
Hello World
SOF
HEDR: Event  dEvent  Clock        What     File                Line Function        RSS       dRSS
FRST: 0      +0      3.090020     LINE     {f}  1 main      41463808  41463808
NEXT: 1      +1      3.090202     LINE     {f}  2 main      41472000  8192
MSG:  2      +1      3.090208     # Level 0 __enter__
and the message goes on
PREV: 2      +1      3.090208
NEXT: 9      +8      3.090725     LINE     {f}  3 populate_list   42524672  1052672
PREV: 9      +8      3.090725     LINE     {f}  3 populate_list   42524672  1052672
NEXT: 11     +2      3.091224     LINE     {f}  3 populate_list   43577344  1052672
NEXT: 12     +1      3.091300     C_CALL   <frozen posixpath>  71 join   43581440  4096
NEXT: 13     +1      3.091400     LINE     {f}  4 main   43573248  -8192
LAST: 675    +274    3.097455     LINE     {f}  2 main      43573248  0
EOF
"""

SOURCE = "def main():\n    x = 1\n    big = [0] * 10\n    del big\n"
HEDR = "HEDR: Event dEvent Clock What File Line Function RSS dRSS\n"


def _log(
    tmp_path: Path, text: str, name: str = "20260227_122119_14_50260_T_2_PY3.12.1.log"
) -> Path:
    log = tmp_path / name
    log.write_text(text)
    return log


def test_pymemtrace_log(tmp_path: Path) -> None:
    src = tmp_path / "prog.py"
    src.write_text(SOURCE)
    run = import_log(str(_log(tmp_path, LOG.format(f="prog.py"))))
    assert run.info.source == "pymemtrace"
    assert run.info.mode == "imported"
    assert run.info.python == "3.12.1"
    assert run.info.pid == 50260
    assert run.info.complete is True
    assert run.info.started.startswith("2026-02-27T12:21:19")
    assert run.info.duration_s == pytest.approx(3.097455 - 3.090020)
    assert run.info.peak_rss_bytes == 43581440
    assert run.info.peak_traced_bytes == 43581440 - 41463808
    # Relative names are found beside the log and recorded by absolute path with their text.
    sf = run.files[str(src)]
    assert sf.text == SOURCE
    assert sf.lines[3].alloc_bytes == 2 * 1052672  # PREV rows are not counted again
    assert sf.lines[3].alloc_count == 2
    assert sf.lines[3].peak_bytes == 2 * 1052672
    assert sf.lines[3].incl_alloc_bytes == 2 * 1052672  # no stacks: inclusive = self
    assert sf.lines[2].alloc_bytes == 8192
    assert 1 not in sf.lines  # the FRST row's dRSS (all RSS at start) is not growth
    assert sf.lines[4].alloc_bytes == 0
    assert sf.lines[4].live_bytes == 0  # net -8192 is clamped
    # A file name with a space is one file name.
    frozen = run.files["<frozen posixpath>"]
    assert frozen.text is None
    assert frozen.lines[71].alloc_bytes == 4096
    assert frozen.lines[71].peak_bytes == 4096  # RSS peaked at that event
    # Functions come from the source when it is there ("populate_list" is not in it).
    assert [(f.qualname, f.first_line, f.last_line) for f in sf.functions] == [
        ("main", 1, 4),
        ("populate_list", 3, 3),
    ]
    # Timeline: one point per counted event, traced = RSS growth since the first event.
    assert len(run.timeline) == 7
    assert run.timeline[0].t == 0.0
    assert run.timeline[0].traced_bytes == 0
    assert run.timeline[-1].rss_bytes == 43573248


def test_pymemtrace_log_without_eof_is_incomplete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = LOG.format(f="prog.py")
    text = text[: text.index("LAST:")]
    run = import_log(str(_log(tmp_path, text)))
    assert run.info.complete is False
    assert "no EOF line" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("nothing here\n", "not a pymemtrace log"),
        ("", "not a pymemtrace log"),
        ("SOF\n" + HEDR + "EOF\n", "the log has no events"),
        ("SOF\nEOF\n", "no HEDR row"),
        ("SOF\nNEXT: 1 +1 1.0 LINE f.py 3 main 10 10\nEOF\n", "line 2: NEXT row before the HEDR"),
        ("SOF\n" + HEDR + "FRST: 0 +0 zz LINE f.py 3 main 10 10\nEOF\n", "line 3: bad FRST row"),
        (
            "SOF\n" + HEDR + "FRST: 0 +0 1.0 LINE f.py 3 main 10 10\nrubbish\nEOF\n",
            "line 4: unrecognised row 'rubbish'",
        ),
        (
            "SOF\n" + HEDR + "NEXT: 1 +1 1.0 LINE f.py 3 main 10 10\nEOF\n",
            "line 3: NEXT row before the FRST row",
        ),
        (
            "SOF\n" + HEDR + "FRST: 0 +0 1.0 LINE f.py 3 main 10 10\n"
            "LAST: 1 +1 1.0 LINE f.py 3 main 10 0\nNEXT: 2 +1 1.0 LINE f.py 3 main 10 0\nEOF\n",
            "line 5: NEXT row after the LAST row",
        ),
        (
            "SOF\n" + HEDR + "FRST: 0 +0 1.0 LINE f.py 3 main 10 10\nEOF\nmore\n",
            "line 5: text after EOF",
        ),
        ("SOF\nHEDR: Clock Address\nEOF\n", "line 2: unsupported columns"),
        ("SOF\nHDR: Clock Address LiveCnt Type File Line Function RSS dRSS\nEOF\n", "reference"),
    ],
)
def test_bad_pymemtrace_logs(tmp_path: Path, text: str, reason: str) -> None:
    log = _log(tmp_path, text, "bad.log")
    with pytest.raises(MemlensError, match=reason) as err:
        import_log(str(log))
    message = str(err.value)
    assert message.startswith(f"cannot read {log}: ")
    assert "\n" not in message


def test_pymemtrace_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MemlensError, match="no such file"):
        import_log(str(tmp_path / "nope.log"))


_ROWS = [
    "SOF",
    "EOF",
    HEDR.strip(),
    "FRST: 0 +0 1.0 LINE f.py 3 main 100 100",
    "NEXT: 1 +1 1.5 LINE f.py 4 main 200 100",
    "NEXT: 2 +1 1.6 C_CALL <frozen os> 9 join 150 -50",
    "PREV: 2 +1 1.6",
    "PREV: 1 +1 1.5 LINE f.py 4 main 200 100",
    "MSG:  3 +1 1.7 # hello",
    "LAST: 9 +6 2.0 RETURN f.py 5 main 150 0",
    "HDR: Clock Address",
]


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.sampled_from(_ROWS) | st.text(max_size=40), max_size=12),
)
def test_fuzz_pymemtrace_parser_reads_or_fails_in_one_line(
    tmp_path_factory: pytest.TempPathFactory, rows: list[str]
) -> None:
    log = tmp_path_factory.mktemp("log") / "fuzz.log"
    log.write_text("\n".join(rows) + "\n", encoding="utf-8", errors="surrogatepass")
    message = ""
    try:
        run = import_log(str(log), search_dirs=[str(log.parent)])
    except MemlensError as exc:
        message = str(exc)
    if message:
        assert message.startswith(f"cannot read {log}: ")
        assert "\n" not in message
    else:
        assert run.info.mode == "imported"
        assert all(s.alloc_bytes >= 0 for sf in run.files.values() for s in sf.lines.values())


HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (f"NEXT: 1 +1 1.5 LINE f.py 3 main {HUGE} 10", "line 4: RSS out of range"),
        (f"NEXT: 1 +1 1.5 LINE f.py 3 main 10 -{HUGE}", "line 4: dRSS out of range"),
        (f"NEXT: 1 +1 1.5 LINE f.py {HUGE} main 10 10", "line 4: line number out of range"),
        ("NEXT: 1 +1 1.5 LINE f.py 3 main " + "9" * 5000 + " 10", "line 4: number out of range"),
    ],
)
def test_pymemtrace_numbers_out_of_range_are_one_line(
    tmp_path: Path, row: str, reason: str
) -> None:
    text = "SOF\n" + HEDR + "FRST: 0 +0 1.0 LINE f.py 3 main 10 10\n" + row + "\nEOF\n"
    log = _log(tmp_path, text, "big.log")
    with pytest.raises(MemlensError, match=reason) as err:
        import_log(str(log))
    assert str(err.value).startswith(f"cannot read {log}: ")


def test_sums_beyond_64_bits_are_one_line(tmp_path: Path) -> None:
    # Each value is in range; 1100 of them add up to more than a run file holds (a log's
    # events at one line are summed before they reach the run).
    rows = [f"NEXT: {i} +1 1.{i} LINE f.py 3 main {2**53} {2**53}" for i in range(1, 1100)]
    text = "SOF\n" + HEDR + "FRST: 0 +0 1.0 LINE f.py 3 main 10 10\n" + "\n".join(rows)
    log = _log(tmp_path, text + "\nEOF\n", "sums.log")
    with pytest.raises(MemlensError, match="figure out of range"):
        import_log(str(log))
    # Many traces, each in range, whose sum at one line is not.
    traces = [(0, 2**53, (("f.py", 1), (f"g{i}.py", 1)), 2) for i in range(1100)]
    path = tmp_path / "s.pickle"
    tracemalloc.Snapshot(traces, 2).dump(str(path))
    with pytest.raises(MemlensError, match="figures too large to record") as err:
        import_snapshot(str(path))
    assert str(err.value).startswith(f"cannot read {path}: damaged tracemalloc snapshot")


def test_tracemalloc_sizes_out_of_range_are_one_line(tmp_path: Path) -> None:
    for size in (2**70, -(2**70)):
        snapshot = tracemalloc.Snapshot([(0, size, (("f.py", 1),), 1)], 1)
        path = tmp_path / "s.pickle"
        snapshot.dump(str(path))
        with pytest.raises(MemlensError, match="figure out of range") as err:
            import_snapshot(str(path))
        assert str(err.value).startswith(f"cannot read {path}: damaged tracemalloc snapshot")
    snapshot = tracemalloc.Snapshot([(0, 10, (("f.py", 2**70),), 1)], 1)
    snapshot.dump(str(path))
    with pytest.raises(MemlensError, match="line number out of range"):
        import_snapshot(str(path))


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="no FIFOs")
def test_importers_refuse_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    for importer in (import_log, import_snapshot):
        with pytest.raises(MemlensError, match="not a regular file"):
            importer(str(fifo))
