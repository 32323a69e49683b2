"""A raw JSON-RPC client for the language server: frames are written by hand, so tests can
send what no well-behaved client would (bad headers, broken JSON, wrong parameter shapes).

A reader thread parses the server's frames; responses are kept by id, notifications and
server requests in order. Server requests (``workspace/configuration``, refreshes, ...) are
answered by ``on_request`` (default: ``null``).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

SERVER_CMD = [sys.executable, "-m", "memlens", "lsp"]


def frame(body: bytes | str, header: bytes | None = None) -> bytes:
    data = body.encode() if isinstance(body, str) else body
    head = header if header is not None else b"Content-Length: %d\r\n\r\n" % len(data)
    return head + data


class RawClient:
    def __init__(
        self,
        env: dict[str, str] | None = None,
        on_request: Callable[[str, Any], Any] | None = None,
        cwd: str | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            SERVER_CMD,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "MEMLENS_LSP_POLL_INTERVAL": "0.2", **(env or {})},
            cwd=cwd,
        )
        self.on_request = on_request or (lambda method, params: None)
        self.responses: dict[Any, dict[str, Any]] = {}
        self.null_id_errors: list[dict[str, Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.cond = threading.Condition()
        self.next_id = 1_000_000_000  # tests may pick small ids of their own
        self.write_lock = threading.Lock()
        self.stderr_tail: list[bytes] = []
        # Server requests are answered from their own thread: the reader must never wait for
        # the writer (the server may be blocked writing to us while we write to it).
        self.answers: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._answer, daemon=True).start()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    # -- transport ---------------------------------------------------------------------------
    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail.append(line)
            del self.stderr_tail[:-200]

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    with self.cond:
                        self.cond.notify_all()
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            assert length is not None, "server sent a frame without Content-Length"
            msg = json.loads(out.read(length))
            self._dispatch(msg)

    def _answer(self) -> None:
        while True:
            msg = self.answers.get()
            try:
                result = self.on_request(msg["method"], msg.get("params"))
            except Exception:  # noqa: BLE001 - the test's callback decides
                result = None
            try:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            except OSError:
                return

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:
            with self.cond:
                self.server_requests.append(msg)
            self.answers.put(msg)
            return
        with self.cond:
            if "method" in msg:
                self.notifications.append(msg)
            elif msg.get("id") is None:
                self.null_id_errors.append(msg)
            else:
                self.responses[msg["id"]] = msg
            self.cond.notify_all()

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        with self.write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, msg: dict[str, Any]) -> None:
        self.write(frame(json.dumps(msg)))

    # -- requests ----------------------------------------------------------------------------
    def request(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        """Send a request; returns its id."""
        if msg_id is None:
            self.next_id += 1
            msg_id = self.next_id
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait(self, msg_id: Any, timeout: float = 30.0) -> dict[str, Any]:
        end = time.monotonic() + timeout
        with self.cond:
            while msg_id not in self.responses:
                left = end - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    tail = b"".join(self.stderr_tail[-20:]).decode(errors="replace")
                    raise AssertionError(f"no response to {msg_id!r} (stderr: {tail})")
                self.cond.wait(min(left, 0.2))
            return self.responses[msg_id]

    def call(self, method: str, params: Any = None, timeout: float = 30.0) -> dict[str, Any]:
        return self.wait(self.request(method, params), timeout)

    def wait_notification(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30.0
    ) -> dict[str, Any]:
        end = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                for msg in self.notifications[seen:]:
                    if predicate(msg):
                        return msg
                seen = len(self.notifications)
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError("notification did not arrive")
                self.cond.wait(min(left, 0.2))

    def initialize(self, folders: list[str], options: Any = None, **caps: Any) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"workspace": {"configuration": True}, **caps}
        result = self.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": folders[0] if folders else None,
                "capabilities": capabilities,
                "workspaceFolders": [{"uri": f, "name": str(i)} for i, f in enumerate(folders)],
                "initializationOptions": options,
            },
        )
        self.notify("initialized", {})
        return result

    def rss_kib(self) -> int:
        """The server's resident set size (Linux)."""
        with open(f"/proc/{self.proc.pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def close(self, timeout: float = 30.0) -> int:
        """shutdown + exit; returns the exit code (kills the server if it does not exit)."""
        if self.proc.poll() is None:
            try:
                self.call("shutdown", None, timeout=timeout)
                self.notify("exit")
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except (AssertionError, OSError):
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("the server did not exit after shutdown/exit") from None
