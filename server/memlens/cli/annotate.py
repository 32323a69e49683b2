"""``memlens annotate``: one source file with the figures beside each line."""

from __future__ import annotations

import argparse
import sys

HELP = "print a source file with each line's figures beside it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the source file (as profiled)")
    parser.add_argument("run", nargs="?", default="latest", help="path, run id, latest or baseline")
    parser.add_argument("--by", choices=("peak", "alloc", "live"), default="peak")
    parser.add_argument("--dir", default=".", help="store root (default: .)")


def run(args: argparse.Namespace) -> int:
    from memlens import fileformat
    from memlens.report import find_file, listing
    from memlens.store import Store

    result = fileformat.read(Store(args.dir).resolve(args.run))
    file = find_file(result, args.file)
    rows = listing(result, file, args.by, whole=True)
    width = len(str(max((r.line for r in rows), default=1)))
    for r in rows:
        label = f"  # {r.label}" if r.label else ""
        sys.stdout.write(f"{r.line:>{width}}  {r.text}{label}".rstrip() + "\n")
    return 0
