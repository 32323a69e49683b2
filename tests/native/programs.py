"""Programs with known allocations on known lines. Lines are found by their ``# @tag``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

MIB = 1024 * 1024


def kept_alive() -> list[bytearray]:
    keep = [bytearray(4 * MIB)]  # @kept
    return keep


def freed() -> None:
    tmp = bytearray(6 * MIB)  # @freed
    del tmp


def grown() -> bytearray:
    buf = bytearray()
    for _ in range(64):
        buf.extend(b"x" * 65536)  # @grown
    return buf


def in_thread(out: list[bytearray]) -> None:
    def work() -> None:
        out.append(bytearray(3 * MIB))  # @thread

    t = threading.Thread(target=work)
    t.start()
    t.join()


def gen() -> Iterator[bytearray]:
    for _ in range(4):
        yield bytearray(MIB)  # @gen


def from_generator() -> list[bytearray]:
    return list(gen())  # @gen_caller


def comprehension() -> list[bytes]:
    return [bytes(1000) for _ in range(2000)]  # @comp


def leaf(n: int) -> bytearray:
    return bytearray(n)  # @leaf


def middle() -> list[bytearray]:
    return [leaf(MIB), leaf(2 * MIB)]  # @middle


def outer() -> list[bytearray]:
    kept = middle()  # @outer
    return kept


def recurse(depth: int) -> list[bytearray]:
    if depth == 0:
        return [bytearray(MIB)]  # @rec_leaf
    return recurse(depth - 1) + [bytearray(MIB)]  # @rec


def zig(depth: int, kept: list[bytearray]) -> None:
    """Recursion through two functions and three lines taking turns (zig, zag, zig...): a line
    or function recurs on a path with others between."""
    kept.append(bytearray(1000 + depth))  # @zig_own
    if depth > 0:
        if depth % 3:
            zag(depth - 1, kept)  # @zig_zag
        else:
            zig(depth - 1, kept)  # @zig_zig


def zag(depth: int, kept: list[bytearray]) -> None:
    kept.append(bytearray(2000 + depth))  # @zag_own
    if depth > 0:
        zig(depth - 1, kept)  # @zag_zig


def _path(level: int, path: int) -> bytearray:
    if level == 0:
        return bytearray(32)  # @path_leaf
    if path & 1:
        return _path(level - 1, path >> 1)
    return _path(level - 1, path >> 1)


def paths(levels: int) -> list[bytearray]:
    """A bytearray at the end of each of 2^levels distinct call paths (a big call tree)."""
    return [_path(levels, p) for p in range(2**levels)]


def pieces(count: int) -> list[bytearray]:
    kept = []
    for _ in range(count):
        kept.append(bytearray(1000))  # @piece
    return kept


def pieces_below(depth: int, count: int) -> list[bytearray]:
    if depth > 0:
        return pieces_below(depth - 1, count)
    return pieces(count)


def _source_of_pieces(count: int) -> Iterator[list[bytearray]]:
    while True:
        yield pieces(count)  # @source_pieces


def two_sources(count: int) -> list[list[bytearray] | None]:
    """Two generators of one function asked once each, from one place, with no allocation
    between them: the second's frame is another frame at the first one's place, with the same
    frames above and below it."""
    sources = (_source_of_pieces(count), _source_of_pieces(count))
    out: list[list[bytearray] | None] = [None, None]
    i = 0
    for source in sources:
        out[i] = next(source)  # @source_next
        i += 1  # noqa: SIM113 (enumerate would make a tuple between the two calls)
    return out


def two_calls(depth: int) -> tuple[list[bytearray], list[bytearray]]:
    """Two calls of one function from two lines, each `depth` frames above the allocations:
    the second call's frames take the first's places (same addresses, same code); only this
    frame's line differs."""
    first = pieces_below(depth, 1000)  # @first_call
    second = pieces_below(depth, 2000)  # @second_call
    return first, second


def descend(level: int, path: int, lines: tuple[bool, ...], events: tuple[bool, ...]) -> Any:
    """One path of branching_descent: a bytearray of 1000 + ``path`` bytes made ``level`` calls
    down, each call made from one of two lines as ``lines[level]`` says. Only where
    ``events[level]`` says so does a frame allocate (a big int, or on 3.13+ a free-listed block
    reused) before its call: so the innermost frame of the stack's last event before the leaf
    is sometimes many frames above it, sometimes right below it."""
    if level == 0:
        return path, bytearray(1000 + path)  # @descent_leaf
    if events[level]:
        junk = (1 << 100) + level  # @descent_int
        del junk
    if lines[level]:
        return descend(level - 1, path, lines, events)  # @descent_one
    return descend(level - 1, path, lines, events)  # @descent_zero


def branching_descent(levels: int) -> list[tuple[int, bytearray]]:
    """2^levels call paths through two call lines per level: each path, taken once, ends in
    an allocation of its own size. Path after path, the frames take the last path's places
    (same addresses, same code) while some callers below have moved to their other line;
    nothing is allocated between paths (the next event is in the new path, maybe deep)."""
    n = 2**levels
    lines = [
        (False, *((p >> (lvl - 1)) & 1 == 1 for lvl in range(1, levels + 1))) for p in range(n)
    ]
    events = [
        (False, *((p * 7919 >> lvl) % 3 == 0 for lvl in range(1, levels + 1))) for p in range(n)
    ]
    out: list[Any] = [None] * n
    for i in range(n):  # (i < 256: small ints, made by no allocation)
        out[i] = descend(levels, i, lines[i], events[i])
    return out


def alt_a() -> tuple[bytearray, bytearray]:
    first = bytearray(100)  # @alt_a1
    second = bytearray(300)  # @alt_a2
    return first, second


def alt_b() -> tuple[bytearray, bytearray]:
    first = bytearray(200)  # @alt_b1
    second = bytearray(400)  # @alt_b2
    return first, second


def alternating(depth: int, count: int) -> list[tuple[bytearray, bytearray]]:
    """`count` calls, `depth` frames down, of two functions in turn from one line: each call's
    frame takes the last one's place (same address, same caller, same caller's position) but
    runs the other function's code."""
    if depth > 0:
        return alternating(depth - 1, count)
    return [(alt_a if i % 2 == 0 else alt_b)() for i in range(count)]  # @alt_call


def peak_then_drop() -> bytearray:
    big = bytearray(20 * MIB)  # @peak_big
    del big
    small = bytearray(2 * MIB)  # @peak_small
    return small


def free_listed(n: int) -> list[tuple[int, int, int]]:
    """Objects of the types CPython keeps on free lists, made `n` to a line and dropped at the
    return (the lists fill up and keep their last ones), and 1,000 tuples that stay alive."""
    pairs = []
    for i in range(n):
        pairs.append((i, -i))  # @fl_tuples
    halves = []
    for i in range(n):
        halves.append(i * 0.5)  # @fl_floats
    dicts = []
    for _ in range(n):
        dicts.append({})  # @fl_dicts
    lists = []
    for i in range(n):
        lists.append([i])  # @fl_lists
    alive = []
    for i in range(1000):
        alive.append((i, i, i))  # @fl_alive
    return alive


def dup_leaf(n: int) -> bytearray:
    return bytearray(n)  # @dup_leaf


def dup_calls() -> list[Any]:
    """Calls that reach one line through places that differ in the frames only: two calls on
    one line (two call sites of one line), a comprehension, and calls from C (sorted's key),
    first and later: each line must be one node under each caller's node."""
    out: list[Any] = []
    for _ in range(2):
        first, second = dup_leaf(1000), dup_leaf(2000)  # @dup_two
        out += [first, second, dup_leaf(3000)]  # @dup_other
        out += [dup_leaf(100 * k) for k in (1, 2, 3)]  # @dup_comp
        out.append(sorted([3, 1, 2], key=lambda x: len(dup_leaf(10 * x))))  # @dup_sorted
    return out
