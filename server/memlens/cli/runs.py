"""``memlens runs``: list the runs of the store, or prune old ones."""

from __future__ import annotations

import argparse
import json
import sys

from memlens.cli.options import add_dir
from memlens.errors import MemlensError
from memlens.layout import printable
from memlens.query import run_entries
from memlens.report import duration_text
from memlens.store import Store
from memlens.units import fmt_bytes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        nargs="?",
        choices=("list", "prune"),
        default="list",
        help="list the runs, or prune old ones (default: list)",
    )
    parser.add_argument(
        "--keep",
        type=int,
        metavar="N",
        help="with prune: keep the N newest runs (and the baseline)",
    )
    parser.add_argument("--json", action="store_true", help="the list as JSON")
    add_dir(parser)


def run(args: argparse.Namespace) -> int:
    store = Store(args.dir)
    if args.action == "prune":
        if args.keep is None:
            raise MemlensError("runs prune needs --keep N")
        gone = store.prune(args.keep)
        print(
            f"memlens: removed {len(gone)} run(s), kept {len(store.run_files())}", file=sys.stderr
        )
        return 0
    if args.json:
        json.dump(run_entries(store), sys.stdout, indent=2)
        print()
        return 0
    entries = store.entries()
    latest, baseline = store.latest(), store.baseline()
    if not entries:
        print(f"memlens: no runs in {store.runs_dir}", file=sys.stderr)
        return 0

    rows = [("id", "started", "peak", "duration", "complete", "command", "")]
    for e in entries:
        marks = ", ".join(m for m, p in (("latest", latest), ("baseline", baseline)) if p == e.path)
        if e.info is None:
            rows.append(
                (printable(e.id), "?", "?", "?", "?", printable(f"unreadable: {e.error}"), marks)
            )
            continue
        rows.append(
            (
                printable(e.id),
                printable(e.info.started[:19].replace("T", " ")),
                fmt_bytes(e.info.peak_traced_bytes),
                duration_text(e.info),
                "yes" if e.info.complete else "no",
                printable(" ".join(e.info.command)),
                f"[{marks}]" if marks else "",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    for r in rows:
        cells = [r[i].rjust(widths[i]) if i in (2, 3) else r[i].ljust(widths[i]) for i in range(6)]
        print(("  ".join(cells) + "  " + r[6]).rstrip())
    return 0
