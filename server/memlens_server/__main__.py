"""``python -m memlens_server [--tcp PORT] [--host HOST]``: start the language server."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence


def start(tcp: int | None = None, host: str = "127.0.0.1") -> int:
    """Serve until ``exit``; returns the exit code (0 after ``shutdown``, else 1)."""
    import os
    import threading

    from memlens_server import transport
    from memlens_server.server import create_server

    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(levelname)s: %(message)s"
    )
    server = create_server()
    if tcp is not None:
        code = transport.serve_tcp(server, host, tcp)
    else:
        code = transport.serve_stdio(server)
    # Work still running on a thread (a read stuck on a FIFO in a hostile workspace) must not
    # keep the process alive after `exit`: leave without waiting for it.
    main = threading.main_thread()
    if any(t is not main and t.is_alive() and not t.daemon for t in threading.enumerate()):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def build_parser() -> argparse.ArgumentParser:
    """The options of ``memlens lsp`` (:mod:`memlens.cli.lsp`: defined once)."""
    from memlens.cli import lsp

    parser = argparse.ArgumentParser(prog="memlens-server", description=lsp.HELP)
    lsp.add_arguments(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return start(args.tcp, args.host)


if __name__ == "__main__":
    sys.exit(main())
