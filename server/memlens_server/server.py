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
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from memlens._version import __version__
from memlens_server import convert, transport
from memlens_server.background import CHUNK, StreamReader
from memlens_server.index import FileView, FolderState, Index, canonical
from memlens_server.settings import Settings
from memlens_server.staleness import LineMapping, MappingCache, Superseded

log = logging.getLogger("memlens_server")

_F = TypeVar("_F", bound=Callable[..., Any])
_I = TypeVar("_I")
_O = TypeVar("_O")


class Notices:
    """Rate limits for what the server tells the user, so that a problem that keeps coming
    back (a run file rewritten in place several times a second, a bad setting) is shown once
    in a while, not once per occurrence."""

    #: The same problem is shown again (window/showMessage) at most this often.
    SHOW_EVERY_S = 600.0
    #: ... and logged (window/logMessage) at most this often.
    LOG_EVERY_S = 60.0
    #: Whatever the problems, at most this many messages are shown per minute.
    MAX_SHOWN_PER_MINUTE = 3
    #: Keys remembered (oldest forgotten first).
    MAX_KEYS = 1024

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._shown: dict[str, float] = {}
        self._logged: dict[str, float] = {}
        self._recent: deque[float] = deque()

    def _due(self, table: dict[str, float], key: str, every: float) -> bool:
        now = self.clock()
        last = table.get(key)
        if last is not None and now - last < every:
            return False
        table.pop(key, None)
        table[key] = now
        while len(table) > self.MAX_KEYS:
            del table[next(iter(table))]
        return True

    def may_log(self, key: str) -> bool:
        return self._due(self._logged, key, self.LOG_EVERY_S)

    def may_show(self, key: str) -> bool:
        now = self.clock()
        while self._recent and now - self._recent[0] >= 60.0:
            self._recent.popleft()
        if len(self._recent) >= self.MAX_SHOWN_PER_MINUTE:
            return False
        if not self._due(self._shown, key, self.SHOW_EVERY_S):
            return False
        self._recent.append(now)
        return True


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
    version: int | None
    folder: FolderState
    view: FileView
    lines: list[str]
    mapping: LineMapping
    codec: PositionCodec


class MemlensServer(LanguageServer):
    """pygls server with memlens state (no module globals)."""

    def __init__(self) -> None:
        super().__init__(
            "memlens",
            __version__,
            protocol_cls=transport.MemlensProtocol,
            converter_factory=convert.converter_factory,
        )
        self.index = Index()
        self.settings = Settings()
        self.features = ClientFeatures()
        self.mappings = MappingCache()
        #: uri -> (key, {0-based line: hint}) of converted inlay hints (features.inlay_hints).
        self.hint_cache: dict[str, Any] = {}
        #: token -> (uri, run id) for inlayHint/resolve (hints carry [token, line] as data).
        self.hint_tokens: dict[int, tuple[str, str]] = {}
        self.hint_token_seq = 0
        self.notices = Notices()
        #: folder uri -> store signature seen by the last reload.
        self.signatures: dict[str, tuple[Any, ...]] = {}
        self.poll_interval = 1.0
        self.poll_task: asyncio.Task[None] | None = None
        self.reload_lock: asyncio.Lock | None = None
        #: Folder uris whose runs are being read on a thread right now.
        self.loading: set[str] = set()
        self.running: dict[str, asyncio.subprocess.Process] = {}
        self.background: set[asyncio.Task[None]] = set()
        #: uri -> the task publishing its diagnostics (a newer one replaces it).
        self.publishing: dict[str, asyncio.Task[None]] = {}

    # -- connection ------------------------------------------------------------------------
    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
        """Serve over stdio until ``exit`` or end of input; returns the exit code."""
        reader = StreamReader(stdin or sys.stdin.buffer)
        self.protocol.set_writer(_StdoutWriter(stdout or sys.stdout.buffer))
        return self._run(reader.read)

    def start_tcp(self, host: str, port: int) -> None:
        """Serve one client over TCP (debugging)."""

        async def main() -> None:
            connected: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
            connected = asyncio.get_running_loop().create_future()

            def on_connect(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
                if not connected.done():
                    connected.set_result((r, w))

            server = await asyncio.start_server(on_connect, host, port)
            async with server:
                reader, writer = await connected
                self.protocol.set_writer(writer)
                await transport.serve(
                    self.protocol,  # type: ignore[arg-type]
                    lambda: reader.read(CHUNK),
                    self._stop_event or threading.Event(),
                )

        self._run_main(main)

    def _run(self, read: Callable[[], Awaitable[bytes]]) -> int:
        async def main() -> None:
            await transport.serve(self.protocol, read, self._stop_event or threading.Event())  # type: ignore[arg-type]

        return self._run_main(main)

    def _run_main(self, main: Callable[[], Awaitable[None]]) -> int:
        self._stop_event = threading.Event()
        code = 0
        try:
            asyncio.run(main())  # type: ignore[arg-type]
        except SystemExit as exc:  # the exit notification
            code = exc.code if isinstance(exc.code, int) else 0
        except (KeyboardInterrupt, BrokenPipeError):
            code = 1
        finally:
            self._stop_event.set()
        return code

    # -- helpers used by features ------------------------------------------------------------
    def document(self, uri: str) -> TextDocument | None:
        if uri not in self.workspace.text_documents:
            return None
        return self.workspace.get_text_document(uri)

    async def context(self, uri: str) -> DocContext | None:
        """The document, its figures and line mapping; None when nothing to show.

        The re-mapping runs off the event loop; when the document or the loaded runs change
        meanwhile, the request is served from the newer state (a few tries, then None)."""
        path = to_fs_path(uri)
        if path is None:
            return None
        key = canonical(path)
        for _ in range(3):
            found = self.index.lookup(key)
            doc = self.document(uri)
            if found is None or doc is None:
                return None
            folder, view = found
            version, codec = doc.version, doc.position_codec
            try:
                lines, mapping = await self.mappings.get(uri, version, view, doc.source)
            except Superseded:
                continue
            return DocContext(uri, version, folder, view, lines, mapping, codec)
        return None

    def log_message(self, text: str, level: str = "info") -> None:
        py_level = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO}
        log.log(py_level.get(level, logging.DEBUG), "%s", text)
        with contextlib.suppress(Exception):  # no connection yet
            self.window_log_message(convert.log(text, level))

    def warn(self, key: str, text: str, *, error: bool = False) -> None:
        """Show ``text`` as a window message when ``key`` comes up, and log it; both rate
        limited per key (:class:`Notices`)."""
        if self.notices.may_log(key):
            self.log_message(text, "error" if error else "warning")
        if self.notices.may_show(key):
            with contextlib.suppress(Exception):  # no connection yet
                self.window_show_message(convert.message(text, error=error))

    def each(self, what: str, items: Iterable[_I], make: Callable[[_I], _O]) -> list[_O]:
        """``make(item)`` for each item; an item that fails is left out (and logged), so one
        bad record of a run never empties a whole response."""
        out: list[_O] = []
        for item in items:
            try:
                out.append(make(item))
            except Exception as exc:  # noqa: BLE001 - isolated per item
                if self.notices.may_log(f"bad-item:{what}"):
                    self.log_message(f"memlens: left out a {what} ({exc!r})", "warning")
        return out


class _StdoutWriter:
    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.flush()

    def write(self, data: bytes) -> None:
        self.stream.write(data)
        self.stream.flush()


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
