"""Terminal reports of a run: the hottest lines and an annotated listing of a file.

Rows are built by pure functions from a :class:`Run`; rendering is plain text (pipes, files,
tests) or rich (a terminal). Labels come from :func:`memlens.annotate.line_label`, so the
listing reads exactly as the editor's inlay hints.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memlens import growth, held
from memlens.annotate import figure_text, line_label
from memlens.errors import MemlensError
from memlens.layout import display_path, printable
from memlens.model import NAMED_FIGURES, LineStats, Run, RunInfo, gpu_figure, ranked_values
from memlens.moment import Moment, run_at
from memlens.units import fmt_bytes, fmt_count


@dataclass(frozen=True, slots=True)
class TopRow:
    rank: int
    file: str
    line: int
    value: int
    stats: LineStats
    share_of_peak: float  # this line's peak figure / the run's peak traced bytes
    source: str
    #: Ranked by live bytes in a run with moments: the leak rule's word on the line
    #: (:func:`memlens.growth.short`: ``grew``, ``kept``, ``late``).
    growth: str = ""


@dataclass(frozen=True, slots=True)
class ListingRow:
    line: int  # 0 for an elision marker ("...")
    text: str
    label: str


def _source_lines(run: Run, file: str) -> list[str]:
    """The recorded source's lines as recorded: untrusted text, made fit for a terminal
    (``printable``) line by line where one is shown (a file's lines are many, those shown few)."""
    text = run.files[file].text
    return text.splitlines() if text is not None else []


def top_lines(
    run: Run, by: str = "peak", n: int | None = 10, keep: Callable[[str], bool] | None = None
) -> list[TopRow]:
    """The ``n`` lines (None: all) with the largest ``by`` figure (self), largest first; lines
    with 0 are left out, and so are files for which ``keep`` says False."""
    fig = NAMED_FIGURES[by]
    attr = fig.line
    gpu = bool(fig.device)
    peak = (run.info.gpu_peak_bytes if gpu else run.info.peak_traced_bytes) or 1
    # One figure per line is read (memlens.model.ranked_values: for a LineTable, pairs made
    # without a Python step per line), a file's n best kept, then the n best of those.
    # (Lines with 0 rank last: dropping them after the n best drops nothing that counts.)
    rows: list[tuple[int, str, int]] = []
    for file, sf in run.files.items():
        if keep is None or keep(file):
            pairs = ranked_values(sf.lines, attr)
            best = pairs if n is None else heapq.nsmallest(n, pairs)
            rows.extend((minus, file, line) for minus, line in best if minus < 0)
    ranked = sorted(rows) if n is None else heapq.nsmallest(n, rows)
    out: list[TopRow] = []
    sources: dict[str, list[str]] = {}
    for rank, (minus, file, line) in enumerate(ranked, start=1):
        value, st = -minus, run.files[file].lines[line]
        if file not in sources:
            sources[file] = _source_lines(run, file)
        src = sources[file]
        out.append(
            TopRow(
                rank=rank,
                file=file,
                line=line,
                value=value,
                stats=st,
                share_of_peak=(st.gpu_peak_bytes if gpu else st.peak_bytes) / peak,
                source=printable(src[line - 1]).strip() if 0 < line <= len(src) else "",
                growth=growth.short(growth.line_verdict(run, file, line))
                if by == "live" and run.moments
                else "",
            )
        )
    return out


def leak_lines(
    run: Run, shown: Sequence[TopRow], n: int | None = 10, live_by: str = "live"
) -> list[TopRow]:
    """The lines that held the most at exit, when the ``shown`` rows miss some of them.

    A table ranked by peak or allocations can leave out a line that allocated after the
    peak and kept it to the end (its peak figure is 0): the report lists the ``n`` lines that
    held the most at exit (``live_by``: ``gpu_live`` for GPU memory). Empty when ``shown`` has
    all of them already.
    """
    live = top_lines(run, live_by, n)
    seen = {(r.file, r.line) for r in shown}
    return [] if all((r.file, r.line) in seen for r in live) else live


def hottest_file(run: Run, by: str = "peak") -> str | None:
    rows = top_lines(run, by, 1)
    return rows[0].file if rows else None


def find_file(run: Run, name: str) -> str:
    """Resolve a user-given file name to a file of the run (absolute, relative or suffix)."""
    absolute = os.path.realpath(name)
    if absolute in run.files:
        return absolute
    matches = [f for f in run.files if f.endswith(os.sep + name.lstrip(os.sep)) or f == name]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise MemlensError(f"the run has no figures for {name}")
    raise MemlensError(f"{name} matches several files of the run: " + ", ".join(matches))


def listing(
    run: Run,
    file: str,
    by: str = "peak",
    context: int = 2,
    whole: bool = False,
    lines: int | None = None,
    words: str | None = None,
) -> list[ListingRow]:
    """The source of ``file`` with a label beside each line that has figures (with ``lines``,
    only the ``lines`` lines with the largest ``by`` figure, then the most allocated).

    Unless ``whole``, only labelled lines and ``context`` lines around them are kept; gaps
    are shown as one row with line 0 and text ``...``.
    """
    sf = run.files[file]
    src = _source_lines(run, file)
    if not src:
        src = [""] * max(sf.lines, default=0)
    attr = NAMED_FIGURES[by].line
    shown = [(ln, st) for ln, st in sf.lines.items() if _shown(st, by)]
    if lines is not None:
        shown.sort(key=lambda e: (-e[1].figure(attr), -e[1].alloc_bytes, e[0]))
        shown = shown[:lines]
    labels = {ln: line_label(st, by, words=words) for ln, st in shown}
    if whole:
        keep = set(range(1, len(src) + 1))
    else:
        keep = {k for ln in labels for k in range(ln - context, ln + context + 1)}
    rows: list[ListingRow] = []
    last = 0
    for ln in range(1, len(src) + 1):
        if ln not in keep:
            continue
        if last and ln != last + 1:
            rows.append(ListingRow(0, "...", ""))
        rows.append(ListingRow(ln, printable(src[ln - 1]), labels.get(ln, "")))
        last = ln
    return rows


def _shown(st: LineStats, by: str) -> bool:
    return (
        st.figure(NAMED_FIGURES[by].line) > 0
        or st.alloc_bytes > 0
        or st.gpu_alloc_bytes > 0
        or st.gpu_live_bytes > 0
    )


NOT_RECORDED = "not recorded"


def rss_text(info: RunInfo) -> str:
    """The peak RSS; imports that do not know it (0) say so instead of "0 B"."""
    return fmt_bytes(info.peak_rss_bytes) if info.peak_rss_bytes > 0 else NOT_RECORDED


def duration_text(info: RunInfo) -> str:
    """``1.25 s``; an import that does not know the duration says so instead of "0.00 s"."""
    if info.mode == "imported" and info.duration_s <= 0:
        return f"duration {NOT_RECORDED}"
    return f"{info.duration_s:.2f} s"


def summary_line(run: Run) -> str:
    info = run.info
    mode = info.mode
    if info.mode == "sampling" and info.sample_interval_bytes:
        mode = f"sampling every ~{fmt_bytes(info.sample_interval_bytes)}"
        if info.seed is not None:
            mode += f" (seed {info.seed})"
    elif info.mode == "imported":
        mode = f"imported from {info.source}"
    state = "" if info.complete else " · INCOMPLETE (the program did not finish)"
    if info.attached:
        state += " · attached: what the process allocated before is not counted"
    host = f"peak {fmt_bytes(info.peak_traced_bytes)} traced · peak RSS {rss_text(info)} · "
    if info.gpus and info.mode == "imported" and not info.peak_traced_bytes:
        host = ""  # a GPU snapshot: no host memory was recorded
    return (
        f"{host}{gpu_text(info)}{duration_text(info)} · {printable(mode)}"
        f"{processes_text(info)}{state}"
    )


def gpu_text(info: RunInfo) -> str:
    """``GPU peak 306.1 MiB · `` for a run that recorded GPU memory (with its devices when
    there are several, and a note when the history misses its start); "" otherwise."""
    if not info.gpus and not info.gpu_peak_bytes:
        return ""
    text = f"GPU peak {fmt_bytes(info.gpu_peak_bytes)}"
    if len(info.gpus) > 1:
        text += " (" + ", ".join(f"cuda:{g.device} {fmt_bytes(g.peak_bytes)}" for g in info.gpus)
        text += ")"
    if any(not g.complete for g in info.gpus):
        text += " (the GPU history misses its start: allocations before it are not counted)"
    return text + " · "


def processes_text(info: RunInfo) -> str:
    """`` · 6 processes (1 incomplete)`` for a run that followed child processes; a child's
    own run says whose child it is (`` · process 4243, child of 4242``); "" otherwise."""
    processes = info.processes
    if len(processes) == 1:
        p = processes[0]
        return f" · process {p.pid}, child of {p.parent_pid}" if p.pid == info.pid else ""
    if not processes:
        return ""
    incomplete = sum(not p.complete for p in processes)
    return f" · {len(processes)} processes" + (f" ({incomplete} incomplete)" if incomplete else "")


# -- rendering ---------------------------------------------------------------------------

#: Columns of a table; "{by}" is the ranking figure, "live" is left out when it ranks (and
#: "growth", the leak rule's word on each line, follows it in a run with moments). A moment's
#: table (``--at``) has its own: the live bytes then and their share of the traced total then.
_COLUMNS = ("#", "line", "{by}", "allocs", "share of peak", "live", "code")
_AT_COLUMNS = ("#", "line", "{by}", "share of traced", "code")
_RIGHT = frozenset(("#", "{by}", "allocs", "share of peak", "live", "share of traced"))
#: Heading of the second table (lines holding memory at exit that the first one misses).
LEAKS_TITLE = "live at exit (what the program still held when it ended):"
#: The same, for a run of a process memlens attached to (``memlens attach``).
LEAKS_TITLE_ATTACHED = "live at detach (what the process still held when memlens detached):"


def _leaks_title(run: Run) -> str:
    return LEAKS_TITLE_ATTACHED if run.info.attached else LEAKS_TITLE


#: Headings of the GPU tables (PyTorch's CUDA memory), and of their second table.
GPU_TITLE = "GPU memory (PyTorch CUDA):"
GPU_LEAKS_TITLE = "GPU memory live at exit (still allocated when the program ended):"


def _live(by: str) -> str:
    """The live-at-exit figure of the kind of memory ``by`` ranks (host or GPU)."""
    return "gpu_live" if NAMED_FIGURES[by].device else "live"


def _columns(by: str, at: Moment | None = None, growth: bool = False) -> tuple[str, ...]:
    if at is not None:
        return _AT_COLUMNS
    columns = [c for c in _COLUMNS if not (c == "live" and by == _live(by))]
    if by == "live" and growth:
        columns.insert(columns.index("{by}") + 1, "growth")
    return tuple(columns)


def _headers(by: str, at: Moment | None = None, growth: bool = False) -> list[str]:
    gpu = "GPU " if NAMED_FIGURES[by].device else ""
    titles = {
        "{by}": NAMED_FIGURES[by].title,
        "live": NAMED_FIGURES[_live(by)].title,
        "share of peak": f"share of {gpu}peak",
    }
    if at is not None:
        titles["{by}"] = at.words
    return [titles.get(c, c) for c in _columns(by, at, growth)]


def _cells(
    row: TopRow, by: str, sampled: bool, at: Moment | None = None, growth: bool = False
) -> tuple[str, ...]:
    """A row of a table; a sampling run's figures are estimates, shown with ``~`` (and their
    standard error where the run has one), as the labels show them (GPU figures are exact)."""
    gpu = bool(NAMED_FIGURES[by].device)
    values = {
        "#": str(row.rank),
        "line": f"{display_path(row.file)}:{row.line}",
        "{by}": figure_text(row.stats, by),
        "allocs": ("~" if sampled and not gpu else "")
        + fmt_count(row.stats.gpu_alloc_count if gpu else row.stats.alloc_count),
        "share of peak": f"{row.share_of_peak:.0%}",
        "live": figure_text(row.stats, "gpu_live" if gpu else "live"),
        "share of traced": f"{row.value / at.traced_bytes:.0%}" if at and at.traced_bytes else "",
        "growth": row.growth,
        "code": row.source[:60],
    }
    return tuple(values[c] for c in _columns(by, at, growth))


def render(
    run: Run,
    out: TextIO,
    *,
    by: str = "peak",
    top: int | None = 10,
    file: str | None = None,
    rich_output: bool | None = None,
    show_listing: bool = True,
    at: Moment | None = None,
) -> None:
    """Print the report: summary, top lines, and the annotated hottest (or given) file.

    Unless the table is ranked by live memory, lines that still held memory at exit and
    are not in it follow in a second table (:func:`leak_lines`). ``top`` None: every line;
    otherwise the listing labels the file's ``top`` lines with the largest figure too.
    A run that recorded GPU memory gets the same tables for it, ranked by its GPU counterpart
    of ``by`` (``gpu_peak`` for ``peak``), after the host ones. ``at``: the report of one
    moment instead (``memlens show --at``): each line's live bytes then, and their share of
    what was traced then (host memory: no GPU tables).
    """
    tables: list[tuple[str, Sequence[TopRow], str]] = []
    if at is not None:
        summary = f"{summary_line(run)}\nmemlens: at {at.describe()}"
        run, by = run_at(run, at), "live"
        tables.append((by, top_lines(run, by, top), ""))
    else:
        summary = summary_line(run)
        ranks = [by]
        if not NAMED_FIGURES[by].device and (run.info.gpus or run.info.gpu_peak_bytes):
            ranks.append(gpu_figure(by) or "gpu_peak")
        for rank in ranks:
            rows = top_lines(run, rank, top)
            gpu = bool(NAMED_FIGURES[rank].device)
            tables.append((rank, rows, GPU_TITLE if gpu else ""))
            if rank != _live(rank):
                leaks = leak_lines(run, rows, top, _live(rank))
                if leaks:
                    title = GPU_LEAKS_TITLE if gpu else _leaks_title(run)
                    tables.append((_live(rank), leaks, title))
        tables = [t for t in tables if t[1] or t[0] == by]
    first = next((rows for _, rows, _ in tables if rows), [])
    target = file or (first[0].file if first else None)
    use_rich = out.isatty() if rich_output is None else rich_output
    view = _View(summary, at, bool(run.moments) and at is None, top)
    if use_rich:
        _render_rich(run, tables, target, by, out, show_listing, view)
    else:
        _render_plain(run, tables, target, by, out, show_listing, view)


Tables = Sequence[tuple[str, Sequence[TopRow], str]]


def share_note(run: Run, rows: Sequence[TopRow]) -> str | None:
    """Why the *share of peak* column adds up past 100%, when it does: a run of several
    processes counts each process's lines at that process's own peak."""
    if len(run.info.processes) < 2 or sum(r.share_of_peak for r in rows) <= 1.0:
        return None
    return (
        "(share of peak adds up past 100%: each process's lines count at that process's own "
        "peak, and the processes peaked at different moments)"
    )


NOTHING = "no allocations were attributed to any line"
NOTHING_AT = "no line held memory at this moment"
NO_GPU = "the run recorded no GPU memory (PyTorch CUDA)"


def _nothing(run: Run, by: str) -> str:
    """What the report says when no line has figures to rank by ``by``."""
    gpu_asked = bool(NAMED_FIGURES[by].device)
    return NO_GPU if gpu_asked and not (run.info.gpus or run.info.gpu_peak_bytes) else NOTHING


@dataclass(frozen=True, slots=True)
class _View:
    """What a report is of: its summary lines, and the moment (None: the whole run)."""

    summary: str
    at: Moment | None
    growth: bool  # the live tables say the leak rule's word on each line
    top: int | None  # the listing labels this many lines (None: all)

    def nothing(self, run: Run, by: str) -> str:
        return NOTHING_AT if self.at is not None else _nothing(run, by)

    @property
    def words(self) -> str | None:
        return self.at.words if self.at is not None else None


def _render_plain(
    run: Run, tables: Tables, target: str | None, by: str, out: TextIO, show: bool, view: _View
) -> None:
    print(f"memlens: {view.summary}", file=out)
    if not any(rows for _, rows, _ in tables):
        print(f"memlens: {view.nothing(run, by)}", file=out)
        return
    for rank_by, rows, title in tables:
        if not rows:
            continue
        print(file=out)
        if title:
            print(title, file=out)
        columns = _columns(rank_by, view.at, view.growth)
        sampled = run.info.mode == "sampling"
        table = [
            tuple(_headers(rank_by, view.at, view.growth)),
            *(_cells(r, rank_by, sampled, view.at, view.growth) for r in rows),
        ]
        widths = [max(len(r[i]) for r in table) for i in range(len(columns) - 1)]
        for r in table:
            cells = [
                r[i].rjust(widths[i]) if columns[i] in _RIGHT else r[i].ljust(widths[i])
                for i in range(len(widths))
            ]
            print(("  " + "  ".join(cells) + "  " + r[-1]).rstrip(), file=out)
        note = share_note(run, rows)
        if note is not None:
            print(f"  {note}", file=out)
    if show and target is not None:
        print(file=out)
        print(f"{display_path(target)}:", file=out)
        rows_l = listing(run, target, by, lines=view.top, words=view.words)
        width = len(str(max((r.line for r in rows_l), default=1)))
        for lr in rows_l:
            if lr.line == 0:
                print(f"  {'':>{width}}  ...", file=out)
                continue
            label = f"  # {lr.label}" if lr.label else ""
            print(f"  {lr.line:>{width}}  {lr.text}{label}".rstrip(), file=out)


def _render_rich(
    run: Run, tables: Tables, target: str | None, by: str, out: TextIO, show: bool, view: _View
) -> None:
    console = Console(file=out)
    console.print(Text("memlens", style="bold") + Text(f": {view.summary}"))
    if not any(rows for _, rows, _ in tables):
        console.print(Text(view.nothing(run, by)))
        return
    for i, (rank_by, rows, title) in enumerate(tables):
        if not rows:
            continue
        if title:
            console.print(Text(f"\n{title}" if i else title, style="bold"))
        columns = _columns(rank_by, view.at, view.growth)
        table = Table(show_edge=False, header_style="bold")
        sampled = run.info.mode == "sampling"
        cells = [_cells(r, rank_by, sampled, view.at, view.growth) for r in rows]
        headers = _headers(rank_by, view.at, view.growth)
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
        # The figures never wrap; the code column gives way (or goes) when the terminal is
        # narrow.
        room = console.width - sum(widths[:-1]) - 3 * (len(headers) - 1)
        shown = len(headers) if room >= 16 else len(headers) - 1
        for k in range(shown):
            if k == len(headers) - 1:
                table.add_column(headers[k], no_wrap=True, overflow="ellipsis", max_width=room - 1)
            else:
                right = columns[k] in _RIGHT
                table.add_column(
                    headers[k],
                    justify="right" if right else "left",
                    no_wrap=True,
                    min_width=widths[k],
                )
        for c in cells:
            table.add_row(*(Text(x) for x in c[:shown]))  # Text: code like "[x]" is not markup
        console.print(table)
        note = share_note(run, rows)
        if note is not None:
            console.print(Text(note, style="dim"))
    if show and target is not None:
        console.print(Text(f"\n{display_path(target)}:", style="bold"))
        rows_l = listing(run, target, by, lines=view.top, words=view.words)
        width = len(str(max((r.line for r in rows_l), default=1)))
        for lr in rows_l:
            line = Text()
            if lr.line == 0:
                line.append(f"  {'':>{width}}  ...", style="dim")
            else:
                line.append(f"  {lr.line:>{width}}  ", style="dim")
                line.append(lr.text)
                if lr.label:
                    line.append(f"  {lr.label}", style="bold magenta")
            console.print(line, soft_wrap=True, highlight=False)


# -- what holds a line (`memlens show --why FILE:LINE`) ----------------------------------------

NOT_RECORDED_WHY = (
    "the run recorded nothing about what holds it (only lines still live at the end of a run "
    "made by this memlens are looked into)"
)


def why_lines(run: Run, file: str, line: int) -> list[str]:
    """What holds ``file``:``line`` at the end of the run, as lines of plain text (names from
    the run made printable): one per path, then one per object on it, with its type and the
    line that allocated it."""
    where = f"{display_path(file)}:{line}"
    stats = run.files[file].lines.get(line) if file in run.files else None
    out = []
    if stats is None:
        out.append(f"{where} has no figures in this run")
    else:
        n = stats.live_count
        objects = f" in {fmt_count(n)} object{'' if n == 1 else 's'}" if n else ""
        out.append(f"{where} holds {fmt_bytes(stats.live_bytes)} at exit{objects}")
    paths = held.of_line(run, file, line)
    if not paths:
        out.append(f"  {NOT_RECORDED_WHY}")
        return out
    total = held.sampled(paths)
    for h in paths:
        if h.outcome != "found":
            out.append(f"  {held.NO_PATH.get(h.outcome, printable(h.outcome))}")
            continue
        out.append(f"  held by {printable(held.expression(h))}  ({h.objects} of {total} sampled)")
        parts = [(printable(p.text.strip()), p) for p in held.parts(h)]
        width = min(max(len(text) for text, _ in parts), 48)
        for text, p in parts:
            at = (
                f"allocated at {display_path(p.file)}:{p.line}"
                if p.file
                else "not allocated by a traced line"
            )
            out.append(f"    {text:<{width}}  {printable(p.type) or '-':<12}  {at}")
    return out


def parse_where(run: Run, where: str) -> tuple[str, int]:
    """``FILE:LINE`` (a file of the run as :func:`find_file` resolves it) as (file, line)."""
    name, _, number = where.rpartition(":")
    if not name or not number.isdigit():
        raise MemlensError(f"--why {where}: expected FILE:LINE, e.g. app.py:42")
    return find_file(run, name), int(number)
