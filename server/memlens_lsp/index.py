"""Immutable snapshots of the runs loaded per workspace folder. No LSP types here.

A :class:`FolderState` holds the run shown in one workspace folder (the latest, or the one
the user chose) and its baseline, with per-file tables keyed by canonical absolute path. An
:class:`Index` is the tuple of folder states. Index values never change once built: the
server replaces the whole index (:func:`memlens_lsp.features.runs.swap`, under the reload
lock), so a request always sees one consistent snapshot.

What they compute on first use and keep (a file's view per path, files found by path suffix,
derived tables such as baseline figures re-mapped onto the run's lines, call-tree lookups,
labels) goes into one :class:`Memo` per object: the only state that changes after a value is
built. Memoised values depend only on the object's own fields (and the key), are filled from
the event loop and from worker threads (re-mapping, summaries), and the first value stored for
a key is the one every reader gets.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

from memlens.calltree import CallTreeIndex
from memlens.diff import match_lines
from memlens.errors import MemlensError
from memlens.growth import Verdict, line_verdict
from memlens.mapping import changed_in_place
from memlens.merge import ProcessLines
from memlens.model import FunctionKey, FunctionStats, LineStats, Run, SourceFile
from memlens.moment import Moment, function_values, line_values, resolve

_T = TypeVar("_T")


class Memo:
    """Values computed on first use and kept, per key: the one place index objects change.

    A value is computed outside the lock (two threads may compute the same one; computing is
    pure), and stored under it: the first value stored for a key wins, so every reader gets
    the same object."""

    __slots__ = ("_lock", "_values")

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value kept for ``key``, or None."""
        return self._values.get(key)

    def keep(self, key: Hashable, value: _T) -> _T:
        """Keep ``value`` for ``key`` unless one is kept already; return the kept one."""
        with self._lock:
            kept: _T = self._values.setdefault(key, value)
            return kept

    def value(self, key: Hashable, make: Callable[[], _T]) -> _T:
        """The value kept for ``key``, made (and kept) the first time."""
        if key in self._values:
            found: _T = self._values[key]
            return found
        return self.keep(key, make())


class memoized(Generic[_T]):
    """A read-only attribute computed on first use and kept in the instance's ``memo``."""

    def __init__(self, compute: Callable[[Any], _T]) -> None:
        self.compute = compute
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> _T:
        memo: Memo = obj.memo
        return memo.value(self.name, lambda: self.compute(obj))


def canonical(path: str | os.PathLike[str]) -> str:
    """The key the index uses for a file: absolute, symlinks resolved, case-normalised.

    Recorded paths come from untrusted runs: a name no file can have (a NUL byte) is kept as
    it is written, made absolute, so that it names nothing on disk and never fails a lookup.
    """
    name = os.fspath(path)
    try:
        return os.path.normcase(os.path.realpath(name))
    except (ValueError, OSError):
        return os.path.normcase(os.path.abspath(name))


_NOT_FUNCTIONS = re.compile(r"<(lambda|listcomp|dictcomp|setcomp|genexpr|module)>$")
_DEF = re.compile(r"(async\s+)?def\s")


def is_def(text: Sequence[str] | None, fn: FunctionStats) -> bool:
    """Whether ``fn`` is a function or method (a ``def``), not a lambda, comprehension,
    generator expression, class body or module. The recorded source ``text`` decides when
    there is one: the first line of ``fn`` after its decorators starts with ``def``."""
    if _NOT_FUNCTIONS.search(fn.qualname):
        return False
    if text is None:
        return True
    for number in range(max(1, fn.first_line), min(fn.last_line, len(text)) + 1):
        line = text[number - 1].strip()
        if line and not line.startswith(("@", "#")):
            return _DEF.match(line) is not None
    return False


class FileView:
    """One profiled file of a run, with its baseline counterpart, ready for requests."""

    def __init__(
        self, key: str, source: SourceFile, run: RunData, baseline: SourceFile | None
    ) -> None:
        self.key = key  #: key of the file in Run.files (CallNode.file uses it)
        self.source = source
        self.run = run
        self.baseline_source = baseline
        self.memo = Memo()

    def label_memo(self, key: Hashable) -> dict[int, str | None]:
        """Labels already built for this file (None: no hint), per ``key`` (the settings and
        the compare mode): requests reuse them. Filled line by line on the event loop."""
        return self.memo.value(("labels", key), dict)

    @property
    def lines(self) -> Mapping[int, LineStats]:
        return self.source.lines

    def lines_at(self, moment: Moment) -> Mapping[int, LineStats]:
        """The file's lines at ``moment``: their ``live_bytes`` and ``incl_live_bytes`` then
        (lines that held nothing left out)."""
        return self.memo.value(
            ("at", moment),
            lambda: {
                n: LineStats(live_bytes=own, incl_live_bytes=incl)
                for n, (own, incl) in self.run.line_values(moment).get(self.key, {}).items()
            },
        )

    def verdict(self, line: int) -> Verdict:
        """The leak rule's verdict on ``line`` (:func:`memlens.growth.judge`)."""
        return self.memo.value(
            ("verdict", line), lambda: line_verdict(self.run.run, self.key, line)
        )

    def warm(self) -> None:
        """Compute the derived tables now (called off the event loop)."""
        _ = self.text_lines, self.baseline_lines, self.baseline_functions, self.function_ranges
        _ = self.baseline_map, self.edited_lines
        _ = self.run.tree.inclusive

    @memoized
    def text_lines(self) -> tuple[str, ...] | None:
        text = self.source.text
        return None if text is None else tuple(text.splitlines())

    @memoized
    def baseline_lines(self) -> Mapping[int, LineStats]:
        """Baseline figures keyed by this run's line numbers (changed lines are absent)."""
        base = self.baseline_source
        mapping = self.baseline_map
        if base is None or mapping is None:
            return {} if base is None or base.sha256 != self.source.sha256 else base.lines
        return {mapping[old]: st for old, st in base.lines.items() if old in mapping}

    @memoized
    def baseline_map(self) -> Mapping[int, int] | None:
        """Baseline line -> this run's line for the same code; None without both texts."""
        base = self.baseline_source
        if base is None or base.text is None or self.source.text is None:
            return None
        if base.text == self.source.text:
            return {n: n for n in base.lines}
        # The same matching as `memlens diff`: unchanged lines, and blocks that moved.
        return match_lines(base, self.source)

    @memoized
    def edited_lines(self) -> Mapping[int, tuple[int, LineStats]]:
        """Lines of this run edited in place since the baseline (``x = f(a)`` became ``x =
        f(a, b)``): this run's line -> (the baseline's line, its figures), for the comparison
        ("17.5 MiB at peak, was 35.0 MiB"). See :func:`memlens.mapping.changed_in_place`."""
        base = self.baseline_source
        matched = self.baseline_map
        if base is None or matched is None or base.text is None or self.text_lines is None:
            return {}
        if base.text == self.source.text:
            return {}
        pairs = changed_in_place(base.text.splitlines(), self.text_lines, matched)
        return {new: (old, base.lines[old]) for old, new in pairs.items() if old in base.lines}

    @memoized
    def function_ranges(self) -> tuple[tuple[int, int], ...] | None:
        """The lines inside the file's functions and methods, as (first, last) spans in order,
        overlapping and nested ones merged (so a line's span is found by bisection); None
        without a table."""
        if not self.source.functions:
            return None
        text = self.text_lines
        spans: list[tuple[int, int]] = []
        for first, last in sorted(
            (f.first_line, f.last_line) for f in self.source.functions if is_def(text, f)
        ):
            if spans and first <= spans[-1][1] + 1:
                spans[-1] = (spans[-1][0], max(spans[-1][1], last))
            else:
                spans.append((first, last))
        return tuple(spans)

    @memoized
    def baseline_functions(self) -> Mapping[str, FunctionStats]:
        base = self.baseline_source
        return {} if base is None else {f.qualname: f for f in base.functions}


class RunData:
    """A loaded run with lookups by canonical path and by call-tree location.

    Recorded paths are those of the machine and checkout that made the run. With ``root``
    (the workspace folder whose store holds the run), files are mapped onto that folder: a
    file recorded under the run's recorded workspace root (``RunInfo.workspace_root``) maps
    to the same relative path under ``root``; a file whose recorded path does not exist here
    is found by :meth:`match` through the longest common path suffix, ties broken by content
    hash. Constructed off the event loop (it checks which recorded paths exist).
    """

    def __init__(
        self,
        path: Path,
        run: Run,
        base_dirs: Iterable[Path] = (),
        root: Path | None = None,
        by_process: ProcessLines | None = None,
    ) -> None:
        self.path = path
        self.run = run
        #: Lines several processes contributed to: each one's own figures (recorded file key
        #: -> line -> (process, figures)); empty for a run of one process.
        self.by_process: ProcessLines = by_process or {}
        self.mtime_ns = _mtime(path)
        self.root = canonical(root) if root is not None else None
        dirs = [Path(run.info.cwd)] if run.info.cwd else []
        dirs.extend(base_dirs)
        recorded_root = getattr(run.info, "workspace_root", "")
        if not isinstance(recorded_root, str):  # a hostile header: ignore it
            recorded_root = ""
        cwd = os.path.normcase(os.path.normpath(run.info.cwd)) if run.info.cwd else ""
        self.memo = Memo()
        self.keys_by_path: dict[str, str] = {}
        #: key -> the canonical local path its figures show on (when it differs).
        self.local_paths: dict[str, str] = {}
        #: file name -> keys of recorded files that may have moved (suffix matching).
        self._missing_by_name: dict[str, list[str]] = {}
        for key, sf in run.files.items():
            local = _relocate(sf.path, recorded_root, self.root)
            if local is not None:
                self.keys_by_path.setdefault(local, key)
                self.local_paths[key] = local
            resolved = _resolve(sf.path, dirs)
            self.keys_by_path.setdefault(resolved, key)
            if local is None and self._may_move(sf.path, resolved, cwd):
                name = os.path.normcase(os.path.basename(sf.path))
                self._missing_by_name.setdefault(name, []).append(key)

    def _may_move(self, recorded: str, resolved: str, cwd: str) -> bool:
        """Whether a recorded file may be found elsewhere by its path suffix: it is the
        program's own (under the run's working directory) or does not exist here. Files of
        installed packages that exist here stay where they are."""
        if not os.path.isabs(recorded) or (self.root is not None and _inside(resolved, self.root)):
            return False
        own = bool(cwd) and _inside(os.path.normcase(os.path.normpath(recorded)), cwd)
        return own or not os.path.exists(resolved)

    def match(self, path: str, digest: Callable[[], str] | None = None) -> str | None:
        """The key of the recorded file shown on the local canonical ``path``, if any."""
        key = self.keys_by_path.get(path)
        if key is not None or self.root is None or not _inside(path, self.root):
            return key
        found: str | None = self.memo.get(("match", path))
        if found is not None:
            return found
        candidates = self._missing_by_name.get(os.path.basename(path), [])
        if not candidates:
            return None
        want = _parts(path)
        scored = [(_common_suffix(_parts(self.run.files[k].path), want), k) for k in candidates]
        best = max(n for n, _ in scored)
        top = [k for n, k in scored if n == best]
        if len(top) > 1 and digest is not None:
            sha = digest()
            top = [k for k in top if self.run.files[k].sha256 == sha]
        if len(top) != 1:
            return None  # ambiguous: no figures rather than another file's
        self.memo.keep(("local", top[0]), path)
        return self.memo.keep(("match", path), top[0])

    def local_path(self, key: str) -> str:
        """Where the figures of recorded file ``key`` show here (its recorded path if not
        mapped elsewhere)."""
        local: str | None = self.local_paths.get(key) or self.memo.get(("local", key))
        return local or self.run.files[key].path

    @property
    def id(self) -> str:
        return self.path.stem

    @memoized
    def tree(self) -> CallTreeIndex:
        """Call-tree lookups (nodes by line, inclusive figures, call paths)."""
        return CallTreeIndex(self.run.call_tree)

    def moment(self, spec: str | None) -> Moment | None:
        """The moment ``spec`` names in this run; None without a spec, or when this run cannot
        show it (a time after its end, or a run without moments)."""
        if not spec:
            return None

        def find() -> Moment | None:
            try:
                return resolve(self.run, spec)
            except MemlensError:
                return None

        return self.memo.value(("moment", spec), find)

    def line_values(self, moment: Moment) -> Mapping[str, Mapping[int, tuple[int, int]]]:
        """Every line's live bytes at ``moment`` (:func:`memlens.moment.line_values`)."""
        return self.memo.value(("values", moment), lambda: line_values(self.run, moment))

    def function_values(self, moment: Moment) -> Mapping[FunctionKey, int]:
        """Every function's live bytes at ``moment``."""
        return self.memo.value(("functions", moment), lambda: function_values(self.run, moment))


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _parts(path: str) -> list[str]:
    return os.path.normcase(os.path.normpath(path)).split(os.sep)


def _common_suffix(a: list[str], b: list[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _relocate(recorded: str, recorded_root: str, root: str | None) -> str | None:
    """The local path of a file recorded under ``recorded_root`` (same path under ``root``)."""
    if root is None or not recorded_root or not os.path.isabs(recorded):
        return None
    if not os.path.isabs(recorded_root):
        return None
    rec, rec_root = os.path.normpath(recorded), os.path.normpath(recorded_root)
    if not _inside(os.path.normcase(rec), os.path.normcase(rec_root)) or rec == rec_root:
        return None
    return canonical(os.path.join(root, os.path.relpath(rec, rec_root)))


def _resolve(recorded: str, dirs: Iterable[Path]) -> str:
    p = Path(recorded)
    if p.is_absolute():
        return canonical(p)
    for d in dirs:
        candidate = d / p
        if os.path.exists(candidate):  # (False for a name no file can have, not an error)
            return canonical(candidate)
    first = next(iter(dirs), Path.cwd())
    return canonical(first / p)


@dataclass(frozen=True)
class FolderState:
    """What one workspace folder shows of one kind of run (``program`` or ``tests``,
    :data:`memlens.layout.KINDS`): its run and baseline (either may be None). Each folder has
    one state per kind, so that a test suite's runs are compared with test suite runs only."""

    root: Path
    uri: str
    run: RunData | None = None
    baseline: RunData | None = None
    #: Run the user chose with memlens.chooseRun (shown until a new run appears).
    chosen: Path | None = None
    #: The ``latest`` target when the choice was made.
    chosen_latest: Path | None = None
    #: Why the run to show could not be read (an unreadable latest run), if it could not.
    problem: str | None = None
    #: The kind of runs this state shows.
    kind: str = "program"
    #: File views per canonical path, made on first use.
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)

    def view(self, path: str, digest: Callable[[], str] | None = None) -> FileView | None:
        """The figures for a canonical path, or None when the run has none for it.
        ``digest`` gives the file's SHA-256 when a tie between recorded files must be broken."""
        run = self.run
        if run is None:
            return None
        cached: FileView | None = self.memo.get(path)
        if cached is not None:
            return cached
        key = run.match(path, digest)
        if key is None:
            return None
        base_sf = None
        if self.baseline is not None:
            bkey = self.baseline.match(path, digest)
            if bkey is not None:
                base_sf = self.baseline.run.files[bkey]
        return self.memo.keep(path, FileView(key, run.run.files[key], run, base_sf))

    def contains(self, path: str) -> bool:
        return _inside(path, canonical(self.root))

    def with_runs(
        self, run: RunData | None, baseline: RunData | None, problem: str | None = None
    ) -> FolderState:
        return replace(self, run=run, baseline=baseline, problem=problem, memo=Memo())


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

    def lookup(
        self, path: str, digest: Callable[[], str] | None = None
    ) -> tuple[FolderState, FileView] | None:
        """The folder state and file view for a canonical path, if any run has figures: the
        file's own folder first (its program run, then its test run), then the others."""
        home = self.folder_for(path)
        first = [f for f in self.folders if home is not None and f.uri == home.uri]
        order = first + [f for f in self.folders if home is None or f.uri != home.uri]
        for folder in order:
            view = folder.view(path, digest)
            if view is not None:
                return folder, view
        return None

    def replace_folder(self, state: FolderState) -> Index:
        return Index(
            tuple(state if (f.uri, f.kind) == (state.uri, state.kind) else f for f in self.folders)
        )

    def get(self, uri: str, kind: str = "program") -> FolderState | None:
        return next((f for f in self.folders if (f.uri, f.kind) == (uri, kind)), None)
