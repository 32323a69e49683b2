"""Immutable snapshots of the runs loaded per workspace folder. No LSP types here.

A :class:`FolderState` holds the run shown in one workspace folder (the latest, or the one
the user chose) and its baseline, with per-file tables keyed by canonical absolute path. An
:class:`Index` is the tuple of folder states; the server swaps the whole index on reload, so a
request always sees one consistent snapshot. Derived tables (baseline figures re-mapped onto
the run's lines, call-tree lookups) are computed on first use and then kept.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from memlens.calltree import CallTreeIndex
from memlens.diff import match_lines
from memlens.model import FunctionStats, LineStats, Run, SourceFile


def canonical(path: str | os.PathLike[str]) -> str:
    """The key the index uses for a file: absolute, symlinks resolved, case-normalised."""
    return os.path.normcase(os.path.realpath(os.fspath(path)))


class FileView:
    """One profiled file of a run, with its baseline counterpart, ready for requests."""

    def __init__(
        self, key: str, source: SourceFile, run: RunData, baseline: SourceFile | None
    ) -> None:
        self.key = key  #: key of the file in Run.files (CallNode.file uses it)
        self.source = source
        self.run = run
        self.baseline_source = baseline

    def label_memo(self, figure: str, compare: bool) -> dict[int, str]:
        """Labels already built for this file, per (figure, compare): requests reuse them."""
        memo = self.__dict__.setdefault("_labels", {})
        found: dict[int, str] = memo.setdefault((figure, compare), {})
        return found

    @property
    def lines(self) -> Mapping[int, LineStats]:
        return self.source.lines

    def warm(self) -> None:
        """Compute the derived tables now (called off the event loop)."""
        _ = self.text_lines, self.baseline_lines, self.baseline_functions
        _ = self.run.tree.inclusive

    @cached_property
    def text_lines(self) -> tuple[str, ...] | None:
        text = self.source.text
        return None if text is None else tuple(text.splitlines())

    @cached_property
    def baseline_lines(self) -> Mapping[int, LineStats]:
        """Baseline figures keyed by this run's line numbers (changed lines are absent)."""
        base = self.baseline_source
        if base is None:
            return {}
        if base.text is None or self.source.text is None:
            return base.lines if base.sha256 == self.source.sha256 else {}
        if base.text == self.source.text:
            return base.lines
        # The same matching as `memlens diff`: unchanged lines, and blocks that moved.
        mapping = match_lines(base, self.source)
        return {mapping[old]: st for old, st in base.lines.items() if old in mapping}

    @cached_property
    def baseline_functions(self) -> Mapping[str, FunctionStats]:
        base = self.baseline_source
        return {} if base is None else {f.qualname: f for f in base.functions}


class RunData:
    """A loaded run with lookups by canonical path and by call-tree location."""

    def __init__(self, path: Path, run: Run, base_dirs: Iterable[Path] = ()) -> None:
        self.path = path
        self.run = run
        self.mtime_ns = _mtime(path)
        dirs = [Path(run.info.cwd)] if run.info.cwd else []
        dirs.extend(base_dirs)
        self.keys_by_path: dict[str, str] = {}
        for key, sf in run.files.items():
            self.keys_by_path.setdefault(_resolve(sf.path, dirs), key)

    @property
    def id(self) -> str:
        return self.path.stem

    @cached_property
    def tree(self) -> CallTreeIndex:
        """Call-tree lookups (nodes by line, inclusive figures, call paths)."""
        return CallTreeIndex(self.run.call_tree)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _resolve(recorded: str, dirs: Iterable[Path]) -> str:
    p = Path(recorded)
    if p.is_absolute():
        return canonical(p)
    for d in dirs:
        candidate = d / p
        if candidate.exists():
            return canonical(candidate)
    first = next(iter(dirs), Path.cwd())
    return canonical(first / p)


@dataclass(frozen=True)
class FolderState:
    """What one workspace folder shows: its run and baseline (either may be None)."""

    root: Path
    uri: str
    run: RunData | None = None
    baseline: RunData | None = None
    #: Run the user chose with memlens.chooseRun (shown until a new run appears).
    chosen: Path | None = None
    #: The ``latest`` target when the choice was made.
    chosen_latest: Path | None = None
    _views: dict[str, FileView] = field(default_factory=dict, compare=False, repr=False)

    def view(self, path: str) -> FileView | None:
        """The figures for a canonical path, or None when the run has none for it."""
        run = self.run
        if run is None:
            return None
        cached = self._views.get(path)
        if cached is not None:
            return cached
        key = run.keys_by_path.get(path)
        if key is None:
            return None
        base_sf = None
        if self.baseline is not None:
            bkey = self.baseline.keys_by_path.get(path)
            if bkey is not None:
                base_sf = self.baseline.run.files[bkey]
        view = FileView(key, run.run.files[key], run, base_sf)
        self._views[path] = view
        return view

    def contains(self, path: str) -> bool:
        root = canonical(self.root)
        return path == root or path.startswith(root.rstrip(os.sep) + os.sep)

    def with_runs(self, run: RunData | None, baseline: RunData | None) -> FolderState:
        return replace(self, run=run, baseline=baseline, _views={})


@dataclass(frozen=True)
class Index:
    folders: tuple[FolderState, ...] = ()

    def folder_for(self, path: str) -> FolderState | None:
        """The folder a file belongs to (deepest root containing it), else the first."""
        best: FolderState | None = None
        for f in self.folders:
            if f.contains(path) and (best is None or len(str(f.root)) > len(str(best.root))):
                best = f
        return best

    def lookup(self, path: str) -> tuple[FolderState, FileView] | None:
        """The folder state and file view for a canonical path, if any run has figures."""
        home = self.folder_for(path)
        order = ([home] if home else []) + [f for f in self.folders if f is not home]
        for folder in order:
            view = folder.view(path)
            if view is not None:
                return folder, view
        return None

    def replace_folder(self, state: FolderState) -> Index:
        return Index(tuple(state if f.uri == state.uri else f for f in self.folders))

    def get(self, uri: str) -> FolderState | None:
        return next((f for f in self.folders if f.uri == uri), None)
