"""``memlens lsp``: the language server (LSP over stdio; ``--tcp PORT`` for debugging)."""

from __future__ import annotations

import argparse

from memlens_lsp.server import serve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tcp", type=int, metavar="PORT", help="listen on TCP PORT (debugging)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address for --tcp (default: 127.0.0.1)"
    )


def run(args: argparse.Namespace) -> int:
    return serve(args.tcp, args.host)
