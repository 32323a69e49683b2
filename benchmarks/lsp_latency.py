"""Latency of the memlens language server over a real LSP connection.

Opens 10,000-line files with figures on every line and measures: the first hints after
``didOpen`` (a fresh file each time: the whole file, as Neovim asks, and a visible range, as
VS Code asks), then p50/p95 of inlay hints (whole file again and again, as Neovim asks on every
refresh, and a ~60-line visible range), hover and code lens; then the time to load a run with
100,000 lines of figures, in-process as the server does it. Targets: whole-file inlay p95 <=
50 ms, first hints <= 150 ms after didOpen, hover p95 <= 10 ms, run load <= 1 s. Each line
says its ratio to the target, and with ``--baseline`` to another checkout's server measured in
the same run.

    .venv/bin/python benchmarks/lsp_latency.py [--lines 10000] [--load-lines 100000]
        [--baseline ../main/.venv/bin/python]   # another checkout measured in the same run
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from memlens.layout import RUN_SUFFIX
from memlens.model import CallNode, FunctionStats, LineStats, Run, RunInfo, SourceFile
from memlens.runfile import writer
from memlens.store import Store


def make_source(n: int) -> str:
    out = []
    for i in range(1, n + 1):
        if i % 10 == 1:
            out.append(f"def f{i}(n):")
        else:
            out.append(f"    x{i} = [0] * {i * 7}  # é😀")
    return "\n".join(out) + "\n"


def make_run(path: Path, n: int, *, seed: int = 1, more: tuple[Path, ...] = ()) -> Run:
    """A run with figures on every line of ``path`` (and of each of ``more``, written too)."""
    run = _make_run(path, n, seed=seed)
    files = dict(run.files)
    for i, other in enumerate(more):
        other.write_text(make_source(n), encoding="utf-8")
        files.update(_make_run(other, n, seed=seed + 1 + i).files)
    return Run(run.info, files, run.call_tree)


def _make_run(path: Path, n: int, *, seed: int = 1) -> Run:
    rnd = random.Random(seed)
    text = make_source(n)
    lines = {}
    for i in range(1, n + 1):
        size = rnd.randint(2_000, 5_000_000)
        lines[i] = LineStats(
            alloc_bytes=size * 2,
            alloc_count=rnd.randint(1, 5000),
            live_bytes=size // 3,
            live_count=3,
            peak_bytes=size,
            incl_alloc_bytes=size * 2,
            incl_live_bytes=size // 3,
            incl_peak_bytes=size,
        )
    fns = tuple(
        FunctionStats(
            f"f{i}", i, min(i + 9, n), alloc_bytes=10 * MiB, alloc_count=100, peak_bytes=5 * MiB
        )
        for i in range(1, n + 1, 10)
    )
    key = str(path)
    tree = tuple(
        CallNode(i, -1 if i == 0 else 0, key, i + 1, f"f{i}", peak_bytes=1000)
        for i in range(min(n, 2000))
    )
    info = bench_info(path.name, sum(s.peak_bytes for s in lines.values()))
    sf = SourceFile(key, hashlib.sha256(text.encode()).hexdigest(), text, lines, fns)
    return Run(info, {key: sf}, tree)


def bench_info(command: str, peak: int) -> RunInfo:
    """The header of a made-up run of ``command`` whose peak was ``peak`` bytes."""
    return RunInfo(
        command=(command,),
        python="3.11",
        platform="linux",
        started="2026-11-22T00:00:00+00:00",
        ended="2026-11-22T00:00:10+00:00",
        duration_s=10.0,
        pid=1,
        exit_code=0,
        mode="exact",
        sample_interval_bytes=None,
        peak_traced_bytes=peak,
        peak_rss_bytes=0,
        complete=True,
    )


MiB = 1024 * 1024


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


async def timed(n: int, make: Callable[[int], Awaitable[Any]]) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        await make(i)
        out.append((time.perf_counter() - t0) * 1000)
    return out


class RawClient:
    """A minimal JSON-RPC client over the server's stdio, parsing responses with json.loads
    (as editors do natively), so the figures measure the server and the wire, not a Python
    client's typed deserialisation. Requests from the server are answered with null."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.notifications: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.reader = asyncio.create_task(self._read())

    def _send(self, msg: dict[str, Any]) -> None:
        body = json.dumps(msg).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while (line := await out.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not line:  # the server is gone: fail what waits for it, not hang
                for fut in self.pending.values():
                    fut.set_exception(SystemExit("the language server exited"))
                return
            raw = await out.readexactly(length)
            # The client's garbage collector would otherwise fire inside big parses and be
            # counted as server latency (an editor parses JSON natively).
            gc.disable()
            try:
                msg = json.loads(raw)
            finally:
                gc.enable()
            if "id" in msg and "method" in msg:
                items = (
                    msg.get("params", {}).get("items", [])
                    if msg["method"] == "workspace/configuration"
                    else None
                )
                result = [None] * len(items) if items is not None else None
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
            elif "id" in msg:
                self.pending.pop(msg["id"]).set_result(msg.get("result"))
            else:
                self.notifications.put_nowait(msg)

    async def request(self, method: str, params: Any) -> Any:
        self.next_id += 1
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await fut

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def wait_for(self, method: str, timeout: float) -> dict[str, Any]:
        async def loop() -> dict[str, Any]:
            while True:
                msg = await self.notifications.get()
                if msg.get("method") == method:
                    return msg

        return await asyncio.wait_for(loop(), timeout)


def rng(a: int, b: int) -> dict[str, Any]:
    return {"start": {"line": a, "character": 0}, "end": {"line": b, "character": 0}}


#: What each measure is held to (ms; the run loads in seconds).
TARGETS = {
    "first hints after didOpen, whole file": 150.0,
    "first hints after didOpen, one screen": 150.0,
    "inlay hints, whole file (again)": 50.0,
    "hover": 10.0,
    "run load, 100k lines (in-process, s)": 1.0,
}

#: The in-process load of the 100,000-line run, as the server does it: run by each interpreter
#: measured, so that a baseline checkout is measured by its own code.
LOAD = """
import statistics, sys, time
from pathlib import Path
from memlens_lsp.features.runs import load_folder
from memlens_lsp.index import FolderState
root, run, latest = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[5])
src, n = sys.argv[3], int(sys.argv[4])
times = []
for _ in range(3):
    t0 = time.perf_counter()
    state, errors = load_folder(FolderState(root, root.as_uri(), chosen=run, chosen_latest=latest))
    view = state.view(src)
    assert not errors and view is not None and len(view.lines) == n, errors
    times.append(time.perf_counter() - t0)
print(statistics.median(times))
"""


async def start_server(python: str, root: Path, load_timeout: float = 120) -> RawClient:
    """A server (``python -m memlens lsp``) of the workspace ``root``, initialized, with its
    run loaded."""
    proc = await asyncio.create_subprocess_exec(
        python,
        "-m",
        "memlens",
        "lsp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    client = RawClient(proc)
    caps = {"workspace": {"inlayHint": {"refreshSupport": True}, "configuration": True}}
    await client.request(
        "initialize",
        {
            "processId": None,
            "capabilities": caps,
            "rootUri": root.as_uri(),
            "workspaceFolders": [{"uri": root.as_uri(), "name": "bench"}],
        },
    )
    client.notify("initialized", {})
    try:
        await client.wait_for("memlens/runLoaded", load_timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return client


async def session(
    python: str, root: Path, n_lines: int, repeats: int, fresh: tuple[Path, ...]
) -> dict[str, list[float]]:
    """One server (``python -m memlens lsp``) measured: samples in ms per measure."""
    src = root / "big.py"
    client = await start_server(python, root)
    proc = client.proc

    def did_open(path: Path) -> None:
        client.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": path.as_uri(),
                    "languageId": "python",
                    "version": 1,
                    "text": path.read_text(encoding="utf-8"),
                }
            },
        )

    out: dict[str, list[float]] = {}
    # First hints after didOpen, each on a file nobody asked about yet: the whole file
    # (Neovim) or the first screen (VS Code).
    for i, path in enumerate(fresh):
        t0 = time.perf_counter()
        did_open(path)
        span = rng(0, n_lines) if i % 2 == 0 else rng(0, 60)
        got = await client.request(
            "textDocument/inlayHint", {"textDocument": {"uri": path.as_uri()}, "range": span}
        )
        name = "first hints after didOpen, " + ("whole file" if i % 2 == 0 else "one screen")
        out.setdefault(name, []).append((time.perf_counter() - t0) * 1000)
        if not got:
            raise SystemExit(f"no hints for {path.name}")
    did_open(src)
    doc = {"uri": src.as_uri()}
    rnd = random.Random(7)

    def full(_: int) -> Awaitable[Any]:
        return client.request(
            "textDocument/inlayHint", {"textDocument": doc, "range": rng(0, n_lines)}
        )

    def visible(_: int) -> Awaitable[Any]:
        first = rnd.randrange(0, n_lines - 60)
        return client.request(
            "textDocument/inlayHint", {"textDocument": doc, "range": rng(first, first + 60)}
        )

    def hover(_: int) -> Awaitable[Any]:
        pos = {"line": rnd.randrange(n_lines), "character": 4}
        return client.request("textDocument/hover", {"textDocument": doc, "position": pos})

    def lens(_: int) -> Awaitable[Any]:
        return client.request("textDocument/codeLens", {"textDocument": doc})

    if len(await full(0)) != n_lines:
        raise SystemExit(f"expected {n_lines} hints")
    out["inlay hints, whole file (again)"] = await timed(50 * repeats, full)
    out["inlay hints, one screen"] = await timed(300 * repeats, visible)
    out["hover"] = await timed(300 * repeats, hover)
    out["code lens (1,000 functions)"] = await timed(50 * repeats, lens)
    await client.request("shutdown", None)
    client.notify("exit", None)
    await proc.wait()
    return out


async def main(n_lines: int, load_lines: int, repeats: int, baseline: str | None) -> int:
    with tempfile.TemporaryDirectory(prefix="memlens-bench-") as tmp:
        root = Path(tmp).resolve()
        src = root / "big.py"
        src.write_text(make_source(n_lines), encoding="utf-8")
        fresh = tuple(root / f"fresh{i}.py" for i in range(6))
        store = Store(root)
        run_path = writer.write(
            make_run(src, n_lines, more=fresh), store.runs_dir / f"20261122-000000-1{RUN_SUFFIX}"
        )
        big_src = root / "huge.py"
        big_src.write_text(make_source(load_lines), encoding="utf-8")
        big_path = writer.write(
            make_run(big_src, load_lines, seed=2),
            root / f"20261122-000001-1{RUN_SUFFIX}",  # outside the store: loaded by path
        )
        servers = [("this checkout", sys.executable)]
        if baseline:
            servers.append(("baseline", baseline))
        results: dict[str, dict[str, list[float]]] = {}
        for name, python in servers:
            store.set_pointer("latest", run_path)
            results[name] = await session(python, root, n_lines, repeats, fresh)
            loader = await asyncio.create_subprocess_exec(
                *(python, "-c", LOAD, str(root), str(big_path), str(big_src), str(load_lines)),
                str(run_path),
                stdout=asyncio.subprocess.PIPE,
            )
            seconds, _ = await loader.communicate()
            if loader.returncode != 0:
                raise SystemExit(f"{python}: loading the 100,000-line run failed")
            results[name]["run load, 100k lines (in-process, s)"] = [float(seconds)]
    print(
        f"memlens LSP latency: {n_lines:,}-line files with figures on every line, Python "
        f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    head = f"{'measure':<40} {'this: p50':>10} {'p95':>9}"
    if baseline:
        head += f" {'baseline: p50':>14} {'p95':>9} {'p95 ratio':>10}"
    print(head + f" {'vs target':>10}")
    mine = results["this checkout"]
    for measure, samples in mine.items():
        p50, p95 = statistics.median(samples), pct(samples, 0.95)
        row = f"{measure:<40} {p50:10.2f} {p95:9.2f}"
        if baseline:
            theirs = results["baseline"].get(measure)
            if theirs:
                b50, b95 = statistics.median(theirs), pct(theirs, 0.95)
                row += f" {b50:14.2f} {b95:9.2f} {p95 / b95:9.2f}x"
            else:
                row += f" {'-':>14} {'-':>9} {'-':>10}"
        target = TARGETS.get(measure)
        row += f" {p95 / target:9.2f}x" if target else f" {'-':>10}"
        print(row)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--load-lines", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="also measure the server of another checkout (its interpreter, e.g. "
        "../main/.venv/bin/python), in the same run: the table gives the ratios",
    )
    ns = parser.parse_args()
    sys.exit(asyncio.run(main(ns.lines, ns.load_lines, ns.repeats, ns.baseline)))
