"""The JSON-RPC connection: framing, dispatch, and what pygls leaves unanswered or retained.

pygls's own read loop has three failure modes this server cannot accept from an editor that
misbehaves once (or from a fuzzer):

- a header it cannot parse (``Content-Length: abc``) leaves it out of step with the stream
  for good: each later body is read as a header line, so the server never answers again;
- a request whose parameters do not fit the method's shape (or whose body is not JSON) is
  logged and dropped: the client waits for an answer forever;
- a response it cannot structure (``workspace/configuration`` answered with ``null``) leaves
  the server's own request pending forever.

:func:`serve` replaces that loop: it reads frames from a byte stream, finds its footing again
after a bad header (at the next ``Content-Length:``), bounds the size of a body, answers every
request (a JSON-RPC error when it cannot be handled: parse error, invalid request, invalid
params, shutting down) and fails the pending request of a malformed response.

:class:`MemlensProtocol` also stops a leak in pygls 2.x: it keeps the future of every
notification handled by a generator (pygls's built-in ``didOpen``/``didChange``/``didClose``
handlers) or a coroutine in ``_request_futures`` under a fresh UUID, and only requests ever
remove theirs; each ``didOpen``/``didClose`` pair retained ~4 KB and each ``didChange``
~2 KB for the server's life. Here a handler's future leaves the table when it is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any, BinaryIO

from cattrs.errors import ClassValidationError
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from memlens_lsp.background import CHUNK, StreamReader
from memlens_lsp.convert import Prebuilt

log = logging.getLogger("memlens_lsp.transport")

#: Bodies larger than this are refused (and skipped): no editor sends a 256 MiB message.
MAX_BODY = 256 * 1024 * 1024
#: A header block longer than this is garbage: skip to the next ``Content-Length:``.
MAX_HEADER = 8 * 1024
_CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
_JSONRPC = "2.0"


class MemlensProtocol(LanguageServerProtocol):
    """pygls's LSP protocol, without its retained notification futures; it knows whether the
    client is busy with the server (a message coming in, requests not answered yet, or
    either of those a moment ago: :meth:`client_idle`), so that work in the background (leak
    warnings) can wait for it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Ids of the client's requests being handled, not answered yet.
        self.answering: set[Any] = set()
        #: Whether part of a message has come in, not all of it (a big file's didOpen comes
        #: in 64 KiB reads, each a turn of the event loop).
        self.receiving = False
        #: When (time.monotonic) the client last sent something or got an answer.
        self.last_heard = time.monotonic()
        self._served: asyncio.Event | None = None

    def _handle_request(self, msg_id: Any, method_name: str, params: Any) -> None:
        self.answering.add(msg_id)
        self._note()
        super()._handle_request(msg_id, method_name, params)

    def answered(self, msg_id: Any) -> None:
        """Note that request ``msg_id`` is answered (every response says so)."""
        self.answering.discard(msg_id)
        self._note()

    def heard(self, partial: bool) -> None:
        """Note that bytes came in; ``partial``: a message is not all in yet."""
        self.receiving = partial
        self._note()

    def _note(self) -> None:
        self.last_heard = time.monotonic()
        served = self._served
        if served is not None:
            if self.answering or self.receiving:
                served.clear()
            else:
                served.set()

    async def client_idle(self, quiet: float, timeout: float) -> bool:
        """Whether the client became idle within ``timeout`` seconds: no message coming in,
        every request it made answered, and neither changed for ``quiet`` seconds (False: the
        time ran out first)."""
        end = time.monotonic() + timeout
        while (now := time.monotonic()) < end:
            if self.answering or self.receiving:
                if self._served is None:
                    self._served = asyncio.Event()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._served.wait(), end - now)
                continue
            left = self.last_heard + quiet - now
            if left <= 0:
                return True
            await asyncio.sleep(min(left, end - now))
        return False

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        futures: dict[Any, Future[Any]] = self._request_futures
        future = futures.get(msg_id)
        if future is None:
            return

        def drop(done: Any) -> None:
            if futures.get(msg_id) is done:
                del futures[msg_id]

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (unit tests): nothing iterates the table meanwhile
            future.add_done_callback(drop)
            return

        # Later, on the loop: a future may be done inside a loop over the table (pygls's
        # shutdown cancels them all while iterating it).
        def later(done: Any) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing to drop
                loop.call_soon_threadsafe(drop, done)

        future.add_done_callback(later)

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: Any | None = None
    ) -> None:
        """A response; a :class:`memlens_lsp.convert.Prebuilt` result goes out as written."""
        self.answered(msg_id)
        if error is not None or not isinstance(result, Prebuilt):
            super()._send_response(msg_id, result, error)
            return
        self._result_types.pop(msg_id, None)
        body = f'{{"jsonrpc":"{_JSONRPC}","id":{json.dumps(msg_id)},"result":{result}}}'
        self._write_body(body.encode("utf-8"))

    def notify_prebuilt(self, method: str, params: Prebuilt) -> None:
        """A notification whose parameters are already written as JSON (a big file's leak
        warnings: thousands of diagnostics cost no lsprotocol conversion)."""
        body = f'{{"jsonrpc":"{_JSONRPC}","method":{json.dumps(method)},"params":{params}}}'
        self._write_body(body.encode("utf-8"))

    def _write_body(self, body: bytes) -> None:
        writer = self.writer
        if writer is None:
            return
        header = (
            f"Content-Length: {len(body)}\r\n"
            f"Content-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
        ).encode("ascii")
        writer.write(header + body)  # serve()'s writers write at once (stdout, a TCP stream)

    # -- used by serve() ------------------------------------------------------------------
    def send_error(self, msg_id: Any, exc: JsonRpcException) -> None:
        """An error response; ``msg_id`` None answers a message whose id is unknown."""
        error: dict[str, Any] = {"code": exc.code, "message": exc.message}
        self._send_data({"jsonrpc": _JSONRPC, "id": msg_id, "error": error})

    def fail_pending(self, msg_id: Any, exc: Exception) -> bool:
        """Fail the server's own pending request ``msg_id`` (its response was malformed)."""
        self._result_types.pop(msg_id, None)
        future = self._request_futures.pop(msg_id, None)
        if future is None or future.done():
            return False
        future.set_exception(exc)
        return True


def _valid_id(value: object) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def dispatch(protocol: MemlensProtocol, body: bytes) -> None:
    """Handle one message body; every request gets an answer, whatever it holds."""
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError):
        protocol.send_error(None, JsonRpcParseError("memlens: the message is not JSON"))
        return
    if not isinstance(raw, dict):
        protocol.send_error(None, JsonRpcInvalidRequest("memlens: a message must be an object"))
        return
    msg_id = raw.get("id")
    method = raw.get("method")
    if "method" not in raw and "id" in raw and ("result" in raw or "error" in raw):
        _response(protocol, raw, msg_id)
        return
    is_request = "id" in raw
    if (
        raw.get("jsonrpc") != _JSONRPC
        or not isinstance(method, str)
        or (is_request and not _valid_id(msg_id))
    ):
        if is_request or "method" not in raw:
            reply_id = msg_id if _valid_id(msg_id) else None
            protocol.send_error(
                reply_id, JsonRpcInvalidRequest("memlens: not a valid JSON-RPC 2.0 request")
            )
        else:
            log.warning("memlens: ignoring a malformed notification")
        return
    if is_request and getattr(protocol, "_shutdown", False) and method != "exit":
        protocol.send_error(msg_id, JsonRpcInvalidRequest("memlens: the server is shutting down"))
        return
    try:
        message = protocol.structure_message(raw)
    except Exception as exc:  # noqa: BLE001 - every shape of bad input ends here
        log.warning("memlens: malformed %s %r", "request" if is_request else "notification", method)
        if is_request:
            invalid = isinstance(exc, JsonRpcInvalidParams) or isinstance(
                exc.__cause__, ClassValidationError
            )
            protocol.send_error(
                msg_id,
                JsonRpcInvalidParams(f"memlens: invalid params for {method}")
                if invalid
                else JsonRpcInternalError(f"memlens: cannot read the request {method}"),
            )
        return
    try:
        protocol.handle_message(message)
    except Exception as exc:
        log.exception("memlens: handling %r failed", method)
        if is_request:
            protocol.send_error(msg_id, JsonRpcInternalError(f"memlens: {method} failed: {exc}"))


def _response(protocol: MemlensProtocol, raw: dict[str, Any], msg_id: object) -> None:
    """A response to one of the server's own requests."""
    if not _valid_id(msg_id):
        log.warning("memlens: ignoring a response with a bad id")
        return
    try:
        message = protocol.structure_message(raw)
    except Exception:  # noqa: BLE001 - e.g. workspace/configuration answered with null
        log.warning("memlens: malformed response to %r", msg_id)
        protocol.fail_pending(
            msg_id, JsonRpcInvalidParams("memlens: the client's response was malformed")
        )
        return
    try:
        protocol.handle_message(message)
    except Exception:
        log.exception("memlens: handling the response to %r failed", msg_id)
        protocol.fail_pending(msg_id, JsonRpcInternalError("memlens: bad response"))


class _Frames:
    """Splits a byte stream into message bodies, recovering from bad headers."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.skipping = False  # after a bad header: drop bytes up to the next Content-Length
        self.want: int | None = None  # body length of the header just read
        self.discard = 0  # bytes of a refused (too large) body still to drop

    def feed(self, data: bytes) -> list[bytes]:
        self.buf += data
        out: list[bytes] = []
        while True:
            body = self._next()
            if body is None:
                return out
            out.append(body)

    def partial(self) -> bool:
        """Whether part of a message is buffered (more of it is to come)."""
        return bool(self.buf) or self.want is not None or self.discard > 0

    def _next(self) -> bytes | None:
        buf = self.buf
        while True:
            if self.discard:
                dropped = min(self.discard, len(buf))
                del buf[:dropped]
                self.discard -= dropped
                if self.discard:
                    return None
            if self.want is not None:
                if len(buf) < self.want:
                    return None
                body = bytes(buf[: self.want])
                del buf[: self.want]
                self.want = None
                return body
            if self.skipping:
                match = _CONTENT_LENGTH.search(buf)
                if match is None:
                    del buf[: max(0, len(buf) - 15)]  # keep a partial "Content-Length"
                    return None
                del buf[: match.start()]
                self.skipping = False
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEADER:
                    log.warning("memlens: skipping %d bytes without a message header", len(buf))
                    del buf[:1]
                    self.skipping = True
                    continue
                return None
            header = bytes(buf[:end])
            del buf[: end + 4]
            length = _content_length(header)
            if length is None:
                log.warning("memlens: bad message header %r; skipping to the next", header[:80])
                self.skipping = True
                continue
            if length > MAX_BODY:
                log.warning("memlens: skipping a %d-byte message (limit %d)", length, MAX_BODY)
                self.discard = length
                continue
            self.want = length


def _content_length(header: bytes) -> int | None:
    length = None
    for line in header.split(b"\r\n"):
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            text = value.strip()
            if not text.isdigit() or len(text) > 12:
                return None
            length = int(text)
    return length


async def serve(
    protocol: MemlensProtocol, read: Callable[[], Awaitable[bytes]], stop: threading.Event
) -> None:
    """Read and handle messages until end of input or ``stop``."""
    frames = _Frames()
    while not stop.is_set():
        data = await read()
        if not data:
            break
        for body in frames.feed(data):
            dispatch(protocol, body)
            await asyncio.sleep(0)  # let handlers started by this message run in turn
        protocol.heard(frames.partial())


# -- running a server --------------------------------------------------------------------------
def serve_stdio(
    server: LanguageServer, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> int:
    """Serve over stdio until ``exit`` or end of input; returns the exit code."""
    reader = StreamReader(stdin or sys.stdin.buffer)
    server.protocol.set_writer(_StdoutWriter(stdout or sys.stdout.buffer))
    protocol = _protocol(server)

    async def main() -> None:
        await serve(protocol, reader.read, server._stop_event or threading.Event())

    return _run(server, main)


def serve_tcp(server: LanguageServer, host: str, port: int) -> int:
    """Serve the first client that connects over TCP (debugging)."""
    protocol = _protocol(server)

    async def main() -> None:
        connected: asyncio.Future[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
        connected = asyncio.get_running_loop().create_future()

        def on_connect(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            if not connected.done():
                connected.set_result((r, w))

        listener = await asyncio.start_server(on_connect, host, port)
        async with listener:
            reader, writer = await connected
            server.protocol.set_writer(writer)
            await serve(
                protocol, lambda: reader.read(CHUNK), server._stop_event or threading.Event()
            )

    return _run(server, main)


def _protocol(server: LanguageServer) -> MemlensProtocol:
    protocol = server.protocol
    assert isinstance(protocol, MemlensProtocol), "create the server with MemlensProtocol"
    return protocol


def _run(server: LanguageServer, main: Callable[[], Awaitable[None]]) -> int:
    server._stop_event = threading.Event()
    code = 0
    try:
        asyncio.run(main())  # type: ignore[arg-type]
    except SystemExit as exc:  # the exit notification
        code = exc.code if isinstance(exc.code, int) else 0
    except (KeyboardInterrupt, BrokenPipeError):
        code = 1
    finally:
        server._stop_event.set()
    return code


class _StdoutWriter:
    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.flush()

    def write(self, data: bytes) -> None:
        self.stream.write(data)
        self.stream.flush()
