"""``memlens diff``: what changed per line and per function between two runs."""

from __future__ import annotations

import argparse
import sys

HELP = "compare two runs per line and function (default: baseline vs latest)"

_FIG = {"peak": "peak_bytes", "alloc": "alloc_bytes", "live": "live_bytes"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", nargs="?", default="baseline", help="old run (default: baseline)")
    parser.add_argument("b", nargs="?", default="latest", help="new run (default: latest)")
    parser.add_argument("--by", choices=tuple(_FIG), default="peak")
    parser.add_argument("--top", type=int, default=20, metavar="N")
    parser.add_argument("--json", action="store_true", help="every line and function, as JSON")
    parser.add_argument("--dir", default=".", help="store root (default: .)")


def run(args: argparse.Namespace) -> int:
    from memlens import fileformat
    from memlens.diff import diff_runs
    from memlens.model import FIGURES
    from memlens.store import Store

    store = Store(args.dir)
    path_a, path_b = store.resolve(args.a), store.resolve(args.b)
    d = diff_runs(fileformat.read(path_a), fileformat.read(path_b))
    if args.json:
        import json

        doc = {
            "a": str(path_a),
            "b": str(path_b),
            "lines": [
                {
                    "file": ld.file,
                    "line_a": ld.line_a,
                    "line_b": ld.line_b,
                    "change": {f: ld.change(f) for f in FIGURES},
                    "relative": {f: ld.relative(f) for f in FIGURES},
                }
                for ld in d.lines
            ],
            "functions": [
                {
                    "file": fd.file,
                    "qualname": fd.qualname,
                    "change": {
                        f: fd.change(f) for f in ("alloc_bytes", "live_bytes", "peak_bytes")
                    },
                    "relative": {
                        f: fd.relative(f) for f in ("alloc_bytes", "live_bytes", "peak_bytes")
                    },
                }
                for fd in d.functions
            ],
        }
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    _print_table(d, _FIG[args.by], args.by, args.top, path_a.stem, path_b.stem)
    return 0


def _print_table(d: object, attr: str, by: str, top: int, name_a: str, name_b: str) -> None:
    from memlens.diff import RunDiff
    from memlens.report import display_path
    from memlens.units import fmt_bytes, fmt_delta_bytes, fmt_percent

    assert isinstance(d, RunDiff)
    changed = [ld for ld in d.lines if ld.change(attr) != 0]
    changed.sort(key=lambda ld: (-abs(ld.change(attr)), ld.file, ld.line_b or ld.line_a or 0))
    print(f"memlens: {by} per line, {name_a} -> {name_b}")
    if not changed:
        print("memlens: no line changed")
        return
    rows = [("line", "before", "after", "change", "")]
    for ld in changed[:top]:
        where = f"{display_path(ld.file)}:{ld.line_b or ld.line_a}"
        if ld.line_a and ld.line_b and ld.line_a != ld.line_b:
            where += f" (was {ld.line_a})"
        before = fmt_bytes(ld.a.figure(attr)) if ld.a else "-"
        after = fmt_bytes(ld.b.figure(attr)) if ld.b else "-"
        rows.append(
            (where, before, after, fmt_delta_bytes(ld.change(attr)), fmt_percent(ld.relative(attr)))
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print(
            "  "
            + "  ".join(
                r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i]) for i in range(5)
            )
        )
    funcs = [fd for fd in d.functions if fd.change(attr) != 0]
    funcs.sort(key=lambda fd: -abs(fd.change(attr)))
    if funcs:
        print("\nfunctions (inclusive):")
        for fd in funcs[:top]:
            print(
                f"  {display_path(fd.file)}::{fd.qualname}  {fmt_delta_bytes(fd.change(attr))}"
                f" ({fmt_percent(fd.relative(attr))})"
            )
