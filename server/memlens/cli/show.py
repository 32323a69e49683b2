"""``memlens show``: the terminal report of a saved run."""

from __future__ import annotations

import argparse
import sys

from memlens.cli import add_by, add_dir, add_run_spec, add_top, top_rows

HELP = "print the report of a saved run (default: the latest)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_spec(parser)
    parser.add_argument(
        "--file", metavar="F", help="list this file of the run (default: the hottest file)"
    )
    add_top(parser)
    add_by(parser)
    add_dir(parser)
    from memlens.timeline import add_arguments as add_timeline_arguments

    add_timeline_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from memlens import fileformat
    from memlens.report import find_file, render
    from memlens.store import Store

    result = fileformat.read(Store(args.dir).resolve(args.run))
    if args.timeline:
        from memlens.timeline import show

        return show(result, args)
    file = find_file(result, args.file) if args.file else None
    render(result, sys.stdout, by=args.by, top=top_rows(args.top), file=file)
    return 0
