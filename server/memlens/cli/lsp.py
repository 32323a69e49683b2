"""``memlens lsp``: the language server (LSP over stdio; ``--tcp PORT`` for debugging)."""

from __future__ import annotations

import argparse

HELP = "start the language server (LSP over stdio) for editors"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tcp", type=int, metavar="PORT", help="listen on TCP PORT (debugging)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address for --tcp (default: 127.0.0.1)"
    )


def run(args: argparse.Namespace) -> int:
    import importlib

    # Imported by name: the core package never imports the server statically.
    server_main = importlib.import_module("memlens_server.__main__")
    code: int = server_main.start(args.tcp, args.host)
    return code
