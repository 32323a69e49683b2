"""``memlens mcp``: the MCP server over the workspace's runs, for coding agents."""

from __future__ import annotations

import argparse

from memlens.cli.options import add_dir
from memlens.errors import MemlensError

HELP = "serve the runs to coding agents (MCP over stdio; --http for streamable HTTP)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_dir(parser)
    parser.add_argument(
        "--allow-run",
        action="store_true",
        help="let agents run scripts of the workspace under memlens (profile_script) and attach "
        "to running processes (attach_process)",
    )
    parser.add_argument(
        "--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio"
    )
    parser.add_argument(
        "--port", type=int, default=8765, help="port for --http (default: 8765; 0: any free port)"
    )


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise MemlensError("--port must be between 0 and 65535")
    try:
        # The MCP SDK is an optional extra (memlens[mcp]): loaded when `memlens mcp` starts.
        from memlens_mcp import server  # noqa: PLC0415 - the optional SDK, only here
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise MemlensError(
            "the MCP server needs the MCP Python SDK, which is not installed: "
            "pip install 'memlens[mcp]'"
        ) from None
    server.serve(args.dir, allow_run=args.allow_run, http=args.http, port=args.port)
    return 0
