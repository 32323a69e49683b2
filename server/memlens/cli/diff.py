"""``memlens diff``: what changed per line and per function between two runs."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, NamedTuple, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from memlens.cli.options import add_by, add_dir, add_run_spec, top_rows
from memlens.diff import diff_runs, ranked_functions, ranked_lines, raw_writer, write_json
from memlens.errors import MemlensError
from memlens.layout import display_path, pointer_name, printable
from memlens.model import NAMED_FIGURES
from memlens.moment import HELP_SYNTAX, resolve, run_at
from memlens.runfile import reader
from memlens.store import Store, run_kind
from memlens.units import fmt_bytes, fmt_delta_bytes, fmt_percent

if TYPE_CHECKING:
    from memlens.diff import Change, FunctionDiff, LineDiff, RunDiff
    from memlens.moment import Moment


_DEFAULT_TOP = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_spec(parser, "a", "baseline", "the old run: ")
    add_run_spec(parser, "b", "latest", "the new run: ")
    add_by(parser)
    parser.add_argument(
        "--top",
        type=int,
        default=None,
        metavar="N",
        help=f"show the N biggest changes (table default {_DEFAULT_TOP}; --json default all; 0 = all)",
    )
    parser.add_argument("--json", action="store_true", help="every line and function, as JSON")
    parser.add_argument("--plain", action="store_true", help="plain text even on a terminal")
    parser.add_argument(
        "--from",
        dest="moment_from",
        metavar="MOMENT",
        help=f"what grew or shrank in one run (A, default latest) from this moment ({HELP_SYNTAX}) "
        "to --to's",
    )
    parser.add_argument(
        "--to", dest="moment_to", metavar="MOMENT", help="... to this moment (default: end)"
    )
    add_dir(parser)
    # The runs' defaults are filled in by run(): with --from/--to, A is the run, latest.
    parser.set_defaults(a=None, b=None, by=None)


def run(args: argparse.Namespace) -> int:
    top = None if args.top is None else top_rows(args.top)
    store = Store(args.dir)
    moments = args.moment_from is not None or args.moment_to is not None
    start: Moment | None = None
    end: Moment | None = None
    if moments:
        if args.b is not None:
            raise MemlensError("--from and --to compare two moments of one run: give one run")
        if args.by not in (None, "live"):
            raise MemlensError("--from and --to compare live bytes: --by live, or no --by")
        path_a = path_b = store.resolve(args.a or "latest")
        whole = reader.read(path_a)
        start = resolve(whole, args.moment_from or "0%")
        end = resolve(whole, args.moment_to or "end")
        d = diff_runs(run_at(whole, start), run_at(whole, end))
        by = "live"
    else:
        path_b = store.resolve(args.b or "latest")
        a = args.a or "baseline"
        if a == "baseline":
            # Like with like: the baseline of the new run's kind (a test run's, a program's).
            a = pointer_name("baseline", run_kind(reader.read_info(path_b)))
        path_a = store.resolve(a)
        run_a = reader.read(path_a)
        texts = {sf.sha256: sf.text for sf in run_a.files.values() if sf.text is not None}
        d = diff_runs(run_a, reader.read(path_b, texts))
        del run_a, texts
        by = args.by or "peak"
    figure = NAMED_FIGURES[by]
    line_attr, fn_attr = figure.line, figure.node
    if args.json:
        more: dict[str, object] = {"a": str(path_a), "b": str(path_b)}
        if start is not None and end is not None:
            more["from"], more["to"] = start.as_json(), end.as_json()
        write_json(d, sys.stdout, by=line_attr, top=top, more=more, raw=raw_writer(sys.stdout))
        return 0

    if args.top is None:
        top = _DEFAULT_TOP
    # (Sorted by the size of the change: the lines that changed come first.)
    lines = ranked_lines(d, line_attr, top)
    functions = ranked_functions(d, fn_attr)

    if start is not None and end is not None:
        title = printable(
            f"memlens: live per line in {path_a.stem}, {start.describe()} -> {end.describe()}"
        )
    else:
        title = printable(f"memlens: {by} per line, {path_a.stem} -> {path_b.stem}")
    changed = [ld for ld in lines if ld.change(line_attr) != 0][:top]
    changed_fns = [fd for fd in functions if fd.change(fn_attr) != 0][:top]
    out: TextIO = sys.stdout
    total = _total_line(d, start is not None)
    report = _Report(
        title,
        _notes(d),
        [_row(ld, line_attr) for ld in changed],
        [ld.change(line_attr) for ld in changed],
        [_fn_row(fd, fn_attr) for fd in changed_fns],
        [fd.change(fn_attr) for fd in changed_fns],
        total,
    )
    if out.isatty() and not args.plain:
        _print_rich(report)
    else:
        _print_plain(report, out)
    return 0


_Row = tuple[str, str, str, str, str]


class _Report(NamedTuple):
    """What ``memlens diff`` prints, as text: the title, notes on the runs, the changed lines'
    and functions' rows (where, before, after, change, relative) with their changes in bytes
    (a terminal colours each row by its sign), and the total's line. Plain and rich output
    only lay it out."""

    title: str
    notes: list[str]
    lines: list[_Row]
    line_changes: list[int]
    functions: list[_Row]
    function_changes: list[int]
    total: str | None


def _where(ld: LineDiff) -> str:
    # The words of the JSON's "status": moved, new, gone (same-line says nothing).
    where = f"{display_path(ld.file)}:{ld.line}"
    if ld.status == "moved":
        where += f" (moved from {ld.line_a})"
    elif ld.status == "new":
        where += " (new code)"
    elif ld.status == "gone":
        where += " (code gone)"
    return where


def _relative(c: Change, is_new: bool) -> str:
    """The relative change; from no figure at all: "new" for new code, else "from 0"."""
    if c.ratio is None and not is_new:
        return "from 0"
    return fmt_percent(c.ratio)


def _row(ld: LineDiff, attr: str) -> _Row:
    c = ld.figure(attr)
    return (
        _where(ld),
        fmt_bytes(c.a) if ld.a else "-",
        fmt_bytes(c.b) if ld.b else "-",
        fmt_delta_bytes(c.delta),
        _relative(c, ld.status == "new"),
    )


def _fn_row(fd: FunctionDiff, attr: str) -> _Row:
    c = fd.figure(attr)
    return (
        f"{display_path(fd.file)}::{printable(fd.qualname)}",
        fmt_bytes(c.a) if fd.a else "-",
        fmt_bytes(c.b) if fd.b else "-",
        fmt_delta_bytes(c.delta),
        _relative(c, fd.a is None),
    )


def _notes(d: RunDiff) -> list[str]:
    return [
        f"memlens: {display_path(p)}: no recorded source on one side; lines matched by number"
        for p in d.unmatched_sources
    ]


def _total_line(d: RunDiff, moments: bool = False) -> str | None:
    """The change of the run's peak; between two moments, of what was traced then."""
    totals = d.totals()
    if "peak_traced_bytes" not in totals:
        return None
    out = []
    first = "traced" if moments else "run peak"
    for key, what in (("peak_traced_bytes", first), ("gpu_peak_bytes", "run GPU peak")):
        c = totals.get(key)
        if c is not None and not (moments and key == "gpu_peak_bytes"):
            out.append(
                f"{what}: {fmt_bytes(c.a)} -> {fmt_bytes(c.b)} "
                f"({fmt_delta_bytes(c.delta)}, {fmt_percent(c.ratio)})"
            )
    return "\n".join(out)


def _print_plain(report: _Report, out: TextIO) -> None:
    print(report.title, file=out)
    for note in report.notes:
        print(note, file=out)
    if not report.lines:
        print("memlens: no line changed", file=out)
    else:
        _plain_table([("line", "before", "after", "change", ""), *report.lines], out)
    if report.functions:
        print("\nfunctions (inclusive):", file=out)
        _plain_table([("function", "before", "after", "change", ""), *report.functions], out)
    if report.total:
        print("\n" + report.total, file=out)


def _plain_table(rows: list[_Row], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        cells = [r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i]) for i in range(5)]
        print(("  " + "  ".join(cells)).rstrip(), file=out)


def _print_rich(report: _Report) -> None:
    # Paths and qualified names are data, not markup: "/tmp/a[/b]/x.py" must print as is.
    console = Console(markup=False)
    console.print(report.title, highlight=False)
    for note in report.notes:
        console.print(note, style="yellow", highlight=False)

    def table(kind: str, rows: list[_Row], deltas: list[int]) -> Table:
        t = Table(show_edge=False, pad_edge=False)
        t.add_column(kind, no_wrap=True)
        for name in ("before", "after", "change", ""):
            t.add_column(name, justify="right", no_wrap=True)
        for row, delta in zip(rows, deltas, strict=True):
            style = "red" if delta > 0 else "green" if delta < 0 else ""
            t.add_row(*(Text(cell) for cell in row), style=style)
        return t

    if not report.lines:
        console.print("memlens: no line changed", highlight=False)
    else:
        console.print(table("line", report.lines, report.line_changes))
    if report.functions:
        console.print()
        console.print("functions (inclusive):", highlight=False)
        console.print(table("function", report.functions, report.function_changes))
    if report.total:
        console.print()
        console.print(report.total, highlight=False)
