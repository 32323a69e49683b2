"""``memlens baseline``: choose the run that diffs and the editor compare against."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memlens.cli.options import add_dir, add_run_spec
from memlens.layout import KINDS, pointer_name, printable
from memlens.runfile import reader
from memlens.store import Store, warn


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("set", "show", "clear"),
        help="set RUN as the baseline, show it, or clear it",
    )
    add_run_spec(parser)
    parser.add_argument(
        "--kind",
        choices=KINDS,
        help="show or clear only the baseline of program runs or of test runs (default: both); "
        "`set` sets the baseline of RUN's kind",
    )
    add_dir(parser)


def run(args: argparse.Namespace) -> int:
    store = Store(args.dir)
    if args.action == "set":
        path = store.resolve(args.run)
        reader.read_info(path)  # refuse an unreadable run with a clear message
        adopted = store.adopt(path)  # a run from elsewhere is copied into the store
        kind = store.set_baseline(adopted)
        print(f"memlens: baseline of {kind} runs set to {printable(adopted.stem)}", file=sys.stderr)
    elif args.action == "clear":
        kinds = [args.kind] if args.kind else list(KINDS)
        for kind in kinds:
            store.clear_pointer(pointer_name("baseline", kind))
        print(f"memlens: baseline of {' and '.join(kinds)} runs cleared", file=sys.stderr)
    else:
        problems: list[tuple[Path, str]] = []
        quiet = Store(args.dir, on_problem=lambda path, why: problems.append((path, why)))
        shown = 0
        for kind in [args.kind] if args.kind else list(KINDS):
            found = quiet.baseline(kind)
            if found is None:
                continue
            info = reader.read_info(found)
            started = info.started[:19].replace("T", " ")
            which = "  (baseline of test runs)" if kind == "tests" else ""
            print(printable(f"{found.stem}  {started}  {' '.join(info.command)}{which}"))
            print(printable(str(found)))
            shown += 1
        if not shown:  # one line: why (an ignored pointer, or none set)
            store.resolve("baseline" if args.kind != "tests" else "baseline-tests")
        for path, why in dict.fromkeys(problems):
            warn(path, why)
    return 0
