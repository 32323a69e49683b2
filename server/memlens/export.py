"""The JSON export of a run (``memlens export``): a stable, documented shape. Stdlib only.

The keys named in docs/file-format.md ("Export") are a contract: they are never renamed or
removed within export version 1 (:data:`EXPORT_VERSION`, the shape of this JSON, not the run
file's format version); new keys may be added.
"""

from __future__ import annotations

from typing import Any

from memlens.model import ERRORS, FIGURES, NATIVE, FunctionStats, LineStats, Run, RunInfo
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
