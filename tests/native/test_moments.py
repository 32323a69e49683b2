"""Moments: each line's live bytes at moments of the run, checked against what the program held
then, and against the run's own figures at the end."""

from __future__ import annotations

import gc
import itertools
import time
from pathlib import Path
from typing import Any

import pytest

from memlens import _tracer
from memlens.model import Run

from . import programs
from .conftest import profiled, tagged

MIB = programs.MIB
SRC = str(Path(programs.__file__).resolve())
HERE = str(Path(__file__).resolve())


def near(value: int, expected: int, slack: int = 64 * 1024) -> bool:
    return abs(value - expected) <= slack


def settled(fn: Any) -> Any:
    """``fn``, then a pause long enough for moments to begin after its last change."""

    def run() -> Any:
        kept = fn()
        time.sleep(0.05)
        return kept

    return run


def phases() -> bytearray:
    big = bytearray(30 * MIB)  # @phase_big
    time.sleep(0.05)
    del big
    time.sleep(0.05)
    small = bytearray(20 * MIB)  # @phase_small
    time.sleep(0.05)
    return small


def growing() -> list[bytearray]:
    kept = []
    for _ in range(6):
        kept.append(bytearray(MIB))  # @grow
        time.sleep(0.01)
    return kept


def series(run: Run, path: str, line: int) -> list[int]:
    changes = run.moments.line_changes().get(path, {}).get(line, ())
    values = [0] * len(run.moments)
    for k, live, _incl in changes:
        for j in range(k, len(values)):
            values[j] = live
    return values


def test_a_line_holds_at_each_moment_what_it_held_then() -> None:
    run, kept = profiled(phases)
    assert kept is not None
    big, small = (
        series(run, HERE, tagged(HERE, "phase_big")),
        series(run, HERE, tagged(HERE, "phase_small")),
    )
    # 30 MiB for a while, then nothing; 20 MiB after that, to the end; never both.
    held_big = [k for k, v in enumerate(big) if near(v, 30 * MIB)]
    held_small = [k for k, v in enumerate(small) if near(v, 20 * MIB)]
    assert held_big
    assert held_small
    assert max(held_big) < min(held_small)
    assert all(v < 1024 for v in big[max(held_big) + 1 :])
    assert all(v < 1024 for v in small[: min(held_small)])
    assert held_small[-1] == len(run.moments) - 1
    # The peak (30 MiB) was while the big buffer was held.
    peak_at = run.info.peak_at_s
    assert peak_at is not None
    times = run.moments.t
    began = times[held_big[0] - 1] if held_big[0] else 0.0
    assert began <= peak_at <= times[max(held_big)]
    # Moments are in time order, within the run, and say what was traced then.
    assert all(a < b for a, b in itertools.pairwise(times))
    assert times[0] > 0
    assert times[-1] <= run.info.duration_s
    assert all(run.moments.traced_bytes[k] >= 30 * MIB for k in held_big[1:])


def test_a_growing_line_grows_moment_by_moment() -> None:
    run, _ = profiled(settled(growing))
    values = series(run, HERE, tagged(HERE, "grow"))
    steps = sorted({round(v / MIB) for v in values})
    assert steps[-1] == 6
    assert len(steps) >= 4  # seen at several sizes along the way
    assert all(b >= a for a, b in itertools.pairwise(values[:-1]))
    # (The last moment leaves out what CPython's free lists hold then, as the line's figures
    # at the end do: the argument tuple of the line's last call, which died into one.)
    assert values[-1] >= values[-2] - 256


HELD = [0.0] * 50


def fill_then_drop() -> None:
    for i in range(50):
        HELD[i] = i * 1.5  # @floats
    time.sleep(0.1)  # moments pass while the line holds its floats
    for i in range(50):
        HELD[i] = 0.0  # the floats die into CPython's free list of floats: no allocator call
    time.sleep(0.1)


def test_free_listed_objects_leave_the_line_at_the_last_moment_only() -> None:
    """The objects CPython's free lists hold at the end are not live on the line that made
    them, at its end and at its last moment; the moments before, when they may still have
    been alive (when they died is not known), keep them."""
    run, _ = profiled(fill_then_drop, timeline_interval_ms=10)
    values = series(run, HERE, tagged(HERE, "floats"))
    # (Most of 50 floats of 24 bytes: before 3.13 one made in a block from before the run, off
    # the free list, is not traced.)
    floats = 40 * 24
    held = [k for k, v in enumerate(values) if v >= floats]
    assert len(held) >= 3, values
    assert held == list(range(held[0], len(values) - 1)), values  # to the moment before the last
    assert values[-1] < floats, values
    assert run.files[HERE].lines[tagged(HERE, "floats")].live_bytes == values[-1] == 0


def on_and_off() -> None:
    for _ in range(3):
        held = bytearray(4 * MIB)  # @on_off
        time.sleep(0.05)
        del held
        for _ in range(20):
            bytearray(MIB)  # @came_and_went: within one moment (but when a boundary falls between)
        time.sleep(0.05)


def test_a_line_that_lets_go_and_holds_again_has_each_value() -> None:
    """The moments' log leaves out what changes nothing (a block that came and went within one
    moment, a value equal to the one before): a line that holds, lets go and holds again has
    each of those values at its moments, and a line whose blocks come and go holds at most one
    of them at any (one that a moment's boundary fell on)."""
    run, _ = profiled(settled(on_and_off))
    values = series(run, HERE, tagged(HERE, "on_off"))
    held = [near(v, 4 * MIB) for v in values]
    assert all(near(v, 4 * MIB) or v < 1024 for v in values)
    # held, then not, three times over: three runs of moments holding it
    assert sum(1 for a, b in itertools.pairwise([False, *held]) if b and not a) == 3
    assert values[-1] < 1024
    assert all(v <= MIB + 1024 for v in series(run, HERE, tagged(HERE, "came_and_went")))


def walk_and_let_go(level: int, path: int) -> None:
    if level == 0:
        bytearray(64)  # @let_go
        return
    if path & 1:
        walk_and_let_go(level - 1, path >> 1)
    else:
        walk_and_let_go(level - 1, path >> 1)


def test_call_paths_whose_blocks_never_outlive_a_moment_log_nothing() -> None:
    """2^12 call paths, each allocating a block it frees at once, over several moments: their
    nodes hold nothing at any moment's end, and the snapshot's moments have no entry for them
    (a big tree's log on 3.10 was millions of such entries; most of its memory)."""
    gc.collect()
    _tracer.start("exact", 0, 0, 10.0, True, True)
    try:
        for part in range(4):
            for p in range(part * 1024, (part + 1) * 1024):
                walk_and_let_go(12, p)
            time.sleep(0.03)
        snap = _tracer.snapshot()
    finally:
        _tracer.stop()
    _tracer.reset()
    assert snap.info["nodes"] > 4096
    assert not snap.info["moments_dropped"]
    assert snap.info["moment_entries"] < 500


def _RECURSION() -> None:
    programs.recurse(3)


@pytest.mark.parametrize(
    "program",
    [programs.outer, _RECURSION, programs.from_generator, programs.comprehension],
    ids=["calls", "recursion", "generator", "comprehension"],
)
@pytest.mark.parametrize("mode", ["exact", "sampling"])
def test_the_last_moment_is_the_end(program: Any, mode: str) -> None:
    """After the program's last change, every line's live bytes (self and inclusive, each
    stack once under recursion) and every function's are exactly the run's live figures: the
    moments collapse the tree onto lines as the run's figures do."""
    options = {"mode": mode, "sample_interval": 64 * 1024, "seed": 7} if mode == "sampling" else {}
    run, _ = profiled(settled(program), **options)
    assert len(run.moments) > 0
    last = len(run.moments) - 1
    at_last = run.moments.values_at(last).get(SRC, {})
    expected = {
        line: (st.live_bytes, st.incl_live_bytes)
        for line, st in run.files[SRC].lines.items()
        if st.live_bytes or st.incl_live_bytes
    }
    assert at_last == expected
    functions = {k: v for k, v in run.moments.function_values_at(last).items() if k[0] == SRC}
    assert functions == {
        (SRC, f.qualname, f.first_line, f.last_line): f.live_bytes
        for f in run.files[SRC].functions
        if f.live_bytes
    }


def test_threads_have_moments() -> None:
    out: list[bytearray] = []
    run, _ = profiled(settled(lambda: programs.in_thread(out)))
    values = series(run, SRC, tagged(SRC, "thread"))
    assert near(values[-1], 3 * MIB)


def test_moments_stay_bounded_and_evenly_spread() -> None:
    """A run keeps a few hundred moments however long it is, spread over all of it."""

    def long_enough() -> None:
        end = time.monotonic() + 1.2
        keep = []
        while time.monotonic() < end:
            keep.append(bytearray(1000))
            time.sleep(0.0005)

    run, _ = profiled(long_enough)
    times = list(run.moments.t)
    assert 128 <= len(times) <= 256
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Merged evenly: the moments of the end are no denser than those of the start.
    assert times[-1] > 0.9 * run.info.duration_s - 0.1
    assert max(gaps) < 0.25
