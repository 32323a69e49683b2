"""Fixture workspaces with hand-made run files, and helpers for pytest-lsp clients.

The workspaces are built once per session in a temporary directory:

- ``proj/``: ``app.py`` with a latest run and a baseline (non-ASCII text on line 10);
- ``lib/``: ``other.py`` with one run (multi-root: its own store);
- ``empty/``: a script and no runs at all;
- ``broken/``: a run store whose only run file is garbage.

Clients are started against the real server process (``python -m memlens lsp``) with the
capabilities of VS Code (UTF-16 positions) and Neovim (which negotiates UTF-8).
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from tests import runs

from memlens.layout import RUN_SUFFIX
from memlens.model import (
    CallNode,
    FunctionStats,
    HeldBy,
    Hop,
    LineStats,
    Moments,
    Run,
    RunInfo,
    TimelinePoint,
    replace,
)
from memlens.runfile import writer
from memlens.store import Store

MiB = 1024 * 1024
PROFILES = ["visual-studio-code", "neovim"]

APP = """\
import os


def build(n):
    data = [bytearray(1024) for _ in range(n)]
    return data


def greet():
    s = "héllo 😀"
    return s * 1000


CACHE = []


def main():
    CACHE.append(build(100))
    greet()


if __name__ == "__main__":
    main()
"""

OTHER = """\
def helper():
    return [0] * 100000
"""

SCRIPT = """\
print("hello")

if __name__ == '__main__':
    print("main")
"""


def info(
    peak: int, *, started: str = "2026-11-22T10:00:00+00:00", command: tuple[str, ...] = ("app.py",)
) -> RunInfo:
    """The info of a run whose peak is ``peak`` (:func:`tests.runs.info`)."""
    return runs.info(
        command=command,
        started=started,
        ended=started,
        peak_traced_bytes=peak,
        peak_rss_bytes=peak * 2,
        cwd="",
    )


def app_run(
    path: Path,
    *,
    baseline: bool = False,
    text: str = APP,
    peak5: int | None = None,
    alloc5: int = 3 * MiB,
    started: str | None = None,
) -> Run:
    """The app's run; the baseline differs on line 5 and has nothing on line 18."""
    line5_peak = peak5 if peak5 is not None else (3 * MiB if baseline else 2 * MiB)
    lines = {
        5: LineStats(
            alloc_bytes=alloc5,
            alloc_count=1200,
            live_bytes=2 * MiB,
            live_count=1000,
            peak_bytes=line5_peak,
            incl_alloc_bytes=3 * MiB,
            incl_live_bytes=2 * MiB,
            incl_peak_bytes=line5_peak,
        ),
        10: LineStats(
            alloc_bytes=8192,
            alloc_count=2,
            peak_bytes=4096,
            incl_alloc_bytes=8192,
            incl_peak_bytes=4096,
        ),
        11: LineStats(alloc_bytes=500, alloc_count=1, peak_bytes=512, incl_peak_bytes=512),
        23: LineStats(incl_alloc_bytes=3 * MiB + 8692, incl_peak_bytes=line5_peak + 4096),
    }
    if not baseline:
        lines[18] = LineStats(
            alloc_bytes=16384,
            alloc_count=1,
            live_bytes=16384,
            live_count=1,
            peak_bytes=16384,
            incl_alloc_bytes=3 * MiB + 16384,
            incl_live_bytes=2 * MiB + 16384,
            incl_peak_bytes=2 * MiB + 16384,
        )
    functions = (
        FunctionStats(
            "build",
            4,
            6,
            alloc_bytes=3 * MiB,
            alloc_count=1200,
            live_bytes=2 * MiB,
            peak_bytes=line5_peak,
        ),
        FunctionStats("greet", 9, 11, alloc_bytes=8692, alloc_count=3, peak_bytes=4096),
        FunctionStats(
            "main",
            17,
            19,
            alloc_bytes=3 * MiB + 8692,
            alloc_count=1203,
            live_bytes=2 * MiB,
            peak_bytes=line5_peak + 4096,
        ),
        FunctionStats("<module>", 1, 23, alloc_bytes=3 * MiB + 8692, peak_bytes=line5_peak + 4096),
    )
    key = str(path)
    tree = (
        CallNode(0, -1, key, 23, "<module>"),
        CallNode(
            1,
            0,
            key,
            18,
            "main",
            alloc_bytes=16384,
            alloc_count=1,
            live_bytes=16384,
            peak_bytes=16384,
        ),
        CallNode(
            2,
            1,
            key,
            5,
            "build",
            alloc_bytes=3 * MiB,
            alloc_count=1200,
            live_bytes=2 * MiB,
            peak_bytes=line5_peak,
        ),
        CallNode(3, 0, key, 19, "main"),
        CallNode(4, 3, key, 10, "greet", alloc_bytes=8192, alloc_count=2, peak_bytes=4096),
    )
    started = started or ("2026-11-21T10:00:00+00:00" if baseline else "2026-11-22T10:00:00+00:00")
    return runs.new_run(
        [runs.source(key, text, lines, functions)],
        tree,
        run_info=info(line5_peak + 4096 + 16384, started=started),
        holders=() if baseline else app_holders(key),
    )


def app_holders(key: str) -> tuple[HeldBy, ...]:
    """What holds the app's live lines: line 5's bytearrays, in the lists `CACHE` (line 14)
    keeps; line 18's own bytes are `CACHE`'s item array."""
    root = Hop("module", "__main__", "module")
    cache = Hop("attribute", "CACHE", "list", key, 14)
    return (
        HeldBy(
            key,
            5,
            5,
            "found",
            (
                root,
                cache,
                Hop("index", "0", "list", key, 5),
                Hop("index", "3", "bytearray", key, 5),
            ),
        ),
        HeldBy(key, 18, 1, "found", (root, cache, Hop("buffer", "items", "", key, 18))),
    )


def other_run(path: Path) -> Run:
    lines = {
        2: LineStats(alloc_bytes=800056, alloc_count=1, peak_bytes=800056, incl_peak_bytes=800056)
    }
    fns = (FunctionStats("helper", 1, 2, alloc_bytes=800056, alloc_count=1, peak_bytes=800056),)
    return runs.new_run(
        [runs.source(str(path), OTHER, lines, fns)], run_info=info(800056, command=("other.py",))
    )


TIMED = """\
import time

CACHE = []


def load():
    scratch = bytearray(30_000_000)
    return len(scratch)


def keep():
    return bytearray(20_000_000)


def leak(i):
    CACHE.append(bytearray(2_000_000))


def main():
    load()
    kept = keep()
    for i in range(4):
        leak(i)
    return kept


main()
"""
#: The moments of TIMED's run: 0.1 s, 0.2 s ... 0.9 s (the run lasts 1.0 s).
TIMES = [round(0.1 * (k + 1), 1) for k in range(9)]
M = 1_000_000


def timed_run(path: Path) -> Run:
    """TIMED's run: load() holds 30 MB at line 7 from 0.1 s to 0.3 s (the peak, at 0.15 s);
    keep() 20 MB at line 12 from 0.5 s to the end (kept); leak() 2 MB more at line 16 at each
    of 0.6, 0.7, 0.8, 0.9 s (grows)."""
    key = str(path)
    lines = {
        7: LineStats(30 * M, 1, 0, 0, 30 * M, 30 * M, 0, 30 * M),
        12: LineStats(20 * M, 1, 20 * M, 1, 0, 20 * M, 20 * M, 0),
        16: LineStats(8 * M, 4, 8 * M, 4, 0, 8 * M, 8 * M, 0),
        20: LineStats(incl_alloc_bytes=30 * M, incl_peak_bytes=30 * M),
        21: LineStats(incl_alloc_bytes=20 * M, incl_live_bytes=20 * M),
        23: LineStats(incl_alloc_bytes=8 * M, incl_live_bytes=8 * M),
        27: LineStats(incl_alloc_bytes=58 * M, incl_live_bytes=28 * M, incl_peak_bytes=30 * M),
    }
    functions = (
        FunctionStats("load", 6, 8, 30 * M, 1, 0, 30 * M),
        FunctionStats("keep", 11, 12, 20 * M, 1, 20 * M, 0),
        FunctionStats("leak", 15, 16, 8 * M, 4, 8 * M, 0),
        FunctionStats("main", 19, 24, 58 * M, 6, 28 * M, 30 * M),
    )
    changes: list[tuple[int, int, int, int]] = []  # (moment, line, live, incl. live)
    for k in range(9):
        load = 30 * M if k <= 2 else 0
        kept = 20 * M if k >= 4 else 0
        leaked = 2 * M * max(0, k - 4)
        for line, live, incl in (
            (7, load, load),
            (20, 0, load),
            (12, kept, kept),
            (21, 0, kept),
            (16, leaked, leaked),
            (23, 0, leaked),
            (27, 0, load + kept + leaked),
        ):
            changes.append((k, line, live, incl))
    fn_changes = [
        (k, f, live)
        for k in range(9)
        for f, live in enumerate(
            (
                30 * M if k <= 2 else 0,
                20 * M if k >= 4 else 0,
                2 * M * max(0, k - 4),
                (30 * M if k <= 2 else 0) + (20 * M if k >= 4 else 0) + 2 * M * max(0, k - 4),
            )
        )
    ]
    moments = Moments(
        TIMES,
        [sum(c[2] for c in changes if c[0] == k) for k in range(9)],  # traced then
        [key],
        {
            "moment": [c[0] for c in changes],
            "file": [0] * len(changes),
            "line": [c[1] for c in changes],
            "live_bytes": [c[2] for c in changes],
            "incl_live_bytes": [c[3] for c in changes],
        },
        [(key, f.qualname, f.first_line, f.last_line) for f in functions],
        {
            "moment": [c[0] for c in fn_changes],
            "function": [c[1] for c in fn_changes],
            "live_bytes": [c[2] for c in fn_changes],
        },
    )
    traced = [sum(c[2] for c in changes if c[0] == k) for k in range(9)]
    timeline = (
        TimelinePoint(0.0, 0, 10 * M),
        *(TimelinePoint(t, v, v + 10 * M) for t, v in zip(TIMES, traced, strict=True)),
        TimelinePoint(1.0, traced[-1], traced[-1] + 10 * M),
    )
    run = runs.new_run(
        [runs.source(key, TIMED, lines, functions)],
        timeline=timeline,
        run_info=runs.info(
            command=("timed.py",), duration_s=1.0, peak_traced_bytes=30 * M, peak_at_s=0.15, cwd=""
        ),
    )
    return replace(run, moments=moments)


def write_run(root: Path, run: Run, stem: str, *, latest: bool = True) -> Path:
    store = Store(root)
    path = writer.write(run, store.runs_dir / f"{stem}{RUN_SUFFIX}")
    if latest:
        store.set_pointer("latest", path)
    return path


@dataclass
class Workspace:
    root: Path
    folders: dict[str, Path] = field(default_factory=dict)

    def uri(self, folder: str, name: str | None = None) -> str:
        path = self.folders[folder] if name is None else self.folders[folder] / name
        return path.as_uri()

    def text(self, folder: str, name: str) -> str:
        return (self.folders[folder] / name).read_text(encoding="utf-8")


def build_workspace(root: Path) -> Workspace:
    ws = Workspace(root)
    for name in ("proj", "lib", "empty", "broken"):
        (root / name).mkdir(parents=True)
        ws.folders[name] = (root / name).resolve()
    proj, lib = ws.folders["proj"], ws.folders["lib"]
    (proj / "app.py").write_text(APP, encoding="utf-8")
    base = write_run(
        proj, app_run(proj / "app.py", baseline=True), "20261121-100000-1", latest=False
    )
    Store(proj).set_pointer("baseline", base)
    write_run(proj, app_run(proj / "app.py"), "20261122-100000-1")
    (lib / "other.py").write_text(OTHER, encoding="utf-8")
    write_run(lib, other_run(lib / "other.py"), "20261122-090000-7")
    (ws.folders["empty"] / "script.py").write_text(SCRIPT, encoding="utf-8")
    broken = Store(ws.folders["broken"]).runs_dir
    broken.mkdir(parents=True)
    (broken / "20261122-000000-1.mlrun").write_bytes(b"this is not a run file at all")
    (ws.folders["broken"] / "x.py").write_text("x = 1\n", encoding="utf-8")
    return ws


# -- clients ---------------------------------------------------------------------------------
SERVER_ENV = {**os.environ, "MEMLENS_LSP_POLL_INTERVAL": "0.2"}
SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "memlens", "lsp"], server_env=SERVER_ENV
)


def plain(value: Any) -> Any:
    """pygls hands untyped params over as named tuples; turn them back into JSON values."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


class Recorder:
    """What the server sent beyond pytest-lsp's own bookkeeping."""

    def __init__(self) -> None:
        self.run_loaded: list[dict[str, Any]] = []
        self.inlay_refreshes = 0
        self.lens_refreshes = 0
        self.registrations: list[lsp.Registration] = []


def install_recorder(client: LanguageClient) -> Recorder:
    rec = Recorder()

    @client.feature("memlens/runLoaded")
    def _loaded(params: Any) -> None:
        rec.run_loaded.append(plain(params))

    @client.feature(lsp.WORKSPACE_INLAY_HINT_REFRESH)
    def _inlay(params: Any) -> None:
        rec.inlay_refreshes += 1

    @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def _lens(params: Any) -> None:
        rec.lens_refreshes += 1

    @client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def _register(params: lsp.RegistrationParams) -> None:
        rec.registrations.extend(params.registrations)

    client.recorder = rec  # type: ignore[attr-defined]
    return rec


async def start_session(
    client: LanguageClient,
    profile: str,
    ws: Workspace,
    folders: list[str],
    options: dict[str, Any] | None = None,
) -> None:
    install_recorder(client)
    await client.initialize_session(
        lsp.InitializeParams(
            capabilities=client_capabilities(profile),
            root_uri=ws.uri(folders[0]),
            workspace_folders=[lsp.WorkspaceFolder(uri=ws.uri(f), name=f) for f in folders],
            initialization_options=options or {},
        )
    )
    # The server loads runs after `initialized`; runLoaded arrives once per folder.
    rec: Recorder = client.recorder  # type: ignore[attr-defined]
    for _ in range(200):
        if len({r["workspace"] for r in rec.run_loaded}) >= len(folders):
            break
        await _sleep(0.02)


async def _sleep(s: float) -> None:
    await asyncio.sleep(s)


async def start_in_folder(
    client: LanguageClient,
    folder: Path,
    profile: str = "visual-studio-code",
    options: dict[str, Any] | None = None,
) -> None:
    """:func:`start_session` with one workspace folder, ``folder`` (a project a test made)."""
    ws = Workspace(folder.parent, {"proj": folder})
    await start_session(client, profile, ws, ["proj"], options)
