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
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memlens.errors import MemlensError, RunFileError
from memlens.layout import POINTERS, RUN_SUFFIX, RUNS_DIR, STORE_DIR, new_run_path, write_pointer

if TYPE_CHECKING:
    from memlens.model import RunInfo


@dataclass(frozen=True, slots=True)
class RunEntry:
    """A run in the store: its id, file and header (``info`` is None when unreadable)."""

    id: str
    path: Path
    info: RunInfo | None
    error: str | None = None


class Store:
    """Runs under ``<root>/.memlens/runs``."""

    def __init__(self, root: str | os.PathLike[str] = ".") -> None:
        self.root = Path(root).resolve()
        self.runs_dir = self.root / STORE_DIR / RUNS_DIR

    # -- writing -------------------------------------------------------------------------
    def new_run_path(self, started: datetime | None = None, pid: int | None = None) -> Path:
        """A fresh, unused path for a run starting now (named by :func:`layout.new_run_path`)."""
        stamp = started.timestamp() if started is not None else None
        return Path(new_run_path(str(self.runs_dir), stamp, pid))

    def set_pointer(self, name: str, run_path: Path) -> None:
        """Point ``latest`` or ``baseline`` at a run file (:func:`layout.write_pointer`)."""
        write_pointer(str(self.runs_dir), name, str(run_path))

    def clear_pointer(self, name: str) -> None:
        (self.runs_dir / name).unlink(missing_ok=True)

    # -- reading -------------------------------------------------------------------------
    def pointer(self, name: str) -> Path | None:
        """The run file a pointer names, or None when unset or dangling."""
        try:
            value = (self.runs_dir / name).read_text(encoding="utf-8").strip()
        except OSError:
            return None
        if not value:
            return None
        path = Path(value)
        if not path.is_absolute():
            path = self.runs_dir / path
        return path if path.is_file() else None

    def latest(self) -> Path | None:
        return self.pointer("latest") or self._newest()

    def baseline(self) -> Path | None:
        return self.pointer("baseline")

    def run_files(self) -> list[Path]:
        """Run files of the store, oldest first (ids sort by start time)."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(
            p
            for p in self.runs_dir.iterdir()
            if p.suffix == RUN_SUFFIX and not p.name.startswith(".")
        )

    def _newest(self) -> Path | None:
        files = self.run_files()
        return files[-1] if files else None

    def entries(self) -> list[RunEntry]:
        """Every run with its header; unreadable files are listed with their error."""
        from memlens import fileformat

        out: list[RunEntry] = []
        for path in self.run_files():
            try:
                out.append(RunEntry(path.stem, path, fileformat.read_info(path)))
            except RunFileError as exc:
                out.append(RunEntry(path.stem, path, None, exc.reason))
        return out

    def resolve(self, spec: str | None, default: str = "latest") -> Path:
        """Turn a user's run spec into a run file path, or raise a one-line MemlensError."""
        spec = spec or default
        if spec in POINTERS:
            path = self.latest() if spec == "latest" else self.baseline()
            if path is None:
                hint = (
                    "no runs yet in " + str(self.runs_dir) + " (run `memlens run SCRIPT` first)"
                    if spec == "latest"
                    else "no baseline set (use `memlens baseline set RUN`)"
                )
                raise MemlensError(hint)
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
            return matches[0]
        if len(matches) > 1:
            raise MemlensError(f"run id {spec!r} is ambiguous ({len(matches)} runs match)")
        raise MemlensError(f"no run {spec!r} in {self.runs_dir}")

    def prune(self, keep: int) -> list[Path]:
        """Delete all but the ``keep`` newest runs; never the baseline. Returns what went."""
        if keep < 0:
            raise MemlensError("--keep must be at least 0")
        files = self.run_files()
        protected = {p.resolve() for p in (self.baseline(),) if p is not None}
        doomed = [p for p in files[: max(0, len(files) - keep)] if p.resolve() not in protected]
        for p in doomed:
            p.unlink(missing_ok=True)
        self._remove_stale_temporaries()
        latest = self.pointer("latest")
        if latest is None:
            newest = self._newest()
            if newest is not None:
                self.set_pointer("latest", newest)
            else:
                self.clear_pointer("latest")
        return doomed

    def _remove_stale_temporaries(self, older_than_s: float = 3600.0) -> None:
        """Delete temporaries of writers that were killed mid-write (``.<name>.<random>.tmp``)."""
        import time

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
