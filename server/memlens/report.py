"""Terminal reports of a run: the hottest lines and an annotated listing of a file.

Rows are built by pure functions from a :class:`Run`; rendering is plain text (pipes, files,
tests) or rich (a terminal). Labels come from :func:`memlens.annotate.line_label`, so the
listing reads exactly as the editor's inlay hints.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memlens.annotate import line_label
from memlens.errors import MemlensError
from memlens.layout import display_path, printable
from memlens.model import NAMED_FIGURES, LineStats, Run, RunInfo
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


@dataclass(frozen=True, slots=True)
class ListingRow:
    line: int  # 0 for an elision marker ("...")
    text: str
    label: str


def _source_lines(run: Run, file: str) -> list[str]:
    """The recorded source's lines, fit for a terminal (a run's text is untrusted)."""
    text = run.files[file].text
    return [printable(line) for line in text.splitlines()] if text is not None else []


def top_lines(
    run: Run, by: str = "peak", n: int | None = 10, keep: Callable[[str], bool] | None = None
) -> list[TopRow]:
    """The ``n`` lines (None: all) with the largest ``by`` figure (self), largest first; lines
    with 0 are left out, and so are files for which ``keep`` says False."""
    attr = NAMED_FIGURES[by].line
    peak = run.info.peak_traced_bytes or 1
    rows: list[tuple[int, str, int, LineStats]] = []
    for file, sf in run.files.items():
        if keep is not None and not keep(file):
            continue
        for line, st in sf.lines.items():
            value = st.figure(attr)
            if value > 0:
                rows.append((value, file, line, st))
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    out: list[TopRow] = []
    for rank, (value, file, line, st) in enumerate(rows[:n], start=1):
        src = _source_lines(run, file)
        out.append(
            TopRow(
                rank=rank,
                file=file,
                line=line,
                value=value,
                stats=st,
                share_of_peak=st.peak_bytes / peak,
                source=src[line - 1].strip() if 0 < line <= len(src) else "",
            )
        )
    return out


def leak_lines(run: Run, shown: Sequence[TopRow], n: int | None = 10) -> list[TopRow]:
    """The lines that held the most at exit, when the ``shown`` rows miss some of them.

    A table ranked by peak or allocations can leave out a line that allocated after the
    peak and kept it to the end (its peak figure is 0): the report lists the ``n`` lines that
    held the most at exit. Empty when ``shown`` has all of them already.
    """
    live = top_lines(run, "live", n)
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
    run: Run, file: str, by: str = "peak", context: int = 2, whole: bool = False
) -> list[ListingRow]:
    """The source of ``file`` with a label beside each line that has figures.

    Unless ``whole``, only lines with figures and ``context`` lines around them are kept;
    gaps are shown as one row with line 0 and text ``...``.
    """
    sf = run.files[file]
    src = _source_lines(run, file)
    if not src:
        src = [""] * max(sf.lines, default=0)
    labels = {ln: line_label(st, by) for ln, st in sf.lines.items() if _shown(st, by)}
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
        rows.append(ListingRow(ln, src[ln - 1], labels.get(ln, "")))
        last = ln
    return rows


def _shown(st: LineStats, by: str) -> bool:
    return st.figure(NAMED_FIGURES[by].line) > 0 or st.alloc_bytes > 0


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
    return (
        f"peak {fmt_bytes(info.peak_traced_bytes)} traced · peak RSS {rss_text(info)} · "
        f"{duration_text(info)} · {printable(mode)}{processes_text(info)}{state}"
    )


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

#: Columns of a table; "{by}" is the ranking figure, "live" is left out when it ranks.
_COLUMNS = ("#", "line", "{by}", "allocs", "share of peak", "live", "code")
_RIGHT = frozenset(("#", "{by}", "allocs", "share of peak", "live"))
#: Heading of the second table (lines holding memory at exit that the first one misses).
LEAKS_TITLE = "live at exit (what the program still held when it ended):"


def _columns(by: str) -> tuple[str, ...]:
    return tuple(c for c in _COLUMNS if not (c == "live" and by == "live"))


def _headers(by: str) -> list[str]:
    titles = {"{by}": NAMED_FIGURES[by].title, "live": NAMED_FIGURES["live"].title}
    return [titles.get(c, c) for c in _columns(by)]


def _cells(row: TopRow, by: str) -> tuple[str, ...]:
    values = {
        "#": str(row.rank),
        "line": f"{display_path(row.file)}:{row.line}",
        "{by}": fmt_bytes(row.value),
        "allocs": fmt_count(row.stats.alloc_count),
        "share of peak": f"{row.share_of_peak:.0%}",
        "live": fmt_bytes(row.stats.live_bytes),
        "code": row.source[:60],
    }
    return tuple(values[c] for c in _columns(by))


def render(
    run: Run,
    out: TextIO,
    *,
    by: str = "peak",
    top: int | None = 10,
    file: str | None = None,
    rich_output: bool | None = None,
    show_listing: bool = True,
) -> None:
    """Print the report: summary, top lines, and the annotated hottest (or given) file.

    Unless the table is ranked by live memory, lines that still held memory at exit and
    are not in it follow in a second table (:func:`leak_lines`). ``top`` None: every line.
    """
    tables = [(by, top_lines(run, by, top))]
    if by != "live":
        leaks = leak_lines(run, tables[0][1], top)
        if leaks:
            tables.append(("live", leaks))
    first = tables[0][1] or tables[-1][1]
    target = file or (first[0].file if first else None)
    use_rich = out.isatty() if rich_output is None else rich_output
    if use_rich:
        _render_rich(run, tables, target, by, out, show_listing)
    else:
        _render_plain(run, tables, target, by, out, show_listing)


Tables = Sequence[tuple[str, Sequence[TopRow]]]
NOTHING = "no allocations were attributed to any line"


def _render_plain(
    run: Run, tables: Tables, target: str | None, by: str, out: TextIO, show: bool
) -> None:
    print(f"memlens: {summary_line(run)}", file=out)
    if not any(rows for _, rows in tables):
        print(f"memlens: {NOTHING}", file=out)
        return
    for i, (rank_by, rows) in enumerate(tables):
        print(file=out)
        if i:
            print(LEAKS_TITLE, file=out)
        columns = _columns(rank_by)
        table = [tuple(_headers(rank_by)), *(_cells(r, rank_by) for r in rows)]
        widths = [max(len(r[i]) for r in table) for i in range(len(columns) - 1)]
        for r in table:
            cells = [
                r[i].rjust(widths[i]) if columns[i] in _RIGHT else r[i].ljust(widths[i])
                for i in range(len(widths))
            ]
            print(("  " + "  ".join(cells) + "  " + r[-1]).rstrip(), file=out)
    if show and target is not None:
        print(file=out)
        print(f"{display_path(target)}:", file=out)
        rows_l = listing(run, target, by)
        width = len(str(max((r.line for r in rows_l), default=1)))
        for lr in rows_l:
            if lr.line == 0:
                print(f"  {'':>{width}}  ...", file=out)
                continue
            label = f"  # {lr.label}" if lr.label else ""
            print(f"  {lr.line:>{width}}  {lr.text}{label}".rstrip(), file=out)


def _render_rich(
    run: Run, tables: Tables, target: str | None, by: str, out: TextIO, show: bool
) -> None:
    console = Console(file=out)
    console.print(Text("memlens", style="bold") + Text(f": {summary_line(run)}"))
    if not any(rows for _, rows in tables):
        console.print(Text(NOTHING))
        return
    for i, (rank_by, rows) in enumerate(tables):
        if i:
            console.print(Text(f"\n{LEAKS_TITLE}", style="bold"))
        columns = _columns(rank_by)
        table = Table(show_edge=False, header_style="bold")
        cells = [_cells(r, rank_by) for r in rows]
        headers = _headers(rank_by)
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
    if show and target is not None:
        console.print(Text(f"\n{display_path(target)}:", style="bold"))
        rows_l = listing(run, target, by)
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
