"""Notebook cells' figures: which run a cell shows (LSP 3.17 notebook documents). No LSP types.

A profiled cell's run (``%%memlens``, :mod:`memlens.notebook`) records the cell in its header
(:class:`memlens.model.NotebookCell`): the front end's id for the cell (VS Code sends the cell
document's URI), the digest of the cell's text, the notebook's path. The kernel writes into
the store of its working directory (``--dir``), the notebook's folder unless the front end
starts kernels elsewhere; so a notebook's cells look in the nearest folder from the notebook's
up to its workspace folder that has a store.

A cell shows the newest run that is either of the same cell document (its URI, for runs made
since the notebook was opened: a reopened notebook's cells get new URIs that may repeat old
ones) or of a cell with the same text (in the same notebook, or in one the kernel did not
know). The cell's text is then mapped onto the buffer as a file's is
(:mod:`memlens_lsp.staleness`), so figures stay on their lines while the cell is edited.

Run headers are read once per file (while it stays the same size and age), off the event loop.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from memlens.errors import RunFileError
from memlens.layout import RUNS_DIR, STORE_DIR
from memlens.model import NotebookCell, RunInfo
from memlens.notebook.cells import totals
from memlens.runfile import reader
from memlens.store import Store
from memlens.units import fmt_bytes
from memlens_lsp.background import in_thread
from memlens_lsp.index import FileView, FolderState, RunData

#: Stamp of a run file: (mtime_ns, size, inode); a file rewritten in place is read again.
Stamp = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class CellRun:
    """A run of a notebook cell, as its header tells."""

    path: Path
    started: datetime | None
    cell: NotebookCell


@dataclass(frozen=True, slots=True)
class StoreCells:
    """The cell runs of one store: per run file, its stamp and cell run (None: not a cell's)."""

    root: Path
    signature: tuple[object, ...]
    runs: dict[Path, tuple[Stamp, CellRun | None]] = field(default_factory=dict)


def signature(root: Path) -> tuple[object, ...]:
    """Changes when runs are added to or removed from the store (the folder's own stamp)."""
    try:
        st = (root / STORE_DIR / RUNS_DIR).stat()
    except OSError:
        return (None,)
    return (st.st_mtime_ns, st.st_ino)


def _stamp(path: Path) -> Stamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _started(info: RunInfo) -> datetime | None:
    try:
        when = datetime.fromisoformat(info.started)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def scan(root: Path, previous: StoreCells | None) -> StoreCells:
    """The store's cell runs, reading only the headers of files that are new or changed."""
    sig = signature(root)
    store = Store(root, on_problem=lambda path, why: None)
    known = previous.runs if previous is not None else {}
    runs: dict[Path, tuple[Stamp, CellRun | None]] = {}
    for path in store.run_files():
        stamp = _stamp(path)
        if stamp is None or not store.holds(path):
            continue
        old = known.get(path)
        if old is not None and old[0] == stamp:
            runs[path] = old
            continue
        try:
            info = reader.read_info(path)
        except RunFileError:
            runs[path] = (stamp, None)
            continue
        cell = info.cell
        runs[path] = (stamp, CellRun(path, _started(info), cell) if cell is not None else None)
    return StoreCells(root, sig, runs)


def choose(
    cells: StoreCells, cell_uri: str, digest: str, notebook: str, opened: datetime
) -> CellRun | None:
    """The run a cell shows (see the module's docstring): the newest of those recorded for
    the cell document ``cell_uri`` since ``opened``, or for a cell whose text has ``digest``."""
    same_cell: list[CellRun] = []
    same_text: list[CellRun] = []
    for _, found in cells.runs.values():
        if found is None:
            continue
        cell = found.cell
        if cell.cell_id == cell_uri and found.started is not None and found.started >= opened:
            same_cell.append(found)
            continue
        recorded = os.path.normcase(cell.notebook)
        if cell.sha256 == digest and (not recorded or not notebook or recorded == notebook):
            same_text.append(found)
    for candidates in (same_cell, same_text):
        if candidates:
            return max(candidates, key=_newest)
    return None


def _newest(run: CellRun) -> tuple[datetime, str]:
    return (run.started or datetime.min.replace(tzinfo=timezone.utc), run.path.name)


def store_root(notebook: Path, boundary: Path | None) -> Path | None:
    """The nearest folder from the notebook's up (not above ``boundary``, the workspace
    folder, when given) that has a run store; None when there is none."""
    here = notebook.parent
    while True:
        if (here / STORE_DIR / RUNS_DIR).is_dir():
            return here
        if (boundary is not None and here == boundary) or here.parent == here:
            return None
        here = here.parent


def cell_lens(view: FileView) -> str | None:
    """The title of the lens on a profiled cell's first line: its totals. None when ``view``
    is not a profiled cell."""
    info = view.run.run.info
    if info.cell is None or info.cell.file != view.key:
        return None
    kept, allocated = totals(view.run.run, view.key)
    state = "" if info.complete else " · interrupted"
    failed = " · raised" if info.exit_code not in (0, None) else ""
    return (
        f"memlens: {view.key} · {fmt_bytes(info.peak_traced_bytes)} at peak · "
        f"{fmt_bytes(kept)} kept · {fmt_bytes(allocated)} allocated · "
        f"{info.duration_s:.2f} s{failed}{state}"
    )


class NotebookRuns:
    """What the server knows of notebooks: when each was opened, the cell runs of their
    stores, and the runs shown (loaded once per file)."""

    #: Loaded cell runs kept (the newest used).
    MAX_LOADED = 32

    def __init__(self) -> None:
        self.opened: dict[str, datetime] = {}
        self.stores: dict[Path, StoreCells] = {}
        self._loaded: dict[tuple[Path, Stamp], tuple[RunData, FolderState]] = {}
        #: Notebook path -> the folder whose store its cells' runs are in.
        self._roots: dict[str, Path] = {}
        self._lock = threading.Lock()

    def open(self, notebook_uri: str) -> None:
        self.opened.setdefault(notebook_uri, datetime.now(timezone.utc))

    def close(self, notebook_uri: str) -> None:
        self.opened.pop(notebook_uri, None)

    async def lookup(
        self,
        notebook_uri: str,
        notebook_path: str | None,
        cell_uri: str,
        digest: Callable[[], str],
        boundary: Path | None,
        folder_uri: Callable[[Path], str],
    ) -> tuple[FolderState, FileView] | None:
        """The folder state and the view of the cell ``cell_uri``'s run, if it has one."""
        if not notebook_path:
            return None
        notebook = Path(notebook_path)
        root = self._roots.get(notebook_path)
        if root is None:
            root = await in_thread(store_root, notebook, boundary, name="memlens-notebook")
            if root is None:
                return None
            self._roots[notebook_path] = root  # (none yet: looked for again next time)
        cells = await self.cells(root)
        opened = self.opened.get(notebook_uri) or datetime.now(timezone.utc)
        chosen = choose(cells, cell_uri, digest(), os.path.normcase(notebook_path), opened)
        if chosen is None:
            return None
        found = await in_thread(self._load, chosen, root, folder_uri(root), name="memlens-load")
        if found is None:
            return None
        data, folder = found
        source = data.run.files.get(chosen.cell.file)
        if source is None:
            return None
        view = data.memo.value(
            ("cell", chosen.cell.file), lambda: FileView(chosen.cell.file, source, data, None)
        )
        return folder, view

    async def cells(self, root: Path) -> StoreCells:
        """The store's cell runs, scanned again when the store changed."""
        known = self.stores.get(root)
        if known is not None and known.signature == signature(root):
            return known
        fresh = await in_thread(scan, root, known, name="memlens-notebook")
        self.stores[root] = fresh
        return fresh

    def changed(self) -> list[Path]:
        """The stores whose runs changed since they were scanned (cheap: one stat each)."""
        return [root for root, cells in self.stores.items() if signature(root) != cells.signature]

    def _load(self, chosen: CellRun, root: Path, uri: str) -> tuple[RunData, FolderState] | None:
        stamp = _stamp(chosen.path)
        if stamp is None:
            return None
        key = (chosen.path, stamp)
        with self._lock:
            found = self._loaded.get(key)
        if found is not None:
            return found
        try:
            run = reader.read(chosen.path)
        except RunFileError:
            return None
        data = RunData(chosen.path, run, (root,), root)
        folder = FolderState(root, uri, run=data)
        with self._lock:
            self._loaded[key] = (data, folder)
            while len(self._loaded) > self.MAX_LOADED:
                del self._loaded[next(iter(self._loaded))]
        return data, folder
