"""The JSON export of a run (``memlens export``): a stable, documented shape. Stdlib only.

The keys named in docs/file-format.md ("Export") are a contract: they are never renamed or
removed within export version 1 (:data:`EXPORT_VERSION`, the shape of this JSON, not the run
file's format version); new keys may be added.
"""

from __future__ import annotations

from typing import Any

from memlens import held
from memlens.model import (
    DEVICE_FIGURES,
    ERRORS,
    FIGURES,
    GPU_FIGURES,
    GPU_FUNCTION_FIGURES,
    NATIVE,
    FunctionStats,
    GpuDeviceLine,
    LineStats,
    Run,
    RunInfo,
    SourceFile,
)
from memlens.runfile.header import tests_json
from memlens.runfile.schema import MAGIC

#: The version of the export's shape (keys are only ever added within a version).
EXPORT_VERSION = 1


def has_gpu(info: RunInfo) -> bool:
    """Whether the run recorded GPU memory: then its lines and functions carry GPU figures."""
    return bool(info.gpus) or info.gpu_peak_bytes > 0


def line_figures(stats: LineStats, mode: str, gpu: bool = False) -> dict[str, int | float]:
    """One line's figures under the export's names (with the native part of the self figures:
    what C libraries allocated themselves); the error estimates in sampling mode; with
    ``gpu`` (a run that recorded GPU memory) the GPU figures."""
    out: dict[str, int | float] = {f: getattr(stats, f) for f in (*FIGURES, *NATIVE)}
    if mode == "sampling":
        out.update((e, getattr(stats, e)) for e in ERRORS)
    if gpu:
        out.update((f, getattr(stats, f)) for f in GPU_FIGURES)
    return out


def function_figures(fn: FunctionStats, gpu: bool = False) -> dict[str, str | int]:
    """One function's entry of the export: its name, lines and inclusive figures (with
    ``gpu``, its GPU figures too, as ``incl_gpu_*``)."""
    out: dict[str, str | int] = {
        "qualname": fn.qualname,
        "first_line": fn.first_line,
        "last_line": fn.last_line,
        "incl_alloc_bytes": fn.alloc_bytes,
        "incl_alloc_count": fn.alloc_count,
        "incl_live_bytes": fn.live_bytes,
        "incl_peak_bytes": fn.peak_bytes,
    }
    if gpu:
        out.update((f"incl_{f}", getattr(fn, f)) for f in GPU_FUNCTION_FIGURES)
    return out


def device_figures(each: tuple[GpuDeviceLine, ...]) -> list[dict[str, int]]:
    """A line's GPU figures per device (runs that used several devices)."""
    return [{"device": d.device, **{f: getattr(d, f) for f in DEVICE_FIGURES}} for d in each]


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
        "attached": info.attached,
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
        "cell": info.cell.as_dict() if info.cell is not None else None,
        "gpu_peak_bytes": info.gpu_peak_bytes,
        "gpus": [g.as_dict() for g in info.gpus],
    }


def to_json_dict(run: Run) -> dict[str, Any]:
    info = run.info
    gpu = has_gpu(info)
    holders = held.index(run)

    def lines(path: str, sf: SourceFile) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for line, st in sorted(sf.lines.items()):
            out[str(line)] = entry = dict[str, Any](line_figures(st, info.mode, gpu))
            if line in sf.gpu_devices:
                entry["gpu_devices"] = device_figures(sf.gpu_devices[line])
            found = holders.get((path, line))
            if found:
                entry["held_by"] = held.to_json(found)
        return out

    return {
        "format": MAGIC,
        "version": EXPORT_VERSION,
        "run": {**run_header(info), "tests": tests_json(info.tests)},
        "files": {
            path: {
                "sha256": sf.sha256,
                "lines": lines(path, sf),
                "functions": [function_figures(fn, gpu) for fn in sf.functions],
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
