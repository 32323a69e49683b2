"""``memlens mcp``: the MCP server over the workspace's runs, for coding agents."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from memlens.cli.options import add_dir
from memlens.errors import MemlensError
from memlens.layout import printable

#: The SDK's requirement when memlens's own metadata cannot say it (pyproject.toml's ``mcp``
#: extra is the one place it is written; tests/mcp_server/test_mcp_e2e.py checks the two).
SDK_REQUIREMENT = "mcp>=2.3,<3"


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
        missing = exc.name or ""
        if missing == "memlens" or missing.startswith(("memlens.", "memlens_")):
            raise  # memlens itself is broken: not a missing extra
        # The SDK or one of its own dependencies (anyio, pydantic, uvicorn...) is missing.
        raise MemlensError(missing_sdk(missing.split(".")[0])) from None
    server.serve(args.dir, allow_run=args.allow_run, http=args.http, port=args.port)
    return 0


def missing_sdk(module: str) -> str:
    """Why ``memlens mcp`` cannot start without the module ``module``, and the command that
    installs what it needs into this interpreter (memlens is not on the package index: the
    SDK's own requirement, as memlens's ``mcp`` extra names it, always installs)."""
    return (
        f"the MCP server needs the MCP Python SDK, which is not installed (no module named "
        f"{module!r}): {printable(sys.executable)} -m pip install '{sdk_requirement()}'"
    )


def sdk_requirement() -> str:
    """The requirement of memlens's ``mcp`` extra, from the installed metadata."""
    try:
        requires = metadata.requires("memlens") or []
    except metadata.PackageNotFoundError:
        return SDK_REQUIREMENT
    for requirement in requires:
        spec, _, marker = requirement.partition(";")
        if marker.replace("'", '"').replace(" ", "") == 'extra=="mcp"':
            return spec.strip().replace(" ", "")
    return SDK_REQUIREMENT
