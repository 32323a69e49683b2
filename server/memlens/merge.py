"""Merging the runs of several processes into one (``memlens run`` follows child processes).

The rule (docs/how-it-works.md, "Child processes"):

- per line, per function and per call-tree node, every figure is the sum over the processes:
  allocated bytes and counts; live at exit (each process's live memory when it ended); peak
  (each process's own share at its own peak); the inclusive figures alike. Sampling errors
  add in quadrature (the processes sample independently);
- the run's peak traced memory (and peak RSS) is the largest sum over the processes alive at
  the same moment, found by laying their memory timelines on one clock (each run's start
  time plus its timeline's offsets), and at least every process's own peak;
- the merged timeline is that sum, on the first run's clock; so are the merged moments (each
  line's live bytes at the processes' moments, summed over the processes alive then) and when
  the merged peak happened;
- what holds a line's objects (``holders``) is each process's own paths, listed together;
- a process that left only a checkpoint (killed, crashed, still running) counts with what the
  checkpoint held; one that left no run counts with nothing;
- GPU memory (PyTorch CUDA) likewise per line and function; the run's GPU peak is the sum of
  each process's own (processes usually use their own devices), and its devices are theirs.

``memlens merge`` applies the same rule to runs made apart (workers on other machines, or not
started by the profiled program): :func:`combine`.

Standard library only; run after the program ended, so imports cost nothing it measures.
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timezone

from memlens import model
from memlens.calltree import TreeBuilder
from memlens.errors import MemlensError, RunFileError
from memlens.layout import process_runs
from memlens.model import (
    CALL_TREE_COLUMNS,
    CallTree,
    FunctionKey,
    FunctionStats,
    GpuDeviceLine,
    LineStats,
    Moments,
    ProcessInfo,
    Run,
    SourceFile,
    TimelinePoint,
    replace,
)
from memlens.runfile import reader

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: Most points of a merged timeline (as the tracer's own timelines).
MAX_TIMELINE_POINTS = 4096
#: Most moments of a merged run (as the tracer keeps at most).
MAX_MOMENTS = 256
#: Most processes listed in a run's header (each entry is small; the header is bounded).
MAX_LISTED_PROCESSES = 2048
#: Longest command kept per listed process, in characters (all arguments together).
MAX_COMMAND_CHARS = 1024


def merge(runs: Sequence[Run], processes: Sequence[ProcessInfo]) -> Run:
    """One run holding the figures of every run in ``runs`` (the first is the program's own:
    its header, sources and clock are kept), listing ``processes`` in its header."""
    root = runs[0]
    files: dict[str, SourceFile] = dict(root.files)
    for run in runs[1:]:
        for path, sf in run.files.items():
            mine = files.get(path)
            files[path] = sf if mine is None else _merge_file(mine, sf)
    peak_traced, peak_rss, timeline = _merge_timelines(runs)
    peak_at = max(timeline, key=lambda p: p.traced_bytes).t if timeline else root.info.peak_at_s
    info = replace(
        root.info,
        peak_traced_bytes=max(peak_traced, *(r.info.peak_traced_bytes for r in runs)),
        peak_rss_bytes=max(peak_rss, *(r.info.peak_rss_bytes for r in runs)),
        processes=tuple(listed(p) for p in processes[:MAX_LISTED_PROCESSES]),
        peak_at_s=peak_at if len(runs) > 1 else root.info.peak_at_s,
        gpu_peak_bytes=sum(r.info.gpu_peak_bytes for r in runs),
        gpus=tuple(g for r in runs for g in r.info.gpus),
    )
    return Run(
        info=info,
        files=files,
        call_tree=_merge_trees([r.call_tree for r in runs]),
        timeline=timeline,
        moments=_merge_moments(runs) if len(runs) > 1 else root.moments,
        holders=tuple(h for r in runs for h in r.holders),  # each process's paths, as found
    )


def combine(runs: Sequence[Run]) -> Run:
    """Runs made apart (``memlens merge``: workers on several machines, or processes that
    were not children of one profiled program) as one run, by :func:`merge`'s rule. The run
    that started first gives the header, the sources it recorded and the clock; the header
    lists every process of every run (a run that followed children lists its own), spans from
    the first start to the last end, and is complete only when every run is. Runs of
    different modes or sampling intervals are refused: their figures are not of one kind.
    Files a run recorded under its own workspace root are taken as the first run's files at
    the same place under its root (:func:`onto`), so that a file of two checkouts is one."""
    if not runs:
        raise MemlensError("nothing to merge")
    kinds = {(r.info.mode, r.info.sample_interval_bytes) for r in runs}
    if len(kinds) > 1:
        listed_kinds = ", ".join(
            mode if mode == "exact" else f"{mode} every {interval} bytes"
            for mode, interval in sorted(kinds)
        )
        raise MemlensError(f"cannot merge runs made in different modes ({listed_kinds})")
    ordered = sorted(runs, key=lambda r: (_start(r) is None, _start(r) or 0.0))
    root = ordered[0].info.workspace_root
    ordered = [ordered[0], *(onto(r, root) for r in ordered[1:])]
    processes = [p for r in ordered for p in processes_of(r)]
    merged = merge(ordered, processes)
    info = replace(merged.info, complete=all(r.info.complete for r in ordered))
    first, last = _span(ordered)
    if first is not None and last is not None:
        ended = datetime.fromtimestamp(last, timezone.utc).isoformat()
        info = replace(info, ended=ended, duration_s=max(last - first, info.duration_s))
    return replace(merged, info=info)


def onto(run: Run, root: str) -> Run:
    """``run`` with the files it recorded under its workspace root (another checkout, another
    machine) moved to the same relative path under ``root``, as the editor maps a run made in
    another checkout onto the workspace. ``run`` itself when either root is unknown, they are
    the same, or the run's root is a file system's root (a process started from ``/``)."""
    own = run.info.workspace_root
    if not (own and root and os.path.isabs(own) and os.path.isabs(root)):
        return run
    own, root = os.path.normpath(own), os.path.normpath(root)
    if own == root or os.path.dirname(own) == own:
        return run
    prefix = os.path.join(own, "")

    def moved(path: str) -> str:
        if os.path.isabs(path) and os.path.normpath(path).startswith(prefix):
            return os.path.join(root, os.path.relpath(os.path.normpath(path), own))
        return path

    files: dict[str, SourceFile] = {}
    for path, sf in run.files.items():
        new = moved(path)
        if new != path:
            sf = replace(sf, path=new)
        mine = files.get(new)
        files[new] = sf if mine is None else _merge_file(mine, sf)
    tree = run.call_tree
    columns = {name: getattr(tree, name) for name in CALL_TREE_COLUMNS}
    tree = CallTree(
        [moved(p) for p in tree.files], tree.functions, columns, canonical=tree.is_canonical()
    )
    m = run.moments
    moments = Moments(
        m.t,
        m.traced_bytes,
        [moved(p) for p in m.files],
        m.lines,
        [(moved(f), q, first, last) for f, q, first, last in m.function_keys],
        m.functions,
    )
    return replace(run, files=files, call_tree=tree, moments=moments)


def processes_of(run: Run) -> tuple[ProcessInfo, ...]:
    """The processes whose figures ``run`` holds: those its header lists (a run that followed
    child processes), else its own process (its parent unknown: 0)."""
    if run.info.processes:
        return run.info.processes
    info = run.info
    return (ProcessInfo(info.pid, 0, info.command, info.complete, info.peak_traced_bytes),)


def _span(runs: Sequence[Run]) -> tuple[float | None, float | None]:
    """The first start and the last end of ``runs`` (timestamps), None when not known."""
    starts = [t for t in (_start(r) for r in runs) if t is not None]
    ends = [t + r.info.duration_s for r in runs if (t := _start(r)) is not None]
    return (min(starts), max(ends)) if starts else (None, None)


#: Most processes whose own runs are read to split a merged run's lines by process.
MAX_SPLIT_PROCESSES = 32

#: Per file and line, each contributing process with its own figures on that line.
ProcessLines = dict[str, dict[int, tuple[tuple[ProcessInfo, LineStats], ...]]]


def split_by_process(run_path: str, run: Run, limit: int = MAX_SPLIT_PROCESSES) -> ProcessLines:
    """The lines of the merged run ``run`` (read from ``run_path``) to which more than one
    process contributed, with each process's own figures, from the runs in its processes
    folder (the first ``limit`` processes listed; a process without a readable run of its own,
    or whose id names several runs, is left out). Empty for a run of one process."""
    if len(run.info.processes) < 2:
        return {}
    found: dict[str, dict[int, list[tuple[ProcessInfo, LineStats]]]] = {}
    for process in run.info.processes[:limit]:
        paths = process_runs(run_path, process.pid)
        if len(paths) != 1:
            continue
        try:
            own = reader.read(paths[0])
        except RunFileError:
            continue
        for path, sf in own.files.items():
            if path not in run.files:
                continue
            lines = found.setdefault(path, {})
            for line, st in sf.lines.items():
                if st.alloc_bytes or st.peak_bytes or st.live_bytes or st.has_gpu():
                    lines.setdefault(line, []).append((process, st))
    return {
        path: {line: tuple(each) for line, each in lines.items() if len(each) > 1}
        for path, lines in found.items()
    }


def listed(process: ProcessInfo) -> ProcessInfo:
    """``process`` as a run's header lists it: its command cut to :data:`MAX_COMMAND_CHARS`."""
    kept: list[str] = []
    room = MAX_COMMAND_CHARS
    for arg in process.command:
        if room <= 0:
            break
        kept.append(arg[:room])
        room -= len(arg)
    command = tuple(kept)
    return process if command == process.command else replace(process, command=command)


def add_lines(a: LineStats, b: LineStats) -> LineStats:
    """The figures of one line in two processes: sums (errors in quadrature)."""
    sums: dict[str, float] = {
        f: getattr(a, f) + getattr(b, f)
        for f in (*model.FIGURES, *model.NATIVE, *model.GPU_FIGURES)
    }
    sums.update((e, math.hypot(getattr(a, e), getattr(b, e))) for e in model.ERRORS)
    return LineStats(**sums)  # type: ignore[arg-type]  # figures are ints, errors floats


def _merge_file(a: SourceFile, b: SourceFile) -> SourceFile:
    lines = dict(a.lines)
    for line, st in b.lines.items():
        mine = lines.get(line)
        lines[line] = st if mine is None else add_lines(mine, st)
    functions: dict[tuple[str, int, int], FunctionStats] = {}
    for fn in (*a.functions, *b.functions):
        key = (fn.qualname, fn.first_line, fn.last_line)
        mine_fn = functions.get(key)
        functions[key] = (
            fn
            if mine_fn is None
            else replace(
                mine_fn,
                **{
                    f: getattr(mine_fn, f) + getattr(fn, f)
                    for f in (*model.FUNCTION_FIGURES, *model.GPU_FUNCTION_FIGURES)
                },
            )
        )
    # The recorded source is the first process's: the same file, read at its end.
    text, sha = (a.text, a.sha256) if a.text is not None else (b.text, b.sha256)
    return SourceFile(
        a.path,
        sha,
        text,
        dict(sorted(lines.items())),
        tuple(functions.values()),
        gpu_devices=_merge_devices(a.gpu_devices, b.gpu_devices),
    )


def _merge_devices(
    a: Mapping[int, tuple[GpuDeviceLine, ...]], b: Mapping[int, tuple[GpuDeviceLine, ...]]
) -> dict[int, tuple[GpuDeviceLine, ...]]:
    """Lines' GPU figures per device of two processes: summed per device index."""
    out: dict[int, dict[int, GpuDeviceLine]] = {}
    for split in (a, b):
        for line, each in split.items():
            devices = out.setdefault(line, {})
            for d in each:
                mine = devices.get(d.device)
                devices[d.device] = (
                    d
                    if mine is None
                    else replace(
                        mine, **{f: getattr(mine, f) + getattr(d, f) for f in model.DEVICE_FIGURES}
                    )
                )
    return {
        line: tuple(v for _, v in sorted(devices.items())) for line, devices in sorted(out.items())
    }


def _merge_trees(trees: Sequence[CallTree]) -> CallTree:
    """The call trees of several processes as one: nodes reached by the same call path (the
    same lines from the root) become one node, figures summed."""
    builder = TreeBuilder()
    for tree in trees:
        # Canonical trees: a node's parent comes before it, ids are positions. Call-tree nodes
        # have no live count: 0 in its place among the sums.
        zeros = [0] * len(tree)
        sums = [
            getattr(tree, name) if name in model.FUNCTION_FIGURES else zeros for name in model.SUMS
        ]
        new_id: list[int] = []
        for i, parent in enumerate(tree.parent):
            node = builder.node(
                -1 if parent < 0 else new_id[parent],
                tree.files[tree.file[i]],
                tree.line[i],
                tree.functions[tree.function[i]],
            )
            new_id.append(node)
            builder.add(node, [column[i] for column in sums])
    return builder.tree()


def _merge_timelines(runs: Sequence[Run]) -> tuple[int, int, tuple[TimelinePoint, ...]]:
    """The largest summed traced bytes and RSS over the processes' timelines laid on the first
    run's clock, and the summed timeline (at most :data:`MAX_TIMELINE_POINTS` points)."""
    origin = _start(runs[0])
    events: list[tuple[float, int, int, int, int]] = []  # (t, order, process, traced, rss)
    for k, run in enumerate(runs):
        if not run.timeline:
            continue
        start = _start(run)
        offset = 0.0 if start is None or origin is None else (start - origin)
        for p in run.timeline:
            events.append((offset + p.t, 0, k, p.traced_bytes, p.rss_bytes))
        # After its last point the process is gone: it holds nothing from the next moment on.
        events.append((offset + run.timeline[-1].t, 1, k, 0, 0))
    events.sort(key=lambda e: (e[0], e[1]))
    traced = [0] * len(runs)
    rss = [0] * len(runs)
    total_traced = total_rss = peak_traced = peak_rss = 0
    points: list[TimelinePoint] = []
    for i, (t, order, k, tb, rb) in enumerate(events):
        total_traced += tb - traced[k]
        total_rss += rb - rss[k]
        traced[k], rss[k] = tb, rb
        last_at_this_time = i + 1 == len(events) or events[i + 1][:2] != (t, order)
        if order == 0 and last_at_this_time:
            peak_traced = max(peak_traced, total_traced)
            peak_rss = max(peak_rss, total_rss)
            points.append(TimelinePoint(max(t, 0.0), total_traced, total_rss))
    return peak_traced, peak_rss, _thin(points)


def _merge_moments(runs: Sequence[Run]) -> Moments:
    """The processes' moments on the first run's clock: at each of their moments (at most
    :data:`MAX_MOMENTS`, evenly chosen), each line's and function's live bytes summed over the
    processes, each at its latest moment then; a process holds nothing before its first moment
    and after its run ended."""
    origin = _start(runs[0])
    # Events: (time, process, key, value...): a process's values at one of its moments, and
    # nothing from the end of its run on.
    line_events: list[tuple[float, int, tuple[str, int], int, int]] = []
    fn_events: list[tuple[float, int, FunctionKey, int]] = []
    traced_events: list[tuple[float, int, int]] = []
    times: set[float] = set()
    for k, run in enumerate(runs):
        moments = run.moments
        if not moments:
            continue
        start = _start(run)
        offset = 0.0 if start is None or origin is None else start - origin
        stamps = [offset + t for t in moments.t]
        times.update(max(0.0, t) for t in stamps)
        traced_events.extend((stamps[i], k, b) for i, b in enumerate(moments.traced_bytes))
        for path, lines in moments.line_changes().items():
            for line, changes in lines.items():
                for m, live, incl in changes:
                    line_events.append((stamps[m], k, (path, line), live, incl))
                line_events.append((offset + run.info.duration_s, k, (path, line), 0, 0))
        for function, fn_changes in moments.function_changes().items():
            for m, live in fn_changes:
                fn_events.append((stamps[m], k, function, live))
            fn_events.append((offset + run.info.duration_s, k, function, 0))
        traced_events.append((offset + run.info.duration_s, k, 0))
    if not times:
        return Moments()
    chosen = sorted(times)
    if len(chosen) > MAX_MOMENTS:
        step = math.ceil(len(chosen) / MAX_MOMENTS)
        chosen = chosen[step - 1 :: step]
    line_events.sort(key=lambda e: e[0])
    fn_events.sort(key=lambda e: e[0])
    traced_events.sort(key=lambda e: e[0])
    line_cols: dict[str, list[int]] = {c: [] for c in ("moment", "file", "line")}
    line_cols.update(live_bytes=[], incl_live_bytes=[])
    files: dict[str, int] = {}
    keys: dict[FunctionKey, int] = {}
    fn_cols: dict[str, list[int]] = {"moment": [], "function": [], "live_bytes": []}
    per_line: dict[tuple[str, int], dict[int, tuple[int, int]]] = {}
    per_fn: dict[FunctionKey, dict[int, int]] = {}
    per_traced: dict[int, int] = {}
    shown_line: dict[tuple[str, int], tuple[int, int]] = {}
    shown_fn: dict[FunctionKey, int] = {}
    traced_out: list[int] = []
    li = fi = ti = 0
    for m, t in enumerate(chosen):
        touched: set[tuple[str, int]] = set()
        while li < len(line_events) and line_events[li][0] <= t + 1e-12:
            _, k, where_k, live, incl = line_events[li]
            per_line.setdefault(where_k, {})[k] = (live, incl)
            touched.add(where_k)
            li += 1
        for where in sorted(touched):
            values = per_line[where].values()
            total = (sum(v[0] for v in values), sum(v[1] for v in values))
            if total != shown_line.get(where, (0, 0)):
                shown_line[where] = total
                line_cols["moment"].append(m)
                line_cols["file"].append(files.setdefault(where[0], len(files)))
                line_cols["line"].append(where[1])
                line_cols["live_bytes"].append(total[0])
                line_cols["incl_live_bytes"].append(total[1])
        touched_fn: set[FunctionKey] = set()
        while fi < len(fn_events) and fn_events[fi][0] <= t + 1e-12:
            _, k, fkey, live = fn_events[fi]
            per_fn.setdefault(fkey, {})[k] = live
            touched_fn.add(fkey)
            fi += 1
        for fkey in sorted(touched_fn):
            total_fn = sum(per_fn[fkey].values())
            if total_fn != shown_fn.get(fkey, 0):
                shown_fn[fkey] = total_fn
                fn_cols["moment"].append(m)
                fn_cols["function"].append(keys.setdefault(fkey, len(keys)))
                fn_cols["live_bytes"].append(total_fn)
        while ti < len(traced_events) and traced_events[ti][0] <= t + 1e-12:
            _, k, traced = traced_events[ti]
            per_traced[k] = traced
            ti += 1
        traced_out.append(sum(per_traced.values()))
    return Moments(chosen, traced_out, list(files), line_cols, list(keys), fn_cols)


def _start(run: Run) -> float | None:
    try:
        return datetime.fromisoformat(run.info.started).timestamp()
    except ValueError:
        return None


def _thin(points: list[TimelinePoint]) -> tuple[TimelinePoint, ...]:
    """At most :data:`MAX_TIMELINE_POINTS` points: evenly spaced ones, and the highest."""
    if len(points) <= MAX_TIMELINE_POINTS:
        return tuple(points)
    step = math.ceil(len(points) / (MAX_TIMELINE_POINTS - 1))
    top = max(range(len(points)), key=lambda i: points[i].traced_bytes)
    keep = sorted({*range(0, len(points), step), top})
    return tuple(points[i] for i in keep)
