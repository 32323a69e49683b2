"""End-to-end: live reloads, run choice, baseline commands and running a file.

These tests change the run store, so they get their own workspace and server per profile.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsp_workspace import (
    APP,
    PROFILES,
    SERVER,
    MiB,
    Recorder,
    Workspace,
    app_run,
    build_workspace,
    plain,
    start_session,
    write_run,
)
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from memlens.store import Store

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(scope="module", params=PROFILES, config=SERVER)
async def live(
    lsp_client: LanguageClient,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[None]:
    live_ws = build_workspace(tmp_path_factory.mktemp("lsp-live"))
    lsp_client.ws = live_ws  # type: ignore[attr-defined]
    # Dotted keys in initializationOptions work as well as nested objects.
    await start_session(
        lsp_client, request.param, live_ws, ["proj", "empty"], {"inlayHints.figure": "alloc"}
    )
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    lsp_client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=live_ws.uri("proj", "app.py"), language_id="python", version=1, text=APP
            )
        )
    )
    yield
    await lsp_client.shutdown_session()


def rec(client: LanguageClient) -> Recorder:
    return client.recorder  # type: ignore[no-any-return, attr-defined]


async def labels(client: LanguageClient, ws: Workspace) -> list[tuple[int, str]]:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=ws.uri("proj", "app.py")),
            range=lsp.Range(
                start=lsp.Position(line=0, character=0), end=lsp.Position(line=24, character=0)
            ),
        )
    )
    return [(h.position.line, h.label) for h in result or []]  # type: ignore[misc]


async def loaded_run(
    client: LanguageClient, ws: Workspace, run_id: str | None, timeout: float = 10.0
) -> dict[str, Any]:
    """Wait for a runLoaded of proj whose run is ``run_id``; return its params."""
    for _ in range(int(timeout / 0.02)):
        mine = [r for r in rec(client).run_loaded if r["workspace"] == ws.uri("proj")]
        if mine and (mine[-1]["run"] or {}).get("id") == run_id:
            return mine[-1]
        await asyncio.sleep(0.02)
    raise AssertionError(f"no runLoaded for {run_id}: {rec(client).run_loaded[-1:]}")


async def execute(client: LanguageClient, command: str, *args: Any) -> Any:
    return plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=command, arguments=list(args))
        )
    )


async def test_initialization_options_apply(live: LanguageClient) -> None:
    live_ws: Workspace = live.ws  # type: ignore[attr-defined]
    assert await labels(live, live_ws) == [
        (4, "3.0 MiB allocated · 1.2k allocs"),
        (9, "8.0 KiB allocated · 2 allocs"),
        (17, "3.0 MiB allocated in calls"),
        (22, "3.0 MiB allocated in calls"),
    ]


async def test_watcher_registered_when_client_can(live: LanguageClient) -> None:
    regs = rec(live).registrations
    if live.profile == "visual-studio-code":  # type: ignore[attr-defined]
        assert [(r.id, r.method) for r in regs] == [
            ("memlens-runs-watcher", "workspace/didChangeWatchedFiles")
        ]
        options = plain(regs[0].register_options)
        assert options == {"watchers": [{"globPattern": "**/.memlens/runs/**"}]}
    else:  # Neovim does not register watchers dynamically: the poll covers it
        assert regs == []


async def test_new_run_is_loaded_and_client_refreshed(live: LanguageClient) -> None:
    live_ws: Workspace = live.ws  # type: ignore[attr-defined]
    before = (rec(live).inlay_refreshes, rec(live).lens_refreshes)
    proj = live_ws.folders["proj"]
    path = write_run(
        proj, app_run(proj / "app.py", peak5=5 * MiB, alloc5=6 * MiB), "20261123-100000-1"
    )
    if live.profile == "visual-studio-code":  # type: ignore[attr-defined]
        live.workspace_did_change_watched_files(
            lsp.DidChangeWatchedFilesParams(
                changes=[lsp.FileEvent(uri=path.as_uri(), type=lsp.FileChangeType.Created)]
            )
        )
    params = await loaded_run(live, live_ws, "20261123-100000-1")
    assert params["baseline"]["id"] == "20261121-100000-1"
    assert (await labels(live, live_ws))[0] == (4, "6.0 MiB allocated · 1.2k allocs")
    after = (rec(live).inlay_refreshes, rec(live).lens_refreshes)
    if live.profile == "visual-studio-code":  # type: ignore[attr-defined]
        assert after[1] > before[1]
        assert after[0] == before[0] == 0
    else:
        assert after[0] > before[0]
        assert after[1] == before[1] == 0


async def test_choose_run_until_a_new_run_appears(live: LanguageClient) -> None:
    live_ws: Workspace = live.ws  # type: ignore[attr-defined]
    summary = await execute(
        live, "memlens.chooseRun", {"run": "20261122-100000-1", "workspace": live_ws.uri("proj")}
    )
    assert summary["id"] == "20261122-100000-1"
    await loaded_run(live, live_ws, "20261122-100000-1")
    assert (await labels(live, live_ws))[0] == (4, "3.0 MiB allocated · 1.2k allocs")
    runs = await execute(live, "memlens.listRuns", {"workspace": live_ws.uri("proj")})
    assert [r["id"] for r in runs if r["isLoaded"]] == ["20261122-100000-1"]

    proj = live_ws.folders["proj"]
    write_run(proj, app_run(proj / "app.py", alloc5=7 * MiB), "20261124-100000-1")
    await loaded_run(live, live_ws, "20261124-100000-1")
    assert (await labels(live, live_ws))[0] == (4, "7.0 MiB allocated · 1.2k allocs")


async def test_set_and_clear_baseline(live: LanguageClient) -> None:
    live_ws: Workspace = live.ws  # type: ignore[attr-defined]
    summary = await execute(
        live, "memlens.setBaseline", {"run": "20261123", "workspace": live_ws.uri("proj")}
    )
    assert summary["id"] == "20261123-100000-1"
    assert (
        Store(live_ws.folders["proj"]).baseline()
        == live_ws.folders["proj"] / ".memlens/runs/20261123-100000-1.mlrun"
    )
    for _ in range(100):
        last = [r for r in rec(live).run_loaded if r["workspace"] == live_ws.uri("proj")][-1]
        if last["baseline"] and last["baseline"]["id"] == "20261123-100000-1":
            break
        await asyncio.sleep(0.02)
    assert last["baseline"]["id"] == "20261123-100000-1"

    await execute(live, "memlens.clearBaseline", {"workspace": live_ws.uri("proj")})
    last = [r for r in rec(live).run_loaded if r["workspace"] == live_ws.uri("proj")][-1]
    assert last["baseline"] is None
    assert Store(live_ws.folders["proj"]).baseline() is None

    with pytest.raises(JsonRpcException, match="no run 'nope'"):
        await execute(
            live, "memlens.setBaseline", {"run": "nope", "workspace": live_ws.uri("proj")}
        )


HAVE_RUN_COMMAND = importlib.util.find_spec("memlens.cli.run") is not None
needs_run = pytest.mark.skipif(
    not HAVE_RUN_COMMAND, reason="`memlens run` (memlens.cli.run) is not in this tree yet"
)

TINY = """\
blocks = [bytearray(4096) for _ in range(256)]

if __name__ == "__main__":
    print("done", len(blocks))
"""


@needs_run
async def test_run_file_makes_a_run_and_notifies(live: LanguageClient) -> None:
    live_ws: Workspace = live.ws  # type: ignore[attr-defined]
    proj = live_ws.folders["proj"]
    script = proj / f"tiny_{live.profile.replace('-', '_')}.py"  # type: ignore[attr-defined]
    script.write_text(TINY, encoding="utf-8")
    before = set(Store(proj).run_files())
    n_loaded = len(rec(live).run_loaded)
    result = await execute(live, "memlens.runFile", {"uri": script.as_uri(), "args": []})
    assert result["exitCode"] == 0
    new = set(Store(proj).run_files()) - before
    assert len(new) == 1
    assert result["run"] == str(new.pop())
    assert Store(proj).latest() == Path(result["run"])
    loaded = [r for r in rec(live).run_loaded[n_loaded:] if r["workspace"] == live_ws.uri("proj")]
    assert loaded
    assert loaded[-1]["run"]["path"] == result["run"]
    reports = [v for values in live.progress_reports.values() for v in values]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin)
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd)


@needs_run
async def test_run_file_can_be_cancelled(live: LanguageClient) -> None:
    live_ws: Workspace = live.ws  # type: ignore[attr-defined]
    proj = live_ws.folders["proj"]
    script = proj / f"slow_{live.profile.replace('-', '_')}.py"  # type: ignore[attr-defined]
    script.write_text(
        "import time\nprint('started', flush=True)\ntime.sleep(60)\n", encoding="utf-8"
    )
    tokens_before = set(live.progress_reports)
    task = asyncio.ensure_future(execute(live, "memlens.runFile", {"uri": script.as_uri()}))
    for _ in range(500):
        new = [
            t for t in live.progress_reports if t not in tokens_before and live.progress_reports[t]
        ]
        if new:
            break
        await asyncio.sleep(0.02)
    assert new, "no progress began"
    await asyncio.sleep(0.5)
    live.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=new[0]))
    result = await asyncio.wait_for(task, 30)
    assert isinstance(result["exitCode"], int)  # SIGINT: the run decides its exit code
    assert isinstance(live.progress_reports[new[0]][-1], lsp.WorkDoneProgressEnd)
    assert live.progress_reports[new[0]][-1].message == "cancelled"


async def test_added_workspace_folder_gets_its_store(live: LanguageClient) -> None:
    live_ws: Workspace = live.ws  # type: ignore[attr-defined]
    lib = live_ws.uri("lib")
    assert not [r for r in rec(live).run_loaded if r["workspace"] == lib]
    live.workspace_did_change_workspace_folders(
        lsp.DidChangeWorkspaceFoldersParams(
            event=lsp.WorkspaceFoldersChangeEvent(
                added=[lsp.WorkspaceFolder(uri=lib, name="lib")], removed=[]
            )
        )
    )
    for _ in range(250):
        loaded = [r for r in rec(live).run_loaded if r["workspace"] == lib]
        if loaded:
            break
        await asyncio.sleep(0.02)
    assert loaded[-1]["run"]["id"] == "20261122-090000-7"
