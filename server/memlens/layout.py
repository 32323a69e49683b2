"""Names on disk, in one place: the run-file suffix and the store's directories. Stdlib only.

Kept free of imports (but os) so that ``memlens run`` can name its run file before the profiled
program starts, and point ``latest`` at it after, without loading the reader/writer or the store.
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


def write_pointer(runs_dir: str, name: str, run_path: str) -> None:
    """Point ``latest`` or ``baseline`` in ``runs_dir`` at a run file, atomically.

    The pointer holds the run's file name when the run is in ``runs_dir``, else its absolute
    path. Written to a temporary file that replaces the pointer, so readers never see half of
    one. The one writer of pointers (:meth:`memlens.store.Store.set_pointer` calls it);
    standard library only, so ``memlens run`` sets ``latest`` without loading the store.
    """
    if name not in POINTERS:
        raise ValueError(name)
    os.makedirs(runs_dir, exist_ok=True)
    real = os.path.realpath(run_path)
    in_store = os.path.dirname(real) == os.path.realpath(runs_dir)
    value = os.path.basename(real) if in_store else real
    while True:
        temporary = os.path.join(runs_dir, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(value + "\n")
        os.replace(temporary, os.path.join(runs_dir, name))
    except BaseException:
        import contextlib  # only on this failure path: not worth its import cost otherwise

        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
