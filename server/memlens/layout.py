"""Names on disk, in one place: the run-file suffix and the store's directories. Stdlib only.

Kept free of imports (but os) so that ``memlens run`` can name its run file before the profiled program
starts without loading the reader/writer.
"""

from __future__ import annotations

import os

#: Suffix of run files.
RUN_SUFFIX = ".mlrun"
#: The store lives in <root>/STORE_DIR/RUNS_DIR.
STORE_DIR = ".memlens"
RUNS_DIR = "runs"
#: Pointer files beside the runs.
POINTERS = ("latest", "baseline")


def display_path(path: str, cwd: str | None = None) -> str:
    """A path relative to the working directory when it is under it."""
    cwd = cwd or os.getcwd()
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def platform_name() -> str:
    """``Linux-6.1.0-x86_64``: cheap (``platform.platform()`` scans the interpreter binary)."""
    try:
        u = os.uname()
    except AttributeError:  # pragma: no cover - Windows
        import sys

        return sys.platform
    return f"{u.sysname}-{u.release}-{u.machine}"


def python_version() -> str:
    """``3.11.7``: as ``platform.python_version()``, without importing ``platform``."""
    import sys

    return sys.version.split()[0]


def new_run_path(runs_dir: str, started: float | None = None, pid: int | None = None) -> str:
    """A fresh, unused run-file path in ``runs_dir``: ``<UTC start>-<pid>[-n].mlrun``.

    The one naming rule for runs (the store and ``memlens run`` both call it); standard library
    only, so ``memlens run`` can name its file before the program starts at no cost.
    """
    import time

    when = time.gmtime(time.time() if started is None else started)
    stem = f"{time.strftime('%Y%m%d-%H%M%S', when)}-{os.getpid() if pid is None else pid}"
    path = os.path.join(runs_dir, stem + RUN_SUFFIX)
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(runs_dir, f"{stem}-{n}{RUN_SUFFIX}")
    return path
