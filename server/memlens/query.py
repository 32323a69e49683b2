"""Machine-readable views of runs: the run list, the heaviest lines, one file's lines with
their call paths, functions with self and inclusive figures. Pure, stdlib only.

``memlens runs --json`` and the MCP server (:mod:`memlens_mcp.server`) answer from here.
Figures are bytes and counts under the names of the JSON export
(:func:`memlens.export.line_figures`, docs/file-format.md), never percentages or labels.
"""

from __future__ import annotations

import itertools
import os
import re
import sysconfig
from pathlib import Path
from typing import Any

from memlens import held
from memlens.calltree import CallTreeIndex
from memlens.export import device_figures, has_gpu, run_header
from memlens.export import function_figures as function_export
from memlens.export import line_figures as line_export
from memlens.model import FUNCTION_FIGURES, NAMED_FIGURES, FunctionStats, Run, SourceFile
from memlens.moment import Moment, run_at
from memlens.report import top_lines as ranked_lines
from memlens.store import Store

_STDLIB_SEGMENT = re.compile(r"python3\.\d+t?")


def run_entries(store: Store) -> list[dict[str, Any]]:
    """Every run of the store, oldest first, as ``memlens runs --json`` lists them.

    An unreadable run file is listed with ``error`` (the reason) and nulls for its header.
    """
    latest, baseline = store.latest(), store.baseline()
    out: list[dict[str, Any]] = []
    for e in store.entries():
        info = e.info
        out.append(
            {
                "id": e.id,
                "path": str(e.path),
                "started": info.started if info else None,
                "command": list(info.command) if info else None,
                "mode": info.mode if info else None,
                "peak_traced_bytes": info.peak_traced_bytes if info else None,
                "duration_s": info.duration_s if info else None,
                "complete": info.complete if info else None,
                "latest": e.path == latest,
                "baseline": e.path == baseline,
                "error": e.error,
            }
        )
    return out


def run_ref(path: Path) -> dict[str, str]:
    """Which run an answer is about: its id (the file's stem) and its file."""
    return {"id": path.stem, "path": str(path)}


def run_summary(path: Path, run: Run) -> dict[str, Any]:
    """A run's id and file, and its header as the export has it (:func:`export.run_header`)."""
    return {**run_ref(path), **run_header(run.info)}


def is_library_path(path: str) -> bool:
    """Whether a file of a run is library code rather than the user's.

    Library code is a pseudo file (``<frozen posixpath>``, ``<string>``), a file of an
    installed package (a ``site-packages`` or ``dist-packages`` folder on its path) or of a
    standard library (under ``lib/python3.X/``, or this interpreter's). Runs can come from
    other machines, so this is decided from the path alone, never from what is installed here.
    """
    if path.startswith("<"):
        return True
    parts = [p.lower() for p in re.split(r"[\\/]", path)]
    if "site-packages" in parts or "dist-packages" in parts:
        return True
    if any(
        a in ("lib", "lib64") and _STDLIB_SEGMENT.fullmatch(b) for a, b in itertools.pairwise(parts)
    ):
        return True
    stdlib = sysconfig.get_paths().get("stdlib")
    return stdlib is not None and os.path.normcase(path).startswith(
        os.path.normcase(os.path.join(stdlib, ""))
    )


def _code(sf: SourceFile, line: int) -> str:
    """The recorded source of one line, stripped ("" when the run has no text for it)."""
    if sf.text is None:
        return ""
    lines = sf.text.splitlines()
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def _function_of(tree: CallTreeIndex, sf: SourceFile, line: int) -> str | None:
    """The function a line belongs to: as the call tree recorded it, else the innermost
    function whose lines contain it; None at module level of a run without a call tree."""
    nodes = tree.at(sf.path, line)
    if nodes:
        return nodes[0].function
    around = [fn for fn in sf.functions if fn.first_line <= line <= fn.last_line]
    return max(around, key=lambda fn: fn.first_line).qualname if around else None


def _line_entry(run: Run, tree: CallTreeIndex, sf: SourceFile, line: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "path": sf.path,
        "line": line,
        "code": _code(sf, line),
        "function": _function_of(tree, sf, line),
        **line_export(sf.lines[line], run.info.mode, has_gpu(run.info)),
        "held_by": held.to_json(held.of_line(run, sf.path, line)),
    }
    if line in sf.gpu_devices:
        entry["gpu_devices"] = device_figures(sf.gpu_devices[line])
    return entry


def top_lines(
    run: Run, by: str = "peak", limit: int | None = 20, include_library: bool = False
) -> list[dict[str, Any]]:
    """The lines with the largest self figure ``by`` (peak, alloc, live or a GPU figure),
    largest first; lines with 0 are left out. ``limit`` None: all."""
    keep = None if include_library else (lambda path: not is_library_path(path))
    rows = ranked_lines(run, by, limit, keep=keep)
    tree = CallTreeIndex(run.call_tree)
    return [_line_entry(run, tree, run.files[r.file], r.line) for r in rows]


def lines_at(
    run: Run, moment: Moment, limit: int | None = 20, include_library: bool = False
) -> list[dict[str, Any]]:
    """The lines that held the most at ``moment``, largest first: their live bytes then, self
    (``live_bytes``) and including their calls (``incl_live_bytes``). ``limit`` None: all."""
    keep = None if include_library else (lambda path: not is_library_path(path))
    then = run_at(run, moment)
    tree = CallTreeIndex(run.call_tree)
    out = []
    for r in ranked_lines(then, "live", limit, keep=keep):
        sf = run.files[r.file]
        out.append(
            {
                "path": sf.path,
                "line": r.line,
                "code": _code(sf, r.line),
                "function": _function_of(tree, sf, r.line),
                "live_bytes": r.stats.live_bytes,
                "incl_live_bytes": r.stats.incl_live_bytes,
            }
        )
    return out


def line_figures(
    run: Run, file: str, start: int = 1, end: int | None = None, paths: int = 3
) -> list[dict[str, Any]]:
    """The lines of ``file`` (a key of ``run.files``) between ``start`` and ``end`` that have
    figures, each with its ``paths`` heaviest call paths (:meth:`CallTreeIndex.heaviest_paths`:
    of a path deeper than :data:`memlens.calltree.SHOWN_FRAMES` frames, its outermost and
    innermost ones, ``frames_left_out`` saying how many lie between)."""
    sf = run.files[file]
    tree = CallTreeIndex(run.call_tree)
    out: list[dict[str, Any]] = []
    for line in sorted(sf.lines):
        if line < start or (end is not None and line > end):
            continue
        entry = _line_entry(run, tree, sf, line)
        entry["call_paths"] = [
            {
                "frames": [
                    {"path": n.file, "line": n.line, "function": n.function} for n in p.frames
                ],
                "frames_left_out": p.left_out,
                "incl_peak_bytes": p.incl_peak_bytes,
                "incl_alloc_bytes": p.incl_alloc_bytes,
            }
            for p in tree.heaviest_paths(file, line, paths)
        ]
        out.append(entry)
    return out


def function_figures(
    run: Run, by: str = "peak", limit: int | None = 20, include_library: bool = False
) -> list[dict[str, Any]]:
    """Functions by their inclusive figure ``by``, largest first, with self figures too.

    Inclusive figures are the run's (each stack counted once). Self figures are what the
    function's own lines allocated: the sum over the call-tree nodes recorded with its name
    inside its lines (nested functions are their own functions).
    """
    nodes: dict[tuple[str, str], list[Any]] = {}
    for n in run.call_tree:
        nodes.setdefault((n.file, n.function), []).append(n)
    rows: list[tuple[int, str, FunctionStats]] = []
    for path, sf in run.files.items():
        if not include_library and is_library_path(path):
            continue
        rows.extend((getattr(fn, NAMED_FIGURES[by].node), path, fn) for fn in sf.functions)
    rows.sort(key=lambda r: (-r[0], r[1], r[2].first_line, r[2].qualname))
    out: list[dict[str, Any]] = []
    for _, path, fn in rows[:limit]:
        own = [
            n for n in nodes.get((path, fn.qualname), ()) if fn.first_line <= n.line <= fn.last_line
        ]
        entry: dict[str, Any] = {"path": path, **function_export(fn, has_gpu(run.info))}
        entry.update((f, sum(getattr(n, f) for n in own)) for f in FUNCTION_FIGURES)
        out.append(entry)
    return out
