"""The memlens language server: state on one instance, every feature registered here.

Handlers live in :mod:`memlens_server.features` (one module per feature). Each is thin: it
takes the current :class:`~memlens_server.index.Index` snapshot and the document, returns
early when there is nothing to show, and calls pure functions of :mod:`memlens_server.views`
whose records :mod:`memlens_server.convert` turns into LSP objects. A failing request handler
is logged and answers ``null``; it never takes the server down.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from memlens._version import __version__
from memlens_server import convert
from memlens_server.index import FileView, FolderState, Index, canonical
from memlens_server.settings import Settings
from memlens_server.staleness import LineMapping, MappingCache

log = logging.getLogger("memlens_server")

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class ClientFeatures:
    """The client capabilities the server acts on, parsed once at initialize."""

    inlay_hint_refresh: bool = False
    code_lens_refresh: bool = False
    watched_files_dynamic: bool = False
    configuration: bool = False
    work_done_progress: bool = False

    @classmethod
    def from_capabilities(cls, caps: lsp.ClientCapabilities) -> ClientFeatures:
        ws = caps.workspace
        window = caps.window
        return cls(
            inlay_hint_refresh=bool(ws and ws.inlay_hint and ws.inlay_hint.refresh_support),
            code_lens_refresh=bool(ws and ws.code_lens and ws.code_lens.refresh_support),
            watched_files_dynamic=bool(
                ws
                and ws.did_change_watched_files
                and ws.did_change_watched_files.dynamic_registration
            ),
            configuration=bool(ws and ws.configuration),
            work_done_progress=bool(window and window.work_done_progress),
        )


@dataclass(frozen=True, slots=True)
class DocContext:
    """Everything a request needs about one open document that has figures."""

    uri: str
    folder: FolderState
    view: FileView
    lines: list[str]
    mapping: LineMapping
    codec: PositionCodec


class MemlensServer(LanguageServer):
    """pygls server with memlens state (no module globals)."""

    def __init__(self) -> None:
        super().__init__("memlens", __version__, converter_factory=convert.converter_factory)
        self.index = Index()
        self.settings = Settings()
        self.features = ClientFeatures()
        self.mappings = MappingCache()
        #: uri -> (key, {0-based line: hint}) of converted inlay hints (features.inlay_hints).
        self.hint_cache: dict[str, Any] = {}
        #: token -> (uri, run id) for inlayHint/resolve (hints carry [token, line] as data).
        self.hint_tokens: dict[int, tuple[str, str]] = {}
        self.hint_token_seq = 0
        #: (path, mtime) of run files already reported as unreadable.
        self.reported: set[tuple[str, int]] = set()
        self.shown_problems: set[str] = set()
        #: folder uri -> store signature seen by the last reload.
        self.signatures: dict[str, tuple[Any, ...]] = {}
        self.poll_interval = 1.0
        self.poll_task: asyncio.Task[None] | None = None
        self.reload_lock: asyncio.Lock | None = None
        self.running: dict[str, asyncio.subprocess.Process] = {}
        self.background: set[asyncio.Task[None]] = set()

    # -- helpers used by features ------------------------------------------------------------
    def document(self, uri: str) -> TextDocument | None:
        if uri not in self.workspace.text_documents:
            return None
        return self.workspace.get_text_document(uri)

    def context(self, uri: str) -> DocContext | None:
        """The document, its figures and line mapping; None when nothing to show."""
        path = to_fs_path(uri)
        if path is None:
            return None
        found = self.index.lookup(canonical(path))
        if found is None:
            return None
        folder, view = found
        doc = self.document(uri)
        if doc is None:
            return None
        lines, mapping = self.mappings.get(uri, doc.version, view, doc.source)
        return DocContext(uri, folder, view, lines, mapping, doc.position_codec)

    def log_message(self, text: str, level: str = "info") -> None:
        py_level = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO}
        log.log(py_level.get(level, logging.DEBUG), "%s", text)
        with contextlib.suppress(Exception):  # no connection yet
            self.window_log_message(convert.log(text, level))

    def show_once(self, key: str, text: str, *, error: bool = False) -> None:
        """Show ``text`` as a window message the first time ``key`` comes up; always log."""
        self.log_message(text, "error" if error else "warning")
        if key in self.shown_problems:
            return
        self.shown_problems.add(key)
        self.window_show_message(convert.message(text, error=error))


def guarded(fn: _F) -> _F:
    """Run a request handler; on an exception log it and answer null (failures isolated)."""

    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(ls: MemlensServer, *args: Any) -> Any:
            try:
                return await fn(ls, *args)
            except Exception:
                log.exception("memlens: %s failed", fn.__qualname__)
                ls.log_message(f"memlens: {fn.__qualname__} failed (see the server log)", "error")
                return None

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    def wrapper(ls: MemlensServer, *args: Any) -> Any:
        try:
            return fn(ls, *args)
        except Exception:
            log.exception("memlens: %s failed", fn.__qualname__)
            ls.log_message(f"memlens: {fn.__qualname__} failed (see the server log)", "error")
            return None

    return wrapper  # type: ignore[return-value]


def create_server() -> MemlensServer:
    """A new server with every feature registered (the one place features are wired)."""
    from memlens_server import protocol
    from memlens_server.features import code_lens, commands, diagnostics, hover, inlay_hints, runs

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

    # Lifecycle, settings and the run store.
    on(lsp.INITIALIZE, runs.initialize)
    on(lsp.INITIALIZED, runs.initialized)
    on(lsp.SHUTDOWN, runs.shutdown)
    on(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION, runs.did_change_configuration)
    on(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, runs.did_change_watched_files)
    on(lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, runs.did_change_workspace_folders)

    # Documents -> diagnostics (push).
    on(lsp.TEXT_DOCUMENT_DID_OPEN, diagnostics.did_open)
    on(lsp.TEXT_DOCUMENT_DID_CHANGE, diagnostics.did_change)
    on(lsp.TEXT_DOCUMENT_DID_CLOSE, diagnostics.did_close)

    # Requests.
    on(lsp.TEXT_DOCUMENT_INLAY_HINT, guarded(inlay_hints.inlay_hints), inlay_hints.OPTIONS)
    on(lsp.INLAY_HINT_RESOLVE, guarded(inlay_hints.resolve))
    on(lsp.TEXT_DOCUMENT_HOVER, guarded(hover.hover))
    on(lsp.TEXT_DOCUMENT_CODE_LENS, guarded(code_lens.code_lens), code_lens.OPTIONS)

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
