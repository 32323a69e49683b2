"""``memlens show``: the terminal report of a saved run."""

from __future__ import annotations

import argparse
import sys

from memlens.cli import add_top, top_rows

HELP = "print the report of a saved run (default: the latest)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", nargs="?", default="latest", help="path, run id, latest or baseline")
    parser.add_argument("--file", metavar="F", help="annotate this file instead of the hottest")
    add_top(parser)
    parser.add_argument("--by", choices=("peak", "alloc", "live"), default="peak")
    parser.add_argument("--dir", default=".", help="store root (default: .)")


def run(args: argparse.Namespace) -> int:
    from memlens import fileformat
    from memlens.report import find_file, render
    from memlens.store import Store

    result = fileformat.read(Store(args.dir).resolve(args.run))
    file = find_file(result, args.file) if args.file else None
    render(result, sys.stdout, by=args.by, top=top_rows(args.top), file=file)
    return 0
