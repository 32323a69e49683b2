"""``memlens flow``: the call tree as a Graphviz flow graph."""

from __future__ import annotations

import argparse
import sys

from memlens.cli.options import add_by, add_dir, add_run_spec
from memlens.errors import MemlensError
from memlens.flow import compare_graphs, to_dot
from memlens.runfile import reader
from memlens.store import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_spec(parser)
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="RUN",
        help="compare these runs instead: each box shows every run's figures",
    )
    parser.add_argument("--dot", metavar="OUT.dot", help="write the graph here (default: stdout)")
    add_by(parser, default="alloc", gpu=False)  # the call tree holds host memory only
    parser.add_argument(
        "--min-node-fraction",
        type=float,
        default=0.01,
        metavar="F",
        help="drop boxes whose cumulative usage is below F of the total (default: 0.01)",
    )
    parser.add_argument(
        "--min-edge-fraction",
        type=float,
        default=0.05,
        metavar="F",
        help="drop arrows below F of their caller's cumulative usage (default: 0.05)",
    )
    add_dir(parser)


def run(args: argparse.Namespace) -> int:
    store = Store(args.dir)
    specs = args.compare or [args.run]
    paths = [store.resolve(s) for s in specs]
    graphs, lines = compare_graphs([reader.read(p) for p in paths], args.by)
    text = to_dot(
        graphs,
        names=[p.stem for p in paths],
        min_node_fraction=args.min_node_fraction,
        min_edge_fraction=args.min_edge_fraction,
        lines=lines,
    )
    if args.dot:
        try:
            with open(args.dot, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise MemlensError(f"cannot write {args.dot}: {exc.strerror or exc}") from None
        print(f"memlens: flow graph written to {args.dot}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0
