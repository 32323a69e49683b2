"""``python -m memlens_server [--tcp PORT] [--host HOST]``: start the language server."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence


def start(tcp: int | None = None, host: str = "127.0.0.1") -> None:
    from memlens_server.server import create_server

    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(levelname)s: %(message)s"
    )
    server = create_server()
    if tcp is not None:
        server.start_tcp(host, tcp)
    else:
        server.start_io()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memlens-server", description="memlens language server")
    parser.add_argument("--tcp", type=int, metavar="PORT", help="listen on TCP (debugging)")
    parser.add_argument("--host", default="127.0.0.1", help="address for --tcp")
    args = parser.parse_args(argv)
    start(args.tcp, args.host)
    return 0


if __name__ == "__main__":
    sys.exit(main())
