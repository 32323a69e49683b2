"""GPU memory per line, from the history PyTorch's CUDA caching allocator records.

``torch.cuda.memory._record_memory_history(stacks="python")`` makes the allocator record every
allocation and free with its size, time and Python frames; ``torch.cuda.memory._snapshot()``
returns that history (``device_traces``, one list of events per device) with the blocks still
allocated (``segments``), as plain dicts and lists. Both ways GPU figures come into a run go
through here: ``memlens run`` takes the snapshot at the end of the program
(:mod:`memlens.tracing.cuda`), ``memlens import torch-snapshot`` reads one recorded elsewhere
(:mod:`memlens.imports.torch_import`). Either way:

1. :func:`read_snapshot` checks the snapshot (untrusted: it may come from any machine) and
   turns it into a :class:`History`: events per device, stacks interned;
2. :func:`attribute` gives allocations made with no Python frame a stack: the backward pass
   runs on autograd's own threads, so the tensors it allocates carry no frame, and the line
   responsible is the one waiting in ``backward()`` (see :func:`attribute`);
3. :func:`replay` replays each device's events: what each stack allocated, what it still holds
   at the end, and what it held at the device's peak (the moment the most was allocated);
4. :func:`build` charges each stack to the innermost frame that passes the run's filter (the
   user's line, as the tracer does for host memory), with inclusive figures per line and
   function counted once per call path (:class:`memlens.imports._build.RunBuilder`), and
   :func:`attach` adds those figures to a run.

Sizes are the sizes requested (``torch.cuda.max_memory_allocated`` counts the allocator's
rounded block sizes, a little more). Standard library only.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence

from memlens.imports._build import RunBuilder, Sources
from memlens.model import (
    GPU_FIGURES,
    GPU_FUNCTION_FIGURES,
    FunctionStats,
    GpuDevice,
    GpuDeviceLine,
    LineStats,
    Run,
    SourceFile,
    replace,
)

#: One frame as PyTorch records it: file name, line, function name.
Frame = tuple[str, int, str]

#: Event kinds kept from a device's history.
ALLOC, FREE, SEGMENT_ALLOC, SEGMENT_FREE = range(4)
_ACTIONS = {
    "alloc": ALLOC,
    "free_completed": FREE,  # the block is free for reuse (free_requested may wait on streams)
    "segment_alloc": SEGMENT_ALLOC,
    "segment_map": SEGMENT_ALLOC,  # expandable segments
    "segment_free": SEGMENT_FREE,
    "segment_unmap": SEGMENT_FREE,
}
#: Block states that still count as allocated (awaiting free: freed, waiting on a stream).
_ALLOCATED_STATES = frozenset(("active_allocated", "active_awaiting_free"))

# -- limits: a snapshot is untrusted input --------------------------------------------------
#: Most devices, events (all devices together), frames of one stack, characters of a name.
MAX_DEVICES = 1024
MAX_EVENTS = 50_000_000
MAX_FRAMES = 10_000
MAX_NAME_CHARS = 4096
#: Largest size or address accepted (sizes beyond 2**53 bytes are no GPU's).
MAX_SIZE = 2**53
MAX_ADDRESS = 2**64
MAX_LINE = 2**31 - 1


class SnapshotError(ValueError):
    """Not a PyTorch memory snapshot, or a damaged one: the message says why (one line)."""


class DeviceHistory:
    """One device's events, in the order they happened: (kind, address, size, stack, time in
    microseconds); ``blocks``: address -> (size, stack) of the blocks still allocated when the
    snapshot was taken (from its ``segments``); ``reserved``: the bytes its segments held then."""

    __slots__ = ("blocks", "device", "events", "reserved")

    def __init__(self, device: int) -> None:
        self.device = device
        self.events: list[list[int]] = []
        self.blocks: dict[int, tuple[int, int]] = {}
        self.reserved = 0


class History:
    """A snapshot's history: ``stacks`` (id -> frames, innermost first; id 0 has none) and the
    devices that recorded events or hold blocks."""

    __slots__ = ("_ids", "attributed", "devices", "stacks")

    def __init__(self) -> None:
        self.stacks: list[tuple[Frame, ...]] = [()]
        self._ids: dict[tuple[Frame, ...], int] = {(): 0}
        self.devices: list[DeviceHistory] = []
        #: Whether :func:`attribute` gave the frameless allocations their stacks already.
        self.attributed = False

    def intern(self, frames: tuple[Frame, ...]) -> int:
        found = self._ids.get(frames)
        if found is None:
            found = self._ids[frames] = len(self.stacks)
            self.stacks.append(frames)
        return found


def _int(value: object, low: int, high: int, what: str) -> int:
    if type(value) is not int or not low <= value <= high:
        raise SnapshotError(f"{what} is not an integer from {low} to {high:,}")
    return value


def _name(value: object, what: str) -> str:
    if type(value) is not str or len(value) > MAX_NAME_CHARS:
        raise SnapshotError(f"{what} is not a string of at most {MAX_NAME_CHARS} characters")
    return value


class _Reader:
    """Checks a snapshot's parts as they are turned into a :class:`History` (frames lists are
    often shared between events: each is read once)."""

    def __init__(self) -> None:
        self.history = History()
        self._by_list: dict[int, int] = {}
        self._keep: list[object] = []  # the lists whose ids key _by_list stay alive

    def stack(self, frames: object) -> int:
        if frames is None:
            return 0
        if not isinstance(frames, list):
            raise SnapshotError("frames is not a list")
        found = self._by_list.get(id(frames))
        if found is not None:
            return found
        out = []
        for f in frames[:MAX_FRAMES]:  # innermost first: deeper stacks lose their roots
            if not isinstance(f, dict):
                raise SnapshotError("a frame is not a dict")
            out.append(
                (
                    _name(f.get("filename"), "a frame's filename"),
                    _int(f.get("line"), -1, MAX_LINE, "a frame's line"),
                    _name(f.get("name"), "a frame's name"),
                )
            )
        sid = self._by_list[id(frames)] = self.history.intern(tuple(out))
        self._keep.append(frames)
        return sid


def read_snapshot(snapshot: object) -> History:
    """The history of a snapshot (``torch.cuda.memory._snapshot()``'s dict), checked: a
    :class:`SnapshotError` names the first thing that is not as PyTorch writes it."""
    if not isinstance(snapshot, dict) or "device_traces" not in snapshot:
        raise SnapshotError("not a PyTorch memory snapshot (no device_traces)")
    traces = snapshot["device_traces"]
    segments = snapshot.get("segments", [])
    if not isinstance(traces, list) or not isinstance(segments, list):
        raise SnapshotError("device_traces or segments is not a list")
    if len(traces) > MAX_DEVICES:
        raise SnapshotError(f"more than {MAX_DEVICES} devices")
    reader = _Reader()
    history = reader.history
    devices: dict[int, DeviceHistory] = {}
    total = 0
    for index, trace in enumerate(traces):
        if not isinstance(trace, list):
            raise SnapshotError(f"the trace of device {index} is not a list")
        total += len(trace)
        if total > MAX_EVENTS:
            raise SnapshotError(f"more than {MAX_EVENTS:,} events")
        device = devices[index] = DeviceHistory(index)
        time = 0
        for event in trace:
            if not isinstance(event, dict):
                raise SnapshotError(f"an event of device {index} is not a dict")
            kind = _ACTIONS.get(event.get("action"))  # type: ignore[arg-type]
            if kind is None:
                continue  # free_requested, oom, snapshot, user annotations: no bytes move
            time = _int(event.get("time_us", time), 0, MAX_ADDRESS, "an event's time_us")
            device.events.append(
                [
                    kind,
                    _int(event.get("addr"), 0, MAX_ADDRESS, "an event's addr"),
                    _int(event.get("size"), 0, MAX_SIZE, "an event's size"),
                    reader.stack(event.get("frames")),
                    time,
                ]
            )
    for segment in segments:
        if not isinstance(segment, dict):
            raise SnapshotError("a segment is not a dict")
        index = _int(segment.get("device", 0), 0, MAX_DEVICES - 1, "a segment's device")
        device = devices.get(index) or devices.setdefault(index, DeviceHistory(index))
        device.reserved += _int(segment.get("total_size", 0), 0, MAX_SIZE, "a segment's size")
        blocks = segment.get("blocks", [])
        if not isinstance(blocks, list):
            raise SnapshotError("a segment's blocks is not a list")
        total += len(blocks)
        if total > MAX_EVENTS:
            raise SnapshotError(f"more than {MAX_EVENTS:,} events and blocks")
        for block in blocks:
            if not isinstance(block, dict):
                raise SnapshotError("a block is not a dict")
            if block.get("state") not in _ALLOCATED_STATES:
                continue
            size = block.get("requested_size", block.get("size"))
            device.blocks[_int(block.get("address"), 0, MAX_ADDRESS, "a block's address")] = (
                _int(size, 0, MAX_SIZE, "a block's size"),
                reader.stack(block.get("frames")),
            )
    history.devices = [devices[k] for k in sorted(devices)]
    return history


# -- frameless allocations: the backward pass ------------------------------------------------

#: The functions through which Python starts autograd's engine (file suffix, function): the
#: backward pass runs on the engine's threads, which have no Python frame.
AUTOGRAD_ENTRIES: frozenset[tuple[str, str]] = frozenset(
    (
        ("torch/_tensor.py", "backward"),
        ("torch/autograd/__init__.py", "backward"),
        ("torch/autograd/__init__.py", "grad"),
        ("torch/autograd/graph.py", "_engine_run_backward"),
    )
)


def backward_cut(frames: tuple[Frame, ...]) -> tuple[Frame, ...] | None:
    """The part of a stack from its outermost autograd entry (``loss.backward()`` ->
    ``torch/_tensor.py: backward``) to its root, or None when it is not in a backward pass."""
    for i in range(len(frames) - 1, -1, -1):
        filename, _line, name = frames[i]
        if name in ("backward", "grad", "_engine_run_backward"):
            path = filename.replace("\\", "/")
            for suffix, function in AUTOGRAD_ENTRIES:
                if name == function and path.endswith("/" + suffix):
                    return frames[i:]
    return None


def attribute(history: History) -> int:
    """Gives each allocation made with no Python frame the stack of the backward pass it
    belongs to; returns how many it gave one.

    The events of every device are taken in time order (each device's own order kept). An
    event whose stack passes through an autograd entry (:data:`AUTOGRAD_ENTRIES`) opens a
    backward pass: the thread that made it waits in ``backward()`` while autograd's threads
    allocate the gradients. The pass is still open at a later frameless allocation unless an
    event of that same thread (the same outermost frame: another thread has another root)
    came since from outside every backward pass. Such an allocation gets the opening stack cut
    at the entry, so it is charged to the line that called ``backward()`` (and the call path
    shows it went through ``torch``'s backward). Frameless allocations outside a backward pass
    keep no stack (charged to no line). Done once per history (0 the next times)."""
    if history.attributed:
        return 0
    history.attributed = True
    streams = [((e[4], i, e) for i, e in enumerate(d.events)) for d in history.devices if d.events]
    stacks = history.stacks
    cut_of: dict[int, int] = {}  # stack id -> id of its backward cut, or -1
    pending = 0  # the stack a frameless allocation gets now (0: none)
    pending_root: Frame | None = None
    given = 0
    for _time, _i, event in heapq.merge(*streams, key=lambda x: x[0]):
        sid = event[3]
        if sid:
            cut = cut_of.get(sid)
            if cut is None:
                frames = backward_cut(stacks[sid])
                cut = cut_of[sid] = -1 if frames is None else history.intern(frames)
            if cut >= 0:
                pending, pending_root = cut, stacks[sid][-1]
            elif pending and stacks[sid][-1] == pending_root:
                pending, pending_root = 0, None
        elif event[0] == ALLOC and pending:
            event[3] = pending
            given += 1
    return given


# -- replaying a device's history --------------------------------------------------------------


class DeviceFigures:
    """What :func:`replay` found on one device: per stack id [allocated bytes, allocations,
    bytes still allocated at the end, bytes held at the device's peak], and the device's
    totals (:class:`memlens.model.GpuDevice`)."""

    __slots__ = ("by_stack", "device", "summary")

    def __init__(self, device: int, by_stack: dict[int, list[int]], summary: GpuDevice) -> None:
        self.device = device
        self.by_stack = by_stack
        self.summary = summary


def _initial(device: DeviceHistory) -> dict[int, tuple[int, int]]:
    """The blocks allocated before the device's first recorded event: freed in the history
    without having been allocated in it (their allocation's stack is unknown), or still
    allocated at the end without an allocation in it (the snapshot's blocks name their
    stack). Empty for a history that starts with the device's first allocation."""
    live: dict[int, int] = {}
    before: dict[int, tuple[int, int]] = {}
    for kind, addr, size, _stack, _time in device.events:
        if kind == ALLOC:
            live[addr] = size
        elif kind == FREE and live.pop(addr, None) is None and addr not in before:
            before[addr] = (size, 0)
    for addr, (size, stack) in device.blocks.items():
        if addr not in live and addr not in before:
            before[addr] = (size, stack)
    return before


def replay(device: DeviceHistory) -> DeviceFigures:
    """Replays one device's history: figures per stack (:class:`DeviceFigures`)."""
    initial = _initial(device)
    events = device.events

    def walk(stop: int) -> tuple[dict[int, tuple[int, int]], int, int, int]:
        """The live blocks after the first ``stop`` events; the most allocated at once and
        the number of events after which it was first reached (0: before any)."""
        live = dict(initial)
        total = sum(size for size, _ in initial.values())
        peak, peak_at = total, 0
        for n in range(stop):
            kind, addr, size, stack, _time = events[n]
            if kind == ALLOC:
                old = live.get(addr)
                if old is not None:
                    total -= old[0]
                live[addr] = (size, stack)
                total += size
                if total > peak:
                    peak, peak_at = total, n + 1
            elif kind == FREE:
                old = live.pop(addr, None)
                if old is not None:
                    total -= old[0]
        return live, total, peak, peak_at

    end_live, _total, peak, peak_at = walk(len(events))
    at_peak = walk(peak_at)[0] if peak_at != len(events) else end_live
    by_stack: dict[int, list[int]] = {}

    def row(stack: int) -> list[int]:
        found = by_stack.get(stack)
        if found is None:
            found = by_stack[stack] = [0, 0, 0, 0]
        return found

    alloc_bytes = alloc_count = 0
    for size, stack in initial.values():
        if stack:  # allocated before the history, by a known stack (a block still held)
            r = row(stack)
            r[0] += size
            r[1] += 1
            alloc_bytes += size
            alloc_count += 1
    reserved = reserved_peak = device.reserved - sum(
        e[2] if e[0] == SEGMENT_ALLOC else -e[2]
        for e in events
        if e[0] in (SEGMENT_ALLOC, SEGMENT_FREE)
    )
    for kind, _addr, size, stack, _time in events:
        if kind == ALLOC:
            r = row(stack)
            r[0] += size
            r[1] += 1
            alloc_bytes += size
            alloc_count += 1
        elif kind == SEGMENT_ALLOC:
            reserved += size
            reserved_peak = max(reserved_peak, reserved)
        elif kind == SEGMENT_FREE:
            reserved -= size
    for size, stack in end_live.values():
        row(stack)[2] += size
    for size, stack in at_peak.values():
        row(stack)[3] += size
    summary = GpuDevice(
        device=device.device,
        peak_bytes=peak,
        alloc_bytes=alloc_bytes,
        alloc_count=alloc_count,
        live_bytes=sum(size for size, _ in end_live.values()),
        reserved_peak_bytes=max(reserved_peak, 0),
        complete=not initial,
    )
    return DeviceFigures(device.device, by_stack, summary)


# -- figures per line --------------------------------------------------------------------------

#: Where a frame's file is charged: the name a :class:`Sources` resolves (the file of the run
#: it goes to), or None when the frame is transparent (a library, memlens, a pseudo file).
Charge = Callable[[str], "str | None"]


class GpuFigures:
    """The GPU figures of a history, per device, ready for :func:`attach`: ``devices`` are
    (device summary, a run whose *host* figures hold that device's GPU figures) pairs."""

    __slots__ = ("devices",)

    def __init__(self, devices: Sequence[tuple[GpuDevice, Run]]) -> None:
        self.devices = tuple(devices)

    @property
    def peak_bytes(self) -> int:
        """Each device at its own peak, summed."""
        return sum(d.peak_bytes for d, _ in self.devices)


def build(history: History, charge: Charge, sources: Sources | None = None) -> GpuFigures:
    """The figures of a history, charged to lines by ``charge`` (frames it says None for are
    transparent; an allocation none of whose frames is charged goes to no line)."""
    sources = sources or Sources()
    attribute(history)
    charged: dict[int, list[tuple[str, int, str]]] = {}

    def path(stack: int) -> list[tuple[str, int, str]]:
        found = charged.get(stack)
        if found is None:
            found = charged[stack] = [
                (name, line, function)
                for filename, line, function in reversed(history.stacks[stack])
                if line >= 1 and (name := charge(filename)) is not None
            ]
        return found

    out = []
    for device in history.devices:
        figures = replay(device)
        builder = RunBuilder(sources)
        for stack, (alloc, count, live, peak) in sorted(figures.by_stack.items()):
            frames = path(stack)
            if frames:
                builder.add(frames, alloc, count, live, peak)
        built = builder.build(
            command=(),
            source="torch",
            python="",
            started=None,
            duration_s=0.0,
            peak_traced_bytes=0,
            peak_rss_bytes=0,
        )
        out.append((figures.summary, built))
    return GpuFigures(out)


def _gpu_line(st: LineStats) -> dict[str, int]:
    """A device run's host figures of one line as GPU figures (named :data:`GPU_FIGURES`)."""
    return dict(
        zip(
            GPU_FIGURES,
            (
                st.alloc_bytes,
                st.alloc_count,
                st.live_bytes,
                st.peak_bytes,
                st.incl_alloc_bytes,
                st.incl_live_bytes,
                st.incl_peak_bytes,
            ),
            strict=True,
        )
    )


def _gpu_function(fn: FunctionStats) -> tuple[int, ...]:
    return (fn.alloc_bytes, fn.alloc_count, fn.live_bytes, fn.peak_bytes)


def attach(run: Run, gpu: GpuFigures) -> Run:
    """``run`` with the GPU figures ``gpu`` added: per line (the sums over devices, and each
    device's own when there are several), per function (matched by name and first line, else
    added), new files for lines only GPU memory names, and the run's GPU peak and devices."""
    files = dict(run.files)
    lines: dict[str, dict[int, dict[str, int]]] = {}
    per_device: dict[str, dict[int, list[GpuDeviceLine]]] = {}
    functions: dict[str, dict[tuple[str, int], tuple[FunctionStats, list[int]]]] = {}
    sources: dict[str, SourceFile] = {}
    several = len(gpu.devices) > 1
    for summary, built in gpu.devices:
        for path, sf in built.files.items():
            sources.setdefault(path, sf)
            file_lines = lines.setdefault(path, {})
            for line, st in sf.lines.items():
                sums = file_lines.setdefault(line, dict.fromkeys(GPU_FIGURES, 0))
                for name, value in _gpu_line(st).items():
                    sums[name] += value
                if several:
                    per_device.setdefault(path, {}).setdefault(line, []).append(
                        GpuDeviceLine(
                            summary.device,
                            st.alloc_bytes,
                            st.alloc_count,
                            st.live_bytes,
                            st.peak_bytes,
                        )
                    )
            fns = functions.setdefault(path, {})
            for fn in sf.functions:
                key = (fn.qualname, fn.first_line)
                found = fns.get(key)
                if found is None:
                    fns[key] = (fn, list(_gpu_function(fn)))
                else:
                    found[1][:] = [a + b for a, b in zip(found[1], _gpu_function(fn), strict=True)]
    for path, file_lines in lines.items():
        sf = files.get(path) or replace(sources[path], lines={}, functions=())
        new_lines = dict(sf.lines)
        for line, sums in file_lines.items():
            new_lines[line] = replace(new_lines.get(line) or LineStats(), **sums)
        files[path] = replace(
            sf,
            lines=dict(sorted(new_lines.items())),
            functions=_with_gpu_functions(sf.functions, functions.get(path, {})),
            gpu_devices={
                line: tuple(each) for line, each in sorted(per_device.get(path, {}).items())
            },
        )
    summaries = tuple(summary for summary, _ in gpu.devices)
    info = replace(run.info, gpu_peak_bytes=gpu.peak_bytes, gpus=summaries)
    return replace(run, info=info, files=dict(sorted(files.items())))


def _with_gpu_functions(
    host: Iterable[FunctionStats], gpu: dict[tuple[str, int], tuple[FunctionStats, list[int]]]
) -> tuple[FunctionStats, ...]:
    out = []
    left = dict(gpu)
    for fn in host:
        found = left.pop((fn.qualname, fn.first_line), None)
        if found is None:
            out.append(fn)
        else:
            out.append(replace(fn, **dict(zip(GPU_FUNCTION_FIGURES, found[1], strict=True))))
    for fn, sums in left.values():
        out.append(
            FunctionStats(
                fn.qualname,
                fn.first_line,
                fn.last_line,
                **dict(zip(GPU_FUNCTION_FIGURES, sums, strict=True)),
            )
        )
    return tuple(out)


# -- per-test windows (pytest --memlens) -------------------------------------------------------


def window(history: History, start: int, end: int) -> History:
    """The part of ``history`` between ``start`` and ``end`` (microseconds since the epoch):
    what :func:`build` charges to lines as allocated during it (a test). Frameless allocations
    are attributed on the whole history first (their backward pass may have begun before)."""
    attribute(history)
    out = History()
    out.stacks, out._ids, out.attributed = history.stacks, history._ids, True
    for device in history.devices:
        part = DeviceHistory(device.device)
        part.events = [e for e in device.events if start <= e[4] <= end]
        out.devices.append(part)
    return out


def window_peaks(history: History, windows: Sequence[tuple[int, int]]) -> list[int]:
    """For each window (start and end time in microseconds since the epoch, as the events'
    ``time_us``; windows in time order, not overlapping), the most GPU memory (all devices)
    allocated during it above what was allocated when it started."""
    streams = [
        ((e[4], d.device, e) for e in d.events if e[0] in (ALLOC, FREE)) for d in history.devices
    ]
    sizes: dict[tuple[int, int], int] = {}
    total = 0
    out = [0] * len(windows)
    k = 0
    base: int | None = None
    peak = 0
    for time, device, event in heapq.merge(*streams, key=lambda x: x[0]):
        while k < len(windows) and time > windows[k][1]:
            if base is not None:
                out[k] = peak - base
            k, base = k + 1, None
        if k < len(windows) and base is None and time >= windows[k][0]:
            base = peak = total
        key = (device, event[1])
        if event[0] == ALLOC:
            total += event[2] - sizes.get(key, 0)
            sizes[key] = event[2]
        else:
            total -= sizes.pop(key, 0)
        if base is not None:
            peak = max(peak, total)
    while k < len(windows):
        if base is not None:
            out[k] = peak - base
        k, base = k + 1, None
    return out
