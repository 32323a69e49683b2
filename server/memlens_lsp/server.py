"""Wiring: every feature of :mod:`memlens_lsp.features` registered on a new server.

Handlers live in :mod:`memlens_lsp.features` (one module per feature). Each is thin: it
takes the current :class:`~memlens_lsp.index.Index` snapshot and the document, returns
early when there is nothing to show, and calls pure functions of :mod:`memlens_lsp.views`
whose records :mod:`memlens_lsp.convert` turns into LSP objects. A failing request handler
is logged and answers ``null``; it never takes the server down. Features depend on
:mod:`memlens_lsp.state` only; this module depends on them, and only ``memlens lsp``
(:mod:`memlens.cli.lsp`) depends on it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from memlens_lsp import protocol, transport
from memlens_lsp.features import (
    code_lens,
    commands,
    diagnostics,
    hover,
    inlay_hints,
    notebooks,
    runs,
)
from memlens_lsp.state import MemlensServer


def create_server() -> MemlensServer:
    """A new server with every feature registered (the one place features are wired)."""
    ls = MemlensServer()

    def on(method: str, handler: Callable[..., Any], options: Any = None) -> None:
        if asyncio.iscoroutinefunction(handler):

            async def bound_async(params: Any) -> Any:
                return await handler(ls, params)

            ls.feature(method, options)(bound_async)
        else:

            def bound(params: Any) -> Any:
                return handler(ls, params)

            ls.feature(method, options)(bound)

    # LSP methods: each feature lists the ones it handles (requests are guarded there).
    for feature in (runs, diagnostics, inlay_hints, hover, code_lens, notebooks):
        for method, handler, options in feature.METHODS:
            on(method, handler, options)

    # Commands (workspace/executeCommand).
    for name, handler in commands.HANDLERS.items():
        assert name in protocol.COMMANDS
        ls.command(name)(_command(handler))
    return ls


def _command(handler: Callable[..., Any]) -> Callable[..., Any]:
    # pygls passes the server as the parameter named ``ls`` and the command's arguments,
    # unconverted, as ``*args``.
    async def run_command(ls: MemlensServer, *args: object) -> Any:
        return await handler(ls, *args)

    run_command.__name__ = handler.__name__
    return run_command


def serve(tcp: int | None = None, host: str = "127.0.0.1") -> int:
    """Serve until ``exit`` (over stdio, or on ``host:tcp``); returns the exit code (0 after
    ``shutdown``, else 1)."""
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
