"""The JSON export of a run (``memlens export``): a stable, documented shape. Stdlib only.

The keys named in docs/file-format.md ("Export") are a contract: they are never renamed or
removed within export version 1 (:data:`EXPORT_VERSION`, the shape of this JSON, not the run
file's format version); new keys may be added.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any, TextIO

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
    LineTable,
    Run,
    RunInfo,
    SourceFile,
)
from memlens.runfile.header import tests_json
from memlens.runfile.jsontext import plain
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


def line_extras(run: Run) -> dict[str, dict[int, dict[str, Any]]]:
    """What a line's entry in the export holds beside its figures, by file and line, for the
    lines that have some: its GPU figures per device (``gpu_devices``) and what holds it
    (``held_by``)."""
    out: dict[str, dict[int, dict[str, Any]]] = {
        path: {line: {"gpu_devices": device_figures(each)} for line, each in sf.gpu_devices.items()}
        for path, sf in run.files.items()
    }
    for (path, line), found in held.index(run).items():
        out.setdefault(path, {}).setdefault(line, {})["held_by"] = held.to_json(found)
    return out


def to_json_dict(run: Run) -> dict[str, Any]:
    """The export of ``run`` as one dict (:func:`write_json` writes the same document piece by
    piece)."""
    info = run.info
    gpu = has_gpu(info)
    extras = line_extras(run)

    def lines(path: str, sf: SourceFile) -> dict[str, dict[str, Any]]:
        extra = extras[path]
        return {
            str(line): {**line_figures(st, info.mode, gpu), **extra.get(line, {})}
            for line, st in sorted(sf.lines.items())
        }

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


def write_json(run: Run, out: TextIO) -> None:
    """Write the export of ``run`` to ``out``: the JSON of :func:`to_json_dict` (equal once
    parsed), made piece by piece: one line of text per line of figures and per call-tree
    node, each made by formatting its numbers (no dict or object per row: a
    :class:`LineTable`'s columns are read as they are), written a thousand at a time.
    Time and memory grow with the run's rows, not with a copy of them as Python objects.
    """
    info = run.info
    gpu = has_gpu(info)
    extras = line_extras(run)
    write = out.write
    write(f'{{"format": {plain(MAGIC)}, "version": {EXPORT_VERSION},\n')
    write(f' "run": {plain({**run_header(info), "tests": tests_json(info.tests)})},\n')
    write(' "files": {')
    for n, (path, sf) in enumerate(run.files.items()):
        write(f'{"," if n else ""}\n  {plain(path)}: {{"sha256": {plain(sf.sha256)}, "lines": {{')
        write_rows(out, _line_rows(sf.lines, info.mode, gpu, extras[path]), "\n   ")
        fns = plain([function_figures(fn, gpu) for fn in sf.functions])
        write(f'\n  }},\n  "functions": {fns}}}')
    write('\n },\n "call_tree": [')
    tree = run.call_tree
    files = [plain(f) for f in tree.files]
    names = [plain(f) for f in tree.functions]
    nodes = (
        _NODE % (node, parent, files[file], line, names[name], alloc, count, live, peak)
        for node, parent, file, line, name, alloc, count, live, peak in zip(
            tree.id, tree.parent, tree.file, tree.line, tree.function,
            tree.alloc_bytes, tree.alloc_count, tree.live_bytes, tree.peak_bytes,
            strict=True,
        )
    )  # fmt: skip
    write_rows(out, nodes, "\n  ")
    write("\n ],\n")
    write(f' "timeline": {plain([[p.t, p.traced_bytes, p.rss_bytes] for p in run.timeline])}\n')
    write("}\n")


def write_rows(out: TextIO, rows: Iterator[str], indent: str) -> None:
    """Write ``rows``, each after ``indent``, with commas between them: a thousand at a
    time (one write, no call per row)."""
    lead = indent
    while batch := list(islice(rows, 1024)):
        out.write(lead + ("," + indent).join(batch))
        lead = "," + indent


#: One call-tree node of the export, from its id, parent, file (JSON), line, function
#: (JSON), alloc_bytes, alloc_count, live_bytes and peak_bytes.
_NODE = (
    '{"id": %d, "parent": %d, "file": %s, "line": %d, "function": %s, '
    '"alloc_bytes": %d, "alloc_count": %d, "live_bytes": %d, "peak_bytes": %d}'
)


def _line_format(errors: bool, gpu: bool) -> str:
    """A line's ``"N": {figures}`` as :func:`line_figures` has them, to be filled with its
    number, its integer figures, its errors (as JSON writes floats: their repr) when
    ``errors``, and its GPU figures when ``gpu``."""
    keys = [f'"{k}": %d' for k in (*FIGURES, *NATIVE)]
    keys += [f'"{k}": %r' for k in ERRORS] if errors else []
    keys += [f'"{k}": %d' for k in GPU_FIGURES] if gpu else []
    return '"%d": {' + ", ".join(keys) + "}"


def _line_rows(
    lines: Mapping[int, LineStats], mode: str, gpu: bool, extras: Mapping[int, dict[str, Any]]
) -> Iterator[str]:
    """Each line's ``"N": {entry}`` in increasing line order, as :func:`to_json_dict` has
    it (its figures, then its ``extras``)."""
    if not isinstance(lines, LineTable):
        return (
            f"{plain(str(line))}: {plain({**line_figures(st, mode, gpu), **extras.get(line, {})})}"
            for line, st in sorted(lines.items())
        )
    errors = mode == "sampling"
    form = _line_format(errors, gpu)
    rows = map(form.__mod__, lines.rows(errors, gpu))  # (no Python call per line)
    if not extras:
        return rows
    return (
        row if extra is None else f"{row[:-1]}, {plain(extra)[1:]}"
        for line, row in zip(lines, rows, strict=True)
        for extra in (extras.get(line),)
    )
