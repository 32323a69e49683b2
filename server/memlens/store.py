"""The run store: ``.memlens/runs/`` under a working directory. Stdlib only.

Layout::

    .memlens/
      runs/
        20261122-231500-4242.mlrun   # one run file per run; its stem is the run id
        latest                       # text file: the file name of the newest run
        baseline                     # text file: the file name of the run chosen as baseline

Pointers are small text files replaced atomically, so readers never see half of one. A run
spec given by a user (``RUN`` on the command line) is a path to a run file, a run id, a unique
prefix of a run id, ``latest`` or ``baseline``.

Everything in a store is untrusted input (it comes with the workspace): a pointer that is not a
small regular UTF-8 file naming a run of this store is ignored with one message, and the store
never follows a link out of itself (see :func:`memlens.layout.read_pointer`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memlens.errors import MemlensError, RunFileError, os_error_reason
from memlens.layout import (
    KINDS,
    POINTERS,
    PROCESSES_SUFFIX,
    RUN_SUFFIX,
    RUNS_DIR,
    STORE_DIR,
    claims_held,
    clear_processes,
    display_path,
    in_store,
    new_run_path,
    pointer_name,
    processes_folder,
    read_pointer,
    replace_file,
    write_pointer,
)
from memlens.runfile import reader

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from memlens.model import RunInfo


@dataclass(frozen=True, slots=True)
class RunEntry:
    """A run in the store: its id, file and header (``info`` is None when unreadable)."""

    id: str
    path: Path
    info: RunInfo | None
    error: str | None = None


def run_kind(info: RunInfo) -> str:
    """The kind of a run (:data:`memlens.layout.KINDS`): ``tests`` for a run of ``pytest
    --memlens`` (it has per-test figures, or, for a checkpoint made before any test ended, the
    plugin's command ``pytest …``), else ``program``."""
    if info.tests or (info.command[:1] == ("pytest",) and info.source == "memlens"):
        return "tests"
    return "program"


#: How many of the newest runs a store made before kinds is searched for the latest run of a
#: kind (each costs reading a header).
KIND_SCAN = 20


@contextlib.contextmanager
def _one_line(doing: str, path: Path) -> Iterator[None]:
    """An OSError changing the store (read-only, full, not ours) as one MemlensError line."""
    try:
        yield
    except OSError as exc:
        raise MemlensError(
            f"cannot {doing} {display_path(str(path))}: {os_error_reason(exc)}"
        ) from None


def _is_file_or_link(path: Path) -> bool:
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def warn(path: Path, problem: str) -> None:
    """The default way a store reports an ignored pointer: one line on stderr."""
    print(f"memlens: warning: ignoring {display_path(str(path))}: {problem}", file=sys.stderr)


class Store:
    """Runs under ``<root>/.memlens/runs``.

    ``on_problem(pointer file, reason)`` is told, once per store object, about a pointer that
    is ignored (default: :func:`warn`); the language server collects them instead.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] = ".",
        on_problem: Callable[[Path, str], None] | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.runs_dir = self.root / STORE_DIR / RUNS_DIR
        self._on_problem = on_problem or warn
        self._reported: set[tuple[str, str]] = set()

    # -- writing -------------------------------------------------------------------------
    def new_run_path(self, started: datetime | None = None, pid: int | None = None) -> Path:
        """A fresh, unused path for a run starting now (named by :func:`layout.new_run_path`)."""
        stamp = started.timestamp() if started is not None else None
        return Path(new_run_path(str(self.runs_dir), stamp, pid))

    def set_pointer(self, name: str, run_path: Path) -> None:
        """Point ``latest`` or ``baseline`` at a run file of this store (see :meth:`adopt`)."""
        if name not in POINTERS:
            raise ValueError(name)
        if not self.holds(run_path):
            raise MemlensError(
                f"{display_path(str(run_path))} is not a run file of the store {self.runs_dir}"
            )
        with _one_line("write", self.runs_dir / name):
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            write_pointer(str(self.runs_dir), name, str(run_path))

    def adopt(self, run_path: Path) -> Path:
        """``run_path`` if it is a run of this store, else a copy of it put into the store.

        Pointers only name runs of their own store; a baseline chosen from elsewhere is copied
        in (under its own name, or a fresh one when that is taken). The caller has checked
        that it is a readable run.
        """
        if self.holds(run_path):
            return run_path

        target = self.runs_dir / (run_path.stem + RUN_SUFFIX)
        n = 1
        while target.exists():
            n += 1
            target = self.runs_dir / f"{run_path.stem}-{n}{RUN_SUFFIX}"
        with _one_line("write", target):
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            replace_file(str(target), lambda tmp: shutil.copyfile(run_path, tmp))
        return target

    def holds(self, path: Path) -> bool:
        """Whether ``path`` is a regular run file directly in this store (links resolved)."""
        if path.suffix != RUN_SUFFIX or not in_store(str(self.runs_dir), str(path)):
            return False
        try:
            return stat.S_ISREG(path.stat().st_mode)
        except (OSError, ValueError):
            return False

    def clear_pointer(self, name: str) -> None:
        with _one_line("remove", self.runs_dir / name):
            (self.runs_dir / name).unlink(missing_ok=True)

    def point_latest(self, run_path: Path, kind: str = "program") -> None:
        """Point ``latest`` and the latest of ``kind`` at a run file of this store."""
        self.set_pointer(pointer_name("latest", kind), run_path)
        self.set_pointer("latest", run_path)

    def set_baseline(self, run_path: Path) -> str:
        """Make a run file of this store the baseline of its kind; the kind."""
        kind = run_kind(reader.read_info(run_path))
        self.set_pointer(pointer_name("baseline", kind), run_path)
        return kind

    # -- reading -------------------------------------------------------------------------
    def _pointer(self, name: str) -> tuple[Path | None, str | None]:
        """(run file, None), (None, None) when unset or dangling, (None, problem) when bad."""
        value, problem = read_pointer(str(self.runs_dir), name)
        if value is None:
            return None, problem
        path = Path(value)
        return (path if self.holds(path) else None), None

    def _report(self, name: str, problem: str) -> None:
        if (name, problem) not in self._reported:
            self._reported.add((name, problem))
            self._on_problem(self.runs_dir / name, problem)

    def pointer(self, name: str) -> Path | None:
        """The run file a pointer names, or None when unset, dangling or bad (reported)."""
        path, problem = self._pointer(name)
        if problem is not None:
            self._report(name, problem)
        return path

    def latest(self, kind: str | None = None) -> Path | None:
        """The latest run (of ``kind``, or of any kind): what its pointer names; in a store
        whose pointer for that kind was never written (made before kinds), ``latest`` if it
        is of that kind, else the newest of the :data:`KIND_SCAN` newest runs that is."""
        if kind is None:
            return self.pointer("latest") or self._newest()
        name = pointer_name("latest", kind)
        if os.path.lexists(self.runs_dir / name):
            return self.pointer(name)
        newest = self.pointer("latest") or self._newest()
        candidates = [newest] if newest is not None else []
        candidates += [p for p in reversed(self.run_files()[-KIND_SCAN:]) if p != newest]
        # An unreadable run counts as a program's: it is shown as unreadable, not skipped.
        return next(
            (p for p in candidates if self.holds(p) and (self._kind(p) or "program") == kind),
            None,
        )

    def baseline(self, kind: str | None = None) -> Path | None:
        """The baseline (of ``kind``; None: what the ``baseline`` pointer names, the program
        runs' baseline). A store made before kinds may name a test run as ``baseline``: that
        is the test runs' baseline (until ``baseline-tests`` is set), not the programs'."""
        if kind is None:
            return self.pointer("baseline")
        own = self.pointer(pointer_name("baseline", kind))
        if kind == "program":  # an unreadable run counts as a program's: shown as unreadable
            return own if own is None or (self._kind(own) or "program") == "program" else None
        if own is not None or os.path.lexists(self.runs_dir / pointer_name("baseline", kind)):
            return own
        old = self.pointer("baseline")
        return old if old is not None and self._kind(old) == kind else None

    def _kind(self, path: Path) -> str | None:
        """The kind of a run file of the store, None when it cannot be read."""
        try:
            return run_kind(reader.read_info(path))
        except RunFileError:
            return None

    def run_files(self) -> list[Path]:
        """Run files of the store, oldest first (ids sort by start time); a directory named
        like one is none."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(
            p
            for p in self.runs_dir.iterdir()
            if p.suffix == RUN_SUFFIX and not p.name.startswith(".") and not p.is_dir()
        )

    def _newest(self) -> Path | None:
        """The newest run file of the store (links out of it and FIFOs never count)."""
        return next((p for p in reversed(self.run_files()) if self.holds(p)), None)

    def entries(self) -> list[RunEntry]:
        """Every run with its header; unreadable files are listed with their error."""
        out: list[RunEntry] = []
        for path in self.run_files():
            if not in_store(str(self.runs_dir), str(path)):
                out.append(RunEntry(path.stem, path, None, "a link to a file outside the store"))
                continue
            try:
                out.append(RunEntry(path.stem, path, reader.read_info(path)))
            except RunFileError as exc:
                out.append(RunEntry(path.stem, path, None, exc.reason))
        return out

    def resolve(self, spec: str | None, default: str = "latest") -> Path:
        """Turn a user's run spec into a run file path, or raise a one-line MemlensError."""
        spec = spec or default
        if spec in POINTERS:
            path, problem = self._pointer(spec)
            if path is None and spec == "latest":
                path = self._newest()
            elif path is None and problem is None and spec != "baseline":
                which, kind = spec.split("-")
                path = self.latest(kind) if which == "latest" else self.baseline(kind)
            if path is None:
                hint = (
                    "no runs yet in " + str(self.runs_dir) + " (run `memlens run SCRIPT` first)"
                    if spec == "latest"
                    else f"no {spec.replace('-', ' ')} run yet in {self.runs_dir}"
                    if spec.startswith("latest")
                    else "no baseline of test runs set (use `memlens baseline set RUN` with a "
                    "run of pytest --memlens)"
                    if spec == "baseline-tests"
                    else "no baseline set (use `memlens baseline set RUN`)"
                )
                if problem is not None:  # one line: why the pointer did not count, and the rest
                    shown = display_path(str(self.runs_dir / spec))
                    hint = f"ignoring {shown} ({problem}); {hint}"
                raise MemlensError(hint)
            if problem is not None:
                self._report(spec, problem)
            return path
        as_path = Path(spec)
        if as_path.suffix == RUN_SUFFIX or os.sep in spec or as_path.is_file():
            if not as_path.exists():
                raise MemlensError(f"cannot read {spec}: no such file")
            return as_path
        matches = [p for p in self.run_files() if p.stem == spec]
        if not matches:
            matches = [p for p in self.run_files() if p.stem.startswith(spec)]
        if len(matches) == 1:
            if not in_store(str(self.runs_dir), str(matches[0])):
                raise MemlensError(f"run {spec!r} is a link to a file outside the store")
            return matches[0]
        if len(matches) > 1:
            raise MemlensError(f"run id {spec!r} is ambiguous ({len(matches)} runs match)")
        raise MemlensError(f"no run {spec!r} in {self.runs_dir}")

    def prune(self, keep: int) -> list[Path]:
        """Delete all but the ``keep`` newest runs; never the baseline. Returns what went."""
        if keep < 0:
            raise MemlensError("--keep must be at least 0")
        # Only run files: something else named like one (a FIFO) is not the store's to remove.
        files = [p for p in self.run_files() if _is_file_or_link(p)]
        baselines = (self.pointer(pointer_name("baseline", kind)) for kind in KINDS)
        protected = {p.resolve() for p in baselines if p is not None}
        doomed = [p for p in files[: max(0, len(files) - keep)] if p.resolve() not in protected]
        for p in doomed:
            with _one_line("remove", p):
                p.unlink(missing_ok=True)
            clear_processes(processes_folder(str(p)), remove=True)  # its processes' runs
        self._remove_orphan_processes()
        self._remove_stale_temporaries()
        latest = self.pointer("latest")
        if latest is None:
            newest = self._newest()
            if newest is not None:
                self.set_pointer("latest", newest)
            else:
                self.clear_pointer("latest")
        for kind in KINDS:  # a pruned latest of a kind: the newest left of that kind, if any
            name = pointer_name("latest", kind)
            if os.path.lexists(self.runs_dir / name) and self.pointer(name) is None:
                self.clear_pointer(name)
        return doomed

    def _remove_orphan_processes(self, older_than_s: float = 3600.0) -> None:
        """Delete the processes folders (per-process runs of a run that followed its children)
        whose run file is gone: left by a program that ended before its first checkpoint, or
        whose run was removed by hand. Only folders untouched for an hour and that no running
        process still writes into (a claim held: memlens.tracing.follow)."""
        if not self.runs_dir.is_dir():
            return
        cutoff = time.time() - older_than_s
        for p in self.runs_dir.iterdir():
            if not p.name.endswith(PROCESSES_SUFFIX) or p.name.startswith("."):
                continue
            run = p.with_name(p.name.removesuffix(PROCESSES_SUFFIX) + RUN_SUFFIX)
            try:
                if os.path.lexists(run) or p.lstat().st_mtime >= cutoff or claims_held(str(p)):
                    continue
            except OSError:
                continue
            clear_processes(str(p), remove=True)

    def _remove_stale_temporaries(self, older_than_s: float = 3600.0) -> None:
        """Delete temporaries of writers that were killed mid-write (``.<name>.<random>.tmp``)."""
        if not self.runs_dir.is_dir():
            return
        cutoff = time.time() - older_than_s
        for p in self.runs_dir.iterdir():
            if p.name.startswith(".") and p.name.endswith(".tmp") and RUN_SUFFIX in p.name:
                try:
                    if p.stat().st_mtime < cutoff:
                        p.unlink()
                except OSError:
                    pass
