"""Wiring: every feature of :mod:`memlens_server.features` registered on a new server.

Handlers live in :mod:`memlens_server.features` (one module per feature). Each is thin: it
takes the current :class:`~memlens_server.index.Index` snapshot and the document, returns
early when there is nothing to show, and calls pure functions of :mod:`memlens_server.views`
whose records :mod:`memlens_server.convert` turns into LSP objects. A failing request handler
is logged and answers ``null``; it never takes the server down. Features depend on
:mod:`memlens_server.state` only; this module depends on them, nothing depends on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from memlens_server import protocol
from memlens_server.features import code_lens, commands, diagnostics, hover, inlay_hints, runs
from memlens_server.state import MemlensServer


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
    for feature in (runs, diagnostics, inlay_hints, hover, code_lens):
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
