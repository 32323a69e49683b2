"""``memlens import tracemalloc``: a ``tracemalloc.Snapshot.dump()`` file as a run.

A snapshot is the set of blocks alive when it was taken, with the traceback of each. Per line
(the innermost frame of each traceback) the run's *allocated*, *live* and *peak* figures are all
that live set: a snapshot records neither what was freed earlier nor when the peak was.
Inclusive figures count every line of a traceback once; the call tree follows the tracebacks.

Snapshot files are pickle: loading one runs code from the file. Only import files you trust.
"""

from __future__ import annotations

import os
import platform
import sys
from datetime import datetime, timezone

from memlens.errors import MemlensError
from memlens.imports._build import RunBuilder
from memlens.model import Run

PICKLE_WARNING = (
    "memlens: warning: tracemalloc snapshots are pickle files, and loading one can run code "
    "from it; only import snapshots you trust"
)


def import_snapshot(path: str) -> Run:
    import pickle
    import tracemalloc

    print(PICKLE_WARNING, file=sys.stderr)
    try:
        snapshot = tracemalloc.Snapshot.load(path)
    except FileNotFoundError:
        raise MemlensError(f"cannot read {path}: no such file") from None
    except (
        pickle.UnpicklingError,
        EOFError,
        AttributeError,
        ValueError,
        TypeError,
        ImportError,
    ) as exc:
        raise MemlensError(f"cannot read {path}: not a tracemalloc snapshot ({exc})") from None
    except OSError as exc:
        raise MemlensError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not isinstance(snapshot, tracemalloc.Snapshot):
        raise MemlensError(f"cannot read {path}: not a tracemalloc snapshot")
    builder = RunBuilder()
    total = 0
    for trace in snapshot.traces:
        # A trace's traceback iterates from the oldest frame to the most recent one.
        stack = [
            (os.path.abspath(f.filename), f.lineno, _function_of(f.lineno)) for f in trace.traceback
        ]
        builder.add(stack, trace.size, 1, trace.size, trace.size)
        total += trace.size
    mtime = datetime.fromtimestamp(os.path.getmtime(path), timezone.utc)
    return builder.build(
        command=("tracemalloc", os.path.abspath(path)),
        source="tracemalloc",
        python=platform.python_version(),
        started=mtime,
        duration_s=0.0,
        peak_traced_bytes=total,
        peak_rss_bytes=0,
    )


def _function_of(line: int) -> str:
    """tracemalloc frames carry no function names: name them by their line."""
    return f"<line {line}>"
