"""Exact mode: known allocations on known lines, checked against the truth and tracemalloc."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from array import array
from pathlib import Path
from typing import Any

import pytest

import memlens
from memlens import _tracer
from memlens.calltree import once_per_path
from memlens.errors import MemlensError
from memlens.model import CallNode, LineStats, Run
from memlens.moment import end_traced
from memlens.runfile import reader
from memlens.tracing import tracer

from . import programs
from .conftest import line, tagged
from .conftest import profiled as profile

MIB = programs.MIB
SRC = Path(programs.__file__).resolve()


def line_of(tag: str) -> int:
    return tagged(SRC, tag)


def stats(run: Run, tag: str) -> LineStats:
    return line(run, SRC, tag)


def built(snap: Any, codes: int, release: bool = False) -> dict[str, Any]:
    """``snap.build()`` with each of the first ``codes`` code ids in one file and a function
    of its own."""
    files, functions = array("i", [0] * codes).tobytes(), array("i", range(codes)).tobytes()
    return snap.build(files, functions, codes, release=release)


def near(value: int, expected: int, rel: float = 0.01, slack: int = 4096) -> bool:
    return abs(value - expected) <= max(expected * rel, slack)


def test_kept_alive_line_has_alloc_live_and_peak() -> None:
    run, keep = profile(programs.kept_alive)
    s = stats(run, "kept")
    assert near(s.alloc_bytes, 4 * MIB)
    assert near(s.live_bytes, 4 * MIB)
    assert near(s.peak_bytes, 4 * MIB)
    assert s.live_count >= 2  # the buffer and the bytearray object (and the list)
    assert keep[0] is not None


def test_freed_block_is_allocated_but_not_live() -> None:
    run, _ = profile(programs.freed)
    s = stats(run, "freed")
    assert near(s.alloc_bytes, 6 * MIB)
    # Nothing is live: the buffer was freed, and the small objects the line made (the argument
    # tuple; on 3.14+ the int 6 * MIB) died, into CPython's free lists, which hold no line's
    # memory (test_what_the_free_lists_hold_is_not_live).
    assert s.live_bytes == 0
    assert s.live_count == 0
    assert near(s.peak_bytes, 6 * MIB)  # it was live when the total peaked


@pytest.mark.parametrize("mode", ["exact", "sampling"])
def test_what_the_free_lists_hold_is_not_live(mode: str) -> None:
    """CPython keeps dead tuples, floats, dicts, lists (3.14+: ints too) on free lists for
    the next object of their type, without freeing their blocks: those blocks are not live on
    the lines that made their objects (2,000 pairs, 100 floats, 80 dicts and lists stayed
    there before). The tuples still alive are."""
    options = {"mode": mode, "sample_interval": 1} if mode == "sampling" else {}
    # (Without the collector's callbacks that other tests' libraries left, e.g. hypothesis's
    # timing of collections: run by a collection that one of these lines set off, what they
    # keep, a float, is that line's, as the code of any library it calls.)
    callbacks = gc.callbacks[:]
    gc.callbacks.clear()

    def program() -> list[tuple[int, int, int]]:
        alive = programs.free_listed(5000)
        # (Then a pause in which the timeline thread closes a moment: on a loaded machine it
        # may not have run at all in a program this short, and a run with no moment closed has
        # none, not even the end's.)
        time.sleep(0.05)
        return alive

    try:
        run, alive = profile(program, **options)
    finally:
        gc.callbacks[:] = callbacks
    for tag in ("fl_tuples", "fl_floats", "fl_dicts", "fl_lists"):
        s = stats(run, tag)
        assert s.alloc_count >= 5000, tag
        assert (s.live_bytes, s.live_count) == (0, 0), tag
    kept = stats(run, "fl_alive")
    assert kept.live_count >= len(alive) == 1000
    assert kept.live_bytes >= 1000 * sys.getsizeof((0, 0, 0))
    # The run's total at its end (the timeline's last point, the last moment's) leaves them
    # out as the lines do: before, it was above the lines' sum by what the lists held.
    lines_live = sum(st.live_bytes for sf in run.files.values() for st in sf.lines.values())
    assert end_traced(run) == lines_live
    assert run.moments.traced_bytes[-1] == lines_live


def test_reallocs_are_matched_to_their_site() -> None:
    run, buf = profile(programs.grown)
    s = stats(run, "grown")
    # The final buffer is live at its site; the reallocations' old blocks were freed.
    assert near(s.live_bytes, len(buf), rel=0.3)
    assert s.alloc_bytes >= 64 * 65536  # every b"x" * 65536 temporary, plus the buffer


def test_threads_are_traced() -> None:
    out: list[bytearray] = []
    run, _ = profile(lambda: programs.in_thread(out))
    s = stats(run, "thread")
    assert near(s.live_bytes, 3 * MIB)


def test_generator_body_and_caller_inclusive() -> None:
    run, result = profile(programs.from_generator)
    assert len(result) == 4
    s = stats(run, "gen")
    assert near(s.alloc_bytes, 4 * MIB)
    caller = stats(run, "gen_caller")
    assert caller.incl_alloc_bytes >= s.alloc_bytes


def test_comprehension_line() -> None:
    run, result = profile(programs.comprehension)
    s = stats(run, "comp")
    expected = sum(result[0].__sizeof__() for _ in result)
    assert near(s.live_bytes, expected, rel=0.05)


def test_inclusive_figures_follow_the_call_tree() -> None:
    run, _ = profile(programs.outer)
    leaf_s = stats(run, "leaf")
    mid = stats(run, "middle")
    out = stats(run, "outer")
    assert near(leaf_s.alloc_bytes, 3 * MIB)
    assert mid.incl_alloc_bytes >= leaf_s.alloc_bytes
    assert near(out.incl_live_bytes, 3 * MIB, rel=0.02)
    assert out.alloc_bytes < 4096  # self: nearly nothing happens on the call line itself
    # The call tree has leaf nodes under the middle line under the outer line.
    nodes = {n.id: n for n in run.call_tree}
    leaf_nodes = [n for n in run.call_tree if n.line == line_of("leaf")]
    assert leaf_nodes
    parent = nodes[leaf_nodes[0].parent]
    assert parent.line == line_of("middle")
    assert nodes[parent.parent].line == line_of("outer")


def test_a_line_reached_through_several_places_is_one_node_under_its_caller() -> None:
    """The call tree has one node per line under each caller's node, however many places
    (call sites on one line, a comprehension, calls from C) reach it, first or later: the
    collapse finds a node made by an earlier place (a caller's first child or another)."""
    run, kept = profile(programs.dup_calls)
    assert len(kept) == 2 * 7
    children: dict[tuple[int, str, int], int] = {}
    for n in run.call_tree:
        key = (n.parent, n.file, n.line)
        assert key not in children, f"two nodes of line {n.line} under node {n.parent}"
        children[key] = n.id
    nodes = {n.id: n for n in run.call_tree}
    leaf = line_of("dup_leaf")

    def leaves(tag: str) -> list[CallNode]:
        """The leaf's nodes under the nodes of the line tagged ``tag``."""
        return [n for n in run.call_tree if n.line == leaf and nodes[n.parent].line == line_of(tag)]

    def leaf_bytes(tag: str) -> int:
        return sum(n.alloc_bytes for n in leaves(tag))

    assert 2 * 3000 <= leaf_bytes("dup_two") < 2 * 3000 + 2000
    assert 2 * 3000 <= leaf_bytes("dup_other") < 2 * 3000 + 2000
    assert 2 * 600 <= leaf_bytes("dup_comp") < 2 * 600 + 2000
    assert len(leaves("dup_two")) == 1


def test_recursion_counts_each_stack_once() -> None:
    run, result = profile(lambda: programs.recurse(5))
    assert len(result) == 6
    rec = stats(run, "rec")
    # 6 MiB allocated below the outermost recursive line, counted once despite 5 levels.
    assert near(rec.incl_alloc_bytes, 6 * MIB, rel=0.05)
    assert rec.incl_alloc_bytes < 7 * MIB


def test_a_caller_that_moved_on_is_seen_deep_in_the_stack() -> None:
    """The second call below reuses the first one's frames (same places, same code): only the
    frame 40 levels above the allocations has moved to another line, and they must follow it."""
    run, (first, second) = profile(lambda: programs.two_calls(40))
    assert (len(first), len(second)) == (1000, 2000)
    one = stats(run, "first_call")
    two = stats(run, "second_call")
    piece = stats(run, "piece")
    assert one.incl_alloc_bytes >= 1000 * 1000
    assert near(two.incl_alloc_bytes, 2 * one.incl_alloc_bytes, rel=0.05)
    assert near(one.incl_alloc_bytes + two.incl_alloc_bytes, piece.incl_alloc_bytes, rel=0.05)


def test_every_path_of_a_branching_descent_gets_its_own_nodes() -> None:
    """2^8 call paths, 8 levels down through two call lines per level: every leaf allocation
    is charged under exactly the call lines its path took. A new path's frames take the last
    one's places, so the stack cache must see which caller moved on, however many frames
    below the innermost one it is and wherever the last event was."""
    levels = 8
    run, kept = profile(lambda: programs.branching_descent(levels))
    assert len(kept) == 2**levels
    nodes = {n.id: n for n in run.call_tree}
    one, zero = line_of("descent_one"), line_of("descent_zero")
    seen: dict[tuple[int, ...], int] = {}
    for n in run.call_tree:
        if n.line != line_of("descent_leaf") or n.alloc_count == 0:
            continue
        lines: list[int] = []
        up = nodes.get(n.parent)
        while up is not None and up.line in (one, zero):
            lines.append(up.line)
            up = nodes.get(up.parent)
        seen[tuple(lines)] = seen.get(tuple(lines), 0) + n.alloc_bytes
    # Each path's calls, innermost first, as a tuple of lines; its leaf's bytes: its
    # bytearray's 1000 + path bytes, the object and the tuple returned, and now and then the
    # interpreter's own work on that line (a second path's bytearray would add 1000 more).
    for path, data in kept:
        lines = tuple(one if (path >> (lvl - 1)) & 1 else zero for lvl in range(1, levels + 1))
        assert lines in seen, f"path {path:#x} has no leaf node"
        assert len(data) <= seen[lines] < len(data) + 900, (path, seen[lines])
    assert len(seen) == 2**levels


def test_a_frame_that_runs_another_function_in_the_same_place_is_charged_right() -> None:
    """Two functions called in turn from one line 30 frames down reuse one frame (same address,
    same caller): every allocation goes to the line of the function running, not to a place
    the other one allocated from (the stack cache knows both functions' places)."""
    n = 4000
    run, kept = profile(lambda: programs.alternating(30, n))
    assert len(kept) == n
    a1, a2 = stats(run, "alt_a1"), stats(run, "alt_a2")
    b1, b2 = stats(run, "alt_b1"), stats(run, "alt_b2")
    # Each line makes n/2 bytearrays of its size (an object and a buffer each), so the lines
    # differ by their buffers' sizes (give or take the interpreter's own first-call work).
    for s in (a1, a2, b1, b2):
        assert n <= s.alloc_count <= n + 8
        assert s.live_count >= n
    assert near(a2.alloc_bytes - a1.alloc_bytes, n // 2 * 200, rel=0, slack=2048)
    assert near(b1.alloc_bytes - a1.alloc_bytes, n // 2 * 100, rel=0, slack=2048)
    assert near(b2.alloc_bytes - a1.alloc_bytes, n // 2 * 300, rel=0, slack=2048)


def test_allocations_deep_in_an_unchanged_stack_do_not_reread_it() -> None:
    """A loop allocating 60 frames down: the stack is read in full once per change of its
    frames, not once per allocation (3.12+: frame exits are reported; before: one tight
    comparison with the cached frames)."""
    gc.collect()
    _tracer.start("exact", 0, 0, 10.0, True, True)
    try:
        kept = programs.pieces_below(60, 5000)
    finally:
        _tracer.stop()
    info = _tracer.snapshot().info
    _tracer.reset()
    assert len(kept) == 5000
    assert info["allocations"] >= 10_000
    assert info["stack_reads"] < info["allocations"] / 10
    assert info["exit_watches_dropped"] == 0  # (3.12+: its callers' exits are rare)


def test_a_caller_in_another_frame_at_the_same_place_is_read_once() -> None:
    """Allocations below a second generator of the same function, at the first one's place:
    the stack is read again once, not on each allocation (3.10/3.11 keep the frame the walk
    found at a level whose place did not change)."""
    gc.collect()
    _tracer.start("exact", 0, 0, 10.0, True, True)
    try:
        kept = programs.two_sources(4000)
    finally:
        _tracer.stop()
    info = _tracer.snapshot().info
    _tracer.reset()
    assert [len(k or ()) for k in kept] == [4000, 4000]
    assert info["allocations"] >= 16_000
    assert info["stack_reads"] < info["allocations"] / 10


@pytest.mark.skipif(
    not (sys.platform == "linux" and os.uname().machine == "x86_64") or sys.version_info < (3, 12),
    reason="the interpreter's thread-local current state (3.12+) is read directly on x86-64 "
    "Linux only (3.10 and 3.11 keep it in a global)",
)
def test_every_thread_reads_its_own_thread_state_directly() -> None:
    """Each thread's allocations read the interpreter's current-state variable with one load
    (its own instance, found once per thread), and still land on their own lines: the main
    thread's and a second thread's (a wrong instance would charge the other's stack)."""
    seen: dict[str, bool] = {}
    out: list[bytearray] = []

    def work() -> None:
        out.append(bytearray(3 * MIB))  # a first allocation makes the thread's stack cache
        seen["thread"] = _tracer.reads_thread_state()

    def program() -> None:
        out.append(bytearray(MIB))
        seen["main"] = _tracer.reads_thread_state()
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        programs.in_thread(out)

    run, _ = profile(program)
    assert seen == {"main": True, "thread": True}
    assert near(stats(run, "thread").alloc_bytes, 3 * MIB)


def test_a_snapshot_built_with_release_frees_its_nodes_and_builds_the_same() -> None:
    """build(release=True), as memlens's own runs use it, frees the snapshot's nodes once
    summed (a big call tree's peak memory): the figures are those of a plain build, the node
    count stays in the snapshot's info, and a second build is refused with a clear error."""
    gc.collect()
    _tracer.start("exact", 0, 0, 10.0, True, True)
    try:
        programs.recurse(4)
        time.sleep(0.05)  # (moments between the two: the timeline ticks every 10 ms)
        kept = programs.pieces_below(8, 200)
    finally:
        _tracer.stop()
    snap, again = _tracer.snapshot(), _tracer.snapshot()
    _tracer.reset()
    assert len(kept) == 200
    n = len(snap.codes)
    nodes = snap.info["nodes"]
    plain = built(again, n)
    released = built(snap, n, release=True)
    assert snap.info["nodes"] == nodes > 0

    def columns(result: dict[str, Any]) -> dict[str, Any]:
        return {
            part: value.tolist()
            if not isinstance(value, dict)
            else {k: v.tolist() for k, v in value.items()}
            for part, value in result.items()
        }

    # (every column: the self figures summed in the snapshot's own, the moments' log freed)
    assert columns(released) == columns(plain)
    assert len(plain["moments"]["site"]) > 0
    with pytest.raises(ValueError, match="release=True already"):
        built(snap, n)


def test_a_frozen_run_adds_no_call_path_and_its_next_snapshot_is_the_last_with_moments() -> None:
    """freeze() (memlens's own runs call it after finish(), before the last snapshot) frees the
    call tree's index: blocks are still tracked until stop(), but no call path is added
    (allocations go to the root unless a thread's cache knows their place). The snapshot
    that follows still has every node and the run's moments, then frees their log and gives
    the tree's memory back: a later snapshot says its moments were dropped and has no call
    tree, though it still counts the allocations. The run stops and is reset as usual."""
    gc.collect()
    _tracer.start("exact", 0, 0, 10.0, True, True)
    try:
        programs.recurse(4)
        time.sleep(0.05)  # (moments between the two: the timeline ticks every 10 ms)
        kept = programs.pieces_below(8, 200)
        _tracer.finish()
        _tracer.freeze()
        _tracer.freeze()  # (twice: nothing more to free)
        last = _tracer.snapshot()
        kept += programs.pieces_below(8, 100)  # the same call path
        deeper = programs.recurse(5)  # new call paths
        later = _tracer.snapshot()
    finally:
        _tracer.stop()
    _tracer.reset()
    assert (len(kept), len(deeper)) == (300, 6)
    assert last.info["nodes"] > 20
    assert later.info["nodes"] == 0
    assert later.info["allocations"] > last.info["allocations"]
    assert (last.info["moments_dropped"], later.info["moments_dropped"]) == (False, True)
    moments = built(last, len(last.codes))["moments"]
    assert len(moments["t"]) > 1
    assert len(moments["site"]) > 0


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for text in f:
            if text.startswith("VmRSS:"):
                return int(text.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
@pytest.mark.parametrize(("mode", "interval"), [("exact", 0), ("sampling", 16)])
def test_the_last_snapshot_gives_the_call_tree_back_as_it_copies_it(
    mode: str, interval: int
) -> None:
    """The run's last snapshot (after freeze()) hands each chunk of the call tree back to the
    system once it has copied it: a big tree and its copy are never held at once. Its figures
    are those of a snapshot taken just before (every chunk copied before it went): its
    allocations. (Live figures may differ: from 3.13, objects this paused thread makes in
    blocks of the program's lines between the two take those blocks out of the run.) The
    program may still allocate on known paths and free what it made, charging nodes whose
    memory went, until stop(); a snapshot after it, before reset(), has no call tree."""
    gc.collect()
    _tracer.start(mode, interval, 1, 10.0, True, True)
    try:
        kept = programs.paths(16)
        paused = _tracer.set_thread_paused(True)
        try:
            _tracer.finish()
            before = _tracer.snapshot()
            _tracer.freeze()
            rss = _rss_bytes()
            last = _tracer.snapshot()
            grown = _rss_bytes() - rss
        finally:
            _tracer.set_thread_paused(paused)
        more = programs.paths(12)  # (paths the thread's cache knows, and the root)
        del kept[: 2**15]  # frees of blocks charged to nodes given back
    finally:
        _tracer.stop()
    after_stop = _tracer.snapshot()
    _tracer.reset()
    assert (len(kept), len(more)) == (2**15, 2**12)
    nodes = last.info["nodes"]
    assert nodes == before.info["nodes"] > 8 * 16384  # (chunks of 16384 nodes)
    assert after_stop.info["nodes"] == 0
    # The copy takes 52 bytes a node; the chunks it gave back held 68 (and 24 more a node of
    # variances in sampling mode).
    assert grown < nodes * 52 // 2
    n = len(last.codes)
    both = [built(s, n) for s in (before, last)]
    for part in ("sites", "sites_incl", "functions"):
        for column in ("alloc_bytes", "alloc_count"):
            assert both[0][part][column] == both[1][part][column], (part, column)
    leaf = both[1]["sites"]["line"].index(line_of("path_leaf"))
    assert both[1]["sites"]["alloc_count"][leaf] >= 2**16


def test_a_build_while_tracing_records_nothing_of_its_own() -> None:
    """A checkpoint builds its run while the program runs, on memlens's own (paused) thread:
    neither it nor the thread that builds the moments beside it is traced (C allocations
    included: the helper allocates through libstdc++, which is interposed)."""
    gc.collect()
    _tracer.start("exact", 0, 0, 10.0, True, True)
    try:
        kept = []
        for _ in range(5):
            kept.append(programs.pieces(200))
            time.sleep(0.03)  # (moments: the timeline ticks every 10 ms)
        paused = _tracer.set_thread_paused(True)
        try:
            snap = _tracer.snapshot()
            before = _tracer.snapshot().info["allocations"]
            collapsed = built(snap, len(snap.codes))
            after = _tracer.snapshot().info["allocations"]
        finally:
            _tracer.set_thread_paused(paused)
    finally:
        _tracer.stop()
    _tracer.reset()
    assert len(kept) == 5
    assert len(collapsed["moments"]["t"]) > 1
    assert after == before


def test_line_and_function_sums_are_the_call_trees_counted_once_per_path() -> None:
    """The tracer sums lines and functions natively; the importers from a tree with
    memlens.calltree.once_per_path: both must be the same definition."""
    run, _ = profile(
        lambda: (
            programs.recurse(4),
            programs.outer(),
            [programs.zig(depth, []) for depth in range(12)],
        )
    )
    tree = run.call_tree
    columns = ("alloc_bytes", "peak_bytes")
    inclusive = [tree.inclusive(c) for c in columns]
    sites = [(tree.files[f], ln) for f, ln in zip(tree.file, tree.line, strict=True)]
    by_line = once_per_path(tree.parent, sites, inclusive)
    recorded = {
        (path, ln): [s.incl_alloc_bytes, s.incl_peak_bytes]
        for path, source in run.files.items()
        for ln, s in source.lines.items()
    }
    assert by_line == recorded
    assert by_line[(str(SRC), line_of("rec"))][0] < 7 * MIB  # the recursion is in it
    # Lines and functions that recur with others between them on a path count it once too.
    zig_zag = by_line[(str(SRC), line_of("zig_zag"))][0]
    assert (
        0
        < zig_zag
        < sum(
            s.alloc_bytes
            for k, s in _lines(run).items()
            if k[1] in (line_of("zig_own"), line_of("zag_own"))
        )
    )
    own: dict[tuple[str, int], int] = {}
    for site, alloc in zip(sites, tree.alloc_bytes, strict=True):
        own[site] = own.get(site, 0) + alloc
    assert own == {k: s.alloc_bytes for k, s in _lines(run).items()}
    functions = [
        (tree.files[f], tree.functions[fn]) for f, fn in zip(tree.file, tree.function, strict=True)
    ]
    by_function = once_per_path(tree.parent, functions, inclusive)
    assert {
        (path, f.qualname): [f.alloc_bytes, f.peak_bytes]
        for path, source in run.files.items()
        for f in source.functions
    } == {k: v for k, v in by_function.items() if k[1] != "<module>"}


def _lines(run: Run) -> dict[tuple[str, int], LineStats]:
    return {(p, ln): s for p, src in run.files.items() for ln, s in src.lines.items()}


def test_peak_is_attributed_to_what_was_live_at_the_peak() -> None:
    run, _ = profile(programs.peak_then_drop)
    assert near(stats(run, "peak_big").peak_bytes, 20 * MIB)
    assert stats(run, "peak_small").peak_bytes < 64 * 1024
    assert near(stats(run, "peak_small").live_bytes, 2 * MIB)
    assert near(run.info.peak_traced_bytes, 20 * MIB, rel=0.1)


def test_matches_tracemalloc_per_line_live_bytes() -> None:
    def work() -> tuple[Any, ...]:
        return programs.kept_alive(), programs.comprehension(), programs.outer()

    run, _kept = profile(work)
    gc.collect()
    tracemalloc.start()
    try:
        _kept2 = work()
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    by_line = {
        s.traceback[0].lineno: s.size
        for s in snap.statistics("lineno")
        if Path(s.traceback[0].filename).resolve() == SRC
    }
    for tag in ("kept", "comp", "leaf"):
        ours = stats(run, tag).live_bytes
        theirs = by_line[line_of(tag)]
        assert near(ours, theirs, rel=0.02), (tag, ours, theirs)


def test_include_filter_charges_the_innermost_included_frame() -> None:
    # json's own lines are not included: their allocations land on our calling line.

    def work() -> str:
        return json.dumps(list(range(200_000)))  # @json

    this = Path(__file__).resolve()
    run, text = profile(work, include=[str(this)])
    assert set(run.files) == {str(this)}
    lines = run.files[str(this)].lines
    hot = max(lines.items(), key=lambda kv: kv[1].alloc_bytes)
    assert near(hot[1].live_bytes, len(text), rel=0.2)


def test_memlens_frames_are_never_attributed() -> None:
    run, _ = profile(programs.kept_alive)
    pkg = str(Path(memlens.__file__).resolve().parent)
    assert not [f for f in run.files if f.startswith(pkg)]


def test_stop_restores_allocators_even_on_exceptions() -> None:
    with pytest.raises(ZeroDivisionError), memlens.profile():
        _ = 1 / 0
    assert not _tracer.hooks_installed()
    with pytest.raises(SystemExit), memlens.profile():
        raise SystemExit(3)
    assert not _tracer.hooks_installed()


def test_start_twice_and_stop_without_start_are_clear_errors() -> None:
    tracer.start()
    try:
        with pytest.raises(MemlensError, match="already tracing"):
            tracer.start()
    finally:
        tracer.stop()
    with pytest.raises(MemlensError, match="not tracing"):
        tracer.stop()


def test_run_header_and_sources() -> None:
    run, _ = profile(programs.kept_alive)
    assert run.info.mode == "exact"
    assert run.info.sample_interval_bytes is None
    assert run.info.peak_rss_bytes > 0
    assert run.timeline
    assert run.timeline[-1].traced_bytes >= 0
    sf = run.files[str(SRC)]
    assert sf.text == SRC.read_text()
    assert len(sf.sha256) == 64


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_is_not_traced_and_parent_is_unaffected() -> None:
    tracer.start()
    try:
        pid = os.fork()
        if pid == 0:  # child: allocates, cannot report, must not crash
            code = 0
            try:
                _ = [bytearray(MIB) for _ in range(5)]
                try:
                    tracer.stop()
                    code = 10
                except MemlensError:
                    code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        keep = programs.kept_alive()
    finally:
        run = tracer.stop()
    assert os.WIFEXITED(status)
    assert os.WEXITSTATUS(status) == 0
    assert near(stats(run, "kept").live_bytes, 4 * MIB)
    assert keep


def test_checkpoints_leave_a_readable_incomplete_run_when_killed(tmp_path: Path) -> None:
    out = tmp_path / "ckpt.mlrun"
    script = tmp_path / "victim.py"
    script.write_text(
        "import time, memlens\n"
        f"memlens.start(checkpoint={str(out)!r}, checkpoint_interval_s=0.2)\n"
        "keep = [bytearray(1 << 20) for _ in range(8)]  # line 3\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 30
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # at least one checkpoint after the allocations
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run = reader.read(out)
    assert run.info.complete is False
    assert run.info.exit_code is None
    line3 = run.files[str(script.resolve())].lines[3]
    assert near(line3.live_bytes, 8 << 20)


def test_forked_child_exits_normally_while_parent_traces(tmp_path: Path) -> None:
    script = tmp_path / "forker.py"
    script.write_text(
        "import os, sys, time, memlens\n"
        "memlens.start(timeline_interval_ms=1)\n"
        "time.sleep(0.05)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    data = [bytearray(1000) for _ in range(100)]\n"
        "    sys.exit(0)  # a normal exit: interpreter finalisation, static destructors\n"
        "_, status = os.waitpid(pid, 0)\n"
        "memlens.stop()\n"
        "print('child', os.waitstatus_to_exitcode(status))\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "child 0\n"


def test_sources_with_a_declared_encoding_are_recorded_as_text(tmp_path: Path) -> None:
    src = tmp_path / "latin.py"
    src.write_bytes(
        b'# -*- coding: latin-1 -*-\ns = "caf\xe9"\nx = [bytes(100) for _ in range(10)]\n'
    )
    code = compile(src.read_bytes(), str(src), "exec")
    with memlens.profile() as p:
        exec(code, {})  # noqa: S102 - runs our own test source
    assert p.run is not None
    sf = p.run.files[str(src.resolve())]
    assert sf.text == '# -*- coding: latin-1 -*-\ns = "café"\nx = [bytes(100) for _ in range(10)]\n'
    assert sf.lines[3].alloc_count >= 10


def test_checkpoints_that_cost_much_are_spaced_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[float] = []

    def slow_checkpoint(*_args: object) -> None:
        calls.append(time.monotonic())
        began = time.thread_time()
        while time.thread_time() - began < 0.02:  # 20 ms of CPU, as a big run would take
            pass

    monkeypatch.setattr(tracer, "write_checkpoint", slow_checkpoint)
    tracer.start(checkpoint=tmp_path / "c.mlrun", checkpoint_interval_s=0.01)
    try:
        time.sleep(0.8)
    finally:
        tracer.stop()
    # Every 10 ms as asked would be ~30 checkpoints; 20 ms each means at least 1 s between them.
    assert len(calls) == 1, calls


def test_window_peak_restarts_where_asked() -> None:
    # The running maximum behind per-test peaks: a reset starts it at the current total.
    with memlens.profile():
        start, _, allocated = _tracer.window(reset=True)
        big = bytearray(8 * MIB)
        del big
        _, peak, allocated2 = _tracer.window()
        assert peak - start >= 8 * MIB
        assert allocated2 - allocated >= 8 * MIB
        now, restarted, _ = _tracer.window(reset=True)
        small = bytearray(1 * MIB)
        _, peak2, _ = _tracer.window()
        del small
        assert 1 * MIB <= peak2 - now < 2 * MIB
        assert restarted >= now
