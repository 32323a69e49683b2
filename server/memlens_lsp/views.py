"""Editor-terms views of a run: hint labels, hover Markdown, lenses, leak warnings.

Pure functions over the index and a line mapping; they return small frozen records with
0-based buffer lines and plain strings. Only :mod:`memlens_lsp.convert` turns them into
LSP objects. Labels come from :mod:`memlens.annotate` (:func:`~memlens.annotate.line_label`;
a whole file's by column, :func:`table_labels`, from the same parts).
Every string from a run that goes into Markdown passes :mod:`memlens_lsp.markdown`.
"""

from __future__ import annotations

import bisect
import math
import os
import re
import shlex
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from memlens import growth, held
from memlens.annotate import (
    HINT_WIDTH,
    change_kind,
    figure_value,
    fit,
    gpu_part,
    gpu_shown,
    line_label,
    size_label,
    size_text,
)
from memlens.model import (
    GPU_SELF_FIGURES,
    NAMED_FIGURES,
    SELF_FIGURES,
    FunctionStats,
    GpuDeviceLine,
    LineStats,
    LineTable,
    calls_figure,
    line_values,
)
from memlens.moment import Moment, seconds, series
from memlens.store import run_kind
from memlens.timeline import sparkline
from memlens.units import fmt_bytes, fmt_count, fmt_delta_bytes, fmt_percent
from memlens_lsp import markdown as md
from memlens_lsp.index import FileView, FolderState, RunData, canonical, is_def
from memlens_lsp.settings import Settings
from memlens_lsp.staleness import IDENTITY, LineMapping

RUN_FILE_COMMAND = "memlens.runFile"
_MAIN_RE = re.compile(
    r"""^if\s+(__name__\s*==\s*(['"])__main__\2|(['"])__main__\3\s*==\s*__name__)\s*:"""
)


class HintItem(NamedTuple):
    """A hint (a tuple: 10,000 of them are made for a big file's first whole-file answer)."""

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
    #: "leak" (a warning: grew during the run), "kept" (information: live at exit, allocated
    #: once and kept), "gone" (information, comparison mode) or "test" (an error: a test that
    #: failed on memory, features.pytest_results)
    code: str = "leak"
    #: Places that explain it (the lines responsible for a test's failure): (file path,
    #: 0-based line, message); clients show them as links.
    related: tuple[tuple[str, int, str], ...] = ()


# -- inlay hints --------------------------------------------------------------------------
def is_call_site(stats: LineStats, settings: Settings, figure: str | None = None) -> bool:
    """Whether the line shows what its callees hold: its own figure (``figure``, by default
    the settings') is small (under a tenth) next to its inclusive one, which is significant
    (``inlayHints.callMinBytes``)."""
    figure = figure or settings.figure
    if not settings.call_hints or NAMED_FIGURES[figure].inclusive:
        return False
    own, incl = figure_value(stats, figure), figure_value(stats, calls_figure(figure))
    return _calls(own, incl, _call_least(settings))


def _calls(own: int, incl: int, least: int) -> bool:
    """Whether a line's own figure is small (under a tenth) next to its inclusive one, which is
    at least ``least`` (:func:`_call_least`): a call site's hint shows what its callees hold."""
    return incl >= least and own * 10 < incl


def _call_least(settings: Settings) -> int:
    """The least inclusive figure of a call site (``inlayHints.callMinBytes``)."""
    return max(settings.min_bytes, settings.call_min_bytes)


def _floor(text: str | None, settings: Settings) -> int | None:
    """The least figure a line's hint shows, by the line's source ``text``: none for a
    decorator line (what it allocates is the decoration, made once at import),
    ``inlayHints.importMinBytes`` for an import line."""
    if text is None or ("@" not in text and "import" not in text):  # (cheaper than a match)
        return settings.min_bytes
    found = _DECORATOR_OR_IMPORT.match(text)
    if found is None:
        return settings.min_bytes
    return None if found.group(1) else max(settings.min_bytes, settings.import_min_bytes)


def _significant(value: int, old: int, share: float, total: int, floor: int) -> bool:
    """Whether a figure (or its baseline's) reaches the hint thresholds: at least ``floor``
    bytes and ``share`` (``inlayHints.minShare``) of ``total``, the run's peak of that kind of
    memory."""
    biggest = max(value, old)
    if biggest <= 0 or biggest < floor:
        return False
    return not (share > 0 and total > 0 and biggest / total < share)


def hint_figure(
    stats: LineStats,
    base: LineStats | None,
    settings: Settings,
    totals: tuple[int, int],
    compare: bool,
    *,
    text: str | None = None,
) -> tuple[str | None, str | None, bool]:
    """Which figures a line's hint shows: (the settings' figure or its call-site counterpart,
    when significant; the GPU figure beside it, when significant; whether that GPU figure is
    the call site's). ``totals`` are the run's peaks: (traced, GPU).

    ``text`` is the line's source (:func:`_floor`)."""
    floor = _floor(text, settings)
    if floor is None:
        return None, None, False
    compare = compare and base is not None
    fig = NAMED_FIGURES[settings.figure]
    calls = is_call_site(stats, settings)
    host: str | None = calls_figure(settings.figure) if calls else settings.figure
    assert host is not None
    old = figure_value(base, host) if compare and base is not None else 0
    share = settings.min_share
    if not _significant(figure_value(stats, host), old, share, totals[bool(fig.device)], floor):
        host = None
    gpu, gpu_calls = None, False
    if not fig.device and (stats.has_gpu() or (compare and base is not None and base.has_gpu())):
        counterpart = gpu_shown(stats, settings.figure)
        if counterpart is not None:
            gpu_calls = is_call_site(stats, settings, counterpart)
            gpu = gpu_shown(stats, settings.figure, calls=gpu_calls)
        if gpu is not None:
            old = figure_value(base, gpu) if compare and base is not None else 0
            if not _significant(figure_value(stats, gpu), old, share, totals[1], floor):
                gpu = None
    return host, gpu, gpu_calls


def hint_label(
    stats: LineStats,
    base: LineStats | None,
    settings: Settings,
    peak_total: int,
    compare: bool,
    gpu_total: int = 0,
    *,
    edited: bool = False,
    text: str | None = None,
) -> str | None:
    """The hint of a line, or None when its figures are below the thresholds
    (:func:`hint_figure`). A line that holds GPU memory shows it after its host figure
    (``12.0 KiB at peak · GPU 64.0 MiB at peak``), alone when the host figure is below the
    thresholds (``GPU 64.0 MiB at peak``). ``edited``: ``base`` is the figure of the
    baseline's line this one replaced in place. Labels fit VS Code's default hint width
    (:data:`memlens.annotate.HINT_WIDTH`)."""
    totals = (peak_total, gpu_total)
    host, gpu, gpu_calls = hint_figure(stats, base, settings, totals, compare, text=text)
    compact = settings.hint_style == "compact"
    if host is not None:
        return line_label(
            stats,
            settings.figure,
            base,
            compare=compare,
            calls=host != settings.figure,
            compact=compact,
            edited=edited,
            noise=settings.noise if compare else None,
            run_peak=peak_total,
            width=HINT_WIDTH,
            gpu=gpu is not None,
            gpu_calls=gpu_calls,
        )
    if gpu is not None:
        label = gpu_part(
            stats,
            settings.figure,
            base,
            compare=compare,
            calls=gpu_calls,
            compact=compact,
            noise=settings.noise,
            run_peak=gpu_total,
        )
        return None if label is None else fit((label,), width=HINT_WIDTH)
    return None


def table_labels(
    table: LineTable,
    recorded: Iterable[int],
    settings: Settings,
    peak_total: int,
    text: Sequence[str],
) -> Iterator[tuple[int, str | None]]:
    """:func:`hint_label` of each of the ``recorded`` lines of ``table`` with no baseline, for
    a table with no GPU figures and a host figure in the settings (:func:`by_column`): read
    column by column, without making each line's :class:`LineStats`, about a third of the cost
    of a fresh 10,000-line file's first hints. ``text``: the recorded source's lines."""
    figure = settings.figure
    fig = NAMED_FIGURES[figure]
    calls_name = calls_figure(figure)
    own_column = table.column(fig.line)
    calls_column = table.column(NAMED_FIGURES[calls_name].line)
    counts = table.column("alloc_count")
    own_errors = table.error_column(fig.err) if fig.err else None
    calls_err = NAMED_FIGURES[calls_name].err
    calls_errors = table.error_column(calls_err) if calls_err else None
    call_hints = settings.call_hints and not fig.inclusive
    compact = settings.hint_style == "compact"
    numbers = table.numbers
    # The settings the rules read, read once: this loop runs for every line of a file. The
    # floors kept are those of import and decorator lines (the others' is the least).
    least = settings.min_bytes
    floors = {
        rec: floor
        for rec in recorded
        if 0 < rec <= len(text) and (floor := _floor(text[rec - 1], settings)) != least
    }
    call_least = _call_least(settings)
    share = settings.min_share
    i = -1
    for rec in recorded:
        floor = floors.get(rec, least) if floors else least
        i += 1  # (the lines asked for are most often the table's, in order)
        if i >= len(numbers) or numbers[i] != rec:
            i = table.index(rec)
        if floor is None or i < 0:
            yield rec, None
            continue
        value = own_column[i]
        calls = call_hints and _calls(value, calls_column[i], call_least)
        if calls:
            value = calls_column[i]
        if not _significant(value, 0, share, peak_total, floor):
            yield rec, None
            continue
        errors = calls_errors if calls else own_errors
        size = size_text(value, errors[i]) if errors is not None else fmt_bytes(value)
        yield (
            rec,
            size_label(size, figure, counts[i], calls=calls, compact=compact, width=HINT_WIDTH),
        )


def by_column(lines: Mapping[int, LineStats], settings: Settings) -> LineTable | None:
    """``lines`` as a table :func:`table_labels` can label (no GPU figures, a host figure in
    the settings), or None."""
    host = not NAMED_FIGURES[settings.figure].device
    return lines if isinstance(lines, LineTable) and not lines.has_gpu and host else None


def moment_hint_label(stats: LineStats, moment: Moment, settings: Settings) -> str | None:
    """The hint of a line at ``moment`` (``stats``: its live bytes then, self and inclusive),
    or None when below the thresholds. A call line shows what its callees held then."""
    own, incl = stats.live_bytes, stats.incl_live_bytes
    calls = settings.call_hints and _calls(own, incl, _call_least(settings))
    value = incl if calls else own
    if value <= 0 or value < settings.min_bytes:
        return None
    traced = moment.traced_bytes
    if settings.min_share > 0 and traced > 0 and value / traced < settings.min_share:
        return None
    return line_label(
        stats,
        "live",
        calls=calls,
        compact=settings.hint_style == "compact",
        width=HINT_WIDTH,
        words=moment.words,
    )


def comparing(view: FileView, settings: Settings, has_baseline: bool) -> bool:
    """Whether figures are shown against the baseline: asked for, there is one, and the run is
    final (a checkpoint of a run still going is never compared as if it were final)."""
    return settings.compare_with_baseline and has_baseline and not view.run.run.info.checkpoint


def baseline_of(view: FileView, line: int) -> tuple[LineStats | None, bool]:
    """The baseline's figures for this run's ``line`` and whether they are those of a line
    edited in place since (``x = f(a)`` became ``x = f(a, b)``)."""
    base = view.baseline_lines.get(line)
    if base is not None:
        return base, False
    edited = view.edited_lines.get(line)
    return (edited[1], True) if edited is not None else (None, False)


def hint_items(
    view: FileView,
    mapping: LineMapping,
    settings: Settings,
    start: int,
    end: int,
    *,
    has_baseline: bool,
    moment: str | None = None,
) -> list[HintItem]:
    """Hints for buffer lines ``start <= line < end`` (0-based), one per line with figures.
    With ``moment`` (a moment spec the run can show: ``memlens.setMoment``), each line's live
    bytes at that moment instead."""
    if not settings.inlay_hints_enabled:
        return []
    at = view.run.moment(moment)
    compare = comparing(view, settings, has_baseline) and at is None
    peak_total = view.run.run.info.peak_traced_bytes
    gpu_total = view.run.run.info.gpu_peak_bytes
    lines = view.lines if at is None else view.lines_at(at)
    text = view.text_lines or ()
    memo = view.label_memo((settings, compare, at))
    # The lines in range with figures: their buffer lines and recorded lines (1-based).
    buffer: Sequence[int]
    recorded: Sequence[int]
    if mapping.identity and isinstance(lines, LineTable):
        # The buffer is the recorded source: the table's lines in range, already in order.
        numbers = lines.numbers
        buffer = recorded = numbers[
            bisect.bisect_right(numbers, start) : bisect.bisect_right(numbers, end)
        ]
    else:
        if end - start >= len(lines):
            # No more figures than lines in range: walk the figures instead.
            pairs = sorted(
                (b, r)
                for r in lines
                if (b := mapping.buffer_line(r)) is not None and start < b <= end
            )
        else:
            pairs = [
                (b, r)
                for b in range(start + 1, end + 1)
                if (r := mapping.recorded_line(b)) is not None and r in lines
            ]
        buffer, recorded = [b for b, _ in pairs], [r for _, r in pairs]
    table = by_column(lines, settings) if at is None and not compare else None
    if table is not None:
        unmade = [r for r in recorded if r not in memo] if memo else recorded
        memo.update(table_labels(table, unmade, settings, peak_total, text))
    else:
        for rec in recorded:
            if rec in memo:
                continue
            if at is not None:
                memo[rec] = moment_hint_label(lines[rec], at, settings)
                continue
            base, edited = baseline_of(view, rec) if compare else (None, False)
            memo[rec] = hint_label(
                lines[rec],
                base,
                settings,
                peak_total,
                compare,
                gpu_total,
                edited=edited,
                text=text[rec - 1] if 0 < rec <= len(text) else None,
            )
    return [
        HintItem(b - 1, label, r)
        for b, r in zip(buffer, recorded, strict=True)
        if (label := memo[r]) is not None
    ]


# -- comparison --------------------------------------------------------------------------
#: Gone lines listed at most (the heaviest).
MAX_GONE = 100


@dataclass(frozen=True, slots=True)
class ChangeItem:
    line: int  #: 0-based buffer line
    kind: str  #: "more", "less" or "new" (changes within the noise are not listed)
    delta: int  #: bytes, run minus baseline (the whole figure when new)
    #: 1 to 3: how big the change is next to the run's peak (under 1%, under 10%, more), for
    #: the colour's intensity
    level: int = 1


@dataclass(frozen=True, slots=True)
class GoneItem:
    line: int  #: 0-based buffer line where the code was (the next line that is still there)
    baseline_line: int  #: 1-based line in the baseline's source
    text: str  #: the baseline's source line
    label: str


def change_level(delta: int, peak_total: int) -> int:
    """1, 2 or 3: a change under 1% of the run's peak, under 10%, or more."""
    share = abs(delta) / peak_total if peak_total > 0 else 1.0
    return 1 if share < 0.01 else 2 if share < 0.1 else 3


def line_changes(
    view: FileView, mapping: LineMapping, settings: Settings, buffer_size: int
) -> list[ChangeItem]:
    """Per line with a hint whose figure really changed against the baseline (beyond the
    noise thresholds, :class:`memlens.annotate.Noise`), how (for colours); none for a
    checkpoint, which is never compared."""
    if view.run.run.info.checkpoint:
        return []
    out: list[ChangeItem] = []
    peak_total = view.run.run.info.peak_traced_bytes
    totals = (peak_total, view.run.run.info.gpu_peak_bytes)
    noise = settings.noise
    text = view.text_lines or ()
    for rec, stats in view.lines.items():
        line = mapping.buffer_line(rec)
        if line is None or not 1 <= line <= buffer_size:
            continue
        base, _edited = baseline_of(view, rec)
        source = text[rec - 1] if 0 < rec <= len(text) else None
        host, gpu, _gpu_calls = hint_figure(stats, base, settings, totals, True, text=source)
        figure = host or gpu  # the figure the hint leads with
        if figure is None:
            continue
        total = totals[bool(NAMED_FIGURES[figure].device)]
        value = figure_value(stats, figure)
        old = figure_value(base, figure) if base is not None else None
        kind = change_kind(value, old, noise, total)
        delta = value - (old or 0)
        if kind == "same" or (kind == "new" and not noise.real(value, 0, total)):
            continue
        out.append(ChangeItem(line - 1, kind, delta, change_level(delta, total)))
    out.sort(key=lambda c: c.line)
    return out


def gone_lines(
    view: FileView, mapping: LineMapping, settings: Settings, buffer_size: int
) -> list[GoneItem]:
    """Baseline lines with figures whose code is gone from this run (edited or removed),
    placed on the next line of the buffer that is still the same code."""
    base = view.baseline_source
    matched = view.baseline_map
    if base is None or matched is None or view.run.run.info.checkpoint:
        return []
    text = base.text.splitlines() if base.text is not None else []
    kept = sorted(matched)
    replaced = {old for old, _ in view.edited_lines.values()}  # compared on their new line
    gone = [
        (old, stats)
        for old, stats in base.lines.items()
        if old not in matched
        and old not in replaced
        and figure_value(stats, settings.figure) >= max(1, settings.min_bytes)
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
    bytes, 0 within the noise, None for a line new since the baseline; a line edited in place
    since is compared with the line it replaced), and the baseline's gone lines."""
    out = []
    attr = NAMED_FIGURES[settings.figure].line
    noise = settings.noise
    peak_total = folder.run.run.info.peak_traced_bytes if folder.run is not None else 0
    views_by_file: dict[str, FileView | None] = {}
    for row in top:
        path = row["file"]
        if path not in views_by_file:
            views_by_file[path] = folder.view(canonical(path))
        view = views_by_file[path]
        delta = None
        if view is not None:
            stats, (base, _) = view.lines.get(row["line"]), baseline_of(view, row["line"])
            if stats is not None and base is not None:
                value, old = stats.figure(attr), base.figure(attr)
                delta = value - old if noise.real(value, old, peak_total) else 0
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


def _baseline_rows(view: FileView, line: int, stats: LineStats, settings: Settings) -> list[str]:
    """The hover's comparison with the baseline: the change of each figure; for a line edited
    in place since, the baseline's line and figures; a change within the noise says so."""
    base, edited = baseline_of(view, line)
    if base is None:
        return ["vs baseline: new (no figures on this line in the baseline)"]
    rows = []
    if edited:
        old_line = view.edited_lines[line][0]
        recorded = view.baseline_source.text if view.baseline_source is not None else None
        source = recorded.splitlines() if recorded is not None else []
        code = source[old_line - 1].strip() if 0 < old_line <= len(source) else ""
        rows.append(
            f"Edited since the baseline: there, line {old_line}"
            + (f" {md.code(code[:120])}" if code else "")
            + f" held {fmt_bytes(base.peak_bytes)} at peak and allocated "
            f"{fmt_bytes(base.alloc_bytes)}."
        )
        rows.append("")
    text = (
        f"vs baseline: peak {_delta(stats.peak_bytes, base.peak_bytes)} · "
        f"allocated {_delta(stats.alloc_bytes, base.alloc_bytes)} · "
        f"live {_delta(stats.live_bytes, base.live_bytes)}"
    )
    if stats.has_gpu() or base.has_gpu():
        text += (
            f" · GPU peak {_delta(stats.gpu_peak_bytes, base.gpu_peak_bytes)} · "
            f"GPU live {_delta(stats.gpu_live_bytes, base.gpu_live_bytes)}"
        )
    rows.append(text)
    figure = calls_figure(settings.figure) if is_call_site(stats, settings) else settings.figure
    value, old = figure_value(stats, figure), figure_value(base, figure)
    if value != old and not settings.noise.real(value, old, view.run.run.info.peak_traced_bytes):
        rows.append("")
        rows.append(
            f"_The change of {md.text(NAMED_FIGURES[figure].title)} is within the noise "
            "(`memlens.compare.*` settings): it shows as unchanged._"
        )
    return rows


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


#: The hover's note on a run of a process memlens attached to (``memlens attach``).
ATTACHED_NOTE = (
    "_Attached to a running process: only what it allocated while memlens was attached is "
    "counted (objects from before are not); live at exit means still held when memlens "
    "detached._"
)


def hover_markdown(
    view: FileView,
    line: int,
    settings: Settings,
    *,
    stale: bool,
    has_baseline: bool,
    local_path: str | None = None,
    moment: str | None = None,
) -> str | None:
    """A Markdown table with every figure of recorded ``line``, or None when it has none.

    It leads with the line's full label (what its hint says when the hints are compact; what
    its callees hold for a call site; with ``moment``, what it held then), and pictures its
    live bytes over the run when the run has moments. ``local_path`` is the open file when the
    run recorded the file elsewhere (another checkout): the hover says so."""
    stats = view.lines.get(line)
    if stats is None:
        return None
    info = view.run.run.info
    at = view.run.moment(moment)
    if at is not None:
        held = view.lines_at(at).get(line, LineStats())
        calls = held.live_bytes * 10 < held.incl_live_bytes and settings.call_hints
        lead = line_label(held, "live", calls=calls, words=at.words)
    else:
        lead = line_label(stats, settings.figure, calls=is_call_site(stats, settings))
    rows = [
        (f.title, stats.figure(f.line), stats.figure(f.incl))
        for f in (NAMED_FIGURES[name] for name in SELF_FIGURES)
        if not f.device
    ]
    out = [f"**memlens** · {lead}", ""]
    if at is not None:
        # (numbers and fixed words only: nothing from the run's text)
        out.append(f"Shown: the moment {at.describe()}; the table is the whole run's.")
        out.append("")
    over = over_the_run(view, line)
    if over:
        out.append(over)
        out.append("")
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
    if stats.has_gpu():
        out.extend(_gpu_table(stats))
        out.extend(_device_table(view.source.gpu_devices.get(line, ())))
    facts = []
    if stats.alloc_count:
        facts.append(f"Average size {fmt_bytes(stats.alloc_bytes / stats.alloc_count)}")
    if info.peak_traced_bytes > 0:
        facts.append(f"{stats.peak_bytes / info.peak_traced_bytes * 100:.1f}% of the run's peak")
    if info.gpu_peak_bytes > 0 and stats.gpu_peak_bytes > 0:
        share = stats.gpu_peak_bytes / info.gpu_peak_bytes * 100
        facts.append(f"{share:.1f}% of the run's GPU peak")
    if facts:
        out.append(" · ".join(facts))
        out.append("")
    if has_baseline and info.checkpoint:
        out.append(
            "_This run is a checkpoint (the program was still running, or was killed before "
            "its end): it is not compared with the baseline._"
        )
        out.append("")
    elif has_baseline:
        out.extend(_baseline_rows(view, line, stats, settings))
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
    out.extend(held_by_markdown(view, line))
    if stats.live_bytes and reuse_caveat(info.python, info.mode):
        out.append(REUSE_CAVEAT.format(python=md.text(info.python)))
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
    if info.attached:
        out.append(ATTACHED_NOTE)
        out.append("")
    out.append(f"Run {md.code(view.run.id)} ({md.text(info.mode)})")
    return "\n".join(out)


def over_the_run(view: FileView, line: int) -> str | None:
    """The line's live bytes over the run as a sparkline, with the most it held and when,
    and what it held at exit; None for a run without moments."""
    points = series(view.run.run, view.key, line)
    if not points:
        return None
    most_t, most = max(points, key=lambda p: (p[1], -p[0]))
    end = points[-1][1]
    peak = f"most {fmt_bytes(most)} at {seconds(most_t)}" if most > 0 else "nothing held"
    return f"Live over the run: `{sparkline(points)}` {peak}, {fmt_bytes(end)} at exit"


def _gpu_table(stats: LineStats) -> list[str]:
    """The hover's table of a line's GPU memory (PyTorch CUDA), self and incl. calls."""
    out = ["| GPU memory | self | incl. calls |", "|:--|--:|--:|"]
    for name in GPU_SELF_FIGURES:
        f = NAMED_FIGURES[name]
        title = f.title.removeprefix("GPU ")
        out.append(
            f"| {title} | {fmt_bytes(stats.figure(f.line))} | {fmt_bytes(stats.figure(f.incl))} |"
        )
    out.append(f"| allocations | {fmt_count(stats.gpu_alloc_count)} | |")
    out.append("")
    return out


def _device_table(each: Sequence[GpuDeviceLine]) -> list[str]:
    """A line's GPU memory per device (runs that used several GPUs)."""
    if not each:
        return []
    out = ["By GPU:", "", "| device | peak | allocated | live at exit |", "|:--|--:|--:|--:|"]
    out.extend(
        f"| cuda:{d.device} | {fmt_bytes(d.peak_bytes)} | {fmt_bytes(d.alloc_bytes)} "
        f"| {fmt_bytes(d.live_bytes)} |"
        for d in each
    )
    out.append("")
    return out


#: Paths shown in a hover, at most.
MAX_HELD_PATHS = 3
#: The hover's note on lines live at exit in runs made before Python 3.13.
REUSE_CAVEAT = (
    "_Python {python}: objects CPython reuses from its free lists (tuples, floats, lists, "
    "dicts) stay charged to the line that first allocated them, so this line's live memory "
    "may belong to a line that made objects after it (from Python 3.13 on, memlens charges "
    "them to the line that makes them)._"
)


def reuse_caveat(python: str, mode: str) -> bool:
    """Whether a run's live figures carry the free-list error (made by memlens before 3.13)."""
    if mode not in ("exact", "sampling"):
        return False
    major, _, rest = python.partition(".")
    minor = rest.partition(".")[0]
    return major == "3" and minor.isdigit() and int(minor) < 13


def held_by_markdown(view: FileView, line: int) -> list[str]:
    """What holds the line's memory at exit, for its hover: each path (the heaviest first) with
    every part a link to the line that allocated its object; or why none was found. Empty when
    the run recorded nothing for the line."""
    paths = held.of_line(view.run.run, view.key, line)
    if not paths:
        return []
    found = sorted((h for h in paths if h.outcome == "found"), key=lambda h: -h.objects)
    total = held.sampled(paths)
    if not found:
        reason = held.NO_PATH.get(paths[0].outcome, paths[0].outcome)
        return [f"**Held by**: {md.text(reason)}.", ""]
    out = [f"**Held by** (what keeps it alive at exit; {total} sampled objects):", ""]
    for h in found[:MAX_HELD_PATHS]:
        links = []
        for part in held.parts(h):
            where = view.run.local_path(part.file) if part.file in view.run.run.files else ""
            made = (
                f"allocated at line {part.line}" if part.file else "not allocated by a traced line"
            )
            title = f"{part.type}, {made}" if part.type else made
            links.append(md.link(md.code(part.text.strip()), where, part.line, title))
        out.append(f"- {' → '.join(links)} · {h.objects} of {total}")
    if len(found) > MAX_HELD_PATHS:
        out.append(f"- … {len(found) - MAX_HELD_PATHS} more paths (`memlens show --why`)")
    out.append("")
    return out


def held_by_suffix(view: FileView, line: int) -> str:
    """``; held by ledger._price_cache[…]`` (what holds most of the line's sampled objects) for
    a warning's message; "" when the run found nothing for the line."""
    found = [h for h in held.of_line(view.run.run, view.key, line) if h.outcome == "found"]
    if not found:
        return ""
    return f"; held by {md.plain(held.expression(max(found, key=lambda h: h.objects)))}"


# -- scopes --------------------------------------------------------------------------------
_IMPORT_FORMS = r"import\s|from\s+\S+\s+import\s"
_IMPORT = re.compile(rf"\s*({_IMPORT_FORMS})")
#: A decorator line (``@pytest.mark.parametrize(...)``: group 1) or an import line.
_DECORATOR_OR_IMPORT = re.compile(rf"\s*(?:(@)|{_IMPORT_FORMS})")


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
    at = bisect.bisect_right(functions, (line, math.inf)) - 1
    return at < 0 or functions[at][1] < line


# -- code lenses -----------------------------------------------------------------------------
def function_lenses(
    view: FileView,
    mapping: LineMapping,
    buffer_size: int,
    settings: Settings,
    *,
    has_baseline: bool,
    moment: str | None = None,
    skip: Collection[int] = (),
) -> list[LensItem]:
    """One lens above each function or method whose peak or allocated figure reaches
    ``codeLens.minBytes``, at its (re-mapped) first line. Lambdas, comprehensions, generator
    expressions, class bodies and modules get none; nor do functions whose first line is in
    ``skip`` (tests, which have a lens of their own), nor lines outside the buffer's
    ``buffer_size`` lines, which only a broken run records. With a baseline the change of the
    peak follows, unless it is within the noise or the run is a checkpoint. With ``moment``,
    each function's live bytes (incl. calls) at that moment, when they reach
    ``codeLens.minBytes``."""
    out: list[LensItem] = []
    compare = has_baseline and not view.run.run.info.checkpoint
    base_fns = view.baseline_functions if compare else {}
    threshold = max(1, settings.lens_min_bytes)
    at = view.run.moment(moment)
    if at is not None:
        held = view.run.function_values(at)
        for fn in view.source.functions:
            value = held.get((view.key, fn.qualname, fn.first_line, fn.last_line), 0)
            if value < threshold or not is_function(view, fn) or fn.first_line in skip:
                continue
            line = mapping.buffer_line(fn.first_line)
            if line is not None and 1 <= line <= buffer_size:
                title = f"memlens: {fmt_bytes(value)} {at.words}, incl. calls"
                out.append(LensItem(line - 1, title))
        out.sort(key=lambda item: item.line)
        return out
    noise, peak_total = settings.noise, view.run.run.info.peak_traced_bytes
    for fn in view.source.functions:
        biggest = max(fn.peak_bytes, fn.alloc_bytes, fn.gpu_peak_bytes, fn.gpu_alloc_bytes)
        if biggest < threshold or not is_function(view, fn):
            continue
        if fn.first_line in skip:
            continue
        line = mapping.buffer_line(fn.first_line)
        if line is None or not 1 <= line <= buffer_size:
            continue
        base = base_fns.get(fn.qualname)
        gpu = _gpu_lens(fn, base) if fn.gpu_peak_bytes or fn.gpu_alloc_bytes else ""
        if gpu and not (fn.peak_bytes or fn.alloc_bytes):
            # GPU memory only (an imported GPU snapshot): no "0 B at peak" before it.
            out.append(LensItem(line - 1, f"memlens: {gpu}, incl. calls"))
            continue
        title = f"memlens: {fmt_bytes(fn.peak_bytes)} at peak"
        if compare:
            if base is None:
                title += " (new since baseline)"
            elif not noise.real(fn.peak_bytes, base.peak_bytes, peak_total):
                title += " (same as baseline)"
            else:
                title += f" ({fmt_delta_bytes(fn.peak_bytes - base.peak_bytes)} vs baseline)"
        title += f" · {fmt_bytes(fn.alloc_bytes)} allocated, incl. calls"
        out.append(LensItem(line - 1, f"{title} · {gpu}" if gpu else title))
    out.sort(key=lambda item: item.line)
    return out


def peak_elsewhere_lens(view: FileView, settings: Settings) -> LensItem | None:
    """A word at the top of a file whose hints, showing the peak, are all empty although its
    lines allocated: the run's peak came while other code ran (during imports, before these
    lines ran, or after they freed their memory), and this says so instead of nothing.
    Computed once per file and settings."""
    if settings.figure not in ("peak", "incl_peak") or not settings.inlay_hints_enabled:
        return None
    found: LensItem | None = view.memo.value(
        ("peak-elsewhere", settings), lambda: _peak_elsewhere(view, settings) or _NONE
    )
    return None if found is _NONE else found


_NONE = LensItem(-1, "")


def _peak_elsewhere(view: FileView, settings: Settings) -> LensItem | None:
    lines = view.lines
    allocated = sum(st.alloc_bytes for st in lines.values())
    if allocated < max(1, settings.min_bytes):
        return None
    text = view.text_lines or ()
    peak = view.run.run.info.peak_traced_bytes
    for rec, stats in lines.items():
        source = text[rec - 1] if 0 < rec <= len(text) else None
        if hint_label(stats, None, settings, peak, False, text=source) is not None:
            return None
    return LensItem(
        0,
        f"memlens: no line here held much at the run's peak ({fmt_bytes(peak)}): it came while "
        f"other code ran (imports, or before or after these lines) · {fmt_bytes(allocated)} "
        "allocated here (inlayHints.figure alloc shows where)",
    )


def _gpu_lens(fn: FunctionStats, base: FunctionStats | None) -> str:
    """The GPU part of a function's lens: ``GPU 274.1 MiB at peak (+16.0 MiB vs baseline) ·
    1.6 GiB allocated`` (the change only when the baseline has the function)."""
    text = f"GPU {fmt_bytes(fn.gpu_peak_bytes)} at peak"
    if base is not None and base.gpu_peak_bytes != fn.gpu_peak_bytes:
        text += f" ({fmt_delta_bytes(fn.gpu_peak_bytes - base.gpu_peak_bytes)} vs baseline)"
    return text + f" · {fmt_bytes(fn.gpu_alloc_bytes)} allocated"


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
    """Lines that still hold at least ``leakWarning.minBytes`` at exit, judged by the leak
    rule (:mod:`memlens.growth`): a warning where the line's live bytes grew during the run (a
    likely leak), information where it was allocated once and kept. A run without moments
    cannot tell: a warning, as memory live at exit. In line order."""
    return in_line_order(list(leak_item_iter(view, mapping, lines, settings)))


def in_line_order(items: list[DiagnosticItem]) -> list[DiagnosticItem]:
    """``items`` sorted in place by buffer line, the order diagnostics are published in."""
    items.sort(key=lambda d: d.line)
    return items


def leak_item_iter(
    view: FileView, mapping: LineMapping, lines: Sequence[str], settings: Settings
) -> Iterator[DiagnosticItem]:
    """:func:`leak_items` one at a time, in the run's line order (not the buffer's)."""
    threshold = max(1, settings.leak_min_bytes)
    for rec, live in line_values(view.lines, "live_bytes"):
        if live < threshold or held_by_module(view, rec):
            continue
        stats = view.lines[rec]
        line = mapping.buffer_line(rec)
        if line is None or not 1 <= line <= len(lines):
            continue
        text = lines[line - 1]
        start = len(text) - len(text.lstrip())
        verdict = view.verdict(rec)
        message = growth.message(verdict, stats.live_count, stats.alloc_bytes)
        message += held_by_suffix(view, rec)
        code = "leak" if verdict.kind in (growth.GROWING, growth.UNKNOWN) else "kept"
        yield DiagnosticItem(line - 1, start, len(text), message, code)


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
        "kind": run_kind(info),
        "checkpoint": info.checkpoint,
        "gpu_peak_bytes": info.gpu_peak_bytes,
    }


def moment_info(run: RunData | None, spec: str | None) -> dict[str, Any] | None:
    """The ``MomentInfo`` shape of docs/lsp.md: the moment ``spec`` names in ``run``, or None
    (no spec, no run, or a moment this run cannot show)."""
    at = run.moment(spec) if run is not None else None
    return None if at is None else at.as_json()


def top_lines(run: RunData, figure: str = "peak", limit: int = 10) -> list[dict[str, Any]]:
    """The heaviest lines of a run by ``figure``: ``{"file", "line", "label", "text"}``;
    ``file`` is where the figures show here (the local file of a run made in another
    checkout), ``text`` the line's code as profiled (stripped; "" when not recorded)."""
    attr = NAMED_FIGURES[figure].line
    rows = [
        (stats.figure(attr), run.local_path(key), line, stats, key)
        for key, sf in run.run.files.items()
        for line, stats in sf.lines.items()
    ]
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    texts: dict[str, list[str]] = {}
    out = []
    for value, path, line, stats, key in rows[:limit]:
        if value <= 0:
            continue
        if key not in texts:
            recorded = run.run.files[key].text
            texts[key] = recorded.splitlines() if recorded is not None else []
        text = texts[key]
        code = text[line - 1].strip()[:200] if 0 < line <= len(text) else ""
        out.append({"file": path, "line": line, "label": line_label(stats, figure), "text": code})
    return out
