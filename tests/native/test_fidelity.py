"""Profiling changes nothing, and nothing is lost at scale: object lifetimes, code objects that
die and whose addresses are reused, stacks of any depth, threads, and the tracer's own ways of
keeping stack reads short (frame-exit monitoring on 3.12+) giving the same figures."""

from __future__ import annotations

import argparse
import asyncio.base_events
import email.message
import gc
import json.decoder
import os
import sys
import textwrap
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest

from memlens import _tracer

from .conftest import PYMALLOC_DEBUG, load, passes_under_allocator, profile, pymalloc_in_use, tagged

MIB = 1024 * 1024


def test_code_objects_keep_their_reference_counts(tmp_path: Path) -> None:
    ns, _ = load(tmp_path, "def f():\n    return [0] * 1000\n")
    code = ns["f"].__code__
    before = sys.getrefcount(code)
    counts: list[int] = []

    def work() -> None:
        for _ in range(100):
            ns["f"]()
        counts.append(sys.getrefcount(code))

    profile(work)
    assert counts == [before]
    assert sys.getrefcount(code) == before


def test_exec_heavy_code_is_freed_while_tracing_and_still_charged(tmp_path: Path) -> None:
    # Each round compiles a fresh code object that allocates on its own line of one file, runs
    # it and drops it: the code objects die while tracing (their addresses are reused by the
    # next ones), and every line must still get exactly its own bytes.
    path = tmp_path / "generated.py"
    rounds = 200
    path.write_text("".join(f"x = bytearray({(i + 1) * 1000})\n" for i in range(rounds)))
    dead: list[weakref.ref[Any]] = []
    alive_at_end: list[int] = []

    def work() -> None:
        for i in range(rounds):
            src = "\n" * i + f"x = bytearray({(i + 1) * 1000})\n"
            code = compile(src, str(path), "exec")
            dead.append(weakref.ref(code))
            exec(code, {})  # noqa: S102 - generated test source
            del code
        gc.collect()
        alive_at_end.append(sum(1 for r in dead if r() is not None))

    run = profile(work)
    assert alive_at_end == [0], "code objects were kept alive by the tracer"
    lines = run.files[str(path)].lines
    for i in range(rounds):
        stats = lines[i + 1]
        assert (i + 1) * 1000 <= stats.alloc_bytes < (i + 1) * 1000 + 200, (i + 1, stats)
        assert stats.live_bytes == 0


def test_an_allocation_400_frames_deep_reaches_every_caller(tmp_path: Path) -> None:
    ns, path = load(
        tmp_path,
        """
        import sys
        sys.setrecursionlimit(5000)

        def deep(n):
            if n == 0:
                return bytearray(3 * 1024 * 1024)  # @leaf
            return deep(n - 1)  # @call

        def top():
            return deep(400)  # @top
        """,
    )
    kept: list[Any] = []
    run = profile(lambda: kept.append(ns["top"]()))
    lines = run.files[path].lines
    leaf = lines[tagged(path, "leaf")]
    assert 3 * MIB <= leaf.alloc_bytes < 3 * MIB + 4096
    for tag in ("call", "top"):
        incl = lines[tagged(path, tag)].incl_alloc_bytes
        # (3.10 allocates a frame object per call: 400 of them under these lines too)
        assert 3 * MIB <= incl < 3 * MIB + 400 * 1024, (tag, incl)
    assert run.info.max_depth == 0  # no frame cap


def test_numpy_arrays_made_in_threads_are_traced(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    ns, path = load(
        tmp_path,
        """
        import numpy as np

        def make(out):
            out.append(np.ones(2 * 1024 * 1024))  # @array
        """,
    )
    out: list[Any] = []

    def work() -> None:
        threads = [threading.Thread(target=ns["make"], args=(out,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    run = profile(work)
    stats = run.files[path].lines[tagged(path, "array")]
    assert 3 * 16 * MIB <= stats.live_bytes < 3 * 16 * MIB + 64 * 1024


def test_line_tables_resolve_as_co_lines_does() -> None:
    # Dead code objects are resolved from copies of their line tables: the decoder must agree
    # with the interpreter's own co_lines() for every instruction of many real code objects
    # (line 0, a module's first instruction on 3.11+, is no line: the code's first line).

    def all_codes(code: Any) -> Any:
        yield code
        for c in code.co_consts:
            if hasattr(c, "co_code"):
                yield from all_codes(c)

    checked = 0
    for module in (argparse, asyncio.base_events, email.message, json.decoder, textwrap):
        source = Path(module.__file__ or "").read_text()
        for code in all_codes(compile(source, module.__file__ or "", "exec")):
            starts: list[tuple[int, int]] = [
                (start, line)
                for start, _end, line in code.co_lines()
                if line  # (not 0, None)
            ]
            for offset in range(len(code.co_code) // 2):
                expected = code.co_firstlineno
                for start, line in starts:
                    if start <= offset * 2:
                        expected = line
                assert _tracer._line_of(code, offset) == expected, (code, offset)
                checked += 1
    assert checked > 10_000


STACK_PROGRAM = """
import sys

def leaf(n):
    return bytearray(1000 + n % 5)  # @leaf

def raiser(n):
    for i in range(40):
        leaf(i)  # @raiser_loop
    raise ValueError(n)

def gen(n):
    for i in range(n):
        yield bytearray(2000 + i)  # @gen

def worker(n):
    out = [bytearray(3000)]  # @worker_start
    for i in range(n):
        out.append(leaf(i))  # @worker_leaf
        if i % 7 == 0:
            try:
                raiser(i)  # @worker_raiser
            except ValueError:
                out.append(leaf(-i))  # @worker_after
        out.extend(gen(3))  # @worker_gen
    return out

def nest(depth, n):
    if depth == 0:
        return worker(n)  # @nest_worker
    return nest(depth - 1, n)  # @nest_nest

def main():
    total = 0
    for rnd in range(6):
        total += len(nest(40 + rnd % 3, 60))  # @main_nest
        total += len(worker(20))  # @main_worker
    return total
"""


@pytest.mark.skipif(sys.version_info < (3, 12), reason="frame-exit monitoring is 3.12+")
def test_watching_frame_exits_gives_the_same_figures(tmp_path: Path) -> None:
    # Deep stacks, generators, exceptions unwinding through long-lived frames and calls at the
    # same depth afterwards (where a stale cache would reuse frame addresses): every line gets
    # the same figures whether the tracer re-reads whole stacks or only the frames above the
    # trusted ones, and the trusted path is really used. (Small objects may differ by a few:
    # CPython's free lists serve some allocations without the allocator, and the tracer's own
    # calls into the interpreter change which.)
    ns, path = load(tmp_path, STACK_PROGRAM)
    watched = profile(ns["main"], watch_exits=True)
    assert _tracer.watches_exits()
    plain = profile(ns["main"], watch_exits=False)
    a, b = watched.files[path].lines, plain.files[path].lines
    checked = 0
    for tag in (
        "leaf", "raiser_loop", "gen", "worker_start", "worker_leaf", "worker_raiser",
        "worker_after", "worker_gen", "nest_worker", "nest_nest", "main_nest", "main_worker",
    ):  # fmt: skip
        x, y = a[tagged(path, tag)], b[tagged(path, tag)]
        for name in ("alloc_bytes", "incl_alloc_bytes", "incl_peak_bytes"):
            mine, theirs = getattr(x, name), getattr(y, name)
            assert abs(mine - theirs) <= max(1024, theirs // 200), (tag, name, mine, theirs)
        assert x.incl_alloc_bytes > 10_000, tag
        checked += 1
    assert checked == 12


DESCENT_PROGRAM = """
def walk(level, path):
    if level == 0:
        return bytearray(40 + path % 3)  # @leaf
    if path & 1:
        return [walk(level - 1, path >> 1)]  # @odd
    return (walk(level - 1, path >> 1),)  # @even

def nest(depth, fn):
    if depth == 0:
        return fn()  # @bottom
    return nest(depth - 1, fn)  # @nest

def descend():
    return [walk(12, p) for p in range(2**12)]  # @descend

def churn():
    return [bytearray(100) for _ in range(20_000)]  # @churn

def main():
    return nest(30, descend), nest(30, churn)  # @main
"""


@pytest.mark.skipif(sys.version_info < (3, 12), reason="frame-exit monitoring is 3.12+")
def test_a_recursive_descent_stops_being_watched_with_the_same_figures(tmp_path: Path) -> None:
    # `walk`'s frames come and go with an allocation or two each: once watched (its top frames
    # stay in place), its exits cost more than trusting its levels saves, and the tracer stops
    # watching it; `nest`'s 30 frames stay watched, so the churn below them is not re-read on
    # every allocation. Every line's figures are those of a run that never watched an exit.
    ns, path = load(tmp_path, DESCENT_PROGRAM)

    def traced(fn: Any) -> dict[str, Any]:
        gc.collect()
        _tracer.start("exact", 0, 0, 10.0, True, True)
        try:
            fn()
        finally:
            _tracer.stop()
        info = _tracer.snapshot().info
        _tracer.reset()
        return info

    both = traced(ns["main"])
    descent = traced(lambda: ns["nest"](30, ns["descend"]))
    assert both["exit_watches_dropped"] >= 1, both
    assert descent["exit_watches_dropped"] >= 1, descent
    # The churn's 40,000 allocations after the drop read the stack a few times only: `nest`'s
    # levels are trusted again (were every watch dropped, each would read 30 frames and more).
    assert both["stack_reads"] - descent["stack_reads"] < 2_000, (both, descent)
    watched = profile(ns["main"], watch_exits=True)
    plain = profile(ns["main"], watch_exits=False)
    a, b = watched.files[path].lines, plain.files[path].lines
    for tag in ("leaf", "odd", "even", "bottom", "nest", "descend", "churn", "main"):
        x, y = a[tagged(path, tag)], b[tagged(path, tag)]
        for name in ("alloc_bytes", "incl_alloc_bytes", "live_bytes", "incl_peak_bytes"):
            mine, theirs = getattr(x, name), getattr(y, name)
            assert abs(mine - theirs) <= max(1024, theirs // 200), (tag, name, mine, theirs)
    # (Each leaf keeps a bytearray: its object and a buffer of 41 to 43 bytes.)
    assert a[tagged(path, "leaf")].live_bytes >= 2**12 * (40 + 40)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="frame-exit monitoring is 3.12+")
def test_a_frame_left_by_an_exception_is_not_trusted_afterwards(tmp_path: Path) -> None:
    # `inner` stays in place over many allocations (its exits get watched), then leaves by an
    # exception; `outer` goes on and allocates on another line. Were the exception's exit
    # missed, `outer`'s allocation would be charged to the line that called `inner`.
    ns, path = load(
        tmp_path,
        """
        def inner():
            for i in range(200):
                bytearray(10)  # @inner
            raise ValueError

        def outer():
            for _ in range(3):
                try:
                    inner()  # @call
                except ValueError:
                    pass
                keep.append(bytearray(500_000))  # @after

        keep = []
        """,
    )
    run = profile(ns["outer"], watch_exits=True)
    lines = run.files[path].lines
    assert 3 * 500_000 <= lines[tagged(path, "after")].alloc_bytes < 3 * 500_000 + 4096
    assert lines[tagged(path, "call")].alloc_bytes < 10_000  # the exceptions' tracebacks


def test_other_allocators_use_the_address_table() -> None:
    run = profile(lambda: bytearray(1000))
    assert run.info.mode == "exact"
    expected = "exact-pymalloc" if pymalloc_in_use() else "exact"
    assert _tracer.hook_kind() == expected


@pytest.mark.skipif("PYTHONMALLOC" in os.environ, reason="already under another allocator")
@pytest.mark.parametrize("allocator", ["malloc", PYMALLOC_DEBUG])
def test_exact_figures_hold_with_other_allocators(allocator: str) -> None:
    # Without plain pymalloc every block is in the address table: the exact-mode statements
    # must hold there too. The exact-mode test files again, in a process using `allocator`.
    passes_under_allocator(allocator, Path(__file__).parent / "test_exact.py", __file__)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")
def test_the_program_may_claim_any_monitoring_tool_id(tmp_path: Path) -> None:
    # memlens holds a sys.monitoring tool id (frame exits); the program sees every id free and
    # claims them all, memlens's first: memlens moves to another id, then gives up watching
    # (reading whole stacks), and every line keeps the figures of a run that never watched.
    ns, path = load(tmp_path, STACK_PROGRAM)
    monitoring = sys.monitoring
    seen: dict[str, Any] = {}

    def claims_every_id() -> int:
        total: int = ns["main"]()
        held = _tracer.monitoring_tool()
        seen["free"] = [monitoring.get_tool(i) for i in range(6)]
        monitoring.use_tool_id(held, "mine")
        seen["moved"] = _tracer.monitoring_tool()
        total += ns["main"]()
        for i in range(6):
            if monitoring.get_tool(i) is None:
                monitoring.use_tool_id(i, f"mine{i}")
        seen["last"] = _tracer.monitoring_tool()
        seen["tools"] = [monitoring.get_tool(i) for i in range(6)]
        try:
            total += ns["main"]()
        finally:
            for i in range(6):
                monitoring.free_tool_id(i)
        return total

    watched = profile(claims_every_id, watch_exits=True)
    assert seen["free"] == [None] * 6  # as without memlens
    assert seen["moved"] not in (-1, 4)
    assert seen["last"] == -1
    assert all(t is not None and t.startswith("mine") for t in seen["tools"])
    # Tracing stopped: sys.monitoring's own functions are back.
    assert type(monitoring.use_tool_id) is type(len)

    def three_times() -> int:
        return int(ns["main"]() + ns["main"]() + ns["main"]())

    plain = profile(three_times, watch_exits=False)
    a, b = watched.files[path].lines, plain.files[path].lines
    for tag in ("leaf", "worker_leaf", "nest_worker", "nest_nest", "main_nest", "main_worker"):
        x, y = a[tagged(path, tag)], b[tagged(path, tag)]
        for name in ("alloc_bytes", "incl_alloc_bytes", "incl_peak_bytes"):
            mine, theirs = getattr(x, name), getattr(y, name)
            assert abs(mine - theirs) <= max(1024, theirs // 200), (tag, name, mine, theirs)


def test_a_tracers_allocations_at_a_modules_start_are_on_its_first_line(tmp_path: Path) -> None:
    # A trace function (coverage's, a debugger's) of a file that is not charged allocates
    # at every call event, where the frame has not run an instruction yet: in a module, its
    # RESUME, whose line is 0 on 3.11+. No line 0 in the run: the module's first line.
    ns, path = load(
        tmp_path,
        """
        import sys

        def body():
            return 1

        def program(tracer, path):
            sys.settrace(tracer)
            try:
                exec(compile("x = 1\\ny = body()\\n", path, "exec"), {"body": body})
            finally:
                sys.settrace(None)
        """,
    )
    helper, helper_path = load(
        tmp_path,
        """
        seen = []

        def tracer(frame, event, arg):
            seen.append([event] * 100)  # allocates on every event, the call events first
            return tracer
        """,
        name="helper",
    )
    previous = sys.gettrace()
    run = profile(lambda: ns["program"](helper["tracer"], path), exclude=[helper_path])
    sys.settrace(previous)
    assert all(line > 0 for sf in run.files.values() for line in sf.lines)
    assert run.files[path].lines[1].alloc_count > 0  # the exec'd module's start
