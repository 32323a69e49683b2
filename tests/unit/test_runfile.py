"""Run files: round trip, the golden v1 file, and every way a file can be bad."""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sqlite3
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlens.errors import RunFileError
from memlens.model import (
    ERRORS,
    GPU_FIGURES,
    GPU_FUNCTION_FIGURES,
    HOP_KINDS,
    NATIVE,
    OUTCOMES,
    ROOT_KINDS,
    CallNode,
    CallTree,
    FunctionStats,
    GpuDevice,
    GpuDeviceLine,
    HeldBy,
    Hop,
    LineStats,
    Moments,
    Run,
    RunInfo,
    SourceFile,
    TestFailure,
    TestStats,
    TimelinePoint,
    replace,
)
from memlens.runfile import reader, schema, writer
from memlens.runfile.schema import FORMAT_VERSION, TREE_PART
from tests.data.formats.make_v2 import golden_v2_run
from tests.data.formats.make_v3 import golden_v3_run
from tests.data.formats.make_v6 import golden_v6_run
from tests.runs import MIB, info, new_run, sample_holders, sample_run

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "formats" / "v1.mlrun"

sizes = st.integers(min_value=0, max_value=2**62)
line_stats = st.builds(
    LineStats,
    alloc_bytes=sizes,
    alloc_count=sizes,
    live_bytes=sizes,
    live_count=sizes,
    peak_bytes=sizes,
    incl_alloc_bytes=sizes,
    incl_live_bytes=sizes,
    incl_peak_bytes=sizes,
    alloc_err=st.floats(min_value=0, max_value=1e12),
    live_err=st.floats(min_value=0, max_value=1e12),
    peak_err=st.floats(min_value=0, max_value=1e12),
    **{f: st.just(0) | sizes for f in GPU_FIGURES},
)
texts = st.text(max_size=200)
gpu_devices = st.builds(
    GpuDevice, st.integers(0, 64), sizes, sizes, sizes, sizes, sizes, st.booleans()
)
device_lines = st.lists(
    st.builds(GpuDeviceLine, st.integers(0, 64), sizes, sizes, sizes, sizes),
    min_size=1,
    max_size=3,
    unique_by=lambda d: d.device,
).map(lambda each: tuple(sorted(each, key=lambda d: d.device)))  # in device order, as read
figure_names = st.sampled_from(["peak_bytes", "alloc_bytes", "leaked_bytes"])
test_stats = st.builds(
    TestStats,
    texts,
    st.sampled_from(["passed", "failed", "error", "skipped", "xfailed", "xpassed"]),
    sizes,
    sizes,
    sizes,
    st.floats(0, 1e6),
    texts,
    st.integers(0, 2**31 - 1),
    texts,
    st.dictionaries(figure_names, sizes).map(lambda d: tuple(d.items())),
    st.lists(
        st.builds(
            TestFailure,
            figure_names,
            sizes,
            sizes,
            st.sampled_from(["limit", "increase"]),
            st.none() | sizes,
        ),
        max_size=3,
    ).map(tuple),
)


@st.composite
def runs(draw: st.DrawFn) -> Run:
    paths = draw(
        st.lists(st.text(min_size=1, max_size=30).map(lambda s: "/" + s), max_size=4, unique=True)
    )
    files = {
        p: SourceFile(
            path=p,
            sha256=draw(st.text("0123456789abcdef", min_size=64, max_size=64)),
            text=draw(st.none() | texts),
            lines=draw(st.dictionaries(st.integers(1, 100_000), line_stats, max_size=8)),
            functions=tuple(
                draw(
                    st.lists(
                        st.builds(
                            FunctionStats,
                            texts,
                            st.integers(1, 10),
                            st.integers(1, 99),
                            sizes,
                            sizes,
                            sizes,
                            sizes,
                            *(st.just(0) | sizes for _ in GPU_FUNCTION_FIGURES),
                        ),
                        max_size=3,
                    )
                )
            ),
            gpu_devices=draw(st.dictionaries(st.integers(1, 100_000), device_lines, max_size=3)),
        )
        for p in paths
    }
    nodes: list[CallNode] = []
    if paths:
        for i in range(draw(st.integers(0, 6))):
            parent = draw(st.integers(-1, i - 1))
            nodes.append(
                CallNode(
                    i,
                    parent,
                    draw(st.sampled_from(paths)),
                    draw(st.integers(1, 500)),
                    draw(texts),
                    *draw(st.tuples(sizes, sizes, sizes, sizes)),
                )
            )
    timeline = tuple(
        draw(st.lists(st.builds(TimelinePoint, st.floats(0, 1e6), sizes, sizes), max_size=5))
    )
    moments = Moments()
    count = draw(st.integers(0, 4)) if paths else 0
    if count:
        t = sorted(draw(st.lists(st.floats(0, 1e6), min_size=count, max_size=count)))
        changes = sorted(
            draw(
                st.lists(
                    st.tuples(
                        st.integers(0, count - 1),
                        st.integers(0, len(paths) - 1),
                        st.integers(1, 500),
                        sizes,
                        sizes,
                    ),
                    max_size=6,
                )
            )
        )
        keys = [
            (p, f.qualname, f.first_line, f.last_line) for p in paths for f in files[p].functions
        ]
        fn_changes = sorted(
            draw(
                st.lists(
                    st.tuples(st.integers(0, count - 1), st.integers(0, len(keys) - 1), sizes),
                    max_size=4,
                )
            )
            if keys
            else []
        )
        moments = Moments(
            t,
            draw(st.lists(sizes, min_size=count, max_size=count)),
            paths,
            dict(
                zip(
                    ("moment", "file", "line", "live_bytes", "incl_live_bytes"),
                    zip(*changes, strict=True),
                    strict=True,
                )
            )
            if changes
            else None,
            keys,
            dict(
                zip(
                    ("moment", "function", "live_bytes"), zip(*fn_changes, strict=True), strict=True
                )
            )
            if fn_changes
            else None,
        )
    run_info = info(
        command=tuple(draw(st.lists(texts, max_size=4))),
        exit_code=draw(st.none() | st.integers(-255, 255)),
        complete=draw(st.booleans()),
        mode=draw(st.sampled_from(["exact", "sampling", "imported"])),
        peak_traced_bytes=draw(sizes),
        peak_rss_bytes=draw(sizes),
        python=draw(texts),
        platform=draw(texts),
        started=draw(texts),
        ended=draw(texts),
        duration_s=draw(st.floats(0, 1e9)),
        pid=draw(st.integers(0, 2**31)),
        sample_interval_bytes=draw(st.none() | st.integers(1, 2**40)),
        cwd=draw(texts),
        memlens_version=draw(texts),
        max_depth=draw(st.integers(0, 10_000)),
        source=draw(st.sampled_from(["memlens", "tracemalloc", "pymemtrace"])),
        seed=draw(st.none() | st.integers(1, 2**64 - 1)),
        # One entry per node id, in the order they ran.
        tests=tuple({t.nodeid: t for t in draw(st.lists(test_stats, max_size=4))}.values()),
        peak_at_s=draw(st.none() | st.floats(0, 1e6)),
        gpu_peak_bytes=draw(st.just(0) | sizes),
        gpus=tuple(draw(st.lists(gpu_devices, max_size=3))),
    )
    return replace(
        new_run(files, nodes, timeline, run_info=run_info, holders=draw(holders_of(paths))),
        moments=moments,
    )


def holders_of(paths: list[str]) -> st.SearchStrategy[tuple[HeldBy, ...]]:
    """What holds lines of ``paths``, in the order a run keeps them (by file, then line)."""
    if not paths:
        return st.just(())
    names = st.text(max_size=40)

    def hops(found: bool) -> st.SearchStrategy[tuple[Hop, ...]]:
        if not found:
            return st.just(())
        where = st.sampled_from(["", *paths])
        root = st.builds(Hop, st.sampled_from(ROOT_KINDS), names, names)
        rest = st.lists(
            st.tuples(st.sampled_from(HOP_KINDS), names, names, where, st.integers(1, 10_000)).map(
                lambda h: Hop(*h[:4], h[4] if h[3] else 0)
            ),
            max_size=5,
        )
        return st.tuples(root, rest).map(lambda t: (t[0], *t[1]))

    one = st.tuples(
        st.sampled_from(paths), st.integers(1, 500), st.integers(0, 5), st.sampled_from(OUTCOMES)
    ).flatmap(lambda t: hops(t[3] == "found").map(lambda h: HeldBy(t[0], t[1], t[2], t[3], h)))
    return st.lists(one, max_size=6).map(
        lambda hs: tuple(sorted(hs, key=lambda h: (paths.index(h.file), h.line)))
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(run=runs())
def test_round_trip(tmp_path: Path, run: Run) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(run, path)
    assert reader.read(path) == run
    assert reader.read_info(path) == run.info


def with_chain_tree(run: Run, count: int) -> Run:
    """``run`` with a call tree of ``count`` nodes, each the caller of the next, in its first
    file, with figures that differ from node to node."""
    path = next(iter(run.files))
    nodes = [
        CallNode(i, i - 1, path, 1 + i % 5, "<module>", 10 * i, i, 5 * i, 7 * i)
        for i in range(count)
    ]
    return replace(run, call_tree=CallTree.from_nodes(nodes))


def test_columns_cut_in_many_parts_read_back_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Columns go in parts of at most TREE_PART values (2^20), each compressed from a slice of
    # the column: with parts of 3 values, every column of this tree spans four.
    monkeypatch.setattr(writer, "TREE_PART", 3)
    run = with_chain_tree(sample_run(), 10)
    out = tmp_path / "parts.mlrun"
    writer.write(run, out)
    con = sqlite3.connect(out)
    try:
        parts = dict(con.execute('SELECT "column", count(*) FROM tree GROUP BY "column"'))
    finally:
        con.close()
    assert len(parts) == 8, parts
    assert set(parts.values()) == {4}, parts  # 10 values: 3 + 3 + 3 + 1
    assert reader.read(out) == run


def test_a_big_trees_parts_compressed_by_two_threads_are_those_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts of 1 MiB and more in all are compressed by two threads at once: the same bytes as
    one thread makes, in the same order, and the run reads back as written."""
    raws = [memoryview(bytes([i]) * 1000 + bytes(range(256)) * 1024) for i in range(7)]
    assert sum(len(r) for r in raws) >= writer.PARALLEL_BYTES
    assert writer._compressed_all(raws) == [writer._compressed(r) for r in raws]
    # A whole run, every table's parts through the two threads (the threshold lowered).
    monkeypatch.setattr(writer, "PARALLEL_BYTES", 0)
    run = with_chain_tree(sample_run(), 50)
    out = tmp_path / "two.mlrun"
    writer.write(run, out)
    assert reader.read(out) == run


def test_a_failure_compressing_a_part_in_either_thread_fails_the_writing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compressed = writer._compressed
    calls = []

    def failing(raw: memoryview) -> bytes:
        calls.append(len(raw))
        if len(calls) % 2 == 0:
            raise MemoryError
        return compressed(raw)

    monkeypatch.setattr(writer, "_compressed", failing)
    with pytest.raises(MemoryError):
        writer._compressed_all([memoryview(bytes(1 << 20)) for _ in range(4)])


#: SHA-256 of the committed golden file: it is never rewritten.
GOLDEN_SHA256 = "40dd7c2b4d090cdb18d745342d4f11f304bc83360d66ef61c10580cb1de1c891"


def test_golden_v1_file() -> None:
    # Written once by tests/data/formats/make_v1.py with format version 1. Never regenerate.
    assert hashlib.sha256(GOLDEN.read_bytes()).hexdigest() == GOLDEN_SHA256
    run = reader.read(GOLDEN)
    assert run == sample_run()
    # The same, spelled out, so that a change to tests/runs.py cannot hide a reader change.
    assert run.info == RunInfo(
        command=("python", "app.py"),
        python="3.11.7",
        platform="Linux-test",
        started="2026-11-22T10:00:00+00:00",
        ended="2026-11-22T10:00:01.500000+00:00",
        duration_s=1.5,
        pid=4242,
        exit_code=0,
        mode="exact",
        sample_interval_bytes=None,
        peak_traced_bytes=48 * MIB,
        peak_rss_bytes=80 * MIB,
        complete=True,
        cwd="/work",
        memlens_version="0.1.0",
        max_depth=128,
        source="memlens",
    )
    assert run.info.seed is None  # written before runs recorded their sampling seed
    assert list(run.files) == ["/work/app.py"]
    sf = run.files["/work/app.py"]
    assert sf.sha256 == "ab" * 32
    assert sf.text == "import x\n\ndef load():\n    return [0] * 10\n\ndata = load()\n"
    assert sf.lines[4] == LineStats(
        40 * MIB, 1200, 30 * MIB, 10, 40 * MIB, 40 * MIB, 30 * MIB, 40 * MIB
    )
    assert sf.lines[6] == LineStats(
        1024, 3, 1024, 3, 1024, 40 * MIB + 1024, 30 * MIB + 1024, 40 * MIB + 1024
    )
    assert sf.functions == (FunctionStats("load", 3, 4, 40 * MIB, 1200, 30 * MIB, 40 * MIB),)
    assert run.call_tree == (
        CallNode(0, -1, "/work/app.py", 6, "<module>", 1024, 3, 1024, 1024),
        CallNode(1, 0, "/work/app.py", 4, "load", 40 * MIB, 1200, 30 * MIB, 40 * MIB),
    )
    assert run.timeline == (TimelinePoint(0.0, 0, 10 * MIB), TimelinePoint(1.5, 48 * MIB, 80 * MIB))
    assert reader.read_info(GOLDEN) == run.info


GOLDEN_V2 = GOLDEN.parent / "v2.mlrun"
GOLDEN_V2_SHA256 = "a3c2a8f5a6fb7afb1888d21643d62b14a35fd2cd46b473cd82e10ab0f734881d"


def test_golden_v2_file() -> None:
    # Written once by tests/data/formats/make_v2.py with format version 2. Never regenerate.

    assert hashlib.sha256(GOLDEN_V2.read_bytes()).hexdigest() == GOLDEN_V2_SHA256
    run = reader.read(GOLDEN_V2)
    assert run == golden_v2_run()
    # Spelled out where version 2 differs from version 1: native figures, the columnar tree.
    db = run.files["/work/db.py"].lines[4]
    assert (db.native_alloc_bytes, db.native_live_bytes, db.native_peak_bytes) == (16 * MIB,) * 3
    assert [(n.id, n.parent, n.file, n.line, n.function, n.alloc_bytes) for n in run.call_tree] == [
        (0, -1, "/work/app.py", 7, "<module>", 0),
        (1, 0, "/work/app.py", 4, "main", 1024),
        (2, 1, "/work/db.py", 4, "load", 24 * MIB),
    ]
    assert reader.read_info(GOLDEN_V2) == run.info


GOLDEN_V3 = GOLDEN.parent / "v3.mlrun"
GOLDEN_V3_SHA256 = "3985f128623207bd543cd0c45b711ac738fd20075bba629aa483779cc8abf1a1"


GOLDEN_V4 = GOLDEN.parent / "v4.mlrun"
GOLDEN_V4_SHA256 = "89cc6813b1eada11456c1d6bbe703db879a23dc34e1409cc67e7940f0e2c4a7a"


def test_golden_v4_file() -> None:
    """Written once by tests/data/formats/make_v4.py with format version 4 (never regenerate):
    version 3's run, its column parts compressed, reads back as that run."""
    assert hashlib.sha256(GOLDEN_V4.read_bytes()).hexdigest() == GOLDEN_V4_SHA256
    assert reader.read(GOLDEN_V4) == golden_v3_run()
    con = sqlite3.connect(f"file:{GOLDEN_V4}?mode=ro&immutable=1", uri=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == ("4",)
    for table in ("tree", "moment_lines", "moment_functions"):
        for (data,) in con.execute(f"SELECT data FROM {table}"):
            assert zlib.decompress(data)
    con.close()


GOLDEN_V5 = GOLDEN.parent / "v5.mlrun"
GOLDEN_V5_SHA256 = "3116cc86b93f3ec7dd7e88cd4a6bd7f35c7a8c7146ab2a21de0d98bc0d2da0f6"


def test_golden_v5_file() -> None:
    """Written once by tests/data/formats/make_v5.py with format version 5 (never regenerate):
    version 3's run, its lines by column in compressed parts, reads back as that run."""
    assert hashlib.sha256(GOLDEN_V5.read_bytes()).hexdigest() == GOLDEN_V5_SHA256
    assert reader.read(GOLDEN_V5) == golden_v3_run()
    con = sqlite3.connect(f"file:{GOLDEN_V5}?mode=ro&immutable=1", uri=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == ("5",)
    columns = {c for (c,) in con.execute("SELECT DISTINCT column FROM line_columns")}
    assert columns == {name for name, _ in schema.LINE_COLUMNS}
    con.close()


GOLDEN_V6 = GOLDEN.parent / "v6.mlrun"
GOLDEN_V6_SHA256 = "b042a56e77f3ac798ea6617931e9ed7d0474d5a0ae5f660e8b2f9ca47743de04"


def test_golden_v6_file() -> None:
    """Written once by tests/data/formats/make_v6.py with format version 6 (never regenerate):
    version 3's run and a second file of three functions, the functions by column in
    compressed parts, reads back as that run."""
    assert hashlib.sha256(GOLDEN_V6.read_bytes()).hexdigest() == GOLDEN_V6_SHA256
    assert reader.read(GOLDEN_V6) == golden_v6_run()
    con = sqlite3.connect(f"file:{GOLDEN_V6}?mode=ro&immutable=1", uri=True)
    assert con.execute("SELECT value FROM meta WHERE key = 'version'").fetchone() == ("6",)
    functions = {c for (c,) in con.execute("SELECT DISTINCT column FROM function_columns")}
    lines = {c for (c,) in con.execute("SELECT DISTINCT column FROM line_columns")}
    con.close()
    # Every column but the figures that are 0 everywhere (no error estimates, no native
    # figures in this run; its GPU figures are stored).
    assert functions == {name for name, _ in (*schema.FUNCTION_COLUMNS, schema.FUNCTION_NAMES)}
    unstored = {*ERRORS, *NATIVE}
    assert lines == {name for name, _ in schema.LINE_COLUMNS} - unstored


def test_golden_v3_file() -> None:
    # Written once by tests/data/formats/make_v3.py with format version 3. Never regenerate.
    assert hashlib.sha256(GOLDEN_V3.read_bytes()).hexdigest() == GOLDEN_V3_SHA256
    run = reader.read(GOLDEN_V3)
    assert run == golden_v3_run()
    # Spelled out where version 3 differs from version 2: GPU figures per line, function and
    # device, the run's GPU peak and devices;
    # what holds the live lines.
    sf = run.files["/work/train.py"]
    assert [sf.lines[n].gpu_live_bytes for n in (4, 5, 8)] == [16 * MIB, 8 * MIB, 0]
    assert sf.lines[8].incl_gpu_peak_bytes == 40 * MIB
    assert sf.lines[4].alloc_bytes == 2048  # host figures as in version 2
    assert sf.functions[0].gpu_peak_bytes == 40 * MIB
    assert sf.gpu_devices[4] == (
        GpuDeviceLine(0, 32 * MIB, 2, 8 * MIB, 24 * MIB),
        GpuDeviceLine(1, 16 * MIB, 1, 8 * MIB, 8 * MIB),
    )
    assert run.info.gpu_peak_bytes == 40 * MIB
    assert [(g.device, g.peak_bytes, g.complete) for g in run.info.gpus] == [
        (0, 32 * MIB, True),
        (1, 8 * MIB, False),
    ]
    assert [(h.file, h.line, h.objects, h.outcome, len(h.hops)) for h in run.holders] == [
        ("/work/train.py", 4, 3, "found", 3),
        ("/work/train.py", 4, 2, "found", 3),
        ("/work/train.py", 5, 0, "unreached", 0),
    ]
    assert run.holders[0].hops == (
        Hop("thread", "loader in step", "frame"),
        Hop("local", "y", "Tensor", "/work/train.py", 4),
        Hop("buffer", "data", "", "/work/train.py", 4),
    )
    assert run.holders[1].hops[0] == Hop("module", "train", "module", "/work/train.py", 1)
    # Version 2 files read with no holders.
    assert reader.read(GOLDEN_V2).holders == ()
    # ... and when the peak was, and the moments.
    assert run.info.peak_at_s == 1.5
    moments = run.moments
    assert list(moments.t) == [1.0, 2.0, 2.5]
    assert list(moments.traced_bytes) == [2560, 2560, 1024]
    assert moments.values_at(1) == {
        "/work/train.py": {4: (2048, 2048), 5: (512, 512), 8: (0, 2560)}
    }
    # (a line that holds nothing then is left out)
    assert moments.values_at(2) == {"/work/train.py": {4: (1024, 1024), 8: (0, 1024)}}
    assert moments.function_values_at(2) == {("/work/train.py", "step", 3, 6): 1024}
    # Older files have no moments, and no peak time.
    assert not reader.read(GOLDEN_V2).moments
    assert reader.read(GOLDEN_V2).info.peak_at_s is None
    assert reader.read_info(GOLDEN_V3) == run.info


def test_runs_without_gpu_figures_keep_their_header(tmp_path: Path) -> None:
    # A run that recorded no GPU memory writes the header it wrote before version 3.
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    con = sqlite3.connect(path)
    (header,) = con.execute("SELECT value FROM meta WHERE key = 'run'").fetchone()
    con.close()
    assert "gpu" not in header
    assert reader.read(path) == sample_run()


def _part(hex_values: str) -> str:
    """A column part holding these bytes, as SQL: compressed, as the writer stores parts."""
    return f"x'{zlib.compress(bytes.fromhex(hex_values)).hex()}'"


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DROP TABLE moments", "corrupt file (no moments table)"),
        ("UPDATE moments SET t = 2.2 WHERE rowid = 1", "moments are not in time order"),
        ("UPDATE moments SET t = 'x'", "moments holds a value of the wrong type"),
        ("DELETE FROM moments WHERE rowid > 1", "a moment change names no moment"),
        (
            "DELETE FROM moment_lines WHERE column = 'line'",
            "corrupt file (moment_lines lacks a column)",
        ),
        (
            f"UPDATE moment_lines SET data = {_part('0100')} WHERE column = 'file'",
            "moment_lines column file is cut short",
        ),
        (
            (
                f"UPDATE moment_lines SET data = {_part('000000000000000000000000000000000000000009000000')}"
                " WHERE column = 'file'"
            ),
            "a moment change names an unknown file",
        ),
        (
            (
                f"UPDATE moment_functions SET data = {_part('0200000000000000')} WHERE column = 'moment'"
            ),
            "moment changes are not in moment order",
        ),
        (
            (
                f"UPDATE moment_functions SET data = {_part('0000000007000000')} WHERE column = 'function'"
            ),
            "a moment change names an unknown function",
        ),
        (
            (f"UPDATE moment_functions SET data = {_part('00000000')} WHERE column = 'function'"),
            "moment_functions columns differ in length",
        ),
    ],
)
def test_corrupt_moments(tmp_path: Path, sql: str, reason: str) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(golden_v3_run(), path)
    _edit(path, sql)
    _bad(path, reason)


def test_moment_changes_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = writer.write(golden_v3_run(), tmp_path / "r.mlrun")
    monkeypatch.setitem(schema.MAX_ROWS, "moment_values", 5)
    _bad(path, "too large to read (the moments hold more than 5 changes)")
    monkeypatch.setitem(schema.MAX_ROWS, "moment_values", 6)
    assert reader.read(path) == golden_v3_run()


def test_write_is_atomic_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    writer.write(sample_run(exit_code=3), path)
    assert reader.read(path).info.exit_code == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.mlrun"]


def test_attached_round_trips_and_is_absent_from_other_headers(tmp_path: Path) -> None:
    """A run of a process memlens attached to says so (what it allocated before is not in the
    figures); the header of any other run is as it was."""
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(attached=True), path)
    assert reader.read(path).info.attached is True
    writer.write(sample_run(), path)
    assert reader.read(path).info.attached is False
    con = sqlite3.connect(path)
    header = json.loads(con.execute("SELECT value FROM meta WHERE key='run'").fetchone()[0])
    con.close()
    assert "attached" not in header


def test_incomplete_runs_read_back_as_incomplete(tmp_path: Path) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(complete=False, exit_code=None), path)
    got = reader.read(path)
    assert got.info.complete is False
    assert got.info.exit_code is None


def _bad(path: Path, reason: str) -> None:
    with pytest.raises(RunFileError) as err:
        reader.read(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"cannot read {path}: ")
    assert reason in message


def test_missing_empty_text_and_directory(tmp_path: Path) -> None:
    _bad(tmp_path / "nope.mlrun", "no such file")
    (tmp_path / "empty.mlrun").write_bytes(b"")
    _bad(tmp_path / "empty.mlrun", "not a memlens run file")
    (tmp_path / "t.mlrun").write_text("hello")
    _bad(tmp_path / "t.mlrun", "not a memlens run file")
    _bad(tmp_path, "is a directory")


def test_foreign_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE people (name TEXT)")
    con.commit()
    con.close()
    _bad(path, "not a memlens run file")


def _edit(path: Path, sql: str, *params: object) -> None:
    con = sqlite3.connect(path)
    con.execute(sql, params)
    con.commit()
    con.close()


def test_newer_version_asks_for_an_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    # A newer writer may also change tables: the version is checked before anything else.
    newer = FORMAT_VERSION + 1
    _edit(path, f"UPDATE meta SET value = '{newer}' WHERE key = 'version'")
    _edit(path, "DROP TABLE line_columns")
    reason = (
        f"format version {newer} is newer than this memlens understands ({FORMAT_VERSION}); "
        "upgrade memlens"
    )
    _bad(path, reason)
    with pytest.raises(RunFileError, match=r"upgrade memlens$"):
        reader.read_info(path)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("UPDATE meta SET value = 'other' WHERE key = 'format'", "not a memlens run file"),
        ("UPDATE meta SET value = '{' WHERE key = 'run'", "bad run header (not JSON)"),
        ("UPDATE meta SET value = '[]' WHERE key = 'run'", "bad run header"),
        ("UPDATE meta SET value = '{\"python\": \"3\"}' WHERE key = 'run'", "run header lacks"),
        (
            "UPDATE files SET text = x'00ff'",
            "corrupt file (files holds a value of the wrong type or size)",
        ),
        ("DROP TABLE meta", "not a memlens run file (no meta table)"),
        ("DELETE FROM meta WHERE key = 'run'", "no run header"),
        ("DELETE FROM meta WHERE key = 'version'", "bad format version"),
        ("UPDATE meta SET value = 'one' WHERE key = 'version'", "bad format version"),
        ("UPDATE meta SET value = '0' WHERE key = 'version'", "bad format version 0"),
        ("UPDATE meta SET value = '[[[[' || '1' || ']]]]' WHERE key = 'run'", "bad run header"),
        ("DROP TABLE files", "corrupt file (no files table)"),
        ("DROP TABLE line_columns", "corrupt file (no line_columns table)"),
        ("DROP TABLE function_columns", "corrupt file (no function_columns table)"),
        ("DROP TABLE tree", "corrupt file (no tree table)"),
        ("DROP TABLE tree_names", "corrupt file (no tree_names table)"),
        ("DROP TABLE timeline", "corrupt file (no timeline table)"),
        (
            "ALTER TABLE timeline RENAME COLUMN rss_bytes TO rss",
            (
                "corrupt file (unexpected schema: table timeline is not as format version "
                f"{FORMAT_VERSION} defines it)"
            ),
        ),
        (
            f"UPDATE tree SET data = {_part('00')} WHERE column = 'parent'",
            "corrupt file (tree column parent is cut short)",
        ),
        ("DELETE FROM tree WHERE column = 'line'", "corrupt file (tree lacks a column)"),
        (
            "UPDATE tree SET part = 1 WHERE column = 'line'",
            "corrupt file (tree holds an unknown or misplaced part)",
        ),
        ("DELETE FROM tree_names", "corrupt file (tree names an unknown function)"),
        ("UPDATE tree SET data = 'text' WHERE column = 'line'", "corrupt file (tree holds a value"),
        (
            "UPDATE timeline SET rss_bytes = 1.5",
            "corrupt file (timeline holds a value of the wrong type or size)",
        ),
    ],
)
def test_damaged_tables(tmp_path: Path, sql: str, reason: str) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    _edit(path, sql)
    _bad(path, reason)


@pytest.mark.parametrize(
    ("version", "sql", "reason"),
    [
        (4, "UPDATE lines SET alloc_bytes = 'many'", "corrupt"),
        (4, "UPDATE lines SET file_id = 77", "corrupt file (lines names unknown file id 77)"),
        (4, "DROP TABLE lines", "corrupt file (no lines table)"),
        (
            4,
            "UPDATE lines SET peak_err = 'x'",
            "corrupt file (lines holds a value of the wrong type or size)",
        ),
        (4, "UPDATE lines SET peak_err = 9e999", "corrupt file (lines holds a number that is not"),
        (5, "UPDATE functions SET file_id = 5", "corrupt file (functions names unknown file id 5)"),
        (
            5,
            "UPDATE functions SET qualname = x'00'",
            "corrupt file (functions holds a value of the wrong type or size)",
        ),
        (5, "DROP TABLE functions", "corrupt file (no functions table)"),
    ],
)
def test_damaged_rows_of_older_versions(
    tmp_path: Path, version: int, sql: str, reason: str
) -> None:
    """Files of versions 1 to 4 (a row per line) and 1 to 5 (a row per function) are still
    read, and checked as before."""
    path = tmp_path / f"v{version}.mlrun"
    path.write_bytes({4: GOLDEN_V4, 5: GOLDEN_V5}[version].read_bytes())
    _edit(path, sql)
    _bad(path, reason)


@pytest.mark.parametrize(
    ("column", "code", "make", "reason"),
    [
        ("file", "i", lambda n: [77] * n, "line_columns names an unknown or misplaced file"),
        ("file", "i", lambda n: [1] + [0] * (n - 1), "line_columns names an unknown or misplaced"),
        ("line", "q", lambda n: list(range(n, 0, -1)), "corrupt file (lines are not in order)"),
        ("alloc_bytes", "q", lambda n: [0] * (n + 1), "line_columns columns differ in length"),
        ("peak_err", "d", lambda n: [float("inf")] * n, "holds a number that is not finite"),
        ("live_err", "d", lambda n: [float("nan")] * n, "holds a number that is not finite"),
        (
            "alloc_bytes",
            "i",
            lambda n: [0] * (2 * n + 1),
            "line_columns column alloc_bytes is cut short",
        ),
    ],
)
def test_damaged_line_columns(
    tmp_path: Path, column: str, code: str, make: Callable[[int], list[float]], reason: str
) -> None:
    run = sample_run()
    n = sum(len(sf.lines) for sf in run.files.values())
    assert n >= 2
    path = writer.write(run, tmp_path / "r.mlrun")
    _put_part(path, "line_columns", column, array(code, make(n)))
    _bad(path, reason)


def _put_part(path: Path, table: str, column: str, values: array[Any]) -> None:
    """Make ``values`` the one part of ``column`` of a table of column parts (added where a
    figure column of zeros was not stored). As a first check fails before the digest is
    looked at, no digest is needed."""
    part = zlib.compress(values.tobytes())
    _edit(path, f"INSERT OR REPLACE INTO {table} VALUES (?, 0, ?)", column, part)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DELETE FROM line_columns WHERE column = 'line'", "corrupt file (line_columns lacks"),
        (
            "UPDATE line_columns SET part = 1 WHERE column = 'line'",
            "corrupt file (line_columns holds an unknown or misplaced part)",
        ),
        (
            "UPDATE line_columns SET column = 'other' WHERE column = 'line'",
            "corrupt file (line_columns holds an unknown or misplaced part)",
        ),
        ("UPDATE line_columns SET data = 'text'", "corrupt file (line_columns holds a value"),
        ("UPDATE line_columns SET data = x'00'", "corrupt file (line_columns column"),
    ],
)
def test_damaged_line_parts(tmp_path: Path, sql: str, reason: str) -> None:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    _edit(path, sql)
    _bad(path, reason)


def _two_files_run() -> Run:
    """sample_run with a second file of three functions (one named in Greek)."""
    run = sample_run()
    sf = run.files["/work/app.py"]
    other = replace(
        sf,
        path="/work/lib.py",
        functions=(
            FunctionStats("a", 1, 2, 10, 1, 5, 7),
            FunctionStats("Klass.μέθοδος", 3, 9, 20, 2, 0, 9),
            FunctionStats("", 10, 12),
        ),
    )
    return replace(run, files={sf.path: sf, other.path: other})


def test_figure_columns_of_zeros_are_not_stored(tmp_path: Path) -> None:
    # One GPU figure on one line of one file, one native figure on another file's line: only
    # those figures' columns (and the keys, the figures every run has) are stored, and the
    # run reads back exactly (the other file's GPU figures, the other figures: 0).
    run = _two_files_run()
    app, lib = run.files["/work/app.py"], run.files["/work/lib.py"]
    app_lines = dict(app.lines)
    first = min(app_lines)
    app_lines[first] = replace(app_lines[first], gpu_alloc_bytes=4096)
    lib_lines = {7: LineStats(alloc_bytes=10, native_alloc_bytes=8), 9: LineStats(alloc_count=1)}
    run = replace(
        run,
        files={
            app.path: replace(app, lines=app_lines),
            lib.path: replace(lib, lines=lib_lines, functions=(FunctionStats("f", 1, 2),)),
        },
    )
    path = writer.write(run, tmp_path / "r.mlrun")
    assert reader.read(path) == run
    con = sqlite3.connect(path)
    lines = {c for (c,) in con.execute("SELECT DISTINCT column FROM line_columns")}
    functions = {c for (c,) in con.execute("SELECT DISTINCT column FROM function_columns")}
    con.close()
    assert {"gpu_alloc_bytes", "native_alloc_bytes", "file", "line"} <= lines
    assert not lines & {"gpu_live_bytes", "native_peak_bytes", *ERRORS}
    assert "gpu_alloc_bytes" not in functions
    assert {"file", "name_length", "names"} <= functions


def test_functions_by_column_read_back_in_their_files(tmp_path: Path) -> None:
    run = _two_files_run()
    path = writer.write(run, tmp_path / "r.mlrun")
    assert reader.read(path) == run
    con = sqlite3.connect(path)
    names = con.execute("SELECT data FROM function_columns WHERE column = 'names'").fetchone()
    con.close()
    assert zlib.decompress(names[0]).decode() == "loadaKlass.μέθοδος"


@pytest.mark.parametrize(
    ("column", "code", "make", "reason"),
    [
        ("file", "i", lambda n: [7] * n, "function_columns names an unknown or misplaced file"),
        ("file", "i", lambda n: [1] + [0] * (n - 1), "names an unknown or misplaced file"),
        ("file", "i", lambda n: [-1] * n, "names an unknown or misplaced file"),
        ("peak_bytes", "q", lambda n: [0] * (n + 1), "function_columns columns differ in length"),
        ("name_length", "i", lambda n: [1] * n, "function_columns names do not fill names"),
        ("name_length", "i", lambda n: [-1] + [9] * (n - 1), "holds a negative name length"),
        ("name_length", "i", lambda n: [5000] * n, "holds a name that is too long"),
        ("names", "B", lambda n: [0xFF] * 16, "function_columns holds a name that is not UTF-8"),
        ("first_line", "i", lambda n: [0] * (2 * n + 1), "column first_line is cut short"),
    ],
)
def test_damaged_function_columns(
    tmp_path: Path, column: str, code: str, make: Callable[[int], list[int]], reason: str
) -> None:
    path = writer.write(_two_files_run(), tmp_path / "r.mlrun")
    _put_part(path, "function_columns", column, array(code, make(4)))  # (its 4 functions)
    _bad(path, reason)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DELETE FROM function_columns WHERE column = 'names'", "(function_columns lacks"),
        (
            "UPDATE function_columns SET part = 1 WHERE column = 'file'",
            "corrupt file (function_columns holds an unknown or misplaced part)",
        ),
        ("UPDATE function_columns SET data = 'text'", "(function_columns holds a value"),
    ],
)
def test_damaged_function_parts(tmp_path: Path, sql: str, reason: str) -> None:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    _edit(path, sql)
    _bad(path, reason)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (
            "UPDATE holder_hops SET kind = 'evil' WHERE hop = 1",
            "corrupt file (holder_hops holds an unknown kind 'evil')",
        ),
        (
            "UPDATE holder_hops SET kind = 'attribute' WHERE hop = 0",
            "corrupt file (holder_hops holds an unknown kind 'attribute')",
        ),
        (
            "UPDATE holder_hops SET hop = 7 WHERE hop = 2",
            "corrupt file (holder_hops numbers a path's hops out of order)",
        ),
        (
            "UPDATE holders SET chain = 3 WHERE line = 6",
            "corrupt file (holders numbers a line's paths out of order)",
        ),
        (
            "UPDATE holders SET outcome = 'maybe'",
            "corrupt file (holders holds an unknown outcome or a bad count)",
        ),
        (
            "UPDATE holders SET objects = -1",
            "corrupt file (holders holds an unknown outcome or a bad count)",
        ),
        ("UPDATE holders SET file_id = 99", "corrupt file (holders names unknown file id 99)"),
        (
            "UPDATE holder_hops SET at_file = 99 WHERE hop = 1",
            "corrupt file (holder_hops names unknown file id 99)",
        ),
        (
            "UPDATE holder_hops SET chain = 1",
            "corrupt file (holder_hops names a path holders does not hold)",
        ),
        (
            "DELETE FROM holder_hops",
            "corrupt file (holders holds a path without hops, or hops without a path)",
        ),
        (
            "UPDATE holder_hops SET name = hex(zeroblob(5000)) WHERE hop = 1",
            "corrupt file (holder_hops holds a value of the wrong type or size)",
        ),
        (
            "UPDATE holder_hops SET at_line = 'x' WHERE hop = 1",
            "corrupt file (holder_hops holds a value of the wrong type or size)",
        ),
    ],
)
def test_damaged_holders(tmp_path: Path, sql: str, reason: str) -> None:
    # What holds a line comes from a file like everything else: every path is checked.
    path = tmp_path / "r.mlrun"
    writer.write(replace(sample_run(), holders=sample_holders()), path)
    _edit(path, sql)
    _bad(path, reason)


@pytest.mark.parametrize(
    ("key", "value", "what"),
    [
        ("peak_traced_bytes", "lots", "str"),
        ("seed", 1.5, "float"),
        ("attached", 1, "int"),
        # JSON integers have no limit; the run file's figures are 64-bit.
        ("peak_traced_bytes", 10**400, "out of range"),
        ("pid", -(2**63) - 1, "out of range"),
        ("max_depth", 2**63, "out of range"),
        ("seed", 2**64, "out of range"),  # a seed is 64 bits without a sign
        ("seed", -1, "out of range"),
    ],
)
def test_header_with_wrong_types(tmp_path: Path, key: str, value: object, what: str) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    con = sqlite3.connect(path)
    header = json.loads(con.execute("SELECT value FROM meta WHERE key='run'").fetchone()[0])
    header[key] = value
    con.execute("UPDATE meta SET value = ? WHERE key = 'run'", (json.dumps(header),))
    con.commit()
    con.close()
    _bad(path, f"bad run header: {key} is {what}")


def test_every_seed_reads_back(tmp_path: Path) -> None:
    # memlens run --seed takes 1 to 2**64 - 1 (the native tracer's seed has no sign).
    for seed in (1, 2**63 - 1, 2**63, 2**64 - 1):
        path = writer.write(sample_run(mode="sampling", seed=seed), tmp_path / f"{seed}.mlrun")
        assert reader.read(path).info.seed == seed


def _read_or_error(path: Path) -> str:
    """Either the file reads, or it fails with a RunFileError: its message ('' on success)."""
    try:
        reader.read(path)
    except RunFileError as exc:
        return str(exc)
    return ""


def test_truncated_files(tmp_path: Path) -> None:
    data = GOLDEN.read_bytes()
    cuts = {1, 15, 16, 17, 99, 100, 101, len(data) - 1}
    cuts |= set(range(256, len(data), 256))  # every page boundary and half page
    for cut in sorted(cuts):
        path = tmp_path / f"cut{cut}.mlrun"
        path.write_bytes(data[:cut])
        message = _read_or_error(path)
        assert message.startswith(f"cannot read {path}: "), cut
        assert "\n" not in message
        if cut >= 100:
            assert message.endswith(": truncated file"), message
        # The header reader fails the same way: listings never show a cut file as a run.
        with pytest.raises(RunFileError):
            reader.read_info(path)


def test_trailing_data_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "long.mlrun"
    path.write_bytes(GOLDEN.read_bytes() + b"\0" * 4096)
    _bad(path, "corrupt file (trailing data)")


def test_every_flipped_byte_reads_or_fails_in_one_line(tmp_path: Path) -> None:
    data = GOLDEN.read_bytes()
    path = tmp_path / "flip.mlrun"
    failures = 0
    for offset in range(0, len(data), 61):
        blob = bytearray(data)
        blob[offset] ^= 0x5A
        path.write_bytes(bytes(blob))
        message = _read_or_error(path)
        assert "\n" not in message
        if message:
            assert message.startswith(f"cannot read {path}: ")
            failures += 1
    assert failures > 0  # damage is noticed (flips in unused space may pass unnoticed)


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    fifo = tmp_path / "pipe.mlrun"
    os.mkfifo(fifo)
    _bad(fifo, "not a regular file")


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("file", 255, "corrupt file (tree names an unknown file)"),
        ("file", -1, "corrupt file (tree names an unknown file)"),
        ("function", 99, "corrupt file (tree names an unknown function)"),
        ("parent", 5, "corrupt file (a tree node comes before its parent)"),
        ("parent", -2, "corrupt file (a tree node comes before its parent)"),
    ],
)
def test_damaged_call_tree(tmp_path: Path, column: str, value: int, reason: str) -> None:
    # The first node's value in one column of the call tree, replaced (before the digest is
    # checked: the structural checks name the damage).
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    con = sqlite3.connect(path)
    (data,) = con.execute(
        "SELECT data FROM tree WHERE column = ? AND part = 0", (column,)
    ).fetchone()
    data = zlib.compress(value.to_bytes(4, "little", signed=True) + zlib.decompress(data)[4:])
    con.execute("UPDATE tree SET data = ? WHERE column = ? AND part = 0", (data, column))
    con.commit()
    con.close()
    _bad(path, reason)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"not zlib", "corrupt file (tree column parent is damaged)"),
        (zlib.compress(b"\0\0\0\0")[:-3], "corrupt file (tree column parent is damaged)"),
        (zlib.compress(b"\0\0\0\0") + b"more", "corrupt file (tree column parent is damaged)"),
        # A part that would inflate beyond the most values a part holds: refused as it inflates.
        (
            zlib.compress(bytes(4 * TREE_PART + 4), 9),
            "corrupt file (tree column parent is damaged)",
        ),
    ],
)
def test_damaged_compressed_parts(tmp_path: Path, data: bytes, reason: str) -> None:
    """Column parts are compressed (format version 4): one that does not inflate, is cut
    short, has bytes after its end, or inflates beyond a part's size is refused in one line."""
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    _edit(path, "UPDATE tree SET data = ? WHERE column = 'parent' AND part = 0", data)
    _bad(path, reason)


def test_call_trees_are_stored_compressed(tmp_path: Path) -> None:
    """A call tree's columns are compressed: 200,000 nodes of a few distinct values take a
    small part of their 7.2 MB of raw columns, and read back whole."""
    n = 200_000
    base = sample_run()
    path_key = next(iter(base.files))
    nodes = tuple(
        CallNode(i, i - 1, path_key, 4, "load", alloc_bytes=64, alloc_count=1) for i in range(n)
    )
    run = replace(base, call_tree=nodes)
    path = tmp_path / "r.mlrun"
    writer.write(run, path)
    assert path.stat().st_size < 7_200_000 / 10
    back = reader.read(path)
    assert back.call_tree == run.call_tree
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA page_size").fetchone() == (4096,)  # a large run: SQLite's own
    con.close()


def test_short_runs_make_small_files(tmp_path: Path) -> None:
    """A short run's file is not mostly empty pages (each table takes at least one): the
    golden run of version 3, with moments, GPU figures and holders, fits in 24 KiB (60 KiB as
    version 3 wrote it)."""
    path = writer.write(golden_v3_run(), tmp_path / "r.mlrun")
    assert path.stat().st_size <= 24 * 1024
    assert reader.read(path) == golden_v3_run()


def test_version_1_trees_are_put_in_order_and_loops_refused(tmp_path: Path) -> None:
    # Version 1 stored node ids freely: a tree listed child first reads back in order, ids
    # renumbered; nodes that are each other's parents are no tree.
    path = tmp_path / "v1.mlrun"
    path.write_bytes(GOLDEN.read_bytes())
    _edit(path, "DELETE FROM meta WHERE key = 'content_sha256'")
    _edit(
        path,
        "UPDATE nodes SET id = id + 10, parent = CASE parent WHEN -1 THEN -1 ELSE parent + 10 END",
    )
    _edit(path, "UPDATE nodes SET id = 5 WHERE id = 11")
    _edit(path, "UPDATE nodes SET parent = 10 WHERE id = 5")
    tree = reader.read(path).call_tree
    assert [(n.id, n.parent, n.line) for n in tree] == [(0, -1, 6), (1, 0, 4)]
    _edit(path, "UPDATE nodes SET parent = 5 WHERE id = 10")
    _bad(path, "corrupt file (the call tree has a loop)")


def test_read_info_reads_the_header_and_checks_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    assert reader.read_info(path) == sample_run().info
    _edit(path, "DROP TABLE tree")
    # A listing does not read the rows, but it does not call a file fine that read() refuses.
    with pytest.raises(RunFileError, match=r"corrupt file \(no tree table\)$"):
        reader.read_info(path)
    _bad(path, "no tree table")


def test_writer_refuses_inconsistent_runs(tmp_path: Path) -> None:
    run = sample_run()
    sf = run.files["/work/app.py"]
    with pytest.raises(ValueError, match="differs from its path"):
        writer.write(replace(run, files={"/elsewhere.py": sf}), tmp_path / "x.mlrun")
    with pytest.raises(ValueError, match="names a file not in the run"):
        writer.write(replace(run, files={}), tmp_path / "y.mlrun")
    assert list(tmp_path.iterdir()) == []  # no temporary left behind


@pytest.mark.parametrize(
    ("ids", "parents", "files", "functions"),
    [
        (range(3), [-1, 2, 0], [0, 0, 0], [0, 0, 0]),  # a node before its parent
        (range(3), [-1, 0, 2], [0, 0, 0], [0, 0, 0]),  # its own parent
        (range(3), [-1, -2, 0], [0, 0, 0], [0, 0, 0]),  # a parent that is no node
        ([0, 2, 1], [-1, 0, 0], [0, 0, 0], [0, 0, 0]),  # ids that are not positions
        (range(3), [-1, 0, 0], [0, 1, 0], [0, 0, 0]),  # a file the table does not have
        (range(3), [-1, 0, 0], [0, -1, 0], [0, 0, 0]),
        (range(3), [-1, 0, 0], [0, 0, 0], [0, 0, 1]),  # a function the table does not have
    ],
)
def test_writer_refuses_a_call_tree_that_is_not_canonical(
    tmp_path: Path, ids: Any, parents: list[int], files: list[int], functions: list[int]
) -> None:
    run = sample_run()
    path = next(iter(run.files))
    ones = [1, 1, 1]
    columns = {"id": ids, "parent": parents, "file": files, "line": [1, 2, 3]}
    columns |= {"function": functions, "alloc_bytes": ones, "alloc_count": ones}
    columns |= {"live_bytes": ones, "peak_bytes": ones}
    tree = CallTree([path], ["<module>"], columns)
    assert not tree.is_canonical()
    with pytest.raises(ValueError, match="call tree is not canonical"):
        writer.write(replace(run, call_tree=tree), tmp_path / "x.mlrun")
    assert list(tmp_path.iterdir()) == []
    # The same columns in canonical form are written, and read back as they were.
    canonical = {"id": range(3), "parent": [-1, 0, 0], "file": [0, 0, 0], "function": [0, 0, 0]}
    fine = CallTree([path], ["<module>"], columns | canonical)
    assert fine.is_canonical()
    writer.write(replace(run, call_tree=fine), tmp_path / "y.mlrun")
    assert reader.read(tmp_path / "y.mlrun").call_tree == fine


def test_written_file_is_sqlite_with_the_magic_first(tmp_path: Path) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    assert path.read_bytes()[:16] == b"SQLite format 3\x00"
    con = sqlite3.connect(path)
    rows = dict(con.execute("SELECT key, value FROM meta").fetchall())
    con.close()
    assert rows["format"] == "memlens-run"
    assert rows["version"] == str(FORMAT_VERSION)
    assert json.loads(rows["run"])["command"] == ["python", "app.py"]


@settings(max_examples=100, deadline=None)
@given(cut=st.integers(0, 40_000), data=st.binary(max_size=64))
def test_fuzz_truncated_and_extended_golden_file(
    tmp_path_factory: pytest.TempPathFactory, cut: int, data: bytes
) -> None:
    golden = GOLDEN.read_bytes()
    path = tmp_path_factory.mktemp("cut") / "c.mlrun"
    path.write_bytes(golden[: cut % len(golden)] + data)
    message = _read_or_error(path)
    assert message.startswith(f"cannot read {path}: ")
    assert "\n" not in message


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=2048), offset=st.integers(0, 40_000), flip=st.integers(1, 255))
def test_fuzz_reader_never_raises_anything_else(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, offset: int, flip: int
) -> None:
    tmp = tmp_path_factory.mktemp("fuzz")
    # Arbitrary bytes, arbitrary bytes behind a SQLite header, and a flipped byte in a real file.
    golden = bytearray(GOLDEN.read_bytes())
    golden[offset % len(golden)] ^= flip
    for i, blob in enumerate((data, b"SQLite format 3\x00" + data, bytes(golden))):
        path = tmp / f"f{i}.mlrun"
        path.write_bytes(blob)
        assert "\n" not in _read_or_error(path)


def test_replace_keeps_equality_semantics() -> None:
    run = sample_run()
    assert replace(run, timeline=()) != run


def test_deeply_nested_header_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    _edit(path, "UPDATE meta SET value = ? WHERE key = 'run'", "[" * 200_000 + "]" * 200_000)
    _bad(path, "corrupt file (nesting too deep)")


def test_written_file_mode_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        path = writer.write(sample_run(), tmp_path / "r.mlrun")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o640


def test_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    before = path.read_bytes()

    def disk_full(run: Run, filename: str, seal: object = None) -> None:
        Path(filename).write_bytes(b"SQLite format 3\x00partial")
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(writer, "_write_db", disk_full)
    with pytest.raises(OSError, match="database or disk is full"):
        writer.write(sample_run(exit_code=5), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["r.mlrun"]


def test_damaged_sqlite_header(tmp_path: Path) -> None:
    data = bytearray(GOLDEN.read_bytes())
    data[92:96] = b"\xff\xff\xff\xff"  # "version-valid-for" no longer matches: size unknown
    path = tmp_path / "h.mlrun"
    path.write_bytes(bytes(data))
    _bad(path, "corrupt file (bad SQLite header)")
    path.write_bytes(GOLDEN.read_bytes()[:60])
    _bad(path, "truncated file")


def test_a_negative_zero_error_reads_back(tmp_path: Path) -> None:
    """SQLite keeps a REAL that is a whole number as an integer, so -0.0 reads back as 0.0:
    written as it is, the digest of the values written would not be the one read back."""
    base = sample_run()
    sf = base.files["/work/app.py"]
    lines = dict(sf.lines)
    lines[4] = replace(lines[4], alloc_err=-0.0, live_err=-0.0)
    run = new_run([replace(sf, lines=lines)])
    path = tmp_path / "r.mlrun"
    writer.write(run, path)
    back = reader.read(path).files["/work/app.py"].lines[4]
    assert (back.alloc_err, back.live_err) == (0.0, 0.0)
    assert str(LineStats.from_sums([0] * 5, [0] * 5, (-0.0, 0.0, 0.0)).alloc_err) == "0.0"


def test_the_collector_is_paused_while_a_run_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (Reading makes objects that form no cycle: the collector's passes over them were a
    # tenth of a big diff.) It is on again afterwards, and stays off if the caller had it off.
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    seen: list[bool] = []
    read_db = reader._read_db

    def spy(*args: Any) -> Run:
        seen.append(gc.isenabled())
        return read_db(*args)

    monkeypatch.setattr(reader, "_read_db", spy)
    assert gc.isenabled()
    assert reader.read(path) == sample_run()
    assert seen == [False]
    assert gc.isenabled()
    gc.disable()
    try:
        reader.read(path)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(RunFileError):
        reader.read(tmp_path / "missing.mlrun")
    assert gc.isenabled()
