"""Editor-terms views of a run: hint labels, hover Markdown, lenses, leak warnings.

Pure functions over the index and a line mapping; they return small frozen records with
0-based buffer lines and plain strings. Only :mod:`memlens_lsp.convert` turns them into
LSP objects. Labels come from :func:`memlens.annotate.line_label` (one place for labels).
Every string from a run that goes into Markdown passes :mod:`memlens_lsp.markdown`.
"""

from __future__ import annotations

import bisect
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memlens.annotate import figure_value, line_label
from memlens.model import NAMED_FIGURES, SELF_FIGURES, FunctionStats, LineStats, calls_figure
from memlens.units import fmt_bytes, fmt_count, fmt_delta_bytes, fmt_percent
from memlens_lsp import markdown as md
from memlens_lsp.index import FileView, FolderState, RunData, canonical, is_def
from memlens_lsp.settings import Settings
from memlens_lsp.staleness import IDENTITY, LineMapping

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
    #: "leak" (a warning), "gone" (information, comparison mode) or "test" (an error: a test
    #: that failed on memory, features.pytest_results)
    code: str = "leak"


# -- inlay hints --------------------------------------------------------------------------
def is_call_site(stats: LineStats, settings: Settings) -> bool:
    """Whether the line shows what its callees hold: its own figure is small (under a tenth)
    next to its inclusive one, which is significant (``inlayHints.callMinBytes``)."""
    if not settings.call_hints or NAMED_FIGURES[settings.figure].inclusive:
        return False
    own = figure_value(stats, settings.figure)
    incl = figure_value(stats, calls_figure(settings.figure))
    return incl >= max(settings.min_bytes, settings.call_min_bytes) and own * 10 < incl


def hint_label(
    stats: LineStats, base: LineStats | None, settings: Settings, peak_total: int, compare: bool
) -> str | None:
    """The hint of a line, or None when its figure is below the thresholds."""
    calls = is_call_site(stats, settings)
    figure = calls_figure(settings.figure) if calls else settings.figure
    value = figure_value(stats, figure)
    old = figure_value(base, figure) if (compare and base is not None) else 0
    biggest = max(value, old)
    if biggest <= 0 or biggest < settings.min_bytes:
        return None
    if settings.min_share > 0 and peak_total > 0 and biggest / peak_total < settings.min_share:
        return None
    return line_label(
        stats,
        settings.figure,
        base,
        compare=compare,
        calls=calls,
        compact=settings.hint_style == "compact",
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
    memo = view.label_memo((settings, compare))
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
        if rec in memo:
            label = memo[rec]
        else:
            label = memo[rec] = hint_label(
                lines[rec], base_lines.get(rec), settings, peak_total, compare
            )
        if label is not None:
            out.append(HintItem(buffer_line - 1, label, rec))
    return out


# -- comparison --------------------------------------------------------------------------
#: Gone lines listed at most (the heaviest).
MAX_GONE = 100


@dataclass(frozen=True, slots=True)
class ChangeItem:
    line: int  #: 0-based buffer line
    kind: str  #: "more", "less", "same" or "new"
    delta: int  #: bytes, run minus baseline (the whole figure when new)


@dataclass(frozen=True, slots=True)
class GoneItem:
    line: int  #: 0-based buffer line where the code was (the next line that is still there)
    baseline_line: int  #: 1-based line in the baseline's source
    text: str  #: the baseline's source line
    label: str


def line_changes(
    view: FileView, mapping: LineMapping, settings: Settings, buffer_size: int
) -> list[ChangeItem]:
    """Per line with a hint, how its figure changed against the baseline (for colours)."""
    out: list[ChangeItem] = []
    base_lines = view.baseline_lines
    peak_total = view.run.run.info.peak_traced_bytes
    for rec, stats in view.lines.items():
        line = mapping.buffer_line(rec)
        if line is None or not 1 <= line <= buffer_size:
            continue
        base = base_lines.get(rec)
        if hint_label(stats, base, settings, peak_total, True) is None:
            continue
        calls = is_call_site(stats, settings)
        figure = calls_figure(settings.figure) if calls else settings.figure
        value = figure_value(stats, figure)
        if base is None:
            out.append(ChangeItem(line - 1, "new", value))
            continue
        delta = value - figure_value(base, figure)
        kind = "more" if delta > 0 else "less" if delta < 0 else "same"
        out.append(ChangeItem(line - 1, kind, delta))
    out.sort(key=lambda c: c.line)
    return out


def gone_lines(
    view: FileView, mapping: LineMapping, settings: Settings, buffer_size: int
) -> list[GoneItem]:
    """Baseline lines with figures whose code is gone from this run (edited or removed),
    placed on the next line of the buffer that is still the same code."""
    base = view.baseline_source
    matched = view.baseline_map
    if base is None or matched is None:
        return []
    text = base.text.splitlines() if base.text is not None else []
    kept = sorted(matched)
    gone = [
        (old, stats)
        for old, stats in base.lines.items()
        if old not in matched and figure_value(stats, settings.figure) >= max(1, settings.min_bytes)
    ]
    # The heaviest first, a bounded number of them.
    gone.sort(key=lambda p: (-figure_value(p[1], settings.figure), p[0]))
    out: list[GoneItem] = []
    for old, stats in gone[:MAX_GONE]:
        anchor = buffer_size
        for o in kept[bisect.bisect_right(kept, old) :]:
            b = mapping.buffer_line(matched[o])
            if b is not None:
                anchor = b
                break
        source = text[old - 1].strip() if 0 < old <= len(text) else ""
        label = line_label(stats, settings.figure)
        out.append(GoneItem(max(0, min(anchor, buffer_size) - 1), old, source, label))
    out.sort(key=lambda g: (g.line, g.baseline_line))
    return out


def gone_items(
    view: FileView, mapping: LineMapping, lines: Sequence[str], settings: Settings
) -> list[DiagnosticItem]:
    """Comparison mode: one note per baseline line whose code is gone (Problems view)."""
    out = []
    for g in gone_lines(view, mapping, settings, len(lines)):
        text = lines[g.line] if g.line < len(lines) else ""
        start = len(text) - len(text.lstrip())
        what = f" ({md.plain(g.text[:60])})" if g.text else ""
        message = f"Gone since the baseline: line {g.baseline_line}{what} held {g.label}"
        out.append(DiagnosticItem(g.line, start, len(text), message, "gone"))
    return out


def compare_summary(
    folder: FolderState, top: list[dict[str, Any]], settings: Settings
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The summary's heaviest lines with their change against the baseline (``delta`` in
    bytes, None for a line new since the baseline), and the baseline's gone lines."""
    out = []
    attr = NAMED_FIGURES[settings.figure].line
    views_by_file: dict[str, FileView | None] = {}
    for row in top:
        path = row["file"]
        if path not in views_by_file:
            views_by_file[path] = folder.view(canonical(path))
        view = views_by_file[path]
        delta = None
        if view is not None:
            stats, base = view.lines.get(row["line"]), view.baseline_lines.get(row["line"])
            if stats is not None and base is not None:
                delta = stats.figure(attr) - base.figure(attr)
        out.append({**row, "delta": delta})
    gone = []
    run = folder.run
    if run is not None:
        for key in run.run.files:
            view = folder.view(canonical(run.local_path(key)))
            if view is None or view.baseline_source is None:
                continue
            size = len(view.text_lines or ())
            for g in gone_lines(view, IDENTITY, settings, size):
                gone.append(
                    {
                        "file": run.local_path(key),
                        "baselineLine": g.baseline_line,
                        "text": g.text,
                        "label": g.label,
                    }
                )
    return out, gone


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
        if path.left_out:  # a deep path: its outermost and innermost frames
            frames.insert(path.left_out_at, f"… {path.left_out:,} more frames …")
        out.append((" → ".join(frames), path.incl_peak_bytes, path.incl_alloc_bytes))
    return out


def hover_markdown(
    view: FileView,
    line: int,
    settings: Settings,
    *,
    stale: bool,
    has_baseline: bool,
    local_path: str | None = None,
) -> str | None:
    """A Markdown table with every figure of recorded ``line``, or None when it has none.

    It leads with the line's full label (what its hint says when the hints are compact; what
    its callees hold for a call site). ``local_path`` is the open file when the run recorded
    the file elsewhere (another checkout): the hover says so."""
    stats = view.lines.get(line)
    if stats is None:
        return None
    info = view.run.run.info
    lead = line_label(stats, settings.figure, calls=is_call_site(stats, settings))
    rows = [
        (f.title, stats.figure(f.line), stats.figure(f.incl))
        for f in (NAMED_FIGURES[name] for name in SELF_FIGURES)
    ]
    out = [f"**memlens** · {lead}", ""]
    native = (stats.native_peak_bytes, stats.native_alloc_bytes, stats.native_live_bytes)
    if any(native):
        # What C libraries allocated themselves (malloc & co., mmap): part of the self figures.
        out.append("| | self | of which native | incl. calls |")
        out.append("|:--|--:|--:|--:|")
        out.extend(
            f"| {name} | {fmt_bytes(s)} | {fmt_bytes(n)} | {fmt_bytes(i)} |"
            for (name, s, i), n in zip(rows, native, strict=True)
        )
        out.append(f"| allocations | {fmt_count(stats.alloc_count)} | | |")
        out.append(f"| live objects | {fmt_count(stats.live_count)} | | |")
    else:
        out.append("| | self | incl. calls |")
        out.append("|:--|--:|--:|")
        out.extend(f"| {name} | {fmt_bytes(s)} | {fmt_bytes(i)} |" for name, s, i in rows)
        out.append(f"| allocations | {fmt_count(stats.alloc_count)} | |")
        out.append(f"| live objects | {fmt_count(stats.live_count)} | |")
    out.append("")
    if any(native):
        out.append(
            "_Native_: memory C libraries allocated themselves (malloc, mmap: e.g. SQLite, BLAS, "
            "libxml2) while this line ran."
        )
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
    shared = view.run.by_process.get(view.key, {}).get(line, ())
    if shared:
        out.append("By process:")
        out.append("")
        out.append("| process | peak | allocated | live at exit |")
        out.append("|:--|--:|--:|--:|")
        root = info.processes[0].pid if info.processes else None
        out.extend(
            f"| {process.pid}{' (the program)' if process.pid == root else ''} "
            f"| {fmt_bytes(st.peak_bytes)} | {fmt_bytes(st.alloc_bytes)} "
            f"| {fmt_bytes(st.live_bytes)} |"
            for process, st in shared
        )
        out.append("")
    if stats.live_bytes and held_by_module(view, line):
        out.append(
            "Held by the module: what this line keeps lives until the program exits by design "
            "(an import, a module constant, a class body), so it is not reported as a leak."
        )
        out.append("")
    recorded = os.path.normcase(os.path.normpath(view.source.path))
    if local_path is not None and recorded != local_path:
        out.append(f"_Profiled as {md.code(view.source.path)} (another checkout)._")
        out.append("")
    if stale:
        out.append(
            f"_The source differs from the profiled version (line {line} when profiled): "
            "edited lines show no figures._"
        )
        out.append("")
    out.append(f"Run {md.code(view.run.id)} ({md.text(info.mode)})")
    return "\n".join(out)


# -- scopes --------------------------------------------------------------------------------
_IMPORT = re.compile(r"\s*(import\s|from\s+\S+\s+import\s)")


def is_function(view: FileView, fn: FunctionStats) -> bool:
    """Whether ``fn`` is a function or method, not a lambda, comprehension, generator
    expression, class body or module (see :func:`memlens_lsp.index.is_def`)."""
    return is_def(view.text_lines, fn)


def held_by_module(view: FileView, line: int) -> bool:
    """Whether what ``line`` allocates is module state that lives to exit by design: an
    import, or a line outside every function (module level or a class body)."""
    text = view.text_lines
    if text is not None and 1 <= line <= len(text) and _IMPORT.match(text[line - 1]):
        return True
    functions = view.function_ranges
    if functions is None:
        # No function table (an imported run): the call tree knows which code ran the line.
        nodes = view.run.tree.at(view.key, line)
        return bool(nodes) and all(n.function == "<module>" for n in nodes)
    return not any(first <= line <= last for first, last in functions)


# -- code lenses -----------------------------------------------------------------------------
def function_lenses(
    view: FileView,
    mapping: LineMapping,
    buffer_size: int,
    settings: Settings,
    *,
    has_baseline: bool,
) -> list[LensItem]:
    """One lens above each function or method whose peak or allocated figure reaches
    ``codeLens.minBytes``, at its (re-mapped) first line. Lambdas, comprehensions, generator
    expressions, class bodies and modules get none; nor do lines outside the buffer's
    ``buffer_size`` lines, which only a broken run records."""
    out: list[LensItem] = []
    base_fns = view.baseline_functions if has_baseline else {}
    threshold = max(1, settings.lens_min_bytes)
    for fn in view.source.functions:
        if max(fn.peak_bytes, fn.alloc_bytes) < threshold or not is_function(view, fn):
            continue
        line = mapping.buffer_line(fn.first_line)
        if line is None or not 1 <= line <= buffer_size:
            continue
        title = f"memlens: {fmt_bytes(fn.peak_bytes)} at peak"
        if has_baseline:
            base = base_fns.get(fn.qualname)
            if base is None:
                title += " (new since baseline)"
            elif base.peak_bytes == fn.peak_bytes:
                title += " (same as baseline)"
            else:
                title += f" ({fmt_delta_bytes(fn.peak_bytes - base.peak_bytes)} vs baseline)"
        title += f" · {fmt_bytes(fn.alloc_bytes)} allocated, incl. calls"
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
        if stats.live_bytes < threshold or held_by_module(view, rec):
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
    """The heaviest lines of a run by ``figure``: ``{"file", "line", "label"}``; ``file`` is
    where the figures show here (the local file of a run made in another checkout)."""
    attr = NAMED_FIGURES[figure].line
    rows = [
        (stats.figure(attr), run.local_path(key), line, stats)
        for key, sf in run.run.files.items()
        for line, stats in sf.lines.items()
    ]
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    return [
        {"file": path, "line": line, "label": line_label(stats, figure)}
        for value, path, line, stats in rows[:limit]
        if value > 0
    ]
