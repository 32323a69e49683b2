"""``memlens annotate``: one source file with the figures beside each line."""

from __future__ import annotations

import argparse
import sys

from memlens.cli.options import add_by, add_dir, add_run_spec
from memlens.report import find_file, listing
from memlens.runfile import reader
from memlens.store import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file", help="the source file, as profiled (a path, or the end of one: app/main.py)"
    )
    add_run_spec(parser)
    add_by(parser)
    add_dir(parser)


def run(args: argparse.Namespace) -> int:
    result = reader.read(Store(args.dir).resolve(args.run))
    file = find_file(result, args.file)
    rows = listing(result, file, args.by, whole=True)
    width = len(str(max((r.line for r in rows), default=1)))
    for r in rows:
        label = f"  # {r.label}" if r.label else ""
        sys.stdout.write(f"{r.line:>{width}}  {r.text}{label}".rstrip() + "\n")
    return 0
