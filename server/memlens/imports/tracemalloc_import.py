"""``memlens import tracemalloc``: a ``tracemalloc.Snapshot.dump()`` file as a run.

A snapshot is the set of blocks alive when it was taken, with the traceback of each (as deep
as the ``tracemalloc.start(nframe)`` limit). Per line, the self figures come from the traces
whose innermost frame is that line: *live* is their size and number. A snapshot records neither
what was freed earlier nor when the peak was, so *allocated* and *peak* are set to the live
figures (lower bounds of the real ones). Inclusive figures count every line of a traceback
once; functions (named and bounded from the source's syntax tree when it can be read) likewise;
the call tree follows the tracebacks, outermost frame first.

Snapshot files are pickle: loading one runs code from the file. Only import files you trust.
"""

from __future__ import annotations

import os
import pickle
import sys
import tracemalloc
from collections.abc import Sequence
from datetime import datetime, timezone

from memlens.errors import MemlensError, os_error_reason
from memlens.imports._build import Frame, RunBuilder, Sources
from memlens.layout import open_regular, python_version
from memlens.model import Run

PICKLE_WARNING = (
    "memlens: warning: tracemalloc snapshots are pickle files, and loading one can run code "
    "from it; only import snapshots you trust"
)


def import_snapshot(path: str, search_dirs: Sequence[str] = ()) -> Run:
    """Read a snapshot file (warning on stderr first) and turn it into a Run.

    Relative file names in the snapshot are looked up in ``search_dirs`` (default: the current
    directory). Raises :class:`MemlensError` (one line) when the file is not a snapshot.
    """
    print(PICKLE_WARNING, file=sys.stderr)
    try:
        os.close(open_regular(path))  # not a FIFO or device: loading it would block
        snapshot = tracemalloc.Snapshot.load(path)
    except OSError as exc:
        raise MemlensError(f"cannot read {path}: {os_error_reason(exc)}") from None
    except (pickle.UnpicklingError, EOFError, ImportError, RecursionError, MemoryError) as exc:
        raise MemlensError(
            f"cannot read {path}: not a tracemalloc snapshot ({_short(exc)})"
        ) from None
    except Exception as exc:  # noqa: BLE001 - unpickling can raise anything
        raise MemlensError(
            f"cannot read {path}: not a tracemalloc snapshot ({type(exc).__name__})"
        ) from None
    if not isinstance(snapshot, tracemalloc.Snapshot):
        raise MemlensError(f"cannot read {path}: not a tracemalloc snapshot")
    builder = RunBuilder(Sources(search_dirs))
    total = 0
    try:
        # Traces with the same traceback are summed first (statistics by traceback): the
        # figures are the same, and real snapshots have many blocks per stack.
        for stat in snapshot.statistics("traceback"):
            # A Traceback iterates from the oldest frame to the most recent one.
            stack: list[Frame] = [(f.filename, f.lineno, None) for f in stat.traceback]
            size, count = int(stat.size), int(stat.count)
            builder.add(stack, size, count, size, size, live_count=count)
            total += size
    except (TypeError, ValueError, AttributeError, IndexError) as exc:
        raise MemlensError(
            f"cannot read {path}: damaged tracemalloc snapshot ({_short(exc)})"
        ) from None
    mtime = datetime.fromtimestamp(os.path.getmtime(path), timezone.utc)
    try:
        return builder.build(
            command=("tracemalloc", os.path.abspath(path)),
            source="tracemalloc",
            python=python_version(),
            started=mtime,
            duration_s=0.0,
            peak_traced_bytes=total,
            peak_rss_bytes=0,
        )
    except ValueError as exc:  # figures that cannot be recorded (see _build.check_value)
        raise MemlensError(f"cannot read {path}: damaged tracemalloc snapshot ({exc})") from None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:120]
