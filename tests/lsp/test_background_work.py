"""Leak warnings are background work: the client's requests are answered first, and the
warnings still arrive whole, with exact ranges."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from lsp_workspace import MiB, info, write_run
from raw_client import RawClient
from tests.runs import new_run, source

from memlens.model import FunctionStats, LineStats
from memlens_lsp import state
from memlens_lsp.features import diagnostics
from memlens_lsp.server import create_server
from memlens_lsp.transport import MemlensProtocol

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux only")


def _server(monkeypatch: pytest.MonkeyPatch) -> tuple[state.MemlensServer, MemlensProtocol]:
    ls = create_server()
    protocol = ls.protocol
    assert isinstance(protocol, MemlensProtocol)
    monkeypatch.setattr(diagnostics, "SLICE_S", 0.0)  # one item a slice
    return ls, protocol


async def test_background_work_waits_for_the_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    ls, protocol = _server(monkeypatch)
    monkeypatch.setattr(state, "BACKGROUND_DEFER_S", 0.0)  # past waiting for a long quiet
    monkeypatch.setattr(state, "BUSY_MAX_WAIT_S", 60.0)
    made: list[int] = []

    def make(i: int) -> int:
        made.append(i)
        return i * 2

    protocol.answering.add(7)  # a request being handled
    since = time.monotonic()
    work = asyncio.ensure_future(diagnostics.in_slices(ls, since, range(5), make))
    await asyncio.sleep(0.2)
    assert made == [0]  # waits for the answer
    assert not work.done()
    protocol.answered(7)
    assert await asyncio.wait_for(work, 5) == [0, 2, 4, 6, 8]


async def test_background_work_waits_for_a_message_coming_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ls, protocol = _server(monkeypatch)
    monkeypatch.setattr(state, "BACKGROUND_DEFER_S", 0.0)
    monkeypatch.setattr(state, "BUSY_MAX_WAIT_S", 60.0)
    protocol.heard(partial=True)  # half of a didOpen
    work = asyncio.ensure_future(diagnostics.in_slices(ls, time.monotonic(), range(3), str))
    await asyncio.sleep(0.2)
    assert not work.done()
    protocol.heard(partial=False)
    assert await asyncio.wait_for(work, 5) == ["0", "1", "2"]


async def test_background_work_waits_for_the_client_to_be_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ls, protocol = _server(monkeypatch)
    monkeypatch.setattr(state, "CLIENT_QUIET_S", 0.3)
    protocol.heard(partial=False)  # a message just now
    t0 = time.monotonic()
    assert await diagnostics.in_slices(ls, t0, range(3), str) == ["0", "1", "2"]
    assert time.monotonic() - t0 >= 0.3


async def test_a_client_that_keeps_asking_holds_background_work_back_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ls, protocol = _server(monkeypatch)
    monkeypatch.setattr(state, "BACKGROUND_DEFER_S", 0.3)
    monkeypatch.setattr(state, "BUSY_MAX_WAIT_S", 0.01)
    protocol.answering.add("stuck")  # never answered
    t0 = time.monotonic()
    assert await asyncio.wait_for(diagnostics.in_slices(ls, t0, range(3), str), 5) == [
        "0",
        "1",
        "2",
    ]
    assert time.monotonic() - t0 >= 0.3


#: A function whose every line still holds 2 MiB at exit, with non-ASCII text (UTF-16 columns).
N = 1500
TEXT = "def grow():\n" + "".join(f'    x{i} = ["é😀"] * {i}\n' for i in range(2, N + 1))


@pytest.fixture
def client() -> Iterator[RawClient]:
    c = RawClient()
    yield c
    assert c.close() == 0


def test_hints_first_then_every_warning_with_exact_ranges(
    tmp_path: Path, client: RawClient
) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    app = folder / "grow.py"
    app.write_text(TEXT, encoding="utf-8")
    stats = LineStats(
        alloc_bytes=2 * MiB, alloc_count=10, live_bytes=2 * MiB, live_count=10, peak_bytes=2 * MiB
    )
    lines = dict.fromkeys(range(2, N + 1), stats)
    fns = (FunctionStats("grow", 1, N, alloc_bytes=N * 2 * MiB, peak_bytes=N * 2 * MiB),)
    run = new_run([source(str(app), TEXT, lines, fns)], run_info=info(N * 2 * MiB))
    write_run(folder, run, "20261122-100000-1")
    client.initialize([folder.as_uri()])
    client.wait_notification(lambda m: m["method"] == "memlens/runLoaded")
    uri = app.as_uri()
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": 3, "text": TEXT}},
    )
    span = {"start": {"line": 0, "character": 0}, "end": {"line": N, "character": 0}}
    hints = client.call("textDocument/inlayHint", {"textDocument": {"uri": uri}, "range": span})
    assert len(hints["result"]) == N - 1
    published = client.wait_notification(
        lambda m: m["method"] == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
    )["params"]
    assert published["version"] == 3
    diags = published["diagnostics"]
    text_lines = TEXT.splitlines()
    assert [d["range"] for d in diags] == [
        {
            "start": {"line": n, "character": 4},
            # "é" is one UTF-16 unit, "😀" two
            "end": {"line": n, "character": len(text_lines[n]) + 1},
        }
        for n in range(1, N)
    ]
    assert {(d["severity"], d["source"], d["code"]) for d in diags} == {(2, "memlens", "leak")}
    assert all(d["message"].startswith("2.0 MiB allocated here") for d in diags)
