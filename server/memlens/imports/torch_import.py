"""``memlens import torch-snapshot``: a PyTorch CUDA memory snapshot as a run of GPU figures.

A snapshot is what ``torch.cuda.memory._dump_snapshot(path)`` writes after
``torch.cuda.memory._record_memory_history(stacks="python")``: a pickle of plain dicts and
lists holding the caching allocator's history (every allocation and free with its Python
frames) and the blocks still allocated. It is read by :mod:`memlens.imports.plain_pickle`,
which runs nothing (a pickle is code: one that asks for anything but plain data is refused),
and turned into figures per line by :mod:`memlens.gpu`, the same code ``memlens run`` uses for
a program's own snapshot.

Frames of installed packages, the standard library and pseudo files are transparent (decided
from the path alone: the snapshot comes from another machine), so each allocation is charged
to the innermost line of the user's code. Files keep the paths they had where the snapshot was
recorded; their text is read from the file with the longest common path suffix under the
search directories (default: the current one), so the editor shows the figures on the
workspace's copy as it does for runs from other checkouts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timezone

from memlens import gpu
from memlens.errors import MemlensError, os_error_reason
from memlens.imports._build import RunBuilder, Sources, is_pseudo_file
from memlens.imports.plain_pickle import PickleRefused, loads
from memlens.layout import open_regular
from memlens.model import Run
from memlens.query import is_library_path

#: Largest snapshot file read (PyTorch's own viewer stops well before).
MAX_SNAPSHOT_BYTES = 2 * 1024 * 1024 * 1024


def import_snapshot(path: str, search_dirs: Sequence[str] = ()) -> Run:
    """Read a snapshot file and turn it into a run of GPU figures. Raises
    :class:`MemlensError` (one line) when the file is not a snapshot, runs nothing."""
    data = _read(path)
    try:
        history = gpu.read_snapshot(loads(data))
    except PickleRefused as exc:
        raise MemlensError(f"cannot read {path}: not a PyTorch memory snapshot: {exc}") from None
    except gpu.SnapshotError as exc:
        raise MemlensError(f"cannot read {path}: {exc}") from None
    except (RecursionError, MemoryError):
        raise MemlensError(f"cannot read {path}: too large or too deeply nested") from None
    del data
    if not any(d.events or d.blocks for d in history.devices):
        raise MemlensError(
            f"cannot read {path}: the snapshot holds no allocation (was it recorded with "
            "torch.cuda.memory._record_memory_history(stacks='python')?)"
        )
    sources = Sources(search_dirs, find_moved=True)
    try:
        figures = gpu.build(history, _charge, sources)
    except ValueError as exc:  # figures a run cannot hold (see _build.check_value)
        raise MemlensError(f"cannot read {path}: {exc}") from None
    times = [e[4] for d in history.devices for e in d.events[:1] + d.events[-1:] if e[4] > 0]
    started = (
        datetime.fromtimestamp(min(times) / 1e6, timezone.utc)
        if times and min(times) / 1e6 < 2**33
        else datetime.fromtimestamp(os.path.getmtime(path), timezone.utc)
    )
    empty = RunBuilder(sources).build(
        command=("torch-snapshot", os.path.abspath(path)),
        source="torch",
        python="",
        started=started,
        duration_s=(max(times) - min(times)) / 1e6 if times else 0.0,
        peak_traced_bytes=0,
        peak_rss_bytes=0,
    )
    return gpu.attach(empty, figures)


def _charge(filename: str) -> str | None:
    """The user's files are charged; libraries and pseudo files are transparent."""
    return None if is_pseudo_file(filename) or is_library_path(filename) else filename


def _read(path: str) -> bytes:
    try:
        # A regular file only: a FIFO or device given by mistake would block or never end.
        with open(open_regular(path), "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > MAX_SNAPSHOT_BYTES:
                raise MemlensError(
                    f"cannot read {path}: larger than {MAX_SNAPSHOT_BYTES >> 30} GiB"
                )
            return fh.read(MAX_SNAPSHOT_BYTES + 1)[:MAX_SNAPSHOT_BYTES]
    except OSError as exc:
        raise MemlensError(f"cannot read {path}: {os_error_reason(exc)}") from None
