"""What holds the lines live at the end of a run: found once, as the program ends and before
the interpreter tears down, by the native walk (``_tracer.holders``, native/src/holders.cpp).

The lines looked for are the :data:`LINES` that hold the most at the end (at least
:data:`MIN_LIVE_BYTES` each). The walk starts from every module in ``sys.modules`` and from
each frame of every thread (memlens's own modules and frames left out), the program's own
first (``__main__``, the modules and frames of its files), follows references as the garbage
collector sees them, and keeps, for each line, the paths to up to :data:`SAMPLES` of its
objects. Its bounds: at most
:data:`MAX_VISITS` objects (about 28 bytes of memlens's own memory each, freed at once) and
:data:`TIME_SHARE` of the run's duration (at least :data:`MIN_SECONDS`). When every module
and thread has been walked and a line's objects are still missing, the objects the garbage
collector tracks (``gc.get_objects()``) are walked from those that nothing else reaches: what
C code holds, and reference cycles not freed yet. A line with fewer live blocks than
:data:`SAMPLES` (one big buffer, a list and its items; in sampling mode, the few sampled
blocks of most lines) is done once the walk has found them all: without that, one such line
kept every walk going to its bounds.

Nothing of the program runs: the walk holds the GIL, calls no Python code and takes no
reference; the only Python objects made are the answer's (and that list of GC objects, when
needed, dropped right after).
"""

from __future__ import annotations

import gc
import os
import sys
from array import array

from memlens import _tracer
from memlens.model import HeldBy, Hop

# Imported once the program has ended, on `memlens run`'s way to writing the run: no typing
# at run time (docs/ARCHITECTURE.md, "Start-up").
TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import types
    from collections.abc import Sequence
    from typing import Any

#: Lines looked for: those holding the most at the end of the run, at least this much each.
LINES = 50
MIN_LIVE_BYTES = 1024
#: Objects of a line whose paths are kept.
SAMPLES = 5
#: Bounds of the walk: objects visited, and its time as a share of the run's (at least
#: MIN_SECONDS).
MAX_VISITS = 1_000_000
TIME_SHARE = 0.2
MIN_SECONDS = 0.25

#: memlens's own code (this package's parent): its modules and frames are not roots.
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def _own_module(name: str) -> bool:
    return name.split(".", 1)[0] in ("memlens", "memlens_lsp", "memlens_mcp")


def _own_frame(frame: Any) -> bool:
    return _real(frame.f_code.co_filename).startswith(_OWN_DIR + os.sep)


def roots(
    program: frozenset[str] = frozenset(),
) -> tuple[list[tuple[object, str, str, int]], list[object]]:
    """The walk's roots: (object, kind, name, tier) for each module and each frame of the
    program's threads (memlens's own frames left out: the program may call memlens.stop() with
    objects in its locals), by tier: 0, ``__main__`` and the modules of the ``program``'s files
    (real paths); 1, the frames running its files; 2 and 3, the other modules and frames (a
    module holds for good, a frame until it returns: the walk names the module when both
    hold an object). And the objects the walk must not enter (memlens's own modules)."""
    out: list[tuple[object, str, str, int]] = []
    skip: list[object] = []
    module_type = type(sys)
    for name, module in list(sys.modules.items()):
        if not isinstance(module, module_type):
            continue
        if _own_module(name):
            skip.append(module)
            skip.append(module.__dict__)
            continue
        file = module.__dict__.get("__file__")
        mine = name == "__main__" or (isinstance(file, str) and _real(file) in program)
        out.append((module, "module", name, 0 if mine else 2))
    names: dict[int, str] = {}
    threading = sys.modules.get("threading")
    if threading is not None:
        names = {t.ident: t.name for t in threading.enumerate() if t.ident is not None}
    for ident, top in sys._current_frames().items():
        frame: types.FrameType | None = top
        while frame is not None:
            code = frame.f_code
            if not _own_frame(frame):
                where = getattr(code, "co_qualname", code.co_name)
                tier = 1 if _real(code.co_filename) in program else 3
                out.append((frame, "thread", f"{names.get(ident, ident)} in {where}", tier))
            frame = frame.f_back
    out.sort(key=lambda root: root[3])
    unique: dict[int, tuple[object, str, str, int]] = {}
    for root in out:  # a module under two names is one root (its first)
        unique.setdefault(id(root[0]), root)
    return list(unique.values()), skip


def _real(path: str) -> str:
    return os.path.realpath(path) if path and not path.startswith("<") else path


def find(
    built: dict[str, Any],
    paths: Sequence[str],
    duration_s: float,
    *,
    lines: int = LINES,
    min_live: int = MIN_LIVE_BYTES,
    max_visits: int | None = None,
    sampling: bool = False,
) -> tuple[HeldBy, ...]:
    """What holds the heaviest live lines of a run being built (``built``: the native build
    of its snapshot, taken with the tracer's tables still in place; ``paths``: its file ids'
    paths; ``sampling``: a sampling run's, whose lines have only their sampled blocks tracked),
    in the order of ``paths`` and lines."""
    sites = built["sites"]
    live = sites["live_bytes"]
    ranked = sorted((i for i in range(len(live)) if live[i] >= min_live), key=lambda i: -live[i])
    chosen = ranked[:lines]
    if not chosen:
        return ()
    node_site = built["node_site"]
    # Each site's target (its rank among the chosen, -1 if none). The walk finds a node's target
    # through its site when it meets one of its blocks: nothing per node is made here (a big
    # call tree has a few hundred thousand nodes).
    target_of_site = array("i", [-1]) * len(live)
    for t, site in enumerate(chosen):
        target_of_site[site] = t
    node_sites = node_site.tobytes()
    targets = target_of_site.tobytes()
    # How many live blocks each chosen line has in the tracer's tables: all of them in exact
    # mode (the snapshot's count), the sampled ones in sampling mode (counted in the table).
    if sampling:
        counts: Sequence[int] = array("i", _tracer.table_blocks(node_sites, len(live)))
    else:
        counts = sites.get("live_count", ())
    # (-1: not known; 0: none, a line whose memory the tables do not hold block by block.)
    per_target = [max(-1, min(counts[s], SAMPLES)) for s in chosen] if counts else []
    tracked = array("i", per_target).tobytes()
    findable = sum(1 for n in per_target if n != 0) if per_target else len(chosen)

    def where(node: int) -> tuple[str, int]:
        site = node_site[node] if 0 <= node < len(node_site) else -1
        if site < 0:
            return "", 0
        return paths[sites["file"][site]], sites["line"][site]

    root_list, skip = roots(frozenset(paths))
    numpy = sys.modules.get("numpy")
    ndarray = numpy.__dict__.get("ndarray") if numpy is not None else None
    budget = max(TIME_SHARE * duration_s, MIN_SECONDS)
    visits = MAX_VISITS if max_visits is None else max_visits
    answer = _tracer.holders(
        root_list, skip, [], node_sites, targets, ndarray, SAMPLES, visits, budget, tracked
    )
    found = {t for t, _ in answer["chains"]}
    if answer["complete"] and len(found) < findable:
        # Some lines' objects are reached from no module or thread: walk again, from the
        # objects the collector tracks that nothing reaches.
        everything = gc.get_objects()
        try:
            answer = _tracer.holders(
                root_list, skip, everything, node_sites, targets, ndarray, SAMPLES, visits,
                budget, tracked,
            )  # fmt: skip
        finally:
            del everything
    by_target: dict[int, list[list[Hop]]] = {}
    for target, hops in answer["chains"]:
        by_target.setdefault(target, []).append(
            [Hop(kind, name, type_, *where(node)) for kind, name, type_, node in hops]
        )
    out = []
    for t, site in enumerate(chosen):
        file, line = paths[sites["file"][site]], sites["line"][site]
        chains = by_target.get(t)
        if not chains:
            none = per_target and per_target[t] == 0  # (nothing of it any walk could meet)
            outcome = "unreached" if answer["complete"] or none else "budget"
            out.append(HeldBy(file, line, 0, outcome))
            continue
        for hops, objects in group(chains):
            out.append(HeldBy(file, line, objects, "found", tuple(hops)))
    order = {p: i for i, p in enumerate(paths)}
    out.sort(key=lambda h: (order[h.file], h.line))
    return tuple(out)


#: Hops whose name differs from object to object of the same container (keys, indexes).
_ITEM_HOPS = frozenset(("key", "dict_key", "index", "member"))


def group(chains: list[list[Hop]]) -> list[tuple[list[Hop], int]]:
    """Paths that differ only in keys and indexes (other items of the same containers) as
    one, with how many objects took it; the first seen represents them."""
    groups: dict[tuple[tuple[str, str, str], ...], tuple[list[Hop], int]] = {}
    for hops in chains:
        key = tuple((h.kind, "" if h.kind in _ITEM_HOPS else h.name, h.type) for h in hops)
        first, n = groups.get(key, (hops, 0))
        groups[key] = (first, n + 1)
    return list(groups.values())
