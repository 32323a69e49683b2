"""``memlens baseline``: choose the run that diffs and the editor compare against."""

from __future__ import annotations

import argparse
import sys

from memlens.cli.options import add_dir, add_run_spec
from memlens.layout import printable
from memlens.runfile import reader
from memlens.store import Store

HELP = "set, show or clear the baseline run (`baseline set RUN`)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("set", "show", "clear"),
        help="set RUN as the baseline, show it, or clear it",
    )
    add_run_spec(parser)
    add_dir(parser)


def run(args: argparse.Namespace) -> int:
    store = Store(args.dir)
    if args.action == "set":
        path = store.resolve(args.run)
        reader.read_info(path)  # refuse an unreadable run with a clear message
        adopted = store.adopt(path)  # a run from elsewhere is copied into the store
        store.set_pointer("baseline", adopted)
        print(f"memlens: baseline set to {printable(adopted.stem)}", file=sys.stderr)
    elif args.action == "clear":
        store.clear_pointer("baseline")
        print("memlens: baseline cleared", file=sys.stderr)
    else:
        path = store.resolve("baseline")
        info = reader.read_info(path)
        started = info.started[:19].replace("T", " ")
        print(printable(f"{path.stem}  {started}  {' '.join(info.command)}"))
        print(printable(str(path)))
    return 0
