"""Editor-terms views of a run: hint labels, hover Markdown, lenses, leak warnings.

Pure functions over the index and a line mapping; they return small frozen records with
0-based buffer lines and plain strings. Only :mod:`memlens_server.convert` turns them into
LSP objects. Labels come from :func:`memlens.annotate.line_label` (one place for labels).
Every string from a run that goes into Markdown passes :mod:`memlens_server.markdown`.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memlens.annotate import FIGURE_NAMES, figure_value, line_label
from memlens.model import LineStats
from memlens.units import fmt_bytes, fmt_count, fmt_delta_bytes, fmt_percent
from memlens_server import markdown as md
from memlens_server.index import FileView, RunData
from memlens_server.settings import Settings
from memlens_server.staleness import LineMapping

RUN_FILE_COMMAND = "memlens.runFile"
_MAIN_RE = re.compile(
    r"""^if\s+(__name__\s*==\s*(['"])__main__\2|(['"])__main__\3\s*==\s*__name__)\s*:"""
)


@dataclass(frozen=True, slots=True)
class HintItem:
    line: int  #: 0-based buffer line
    label: str
    recorded_line: int  #: 1-based line in the recorded source (for resolve)


@dataclass(frozen=True, slots=True)
class LensItem:
    line: int  #: 0-based buffer line
    title: str
    command: str = ""
    arguments: tuple[Any, ...] | None = None


@dataclass(frozen=True, slots=True)
class DiagnosticItem:
    line: int  #: 0-based buffer line
    start: int  #: code-point column of the first non-blank character
    end: int  #: code-point column of the end of the line
    message: str


# -- inlay hints --------------------------------------------------------------------------
def _shown(
    stats: LineStats, base: LineStats | None, settings: Settings, peak_total: int, compare: bool
) -> bool:
    value = figure_value(stats, settings.figure)
    old = figure_value(base, settings.figure) if (compare and base is not None) else 0
    biggest = max(value, old)
    if biggest <= 0 or biggest < settings.min_bytes:
        return False
    return not (
        settings.min_share > 0 and peak_total > 0 and biggest / peak_total < settings.min_share
    )


def hint_items(
    view: FileView,
    mapping: LineMapping,
    settings: Settings,
    start: int,
    end: int,
    *,
    has_baseline: bool,
) -> list[HintItem]:
    """Hints for buffer lines ``start <= line < end`` (0-based), one per line with figures."""
    if not settings.inlay_hints_enabled:
        return []
    compare = settings.compare_with_baseline and has_baseline
    peak_total = view.run.run.info.peak_traced_bytes
    lines = view.lines
    base_lines = view.baseline_lines if compare else {}
    out: list[HintItem] = []
    memo = view.label_memo(settings.figure, compare)
    if end - start > len(lines):
        # Fewer figures than lines in range: walk the figures instead.
        candidates = sorted(
            (b, r) for r in lines if (b := mapping.buffer_line(r)) is not None and start < b <= end
        )
    else:
        candidates = [
            (b, r)
            for b in range(start + 1, end + 1)
            if (r := mapping.recorded_line(b)) is not None and r in lines
        ]
    for buffer_line, rec in candidates:
        stats = lines[rec]
        base = base_lines.get(rec)
        if not _shown(stats, base, settings, peak_total, compare):
            continue
        label = memo.get(rec)
        if label is None:
            label = memo[rec] = line_label(stats, settings.figure, base, compare=compare)
        out.append(HintItem(buffer_line - 1, label, rec))
    return out


# -- hover ----------------------------------------------------------------------------------
def _delta(new: int, old: int) -> str:
    ratio = (new - old) / old if old else (0.0 if new == 0 else None)
    return f"{fmt_delta_bytes(new - old)} ({fmt_percent(ratio)})"


def call_paths(run: RunData, key: str, line: int, limit: int = 3) -> list[tuple[str, int, int]]:
    """The heaviest call paths reaching ``key:line``: (text, peak bytes, allocated bytes).

    Each node of the call tree at this line is one path (root -> ... -> this line); nodes
    reached through the same callers are merged (:meth:`memlens.calltree.CallTreeIndex.heaviest_paths`).
    Figures are inclusive of what the line calls.
    """
    out: list[tuple[str, int, int]] = []
    for path in run.tree.heaviest_paths(key, line, limit):
        *callers, own = path.frames
        frames = [
            f"{md.code(n.function)} ({md.code(f'{os.path.basename(n.file)}:{n.line}')})"
            for n in callers
        ]
        frames.append(f"{md.code(own.function)} (line {own.line})")
        out.append((" → ".join(frames), path.incl_peak_bytes, path.incl_alloc_bytes))
    return out


def hover_markdown(view: FileView, line: int, *, stale: bool, has_baseline: bool) -> str | None:
    """A Markdown table with every figure of recorded ``line``, or None when it has none."""
    stats = view.lines.get(line)
    if stats is None:
        return None
    info = view.run.run.info
    rows = [
        ("peak", stats.peak_bytes, stats.incl_peak_bytes),
        ("allocated", stats.alloc_bytes, stats.incl_alloc_bytes),
        ("live at exit", stats.live_bytes, stats.incl_live_bytes),
    ]
    out = [f"**memlens** · {line_label(stats)}", ""]
    out.append("| | self | incl. calls |")
    out.append("|:--|--:|--:|")
    out.extend(f"| {name} | {fmt_bytes(s)} | {fmt_bytes(i)} |" for name, s, i in rows)
    out.append(f"| allocations | {fmt_count(stats.alloc_count)} | |")
    out.append(f"| live objects | {fmt_count(stats.live_count)} | |")
    out.append("")
    facts = []
    if stats.alloc_count:
        facts.append(f"Average size {fmt_bytes(stats.alloc_bytes / stats.alloc_count)}")
    if info.peak_traced_bytes > 0:
        facts.append(f"{stats.peak_bytes / info.peak_traced_bytes * 100:.1f}% of the run's peak")
    if facts:
        out.append(" · ".join(facts))
        out.append("")
    if has_baseline:
        base = view.baseline_lines.get(line)
        if base is None:
            out.append("vs baseline: new (no figures on this line in the baseline)")
        else:
            out.append(
                f"vs baseline: peak {_delta(stats.peak_bytes, base.peak_bytes)} · "
                f"allocated {_delta(stats.alloc_bytes, base.alloc_bytes)} · "
                f"live {_delta(stats.live_bytes, base.live_bytes)}"
            )
        out.append("")
    paths = call_paths(view.run, view.key, line)
    if paths:
        out.append("Heaviest call paths:")
        out.append("")
        out.extend(
            f"{i}. {text} — {fmt_bytes(peak)} peak, {fmt_bytes(alloc)} allocated"
            for i, (text, peak, alloc) in enumerate(paths, start=1)
        )
        out.append("")
    if stale:
        out.append(
            f"_Figures are from an earlier version of this file (line {line} when profiled); "
            "edited lines show none._"
        )
        out.append("")
    out.append(f"Run {md.code(view.run.id)} ({md.text(info.mode)})")
    return "\n".join(out)


# -- code lenses -----------------------------------------------------------------------------
def function_lenses(
    view: FileView, mapping: LineMapping, buffer_size: int, *, has_baseline: bool
) -> list[LensItem]:
    """One lens above each function that has figures, at its (re-mapped) first line (lines
    outside the buffer's ``buffer_size`` lines, which only a broken run records, are left out).
    """
    out: list[LensItem] = []
    base_fns = view.baseline_functions if has_baseline else {}
    for fn in view.source.functions:
        if fn.qualname == "<module>" or (fn.peak_bytes == 0 and fn.alloc_bytes == 0):
            continue
        line = mapping.buffer_line(fn.first_line)
        if line is None or not 1 <= line <= buffer_size:
            continue
        title = (
            f"memlens: {fmt_bytes(fn.peak_bytes)} peak · "
            f"{fmt_bytes(fn.alloc_bytes)} allocated (incl.)"
        )
        if has_baseline:
            base = base_fns.get(fn.qualname)
            title += (
                " · Δ new"
                if base is None
                else f" · Δ {fmt_delta_bytes(fn.peak_bytes - base.peak_bytes)}"
            )
        out.append(LensItem(line - 1, title))
    out.sort(key=lambda item: item.line)
    return out


def main_block_lenses(uri: str, lines: Sequence[str]) -> list[LensItem]:
    """A "run under memlens" lens above each ``if __name__ == "__main__":`` line."""
    return [
        LensItem(i, "▶ Run under memlens", RUN_FILE_COMMAND, ({"uri": uri, "args": []},))
        for i, text in enumerate(lines)
        if text.startswith("if") and _MAIN_RE.match(text)
    ]


# -- diagnostics --------------------------------------------------------------------------
def leak_items(
    view: FileView, mapping: LineMapping, lines: Sequence[str], settings: Settings
) -> list[DiagnosticItem]:
    """Warnings on lines that still hold at least ``leakWarning.minBytes`` at exit."""
    threshold = max(1, settings.leak_min_bytes)
    out: list[DiagnosticItem] = []
    for rec, stats in view.lines.items():
        if stats.live_bytes < threshold:
            continue
        line = mapping.buffer_line(rec)
        if line is None or not 1 <= line <= len(lines):
            continue
        text = lines[line - 1]
        start = len(text) - len(text.lstrip())
        objects = f" in {fmt_count(stats.live_count)} objects" if stats.live_count else ""
        message = (
            f"{fmt_bytes(stats.live_bytes)} allocated here{objects} is still live at exit "
            f"(likely leak; {fmt_bytes(stats.alloc_bytes)} allocated in total)"
        )
        out.append(DiagnosticItem(line - 1, start, len(text), message))
    out.sort(key=lambda d: d.line)
    return out


# -- run summaries --------------------------------------------------------------------------
def run_summary(run: RunData | None) -> dict[str, Any] | None:
    """The ``RunSummary`` shape of docs/lsp.md."""
    if run is None:
        return None
    info = run.run.info
    return {
        "id": run.id,
        "path": str(run.path),
        "started": info.started,
        "command": shlex.join(info.command),
        "peak_traced_bytes": info.peak_traced_bytes,
        "duration_s": info.duration_s,
        "complete": info.complete,
        "mode": info.mode,
    }


def top_lines(run: RunData, figure: str = "peak", limit: int = 10) -> list[dict[str, Any]]:
    """The heaviest lines of a run by ``figure``: ``{"file", "line", "label"}``."""
    attr = FIGURE_NAMES[figure]
    rows = [
        (stats.figure(attr), sf.path, line, stats)
        for sf in run.run.files.values()
        for line, stats in sf.lines.items()
    ]
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    return [
        {"file": path, "line": line, "label": line_label(stats, figure)}
        for value, path, line, stats in rows[:limit]
        if value > 0
    ]
