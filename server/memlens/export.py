"""The JSON export of a run (``memlens export``): a stable, documented shape. Stdlib only.

The keys named in docs/file-format.md ("Export") are a contract: they are never renamed or
removed within export version 1 (:data:`EXPORT_VERSION`, the shape of this JSON, not the run
file's format version); new keys may be added.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, TextIO

from memlens.model import (
    ERRORS,
    FIGURES,
    NATIVE,
    FunctionStats,
    LineStats,
    LineTable,
    Run,
    RunInfo,
)
from memlens.runfile.header import tests_json
from memlens.runfile.schema import MAGIC

#: The version of the export's shape (keys are only ever added within a version).
EXPORT_VERSION = 1


def line_figures(stats: LineStats, mode: str) -> dict[str, int | float]:
    """One line's figures under the export's names (with the native part of the self figures:
    what C libraries allocated themselves); the error estimates in sampling mode."""
    out: dict[str, int | float] = {f: getattr(stats, f) for f in (*FIGURES, *NATIVE)}
    if mode == "sampling":
        out.update((e, getattr(stats, e)) for e in ERRORS)
    return out


def function_figures(fn: FunctionStats) -> dict[str, str | int]:
    """One function's entry of the export: its name, lines and inclusive figures."""
    return {
        "qualname": fn.qualname,
        "first_line": fn.first_line,
        "last_line": fn.last_line,
        "incl_alloc_bytes": fn.alloc_bytes,
        "incl_alloc_count": fn.alloc_count,
        "incl_live_bytes": fn.live_bytes,
        "incl_peak_bytes": fn.peak_bytes,
    }


def run_header(info: RunInfo) -> dict[str, Any]:
    """The export's ``run`` object: the run's header."""
    return {
        "command": list(info.command),
        "python": info.python,
        "started": info.started,
        "duration_s": info.duration_s,
        "exit_code": info.exit_code,
        "mode": info.mode,
        "sample_interval_bytes": info.sample_interval_bytes,
        "peak_traced_bytes": info.peak_traced_bytes,
        "peak_rss_bytes": info.peak_rss_bytes,
        "complete": info.complete,
        "ended": info.ended,
        "platform": info.platform,
        "pid": info.pid,
        "cwd": info.cwd,
        "workspace_root": info.workspace_root,
        "memlens_version": info.memlens_version,
        "source": info.source,
        "seed": info.seed,
        "processes": [
            {
                "pid": p.pid,
                "parent_pid": p.parent_pid,
                "command": list(p.command),
                "complete": p.complete,
                "peak_traced_bytes": p.peak_traced_bytes,
            }
            for p in info.processes
        ],
    }


def to_json_dict(run: Run) -> dict[str, Any]:
    info = run.info
    return {
        "format": MAGIC,
        "version": EXPORT_VERSION,
        "run": {**run_header(info), "tests": tests_json(info.tests)},
        "files": {
            path: {
                "sha256": sf.sha256,
                "lines": {
                    str(line): line_figures(st, info.mode) for line, st in sorted(sf.lines.items())
                },
                "functions": [function_figures(fn) for fn in sf.functions],
            }
            for path, sf in run.files.items()
        },
        "call_tree": [
            {
                "id": n.id,
                "parent": n.parent,
                "file": n.file,
                "line": n.line,
                "function": n.function,
                "alloc_bytes": n.alloc_bytes,
                "alloc_count": n.alloc_count,
                "live_bytes": n.live_bytes,
                "peak_bytes": n.peak_bytes,
            }
            for n in run.call_tree
        ],
        "timeline": [[p.t, p.traced_bytes, p.rss_bytes] for p in run.timeline],
    }


def write_json(run: Run, out: TextIO) -> None:
    """Write the export of ``run`` to ``out``: the JSON of :func:`to_json_dict` (equal once
    parsed), made piece by piece: one line per line of figures and per call-tree node, each
    made by formatting its numbers (no dict or object per row; a LineTable's columns are read
    as they are), written in chunks. Time and memory grow with the run's rows, not with a
    copy of them as Python objects: a 12 MB run exports in about a second.
    """
    info = run.info
    dumps = json.dumps
    write = _Chunks(out)
    write(f'{{"format": {dumps(MAGIC)}, "version": {EXPORT_VERSION},\n')
    write(f' "run": {dumps({**run_header(info), "tests": tests_json(info.tests)})},\n')
    write(' "files": {')
    for n, (path, sf) in enumerate(run.files.items()):
        write(f'{"," if n else ""}\n  {dumps(path)}: {{"sha256": {dumps(sf.sha256)}, "lines": {{')
        for k, row in enumerate(_line_rows(sf.lines, info.mode)):
            write(f"{',' if k else ''}\n   {row}")
        fns = dumps([function_figures(fn) for fn in sf.functions])
        write(f'\n  }},\n  "functions": {fns}}}')
    write('\n },\n "call_tree": [')
    tree = run.call_tree
    files = [dumps(f) for f in tree.files]
    names = [dumps(f) for f in tree.functions]
    sep = "\n  "
    for node, parent, file, line, name, alloc, count, live, peak in zip(
        tree.id, tree.parent, tree.file, tree.line, tree.function,
        tree.alloc_bytes, tree.alloc_count, tree.live_bytes, tree.peak_bytes,
        strict=True,
    ):  # fmt: skip
        write(_NODE % (sep, node, parent, files[file], line, names[name], alloc, count, live, peak))
        sep = ",\n  "
    write("\n ],\n")
    write(f' "timeline": {dumps([[p.t, p.traced_bytes, p.rss_bytes] for p in run.timeline])}\n')
    write("}\n")
    write.flush()


#: One call-tree node of the export, from its separator, id, parent, file (JSON), line,
#: function (JSON), alloc_bytes, alloc_count, live_bytes and peak_bytes.
_NODE = (
    '%s{"id": %d, "parent": %d, "file": %s, "line": %d, "function": %s, '
    '"alloc_bytes": %d, "alloc_count": %d, "live_bytes": %d, "peak_bytes": %d}'
)
_INT_KEYS = (*FIGURES, *NATIVE)
#: One line's figures: its number, then the integer figures in order (and the errors as
#: JSON writes floats: their repr).
_LINE = '"%d": {' + ", ".join(f'"{k}": %d' for k in _INT_KEYS) + "}"
_LINE_ERRS = _LINE[:-1] + "".join(f', "{k}": %s' for k in ERRORS) + "}"


def _line_rows(lines: Any, mode: str) -> Iterator[str]:
    """Each line's ``"N": {figures}`` in increasing line order (the errors in sampling mode),
    as :func:`line_figures` has them."""
    errors = mode == "sampling"
    if isinstance(lines, LineTable):
        for line, ints, errs in lines.rows():
            if errors:
                floats = (0.0, 0.0, 0.0) if errs is None else errs
                yield _LINE_ERRS % (line, *ints, *(repr(float(e)) for e in floats))
            else:
                yield _LINE % (line, *ints)
        return
    for line, st in sorted(lines.items()):
        yield f"{json.dumps(str(line))}: {json.dumps(line_figures(st, mode))}"


class _Chunks:
    """Writes pieces of text to ``out`` in chunks (one write per few thousand pieces)."""

    __slots__ = ("_out", "_parts")

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._parts: list[str] = []

    def __call__(self, text: str) -> None:
        self._parts.append(text)
        if len(self._parts) >= 4096:
            self.flush()

    def flush(self) -> None:
        self._out.write("".join(self._parts))
        self._parts.clear()
