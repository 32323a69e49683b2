"""The workspace an MCP server serves: its store, and the only place it reads or runs files."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from memlens.errors import MemlensError, os_error_reason
from memlens.model import Run
from memlens.runfile import reader
from memlens.store import Store

#: Parsed runs kept in memory (by file, inode, modification time and size): follow-up calls
#: about the same run do not read it again.
RUN_CACHE_SIZE = 4


class Workspace:
    """The directory the server serves: its store, and the only place it reads or runs files."""

    def __init__(self, root: str | os.PathLike[str], allow_run: bool = False) -> None:
        self.root = Path(os.path.realpath(root))
        self.store = Store(self.root)
        self.allow_run = allow_run
        #: One profiled program at a time: they would share the machine (and skew each
        #: other's timings), and each takes the store's next run name.
        self.program_lock = threading.Lock()
        self._runs: dict[tuple[str, int, int, int], Run] = {}
        self._cache_lock = threading.Lock()

    def check_inside(self, path: str | os.PathLike[str], what: str) -> None:
        """A MemlensError unless ``path`` (symlinks resolved) is inside the workspace."""
        real = Path(os.path.realpath(path))
        if real != self.root and self.root not in real.parents:
            raise MemlensError(f"{what}: outside the workspace {self.root}")

    def run_path(self, spec: str | None, default: str = "latest") -> Path:
        """A run spec (as on the command line: path, id, prefix, latest, baseline) -> its file,
        as the CLI would name it in messages."""
        try:
            path = self.store.resolve(spec, default)
        except OSError as exc:  # e.g. a name too long for the file system
            raise MemlensError(f"cannot read {spec}: {os_error_reason(exc)}") from None
        self.check_inside(path, spec or default)
        return path

    def read(self, path: Path) -> Run:
        """The run in ``path``; unreadable files raise the reader's one-line RunFileError."""
        try:
            st = path.stat()
        except OSError:
            return reader.read(path)  # the reader words the error
        key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
        with self._cache_lock:
            run = self._runs.get(key)
        if run is None:
            run = reader.read(path)
            with self._cache_lock:
                while len(self._runs) >= RUN_CACHE_SIZE:
                    self._runs.pop(next(iter(self._runs)))
                self._runs[key] = run
        return run

    def run(self, spec: str | None, default: str = "latest") -> tuple[Path, Run]:
        path = self.run_path(spec, default)
        return path, self.read(path)
