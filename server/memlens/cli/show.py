"""``memlens show``: the terminal report of a saved run."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from memlens.cli.options import add_by, add_dir, add_listing, add_run_spec, add_top, top_rows
from memlens.errors import MemlensError
from memlens.layout import display_path, process_runs, processes_folder
from memlens.moment import HELP_SYNTAX, resolve
from memlens.report import find_file, parse_where, render, why_lines
from memlens.runfile import reader
from memlens.store import Store
from memlens.timeline import add_arguments as add_timeline_arguments
from memlens.timeline import show

if TYPE_CHECKING:
    from memlens.model import RunInfo


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_spec(parser)
    parser.add_argument(
        "--file", metavar="F", help="list this file of the run (default: the hottest file)"
    )
    parser.add_argument(
        "--process",
        type=int,
        metavar="PID",
        help="the figures of one process of a run that followed child processes",
    )
    parser.add_argument(
        "--why",
        metavar="FILE:LINE",
        help="what keeps this line's memory alive at exit: the references from a module global, "
        "class attribute, thread or C code to its objects",
    )
    add_top(parser)
    add_listing(parser)
    add_by(parser)
    parser.add_argument(
        "--at",
        metavar="MOMENT",
        help=f"each line's live bytes at one moment of the run: {HELP_SYNTAX}",
    )
    add_dir(parser)

    add_timeline_arguments(parser)


def run(args: argparse.Namespace) -> int:
    path = Store(args.dir).resolve(args.run)
    result = reader.read(path)
    if args.process is not None:
        result = reader.read(process_run(str(path), result.info, args.process))
    if args.timeline or args.svg or args.html:  # (a file asked for is the timeline's)
        if args.at is not None:
            raise MemlensError("--at and --timeline are two views: give one of them")
        return show(result, args)
    if args.why:
        if args.at is not None:
            raise MemlensError("--at and --why are two views: give one of them")
        where, line = parse_where(result, args.why)
        for text in why_lines(result, where, line):
            print(text)
        return 0
    at = resolve(result, args.at) if args.at is not None else None
    file = find_file(result, args.file) if args.file else None
    render(
        result,
        sys.stdout,
        by=args.by,
        top=top_rows(args.top),
        file=file,
        at=at,
        show_listing=not args.no_listing,
    )
    return 0


def process_run(run_path: str, info: RunInfo, pid: int) -> str:
    """The run file of process ``pid`` of the run ``run_path`` (its processes folder), or a
    one-line MemlensError."""
    pids = [p.pid for p in info.processes]
    if pid not in pids:
        listed = ", ".join(str(p) for p in pids[:20]) + (", ..." if len(pids) > 20 else "")
        raise MemlensError(
            f"the run has no process {pid} (its processes: {listed})"
            if pids
            else f"the run has no process {pid} (it is a run of one process)"
        )
    found = process_runs(run_path, pid)
    if not found:
        shown = display_path(processes_folder(run_path))
        raise MemlensError(f"process {pid} left no run in {shown}")
    if len(found) > 1:
        raise MemlensError(f"several processes of the run had the id {pid}: {len(found)} runs")
    return found[0]
