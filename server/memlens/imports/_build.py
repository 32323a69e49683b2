"""Shared by the importers: build a Run from stacks of (file, line, function) and sizes."""

from __future__ import annotations

import hashlib
import os
import platform
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from memlens._version import __version__
from memlens.model import (
    CallNode,
    FunctionStats,
    LineStats,
    Run,
    RunInfo,
    SourceFile,
    TimelinePoint,
)

Frame = tuple[str, int, str]  # file, line, function


class _Node:
    __slots__ = ("alloc", "count", "file", "func", "line", "live", "parent", "peak")

    def __init__(self, parent: int, file: str, line: int, func: str) -> None:
        self.parent, self.file, self.line, self.func = parent, file, line, func
        self.alloc = self.count = self.live = self.peak = 0


class RunBuilder:
    """Accumulates samples, each a stack (outermost first) with self figures at its leaf."""

    def __init__(self) -> None:
        self._nodes: dict[tuple[int, str, int], int] = {}
        self._node_rows: list[_Node] = []
        self._self: dict[tuple[str, int], list[int]] = {}
        self._incl: dict[tuple[str, int], list[int]] = {}
        self._funcs: dict[tuple[str, str], list[int]] = {}
        self._func_lines: dict[tuple[str, str], list[int]] = {}

    def add(self, stack: Sequence[Frame], alloc: int, count: int, live: int, peak: int) -> None:
        if not stack:
            return
        parent = -1
        for file, line, func in stack:
            key = (parent, file, line)
            nid = self._nodes.get(key)
            if nid is None:
                nid = len(self._node_rows)
                self._nodes[key] = nid
                self._node_rows.append(_Node(parent, file, line, func))
            parent = nid
            span = self._func_lines.setdefault((file, func), [line, line])
            span[0], span[1] = min(span[0], line), max(span[1], line)
        node = self._node_rows[parent]
        node.alloc += alloc
        node.count += count
        node.live += live
        node.peak += peak
        leaf = (stack[-1][0], stack[-1][1])
        s = self._self.setdefault(leaf, [0, 0, 0, 0])
        for i, v in enumerate((alloc, count, live, peak)):
            s[i] += v
        for site in {(f, ln) for f, ln, _ in stack}:
            inc = self._incl.setdefault(site, [0, 0, 0, 0])
            for i, v in enumerate((alloc, count, live, peak)):
                inc[i] += v
        for fkey in {(f, fn) for f, _, fn in stack}:
            fi = self._funcs.setdefault(fkey, [0, 0, 0, 0])
            for i, v in enumerate((alloc, count, live, peak)):
                fi[i] += v

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
        base_dir: str = "",
    ) -> Run:
        started = started or datetime.now(timezone.utc)
        files: dict[str, dict[int, LineStats]] = {}
        for (file, line), inc in self._incl.items():
            s = self._self.get((file, line), [0, 0, 0, 0])
            files.setdefault(file, {})[line] = LineStats(
                alloc_bytes=s[0],
                alloc_count=s[1],
                live_bytes=s[2],
                live_count=s[1] if s[2] else 0,
                peak_bytes=s[3],
                incl_alloc_bytes=inc[0],
                incl_live_bytes=inc[2],
                incl_peak_bytes=inc[3],
            )
        funcs: dict[str, list[FunctionStats]] = {}
        for (file, fn), fi in sorted(self._funcs.items()):
            first, last = self._func_lines[(file, fn)]
            funcs.setdefault(file, []).append(
                FunctionStats(fn, first, last, fi[0], fi[1], fi[2], fi[3])
            )
        out_files: dict[str, SourceFile] = {}
        for file in sorted(files):
            sha, text = _source(file, base_dir)
            out_files[file] = SourceFile(
                file, sha, text, dict(sorted(files[file].items())), tuple(funcs.get(file, ()))
            )
        nodes = tuple(
            CallNode(i, n.parent, n.file, n.line, n.func, n.alloc, n.count, n.live, n.peak)
            for i, n in enumerate(self._node_rows)
        )
        info = RunInfo(
            command=tuple(command),
            python=python,
            platform=platform.platform(),
            started=started.isoformat(),
            ended=started.isoformat(),
            duration_s=duration_s,
            pid=0,
            exit_code=None,
            mode="imported",
            sample_interval_bytes=None,
            peak_traced_bytes=peak_traced_bytes,
            peak_rss_bytes=peak_rss_bytes,
            complete=True,
            cwd=os.getcwd(),
            memlens_version=__version__,
            source=source,
        )
        return Run(info=info, files=out_files, call_tree=nodes, timeline=tuple(timeline))


def _source(file: str, base_dir: str) -> tuple[str, str | None]:
    path = Path(file)
    if not path.is_absolute() and base_dir:
        path = Path(base_dir) / path
    try:
        data = path.read_bytes()
    except OSError:
        return "", None
    return hashlib.sha256(data).hexdigest(), data.decode("utf-8", errors="replace")
