"""What holds the lines live at the end of a run (memlens.tracing.holders, native/src/holders.cpp):
the paths from a module global, a class attribute, an instance attribute, a slot or a thread's
frame to the line's objects, each hop with the line that allocated its object; found without
changing the program (reference counts are as they were) and within its bounds. (C code and
cycles, which need a fresh process: tests/cli/test_holders_e2e.py.)"""

from __future__ import annotations

import functools
import gc
import sys
import textwrap
import threading
import types
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memlens
from memlens import held
from memlens.model import HeldBy, Run
from memlens.tracing import holders

from .conftest import tagged


@pytest.fixture
def module(tmp_path: Path) -> Iterator[Any]:
    """Makes modules from source, as imports do (a real file, in sys.modules): the walk
    starts from sys.modules. They are removed afterwards."""
    made: list[str] = []

    def make(source: str, name: str = "ledger") -> tuple[types.ModuleType, str]:
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        mod = types.ModuleType(name)
        mod.__file__ = str(path)
        sys.modules[name] = mod
        made.append(name)
        exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)  # noqa: S102 - ours
        return mod, str(path)

    yield make
    for name in made:
        sys.modules.pop(name, None)


@pytest.fixture(autouse=True)
def _time_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    # These runs last a moment, so the search's time bound is its floor; inside the whole test
    # suite's process (a heap of test modules and clients walked before a thread's frames) on
    # a loaded machine that floor can end the walk before a thread is reached. The paths are
    # what these tests check; the bounds are test_the_walk_s_bounds's.
    monkeypatch.setattr(holders, "MIN_SECONDS", 10.0)


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Each walk the runs make: what it was given and what it answered (the real walk's)."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    walk = holders._tracer.holders

    def recorded(*args: Any) -> dict[str, Any]:
        answer = walk(*args)
        seen.append((args, answer))
        return answer

    monkeypatch.setattr(holders._tracer, "holders", recorded)
    return seen


def run_of(fn: Any, **options: Any) -> Run:
    gc.collect()
    with memlens.profile(**options) as p:
        fn()
    assert p.run is not None
    return p.run


def paths_of(run: Run, path: str, tag: str) -> list[HeldBy]:
    found = held.of_line(run, path, tagged(path, tag))
    assert found, f"nothing recorded for @{tag}: {run.holders}"
    return found


def hops(h: HeldBy) -> list[tuple[str, str, str, int]]:
    """(kind, name, type, line) of each hop (the line only for the hop's own file)."""
    return [(x.kind, x.name, x.type, x.line) for x in h.hops]


LEDGER = """\
_price_cache = {}  # @cache


def price(sku, day):
    key = (sku, day)  # @key
    hit = _price_cache.get(key)
    if hit is None:
        hit = [float(day)] * 50  # @hit
        _price_cache[key] = hit  # @store
    return hit


def work(n):
    for i in range(n):
        price(f"sku{i % 100}", i // 100)
"""


def test_a_module_global_holds_what_a_line_keeps(module: Any) -> None:
    mod, path = module(LEDGER)
    run = run_of(lambda: mod.work(2000))
    (hit,) = paths_of(run, path, "hit")
    assert hit.outcome == "found"
    assert hit.objects == holders.SAMPLES
    key_name = hit.hops[2].name
    assert key_name.startswith("('sku")
    assert key_name.endswith(")")
    # (The module and its dict were made before the run: no line allocated them.)
    assert hops(hit) == [
        ("module", "ledger", "module", 0),
        ("attribute", "_price_cache", "dict", 0),
        ("key", key_name, "list", tagged(path, "hit")),
    ]
    assert hit.hops[2].file == path
    assert held.expression(hit) == f"ledger._price_cache[{key_name}]"
    # The storing line's own memory is the dict's table; the keys are the dict's keys.
    (store,) = paths_of(run, path, "store")
    assert hops(store)[-1] == ("buffer", "table", "", tagged(path, "store"))
    assert held.expression(store) == "ledger._price_cache (its hash table)"
    (key,) = paths_of(run, path, "key")
    assert [h.kind for h in key.hops] == ["module", "attribute", "dict_key"]


def test_class_and_instance_attributes(module: Any) -> None:
    mod, path = module(
        """\
        class Registry:
            items = []


        class Ledger:
            def __init__(self):
                self.rows = []  # @rows


        LEDGER = None


        def work():
            global LEDGER
            LEDGER = Ledger()  # @ledger
            for i in range(300):
                Registry.items.append(str(i) * 20)  # @append
                LEDGER.rows.append([i] * 20)  # @row
        """
    )
    run = run_of(mod.work)
    (append,) = paths_of(run, path, "append")
    assert hops(append)[:3] == [
        ("module", "ledger", "module", 0),
        ("attribute", "Registry", "type", 0),
        ("attribute", "items", "list", 0),
    ]
    assert append.hops[3].kind == "index"
    assert held.expression(append).startswith("ledger.Registry.items[")
    (row,) = paths_of(run, path, "row")
    assert hops(row)[:3] == [
        ("module", "ledger", "module", 0),
        ("attribute", "LEDGER", "Ledger", tagged(path, "ledger")),
        ("attribute", "rows", "list", tagged(path, "rows")),
    ]
    assert row.hops[3].kind == "index"


def test_a_slot_and_a_bytearray_s_data(module: Any) -> None:
    mod, path = module(
        """\
        class Slotted:
            __slots__ = ("kept",)

        SLOTTED = Slotted()


        def work():
            SLOTTED.kept = bytearray(50_000)  # @slot
        """
    )
    run = run_of(mod.work)
    line = tagged(path, "slot")
    found = {held.expression(h): hops(h) for h in paths_of(run, path, "slot")}
    assert found == {
        "ledger.SLOTTED.kept": [
            ("module", "ledger", "module", 0),
            ("attribute", "SLOTTED", "Slotted", 0),
            ("attribute", "kept", "bytearray", line),
        ],
        "ledger.SLOTTED.kept (its data)": [
            ("module", "ledger", "module", 0),
            ("attribute", "SLOTTED", "Slotted", 0),
            ("attribute", "kept", "bytearray", line),
            ("buffer", "data", "", line),
        ],
    }


def test_a_thread_s_local_variable(module: Any) -> None:
    mod, path = module(
        """\
        import threading

        started = threading.Event()
        release = threading.Event()


        def hold():
            buf = []
            for i in range(500):
                buf.append(str(i) * 50)  # @local
            started.set()
            release.wait()
        """
    )
    worker = threading.Thread(target=mod.hold, name="holder")

    def work() -> None:
        worker.start()
        mod.started.wait()

    try:
        run = run_of(work)
    finally:
        mod.release.set()
        worker.join()
    (local,) = paths_of(run, path, "local")
    assert local.hops[0].kind == "thread"
    assert local.hops[0].name == "holder in hold"
    assert [h.kind for h in local.hops[1:]] == ["local", "index"]
    assert local.hops[1].name == "buf"


def test_the_walk_s_bounds(module: Any) -> None:
    mod, path = module(LEDGER)
    mod.work(2000)
    with memlens.profile(holders=False) as p:
        mod.work(4000)
    assert p.run is not None
    assert p.run.holders == ()
    # A budget too small to reach anything: the lines say so.
    original = holders.MAX_VISITS
    holders.MAX_VISITS = 10
    try:
        run = run_of(lambda: mod.work(6000))
    finally:
        holders.MAX_VISITS = original
    (hit,) = paths_of(run, path, "hit")
    assert (hit.outcome, hit.hops) == ("budget", ())


FEW_BLOCKS = """\
KEPT = None
NOISE = None


def work():
    global KEPT, NOISE
    KEPT = b"x" * 1_000_000  # @kept
    NOISE = [str(i) * 20 for i in range(100_000)]  # @noise
"""


@pytest.mark.parametrize(
    "options", [{}, {"mode": "sampling", "sample_interval": 64 * 1024, "seed": 7}]
)
def test_a_line_with_fewer_blocks_than_samples_ends_the_walk_once_found(
    module: Any,
    monkeypatch: pytest.MonkeyPatch,
    walks: list[tuple[tuple[Any, ...], dict[str, Any]]],
    options: dict[str, Any],
) -> None:
    """A line holding fewer live blocks than SAMPLES (one buffer here; in sampling mode, the
    sampled ones of most lines) is done once they are all found: the walk stops there, a few
    thousand objects in, instead of going through every object the program holds (the 100,000
    strings, then every module) to its bounds, as it did when each line waited for SAMPLES of
    its blocks. (Only the two lines are looked for: from 3.13 the line running the profiled
    function is charged memlens's own objects made before it stops, which no module the walk
    enters holds.)"""
    mod, path = module(FEW_BLOCKS)
    monkeypatch.setattr(holders, "find", functools.partial(holders.find, min_live=500_000))
    run = run_of(mod.work, **options)
    (kept,) = paths_of(run, path, "kept")
    assert (kept.outcome, kept.objects) == ("found", 1)
    noise = paths_of(run, path, "noise")
    assert sum(h.objects for h in noise) == holders.SAMPLES
    assert walks
    answer = walks[0][1]
    assert answer["complete"]
    assert answer["visited"] < 20_000, answer["visited"]


FREE_LISTED = """\
KEPT = None
NOISE = None


def work():
    global KEPT, NOISE
    rows = [(i, -i, bytearray(600_000) if i == 0 else None) for i in range(5000)]  # @rows
    KEPT = rows[0][2]
    del rows
    NOISE = [str(i) * 20 for i in range(100_000)]  # @noise
"""


@pytest.mark.skipif(
    sys.version_info < (3, 13),
    reason="before 3.13 a block an object of another line reuses stays on its first line "
    "(docs/how-it-works.md, Free lists): the line may then count blocks no walk from it finds",
)
def test_a_line_s_free_listed_blocks_are_not_looked_for(
    module: Any,
    monkeypatch: pytest.MonkeyPatch,
    walks: list[tuple[tuple[Any, ...], dict[str, Any]]],
) -> None:
    """Sampling mode counts a line's tracked blocks to know when it is done: the 2,000 tuples
    CPython keeps on its free list (dead, still tracked) counted, so a line with a buffer
    beside them waited for five objects and the walk went through every object (the 100,000
    strings, every module) to its bounds. They are left out of the count."""
    mod, path = module(FREE_LISTED)
    monkeypatch.setattr(holders, "find", functools.partial(holders.find, min_live=500_000))
    run = run_of(mod.work, mode="sampling", sample_interval=1, seed=7)
    found = paths_of(run, path, "rows")
    assert any(h.outcome == "found" and h.hops[-1].name == "KEPT" for h in found), found
    assert walks
    answer = walks[0][1]
    assert answer["complete"]
    assert answer["visited"] < 20_000, answer["visited"]


def test_a_block_met_again_is_kept_once_towards_a_line_s_blocks(
    module: Any, walks: list[tuple[tuple[Any, ...], dict[str, Any]]]
) -> None:
    """Five views of an array (module globals), met before the array itself (held one step
    further), lead to its data five times: that is one of the array line's two blocks, kept
    once, and the walk goes on to the array object (it stopped before it when each meeting
    counted as one of the line's blocks, or took one of the five samples)."""
    np = pytest.importorskip("numpy")
    mod, path = module(
        """\
        import numpy as np

        V1 = V2 = V3 = V4 = V5 = HOLDER = None
        # (numpy keeps the small blocks of freed arrays' shapes for the next arrays: with
        # some kept, the profiled array takes no block of its own for its shape.)
        _warm = [np.zeros(10) for _ in range(8)]
        del _warm


        def work():
            global V1, V2, V3, V4, V5, HOLDER
            array = np.zeros(100_000)  # @array
            V1, V2, V3, V4, V5 = (array[:] for _ in range(5))  # @views
            HOLDER = {"a": array}  # @holder
        """
    )
    run = run_of(mod.work)
    assert isinstance(mod.HOLDER["a"], np.ndarray)
    tracked = array("i", walks[0][0][9])
    assert tracked[0] == 2  # the heaviest line, the array's: its object and data (the premise)
    found = paths_of(run, path, "array")
    assert {h.outcome for h in found} == {"found"}
    ends = {(h.hops[-1].kind, h.hops[-1].name, h.hops[-1].type) for h in found}
    assert ("key", "'a'", "numpy.ndarray") in ends, ends


def test_lines_not_live_at_exit_are_not_looked_for(module: Any) -> None:
    mod, path = module(
        """\
        def work():
            for _ in range(100):
                tmp = [0] * 1000  # @tmp
            return len(tmp)
        """
    )
    run = run_of(mod.work)
    assert held.of_line(run, path, tagged(path, "tmp")) == []


def test_reference_counts_are_as_they_were(module: Any) -> None:
    mod, path = module(
        """\
        KEPT = []


        def work():
            for i in range(200):
                KEPT.append([i] * 100)  # @kept
        """
    )
    kept = mod.KEPT
    before = sys.getrefcount(kept)
    run = run_of(mod.work)
    # (Counted before asserting: pytest's assertions hold references of their own.)
    after, item = sys.getrefcount(kept), sys.getrefcount(kept[0])
    assert after == before
    assert item == 2  # the list's, and getrefcount's argument
    assert held.expression(paths_of(run, path, "kept")[0]).startswith("ledger.KEPT[")


def test_the_walk_gets_each_site_s_target_and_each_node_s_site(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk is given each node's site and each site's target (the heaviest lines' ranks),
    not a table per node made in Python (a big call tree has a few hundred thousand nodes). A
    node with no line (the root: site -1) stays -1: the walk counts it for no line."""
    seen: dict[str, Any] = {}

    def walk(
        roots: Any, skip: Any, everything: Any, sites: bytes, targets: bytes, *rest: Any
    ) -> Any:
        seen["sites"], seen["targets"] = array("i", sites), array("i", targets)
        return {"chains": [], "complete": False}

    monkeypatch.setattr(holders._tracer, "holders", walk)
    built = {
        "sites": {"live_bytes": [10, 1 << 20, 2 << 20], "file": [0, 0, 0], "line": [1, 2, 3]},
        "node_site": array("i", [-1, 0, 1, 2, -1]),
    }
    holders.find(built, ["app.py"], 1.0)
    assert list(seen["sites"]) == [-1, 0, 1, 2, -1]
    # Sites 2 and 1 are looked for (heaviest first: targets 0 and 1); site 0 is too light.
    assert list(seen["targets"]) == [-1, 1, 0]
