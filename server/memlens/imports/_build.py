"""Shared by the importers: build a Run from stacks of (file, line, function) and sizes.

Imported data knows file names and line numbers, often not function ranges. When a source file
can be read, its functions (qualified name, first and last line) come from its syntax tree, so
imported runs name and bound functions the way the tracer does.
"""

from __future__ import annotations

import ast
import bisect
import os
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

from memlens._version import __version__
from memlens.calltree import TreeBuilder, once_per_path
from memlens.layout import platform_name
from memlens.model import (
    SUMS,
    FunctionStats,
    LineStats,
    Run,
    RunInfo,
    SourceFile,
    TimelinePoint,
)
from memlens.source import read_source

#: file, line, function name (None when the source format has none)
Frame = tuple[str, int, str | None]
#: qualname, first line, last line
FunctionSpan = tuple[str, int, int]
#: Figure sums per line, function and node, laid out as memlens.model.SUMS.
_N = len(SUMS)
#: Largest figure or line number an import accepts (2**53): beyond it a JSON reader such as the
#: editor's loses precision, and sums soon leave the 64 bits a run file holds.
MAX_VALUE = 2**53
_INT64_MAX = 2**63 - 1


def check_value(value: int, what: str) -> int:
    """``value`` if it is within +-MAX_VALUE, else ValueError naming ``what``."""
    if not -MAX_VALUE <= value <= MAX_VALUE:
        raise ValueError(f"{what} out of range ({str(value)[:30]})")
    return value


def is_pseudo_file(name: str) -> bool:
    """``<frozen posixpath>``, ``<string>``, ``<unknown>``: no file on disk."""
    return not name or (name.startswith("<") and name.endswith(">"))


class Sources:
    """Resolves the file names an import mentions to recorded sources (read once each).

    With ``find_moved``, an absolute name that does not exist here (a run recorded on another
    machine) keeps its name, but its text is read from the file under a search directory with
    the longest part of its path in common (``/home/dev/proj/train.py`` -> ``DIR/train.py``),
    so the run records the source it ran and names its functions; the editor maps such a file
    onto the workspace by the same path suffix (as runs from other checkouts)."""

    def __init__(self, search_dirs: Sequence[str] = (), *, find_moved: bool = False) -> None:
        self.search_dirs = [os.path.abspath(d) for d in search_dirs] or [os.getcwd()]
        self.find_moved = find_moved
        self._cache: dict[str, tuple[str, str, str | None]] = {}
        self._spans: dict[str, _Spans] = {}

    def resolve(self, name: str) -> tuple[str, str, str | None]:
        """``name`` -> (key in Run.files, sha256 or "", text or None).

        The key is the absolute path when the file was found, else the name as recorded.
        """
        hit = self._cache.get(name)
        if hit is not None:
            return hit
        result: tuple[str, str, str | None] = (name, "", None)
        if not is_pseudo_file(name):
            candidates = (
                [Path(name)] if os.path.isabs(name) else [Path(d) / name for d in self.search_dirs]
            )
            for path in candidates:
                found = read_source(str(path))
                if found is not None:
                    result = (os.path.abspath(path), *found)
                    break
            else:
                if os.path.isabs(name):
                    result = (os.path.normpath(name), *self._moved(name))
        self._cache[name] = result
        return result

    #: Most trailing path parts tried when looking for a moved file.
    MAX_SUFFIX_PARTS = 8

    def _moved(self, name: str) -> tuple[str, str | None]:
        """(sha256, text) of the file a missing absolute ``name`` moved to, or ("", None)."""
        if not self.find_moved:
            return "", None
        parts = [p for p in Path(name).parts[1:] if p not in ("", ".", "..")]
        for n in range(min(len(parts), self.MAX_SUFFIX_PARTS), 0, -1):
            for d in self.search_dirs:
                found = read_source(str(Path(d, *parts[-n:])))
                if found is not None:
                    return found
        return "", None

    def spans(self, key: str, text: str | None) -> _Spans:
        found = self._spans.get(key)
        if found is None:
            found = self._spans[key] = _Spans(text)
        return found


class _Spans:
    """The functions of one source text, to find the innermost one around a line."""

    def __init__(self, text: str | None) -> None:
        self.spans: list[FunctionSpan] = []
        self._memo: dict[int, FunctionSpan | None] = {}
        if text is None:
            return
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return
        self._walk(tree, "")
        self.spans.sort(key=lambda s: (s[1], -s[2]))
        self._starts = [s[1] for s in self.spans]

    def _walk(self, node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    self.spans.append((qualname, first, child.end_lineno or child.lineno))
                    self._walk(child, qualname + ".<locals>.")
                else:
                    self._walk(child, qualname + ".")
            else:
                self._walk(child, prefix)

    def enclosing(self, line: int) -> FunctionSpan | None:
        """The innermost function whose lines contain ``line``, or None (module level)."""
        if not self.spans:
            return None
        if line in self._memo:
            return self._memo[line]
        best: FunctionSpan | None = None
        for span in self.spans[: bisect.bisect_right(self._starts, line)]:
            if span[1] <= line <= span[2] and (best is None or span[1] >= best[1]):
                best = span
        self._memo[line] = best
        return best


class RunBuilder:
    """Accumulates samples, each a stack (outermost first) with self figures at its leaf.

    The stacks make a call tree (:class:`memlens.calltree.TreeBuilder`); from it, self figures
    go to each node's line, and inclusive figures to every line and every function of a path,
    each once per path (:func:`memlens.calltree.once_per_path`), as the tracer counts them.
    """

    def __init__(self, sources: Sources | None = None) -> None:
        self.sources = sources or Sources()
        self._tree = TreeBuilder()
        self._func_lines: dict[tuple[str, str], list[int]] = {}
        self._files: dict[str, tuple[str, str | None]] = {}

    def _frame(self, frame: Frame) -> tuple[str, int, str, tuple[str, int, int] | None]:
        name, line, func = frame
        key, sha, text = self.sources.resolve(name)
        self._files.setdefault(key, (sha, text))
        span = self.sources.spans(key, text).enclosing(line)
        if span is not None and (func is None or span[0].rsplit(".", 1)[-1] == func):
            return key, line, span[0], span
        if func is None:
            return key, line, "<module>" if text is not None else "<unknown>", None
        return key, line, func, None

    def add(
        self,
        stack: Sequence[Frame],
        alloc: int,
        count: int,
        live: int,
        peak: int,
        live_count: int = 0,
    ) -> None:
        for _name, line, _func in stack:
            check_value(line, "line number")
        values = tuple(check_value(v, "figure") for v in (alloc, count, live, live_count, peak))
        frames = [self._frame(f) for f in stack if f[1] >= 1]
        if not frames:
            return
        node = -1
        for file, line, func, span in frames:
            node = self._tree.node(node, file, line, func)
            bounds = self._func_lines.setdefault((file, func), [line, line])
            if span is not None:
                bounds[0], bounds[1] = span[1], span[2]
            else:
                bounds[0], bounds[1] = min(bounds[0], line), max(bounds[1], line)
        self._tree.add(node, values)

    def build(
        self,
        *,
        command: Iterable[str],
        source: str,
        python: str,
        started: datetime | None,
        duration_s: float,
        peak_traced_bytes: int,
        peak_rss_bytes: int,
        timeline: Sequence[TimelinePoint] = (),
        complete: bool = True,
        pid: int = 0,
    ) -> Run:
        started = started or datetime.now(timezone.utc)
        tb = self._tree
        sites = list(zip(tb.file, tb.line, strict=True))
        own: dict[tuple[str, int], list[int]] = {}
        for i, site in enumerate(sites):
            row = own.setdefault(site, [0] * _N)
            for c, column in enumerate(tb.figures):
                row[c] += column[i]
        inclusive = tb.subtree_sums()
        incl = once_per_path(tb.parent, sites, inclusive)
        fkeys = [
            None if fn in ("<module>", "<unknown>") else (file, fn)
            for file, fn in zip(tb.file, tb.function, strict=True)
        ]
        fsums = once_per_path(tb.parent, fkeys, inclusive)
        files: dict[str, dict[int, LineStats]] = {}
        for (file, line), inc in incl.items():
            files.setdefault(file, {})[line] = LineStats.from_sums(own[(file, line)], inc)
        funcs: dict[str, list[FunctionStats]] = {}
        for (file, fn), fi in sorted(fsums.items()):
            first, last = self._func_lines[(file, fn)]
            funcs.setdefault(file, []).append(FunctionStats.from_sums(fn, first, last, fi))
        out_files: dict[str, SourceFile] = {}
        for file in sorted(files):
            sha, text = self._files[file]
            out_files[file] = SourceFile(
                file, sha, text, dict(sorted(files[file].items())), tuple(funcs.get(file, ()))
            )
        sums = [*incl.values(), *fsums.values(), *inclusive]
        totals = (peak_traced_bytes, peak_rss_bytes, *(p.rss_bytes for p in timeline))
        if any(abs(v) > _INT64_MAX for s in sums for v in s) or any(
            abs(v) > _INT64_MAX for v in totals
        ):
            raise ValueError("figures too large to record (their sums exceed 64 bits)")
        info = RunInfo(
            command=tuple(command),
            python=python,
            platform=platform_name(),
            started=started.isoformat(),
            ended=(started + timedelta(seconds=max(duration_s, 0.0))).isoformat(),
            duration_s=duration_s,
            pid=pid,
            exit_code=None,
            mode="imported",
            sample_interval_bytes=None,
            peak_traced_bytes=peak_traced_bytes,
            peak_rss_bytes=peak_rss_bytes,
            complete=complete,
            cwd=os.getcwd(),
            memlens_version=__version__,
            source=source,
        )
        return Run(info=info, files=out_files, call_tree=tb.tree(), timeline=tuple(timeline))


def bounded(points: list[TimelinePoint], cap: int = 4096) -> list[TimelinePoint]:
    """At most ``cap`` points, evenly thinned, always keeping the last one."""
    if len(points) <= cap:
        return points
    step = -(-len(points) // cap)
    kept = points[::step]
    if kept[-1] is not points[-1]:
        kept[-1] = points[-1]
    return kept
