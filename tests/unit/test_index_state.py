"""The language server's index: immutable values replaced in one place under the reload lock,
and the one memo their first-use values go into (docs/ARCHITECTURE.md, the server's code map)."""

from __future__ import annotations

import ast
import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pygls.workspace import Workspace

from memlens.runfile import writer
from memlens.store import Store
from memlens_lsp.features import commands, runs
from memlens_lsp.index import Memo
from memlens_lsp.state import MemlensServer
from tests.runs import sample_run

SERVER = Path(__file__).resolve().parents[2] / "server" / "memlens_lsp"


def test_the_index_is_replaced_in_one_place() -> None:
    """Only features/runs.swap assigns the server's index (and the server's constructor)."""
    places = []
    for path in sorted(SERVER.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else []
                if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                    targets = [node.target]
                if any(isinstance(t, ast.Attribute) and t.attr == "index" for t in targets):
                    places.append(f"{path.relative_to(SERVER)}:{fn.name}")
    assert sorted(places) == ["features/runs.py:swap", "state.py:__init__"]


def test_memo_keeps_the_first_value_across_threads() -> None:
    memo = Memo()
    start = threading.Barrier(8)
    got: list[object] = []

    def make() -> object:
        return object()

    def read() -> None:
        start.wait()
        got.append(memo.value("k", make))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(got) == 8
    assert all(v is got[0] for v in got)
    assert memo.keep("k", object()) is got[0]
    assert memo.get("missing") is None


def _server(root: Path) -> MemlensServer:
    ls = MemlensServer()
    folder = lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)
    ls.protocol._workspace = Workspace(  # what initialize sets up
        root.as_uri(), lsp.TextDocumentSyncKind.Incremental, [folder]
    )
    return ls


async def test_a_chosen_run_is_not_lost_to_a_reload_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """memlens.chooseRun while a reload of the folder is reading the store: the reload ends
    first, then the choice is applied (never overwritten by the reload's older state)."""
    store = Store(tmp_path)
    older = writer.write(sample_run(), store.runs_dir / "20261122-100000-1.mlrun")
    newer = writer.write(sample_run(), store.runs_dir / "20261122-110000-1.mlrun")
    store.set_pointer("latest", newer)
    ls = _server(tmp_path)
    monkeypatch.setattr(runs, "notify_loaded", lambda *a: None)  # no client connected
    monkeypatch.setattr(runs.diagnostics, "publish_all", lambda *a: None)
    await runs.reload(ls, force=True)
    uri = tmp_path.as_uri()
    shown = ls.index.get(uri)
    assert shown is not None
    assert shown.run is not None
    assert shown.run.path == newer

    # The next reload blocks in the middle of reading the store.
    reading, release = threading.Event(), threading.Event()
    real_load = runs.load_folder

    def slow_load(prev: Any) -> Any:
        reading.set()
        release.wait(60)
        return real_load(prev)

    monkeypatch.setattr(runs, "load_folder", slow_load)
    reload = asyncio.ensure_future(runs.reload(ls, [uri], force=True))
    assert await asyncio.to_thread(reading.wait, 60)
    choice = asyncio.ensure_future(commands.choose_run(ls, {"run": older.stem, "workspace": uri}))
    await asyncio.sleep(0.2)  # the choice waits for the reload (it used to swap at once)
    release.set()
    await asyncio.wait_for(reload, 60)
    summary = await asyncio.wait_for(choice, 60)
    assert summary is not None
    assert summary["id"] == older.stem
    folder = ls.index.get(uri)
    assert folder is not None
    assert folder.run is not None
    assert folder.run.path == older
    assert folder.chosen == older
