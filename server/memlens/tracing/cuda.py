"""PyTorch's CUDA memory in a traced program: recorded from the moment CUDA is initialised,
taken at the end (docs/how-it-works.md, "GPU memory").

Profiling changes nothing, so memlens neither imports torch nor initialises CUDA itself. While
tracing, the tracer's import watcher waits for the program's own ``import torch`` (which
imports ``torch.cuda``); then :func:`arm_when_initialised` asks ``torch.cuda._lazy_call`` to
run :func:`_arm` when CUDA is initialised (at once if it already is): PyTorch runs such calls
at the end of its lazy CUDA initialisation, before the first allocation is served. :func:`_arm` turns on the caching
allocator's history (``torch.cuda.memory._record_memory_history``: every allocation with its
Python frames, at most :data:`MAX_EVENTS` events in a ring buffer). When tracing stops,
:func:`take` asks for the history (``torch.cuda.memory._snapshot()``, plain dicts, before the
interpreter tears anything down) and turns recording off; :mod:`memlens.gpu` charges it to the
program's lines, as ``memlens import torch-snapshot`` does for one recorded elsewhere.

A program that never imports torch, or never uses CUDA, pays for nothing more than the import
watcher numpy needs anyway (one dict lookup per import). Imported at the start of every traced
program: only ``sys`` here.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import types
    from typing import Any

    from memlens.gpu import History
    from memlens.model import Run

#: The events the allocator keeps (its ring buffer: later events overwrite the oldest). Each
#: holds its Python stack, a few hundred bytes of the program's host memory (native, charged
#: to the line that allocated on the GPU), so at most a few tens of MB.
MAX_EVENTS = 100_000
#: The module whose import arms recording (``import torch`` imports it).
TORCH_CUDA = "torch.cuda"

#: Whether to record at all (``memlens run --no-gpu``, ``memlens.start(gpu=False)``).
enabled = True
#: Whether this process asked PyTorch to record (CUDA was initialised while tracing).
_armed = False
#: The history :func:`take` last turned into figures (the pytest plugin's per-test windows).
last_history: History | None = None


def _warn(what: str, exc: BaseException) -> None:
    text = " ".join(str(exc).split())[:200] or type(exc).__name__
    print(f"memlens: {what}: {text}", file=sys.stderr)


def _arm() -> None:
    """Turn the caching allocator's history on (run by PyTorch as CUDA is initialised). Never
    raises: PyTorch would report any exception as the program's own CUDA error."""
    global _armed
    try:
        memory: Any = sys.modules.get("torch.cuda.memory")
        if memory is None or not enabled or _armed:
            return  # (tracing restarted with gpu=False, or armed already)
        options = {"context": "alloc", "stacks": "python", "max_entries": MAX_EVENTS}
        try:
            # free_requested events are not needed (free_completed are): half the history.
            memory._record_memory_history("all", skip_actions=["free_requested"], **options)
        except TypeError:  # a PyTorch without skip_actions
            memory._record_memory_history("all", **options)
        _armed = True
    except Exception as exc:  # noqa: BLE001 - whatever PyTorch raised: warn, go on untraced
        _warn("GPU memory is not recorded", exc)


def arm_when_initialised(module: types.ModuleType) -> None:
    """Ask ``torch.cuda`` (``module``, the program's own import) to turn recording on when CUDA
    is initialised, at once if it is already (the tracer's import watcher calls this)."""
    lazy_call = getattr(module, "_lazy_call", None)
    if lazy_call is None or not enabled:
        return  # not a PyTorch this knows, or GPU memory left out
    try:
        lazy_call(_arm)
    except Exception as exc:  # noqa: BLE001 - as in _arm
        _warn("GPU memory is not recorded", exc)


def take() -> dict[str, Any] | None:
    """The allocator's history (``torch.cuda.memory._snapshot()``), and recording turned off
    (tracing stops); None when nothing was recorded (no CUDA, or not in this process)."""
    global _armed, enabled
    enabled = False  # a call PyTorch still has queued (CUDA not initialised yet) does nothing
    if not _armed:
        return None
    _armed = False
    cuda: Any = sys.modules.get(TORCH_CUDA)
    memory: Any = sys.modules.get("torch.cuda.memory")
    try:
        if cuda is None or memory is None or not cuda.is_initialized():
            return None
        snapshot: dict[str, Any] = memory._snapshot()
        memory._record_memory_history(None)
    except Exception as exc:  # noqa: BLE001 - whatever PyTorch raised: no GPU figures
        _warn("GPU memory is not recorded", exc)
        return None
    return snapshot


def peek() -> History | None:
    """The history so far, recording on (the pytest plugin judging a test); None when
    nothing is recorded."""
    if not _armed:
        return None
    from memlens.gpu import SnapshotError, read_snapshot

    cuda: Any = sys.modules.get(TORCH_CUDA)
    memory: Any = sys.modules.get("torch.cuda.memory")
    try:
        if cuda is None or memory is None or not cuda.is_initialized():
            return None
        return read_snapshot(memory._snapshot())
    except SnapshotError as exc:
        _warn("cannot read PyTorch's GPU memory history", exc)
    except Exception as exc:  # noqa: BLE001 - whatever PyTorch raised
        _warn("GPU memory is not recorded", exc)
    return None


def attach(run: Run, snapshot: object, charge: Any) -> Run:
    """``run`` with the GPU figures of ``snapshot`` (what :func:`take` returned), charged to
    lines by ``charge`` (the tracer's filter: a frame's file -> the run's file, or None)."""
    global last_history
    from memlens.gpu import SnapshotError, attach, build, read_snapshot
    from memlens.imports._build import Sources

    try:
        history = read_snapshot(snapshot)
        figures = build(history, charge, Sources())
    except (SnapshotError, ValueError) as exc:
        _warn("cannot read PyTorch's GPU memory history", exc)
        return run
    last_history = history
    return attach(run, figures)
