"""``memlens baseline``: choose the run that diffs and the editor compare against."""

from __future__ import annotations

import argparse
import sys

from memlens.cli import add_dir, add_run_spec

HELP = "set, show or clear the baseline run (`baseline set RUN`)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("set", "show", "clear"),
        help="set RUN as the baseline, show it, or clear it",
    )
    add_run_spec(parser, what="with set: ")
    add_dir(parser)


def run(args: argparse.Namespace) -> int:
    from memlens import fileformat
    from memlens.store import Store

    store = Store(args.dir)
    if args.action == "set":
        path = store.resolve(args.run)
        fileformat.read_info(path)  # refuse an unreadable run with a clear message
        store.set_pointer("baseline", path.resolve())
        print(f"memlens: baseline set to {path.stem}", file=sys.stderr)
    elif args.action == "clear":
        store.clear_pointer("baseline")
        print("memlens: baseline cleared", file=sys.stderr)
    else:
        path = store.resolve("baseline")
        info = fileformat.read_info(path)
        print(f"{path.stem}  {info.started[:19].replace('T', ' ')}  {' '.join(info.command)}")
        print(path)
    return 0
