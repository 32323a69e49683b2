"""Native memory: what C libraries allocate themselves (malloc & co., anonymous mmap) is charged
to the Python line that made them do it, without counting Python's own allocations twice."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from memlens import _tracer
from memlens.runfile import reader
from tests.cli.memlens_cmd import memlens

from .conftest import line, load, profile

MB = 1_000_000
MIB = 1024 * 1024


CTYPES = """
import ctypes

keep = []

def work():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    for _ in range(100):
        keep.append(libc.malloc(100_000))  # @malloc
    gone = libc.malloc(5_000_000)  # @freed
    libc.free(gone)
"""


def test_ctypes_malloc_is_charged_to_its_line(tmp_path: Path) -> None:
    ns, path = load(tmp_path, CTYPES)
    run = profile(ns["work"])
    assert _tracer.traces_native()
    kept = line(run, path, "malloc")
    assert 10.0 * MB <= kept.live_bytes <= 10.5 * MB
    assert kept.alloc_count >= 100
    freed = line(run, path, "freed")
    assert 5 * MB <= freed.alloc_bytes < 5 * MB + 64 * 1024
    assert freed.live_bytes < 64 * 1024


REALLOC = """
import ctypes

keep = []

def work():
    libc = ctypes.CDLL(None)
    libc.malloc.restype = libc.realloc.restype = libc.reallocarray.restype = ctypes.c_void_p
    libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.reallocarray.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    block = libc.malloc(1_000_000)  # @small
    keep.append(libc.realloc(block, 4_000_000))  # @grown
    block = libc.malloc(1_000_000)  # @small2
    keep.append(libc.reallocarray(block, 3, 2_000_000))  # @grown2
    keep.append(libc.reallocarray(None, 2**62, 2**62))  # @overflow
"""


def test_c_realloc_moves_the_block_to_the_growing_line(tmp_path: Path) -> None:
    """realloc and reallocarray charge the new block to their line and take the old one
    back from its line; an overflowing reallocarray fails (NULL) and counts nothing."""
    ns, path = load(tmp_path, REALLOC)
    run = profile(ns["work"])
    assert ns["keep"][2] is None
    for small, grown, size in (("small", "grown", 4 * MB), ("small2", "grown2", 6 * MB)):
        assert line(run, path, small).live_bytes < 64 * 1024
        assert size <= line(run, path, grown).live_bytes < size + 64 * 1024
    assert line(run, path, "overflow").alloc_bytes < 64 * 1024


UNNAMED_CALLEE = """
import ctypes
import json

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
kept = [bytearray(1_000) for _ in range(100)]  # @objects
blocks = [libc.malloc(1_000_000) for _ in range(3)]  # @blocks
"""


def test_a_callee_not_yet_named_charges_its_caller(tmp_path: Path) -> None:
    """ctypes calls malloc without the GIL, when a code object never seen before cannot be
    named (before 3.12, a comprehension's own code at its first call): the line that runs it
    is charged, which the stack read finds under it, as it found the levels it re-reads from
    their own frames (one that read the wrong frames charged the module's first lines)."""
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(UNNAMED_CALLEE))
    out = tmp_path / "run.mlrun"
    proc = memlens("run", "--no-report", "-o", str(out), str(script))
    assert proc.returncode == 0, proc.stderr
    run = reader.read(out)
    assert 3 * MB <= line(run, str(script), "blocks").native_live_bytes < 3 * MB + 64 * 1024
    assert (
        sum(figures.native_live_bytes for figures in run.files[str(script)].lines.values())
        < 3 * MB + 64 * 1024
    )


def test_no_native_option(tmp_path: Path) -> None:
    ns, path = load(tmp_path, CTYPES)
    run = profile(ns["work"], native=False)
    assert not _tracer.traces_native()
    assert line(run, path, "malloc").live_bytes < 1 * MB  # only Python's own objects


def test_sqlite_page_cache_on_the_executemany_line(tmp_path: Path) -> None:
    # sqlite3 is imported (its library loaded) while tracing: libraries loaded later are
    # patched when they load.
    ns, path = load(
        tmp_path,
        """
        def work(out):
            import sqlite3
            con = sqlite3.connect(":memory:")
            con.execute("create table t (id integer primary key, data blob)")
            rows = ((i, b"x" * 1000) for i in range(20_000))
            con.executemany("insert into t values (?, ?)", rows)  # @insert
            out.append(con)
        """,
    )
    out: list[Any] = []
    run = profile(lambda: ns["work"](out))
    assert line(run, path, "insert").live_bytes >= 15 * MB


def test_anonymous_mappings_are_tracked_and_released(tmp_path: Path) -> None:
    ns, path = load(
        tmp_path,
        """
        import mmap

        def work(out):
            kept = mmap.mmap(-1, 8 * 1024 * 1024)  # @kept
            kept[:4] = b"abcd"
            out.append(kept)
            gone = mmap.mmap(-1, 4 * 1024 * 1024)  # @gone
            gone.close()
        """,
    )
    out: list[Any] = []
    run = profile(lambda: ns["work"](out))
    kept = line(run, path, "kept")
    assert 8 * MIB <= kept.live_bytes < 8 * MIB + 64 * 1024
    gone = line(run, path, "gone")
    assert 4 * MIB <= gone.alloc_bytes < 4 * MIB + 64 * 1024
    assert gone.live_bytes < 64 * 1024


def test_python_objects_are_not_counted_twice(tmp_path: Path) -> None:
    # Large Python objects come from the RAW domain, whose allocator is libc's malloc: each
    # must be counted once (as Python memory), not again as a native block.
    ns, path = load(
        tmp_path,
        """
        def work(out):
            out.append([bytearray(1_000_000) for _ in range(20)])  # @buffers
            out.append([str(i) * 50 for i in range(20_000)])  # @strings
        """,
    )
    out: list[Any] = []
    with_native = profile(lambda: ns["work"](out), native=True)
    out.clear()
    without = profile(lambda: ns["work"](out), native=False)
    for tag in ("buffers", "strings"):
        a, b = line(with_native, path, tag), line(without, path, tag)
        assert abs(a.alloc_bytes - b.alloc_bytes) <= max(4096, b.alloc_bytes // 100), tag


PROGRAM_WITH_THREADS_AND_FORK = """
import ctypes, os, sys, threading

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]

def churn():
    for _ in range(2000):
        libc.free(libc.malloc(1000))

threads = [threading.Thread(target=churn) for _ in range(4)]
for t in threads:
    t.start()
pid = os.fork()
if pid == 0:
    churn()  # the child: hooks pass through, nothing is recorded, it exits cleanly
    os._exit(7)
for t in threads:
    t.join()
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))

import atexit
atexit.register(churn)  # native allocations while the interpreter shuts down
print("done")
"""


def test_threads_fork_and_shutdown_are_safe(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM_WITH_THREADS_AND_FORK)
    out = tmp_path / "run.mlrun"
    proc = memlens("run", "--no-report", "-o", str(out), str(script))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:2] == ["child 7", "done"]
    assert out.exists()


def test_numpy_and_blas_threads(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    ns, path = load(
        tmp_path,
        """
        import numpy as np

        def work(out):
            a = np.ones((700, 700))
            out.append(a @ a)  # @matmul
        """,
    )
    out: list[Any] = []
    run = profile(lambda: ns["work"](out))
    stats = line(run, path, "matmul")
    assert stats.live_bytes >= 700 * 700 * 8  # the result (numpy's handler)
    assert float(out[0][0, 0]) == 700.0


def test_memlens_run_no_native_option(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(CTYPES) + "\nwork()\n")
    for flag, expect_native in (([], True), (["--no-native"], False)):
        out = tmp_path / f"run{len(flag)}.mlrun"
        proc = memlens("run", "--no-report", "-o", str(out), *flag, str(script))
        assert proc.returncode == 0, proc.stderr

        run = reader.read(out)
        kept = line(run, str(script), "malloc")
        if expect_native:
            assert kept.native_live_bytes >= 10 * MB
            assert kept.live_bytes >= kept.native_live_bytes
        else:
            assert kept.native_live_bytes == 0
            assert kept.live_bytes < 1 * MB
