"""The language server's state, and the helpers every feature uses. No feature logic here.

:class:`MemlensServer` holds everything the features share (the loaded runs, settings, client
capabilities, caches, running programs) on one instance (no module globals). Features
(:mod:`memlens_lsp.features`) depend on this module only; :mod:`memlens_lsp.server`
wires them to LSP methods, and :mod:`memlens_lsp.transport` runs the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from memlens._version import __version__
from memlens.launch import ProfiledProgram
from memlens.source import text_digest
from memlens_lsp import convert, transport
from memlens_lsp.index import FileView, FolderState, Index, canonical
from memlens_lsp.notebooks import NotebookRuns
from memlens_lsp.settings import Settings
from memlens_lsp.staleness import LineMapping, MappingCache, Superseded

log = logging.getLogger("memlens_lsp")

#: Seconds a request made before the first load of the runs waits for it.
FIRST_LOAD_WAIT_S = 25.0

#: Background work (leak warnings) goes on when the client has been quiet this long (seconds:
#: no message coming in, nothing to answer) ...
CLIENT_QUIET_S = 0.2
#: ... or, while the client keeps asking, once this long has passed since the work was asked
#: for, whenever no background work (of any document) has run for ``BUSY_MAX_WAIT_S``: a
#: slice of a few milliseconds that often, a small share of the CPU, so that it still ends.
BACKGROUND_DEFER_S = 2.0
BUSY_MAX_WAIT_S = 0.1
#: Two slices of background work (of two documents) never run without a turn of the event loop
#: between them: the second waits while the first ended less than this long ago.
_SLICE_GAP_S = 0.001

#: An LSP method a feature handles: (method, handler(ls, params), registration options or
#: None). Each feature module lists its own in ``METHODS``; :mod:`memlens_lsp.server`
#: registers them.
Method = tuple[str, Callable[..., Any], Any]

#: Notebook documents whose Python cells the server is told about (LSP 3.17), for their
#: cells' figures (features.notebooks).
NOTEBOOK_SYNC = lsp.NotebookDocumentSyncOptions(
    notebook_selector=[
        lsp.NotebookDocumentFilterWithCells(
            notebook="*", cells=[lsp.NotebookCellLanguage(language="python")]
        )
    ]
)

_F = TypeVar("_F", bound=Callable[..., Any])
_I = TypeVar("_I")
_O = TypeVar("_O")


def uri_path(uri: str) -> str | None:
    """The canonical path (:func:`memlens_lsp.index.canonical`) of a ``file:`` URI, with its
    percent escapes decoded (``%20``, ``%C3%BC``): the one way the server turns a document's
    or a folder's URI into the path its figures are keyed by. None for other schemes, and for
    a name no file can have (a NUL byte, beyond the system's limits)."""
    if not uri.startswith("file:"):
        return None
    try:
        path = to_fs_path(uri)
        return None if path is None else canonical(path)
    except (ValueError, OSError):
        return None


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
    related_information: bool = False

    @classmethod
    def from_capabilities(cls, caps: lsp.ClientCapabilities) -> ClientFeatures:
        ws = caps.workspace
        window = caps.window
        publish = caps.text_document.publish_diagnostics if caps.text_document else None
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
            related_information=bool(publish and publish.related_information),
        )


@dataclass(frozen=True, slots=True)
class DocContext:
    """Everything a request needs about one open document that has figures."""

    uri: str
    path: str  #: the document's canonical path
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
            notebook_document_sync=NOTEBOOK_SYNC,
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
        self.running: dict[str, ProfiledProgram] = {}
        self.background: set[asyncio.Task[None]] = set()
        #: uri -> the task publishing its diagnostics (a newer one replaces it).
        self.publishing: dict[str, asyncio.Task[None]] = {}
        #: When (time.monotonic) the last slice of background work ended (background_turn).
        self.background_at = 0.0
        #: The moment hints, hovers and lenses show (a spec of memlens.moment, set with
        #: memlens.setMoment), or None: the run's own figures.
        self.moment: str | None = None
        #: Set once the runs have been loaded after ``initialized`` (or that load gave up):
        #: requests made before wait for it, so that a client that asks at once (Neovim asks
        #: for lenses as it opens a file) gets the figures, not an empty answer.
        self.first_load: asyncio.Event | None = None
        #: Notebook documents' cells and their runs (features.notebooks).
        self.notebooks = NotebookRuns()
        self.notebook_poll: asyncio.Task[None] | None = None

    # -- helpers used by features ------------------------------------------------------------
    def document(self, uri: str) -> TextDocument | None:
        """The open document ``uri`` names, however the client escapes it (pygls keeps
        documents under their URI with percent escapes decoded), or None: the one way
        features look a document up."""
        documents: dict[str, TextDocument] = self.workspace.text_documents
        return documents.get(uri) or documents.get(unquote(uri))

    def open_uris(self) -> list[str]:
        """The URIs of the open documents, as the client sent them."""
        return [doc.uri for doc in self.workspace.text_documents.values()]

    async def context(self, uri: str) -> DocContext | None:
        """The document, its figures and line mapping; None when nothing to show.

        The re-mapping runs off the event loop; when the document or the loaded runs change
        meanwhile, the request is served from the newer state (a few tries, then None)."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        path_key = uri_path(uri)
        if path_key is None and notebook is None:
            return None
        if self.first_load is not None and not self.first_load.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.first_load.wait(), FIRST_LOAD_WAIT_S)
        key = path_key or ""
        for _ in range(3):
            doc = self.document(uri)
            if doc is None:
                return None
            digest = functools.partial(text_digest, doc.source)
            if notebook is not None:  # a notebook's cell: its last profiled run
                found = await self._cell(notebook.uri, uri, digest)
            else:
                found = self.index.lookup(key, digest)
            if found is None:
                return None
            folder, view = found
            if notebook is not None:
                key = os.path.normcase(os.path.normpath(view.source.path))
            version, codec = doc.version, doc.position_codec
            try:
                lines, mapping = await self.mappings.get(uri, version, view, doc.source)
            except Superseded:
                continue
            return DocContext(uri, key, version, folder, view, lines, mapping, codec)
        return None

    async def _cell(
        self, notebook_uri: str, uri: str, digest: Callable[[], str]
    ) -> tuple[FolderState, FileView] | None:
        path = to_fs_path(notebook_uri)
        folder = self.index.folder_for(canonical(path)) if path is not None else None
        return await self.notebooks.lookup(
            notebook_uri,
            path,
            uri,
            digest,
            folder.root if folder is not None else None,
            lambda root: from_fs_path(str(root)) or root.as_uri(),
        )

    async def background_turn(self, since: float) -> None:
        """A turn of the event loop for background work (leak warnings) asked for at
        ``since`` (``time.monotonic()``), before its next slice: the client goes first. Until
        :data:`BACKGROUND_DEFER_S` after ``since`` the work waits for the client to be quiet
        (:data:`CLIENT_QUIET_S`: no message coming in, nothing to answer); after that, for the
        same quiet or until no background slice has run for :data:`BUSY_MAX_WAIT_S`. So a
        document's first hints, or a burst of requests, neither wait for nor share much of the
        CPU with another document's warnings. The caller calls :meth:`background_done` after
        its slice."""
        protocol = self.protocol
        while True:
            await asyncio.sleep(0)
            if not isinstance(protocol, transport.MemlensProtocol):
                return
            now = time.monotonic()
            if now - self.background_at < _SLICE_GAP_S:
                continue  # another document's slice just ran: a turn of the loop first
            left = since + BACKGROUND_DEFER_S - now
            if left <= 0:  # waited long enough: a slice now and then, whatever the client does
                left = self.background_at + BUSY_MAX_WAIT_S - now
                if left <= 0:
                    return
            if await protocol.client_idle(CLIENT_QUIET_S, left):
                return

    def background_done(self) -> None:
        """Note that a slice of background work has just run."""
        self.background_at = time.monotonic()

    def notify_json(self, method: str, params: Any) -> None:
        """Send notification ``method`` with ``params`` (JSON values) as they are, skipping
        lsprotocol's conversion."""
        protocol = self.protocol
        assert isinstance(protocol, transport.MemlensProtocol)
        protocol.notify_prebuilt(method, convert.prebuilt(params))

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


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection in the block: for a request that makes thousands of
    short-lived, acyclic objects (a whole file's hints). Those allocations would otherwise
    set off collections of the server's whole heap (the loaded runs) inside the request, which
    can take longer than the request itself; what the block leaves alive is collected later."""
    if not gc.isenabled():  # (nested, or paused by another thread: that one turns it back on)
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


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
