"""Work off the event loop, on daemon threads only.

Everything the server reads from a workspace may block or take long (a run file, a pointer
file that is a FIFO, a line re-mapping of a hostile source). Such work runs on a daemon thread
so that the event loop keeps answering, and so that a thread stuck for good never keeps the
process alive after ``exit`` (executor threads, asyncio's default executor included, are
joined at interpreter exit; daemon threads are not).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from typing import BinaryIO, TypeVar

_T = TypeVar("_T")

#: Bytes asked for per read from the client's stream.
CHUNK = 64 * 1024


async def in_thread(fn: Callable[..., _T], *args: object, name: str = "memlens-work") -> _T:
    """``fn(*args)`` on a new daemon thread; the caller awaits its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def settle(ok: bool, value: object) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)  # type: ignore[arg-type]
        else:
            assert isinstance(value, BaseException)
            future.set_exception(value)

    def work() -> None:
        try:
            result: object = fn(*args)
            ok = True
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            result, ok = exc, False
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(settle, ok, result)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future


class StreamReader:
    """Chunks of a blocking binary stream (stdin), read on a daemon thread.

    At most a few chunks wait in memory: the thread reads the next one only when the loop has
    taken the previous one, so a client that writes faster than the server reads is held back
    by the pipe, not buffered here.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream
        self.queue: asyncio.Queue[bytes] | None = None

    def _run(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes]) -> None:
        read = self._reader()
        while True:
            try:
                data = read(CHUNK)
            except (OSError, ValueError):
                data = b""
            try:
                asyncio.run_coroutine_threadsafe(queue.put(data), loop).result()
            except (RuntimeError, asyncio.CancelledError):
                return  # the loop is gone
            except Exception:  # noqa: BLE001 - e.g. concurrent.futures.CancelledError
                return
            if not data:
                return

    def _reader(self) -> Callable[[int], bytes]:
        # The file descriptor itself where there is one: a thread blocked in a buffered
        # reader holds its lock, and the interpreter aborts when it finalizes that reader at
        # exit ("could not acquire lock ... possibly due to daemon threads").
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):
            return getattr(self.stream, "read1", self.stream.read)
        return lambda n: os.read(fd, n)

    async def read(self) -> bytes:
        if self.queue is None:
            self.queue = asyncio.Queue(maxsize=4)
            loop = asyncio.get_running_loop()
            threading.Thread(
                target=self._run, args=(loop, self.queue), name="memlens-stdin", daemon=True
            ).start()
        return await self.queue.get()
