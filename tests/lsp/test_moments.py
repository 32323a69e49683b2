"""End-to-end over plain LSP: a moment of the run (memlens.setMoment, memlens.jumpToPeak, the
timeline's moments), and the leak rule's warnings (grew) and notes (kept).

The moment is the server's state, so these tests get their own workspace and server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_lsp
from lsp_workspace import (
    PROFILES,
    SERVER,
    TIMED,
    TIMES,
    Workspace,
    plain,
    start_session,
    timed_run,
    write_run,
)
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from memlens.units import fmt_bytes

pytestmark = pytest.mark.asyncio(loop_scope="module")

LINES = TIMED.splitlines()
M = 1_000_000


@pytest_lsp.fixture(scope="module", params=PROFILES, config=SERVER)
async def timed(
    lsp_client: LanguageClient,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[None]:
    root = tmp_path_factory.mktemp("lsp-moments")
    ws = Workspace(root)
    folder = (root / "timed").resolve()
    folder.mkdir()
    ws.folders["timed"] = folder
    (folder / "timed.py").write_text(TIMED, encoding="utf-8")
    write_run(folder, timed_run(folder / "timed.py"), "20261124-100000-1")
    lsp_client.ws = ws  # type: ignore[attr-defined]
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    await start_session(lsp_client, request.param, ws, ["timed"])
    lsp_client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=ws.uri("timed", "timed.py"), language_id="python", version=1, text=TIMED
            )
        )
    )
    yield
    await lsp_client.shutdown_session()


def uri(client: LanguageClient) -> str:
    return client.ws.uri("timed", "timed.py")  # type: ignore[attr-defined, no-any-return]


def eol(client: LanguageClient, line: int) -> int:
    """The end of 0-based ``line`` in the profile's position encoding."""
    text = LINES[line]
    if client.profile == "neovim":  # type: ignore[attr-defined]
        return len(text.encode("utf-8"))
    return len(text.encode("utf-16-le")) // 2


async def hints(client: LanguageClient) -> list[tuple[int, int, str]]:
    result = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri(client)),
            range=lsp.Range(
                start=lsp.Position(line=0, character=0),
                end=lsp.Position(line=len(LINES), character=0),
            ),
        )
    )
    return [(h.position.line, h.position.character, h.label) for h in result or []]  # type: ignore[misc]


async def execute(client: LanguageClient, command: str, *args: Any) -> Any:
    return plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=command, arguments=list(args))
        )
    )


async def hover(client: LanguageClient, line: int) -> str:
    result = await client.text_document_hover_async(
        lsp.HoverParams(
            text_document=lsp.TextDocumentIdentifier(uri=uri(client)),
            position=lsp.Position(line=line, character=4),
        )
    )
    assert result is not None
    assert isinstance(result.contents, lsp.MarkupContent)
    return result.contents.value


async def lenses(client: LanguageClient) -> list[tuple[int, str]]:
    result = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri(client)))
    )
    return [(lens.range.start.line, lens.command.title) for lens in result or [] if lens.command]


def at(client: LanguageClient, line: int, label: str) -> tuple[int, int, str]:
    """The hint expected at the end of 0-based ``line``."""
    return (line, eol(client, line), label)


async def test_the_run_figures_before_any_moment(timed: LanguageClient) -> None:
    client = timed
    assert await hints(client) == [
        at(client, 6, f"{fmt_bytes(30 * M)} at peak · 1 alloc"),
        at(client, 19, f"{fmt_bytes(30 * M)} at peak in calls"),
        at(client, 26, f"{fmt_bytes(30 * M)} at peak in calls"),
    ]


async def test_scrub_the_timeline(timed: LanguageClient) -> None:
    """What a client's timeline control does: read where the moments are, set one, re-read
    the hints; set another; go back to the run's figures."""
    client = timed
    timeline = await execute(client, "memlens.timeline", {})
    assert timeline["moments"]["t"] == TIMES
    assert timeline["duration_s"] == 1.0
    assert timeline["peak_at_s"] == 0.15
    assert timeline["moment"] is None
    # The drawing says where time runs, so that a click can be turned into a time.
    assert 'data-x0="70"' in timeline["svg"]
    assert 'data-t1="' in timeline["svg"]

    refreshes = client.recorder.lens_refreshes  # type: ignore[attr-defined]
    moment = await execute(client, "memlens.setMoment", {"moment": "0.25s"})
    assert moment == {
        "kind": "time",
        "name": "0.20 s",
        "spec": "0.200000s",
        "t": 0.2,
        "traced_bytes": 30 * M,
    }
    if client.profile == "visual-studio-code":  # type: ignore[attr-defined]
        # The client is asked to show the moment's lenses (and hints, where it can refresh them).
        assert client.recorder.lens_refreshes > refreshes  # type: ignore[attr-defined]
    assert await hints(client) == [
        at(client, 6, f"{fmt_bytes(30 * M)} live at 0.20 s"),
        at(client, 19, f"{fmt_bytes(30 * M)} live at 0.20 s in calls"),
        at(client, 26, f"{fmt_bytes(30 * M)} live at 0.20 s in calls"),
    ]

    # Further along: the 30 MB are gone, 20 MB kept and the leak at 6 MB.
    moment = await execute(client, "memlens.setMoment", {"moment": "85%"})
    assert moment["name"] == "0.80 s"
    assert await hints(client) == [
        at(client, 11, f"{fmt_bytes(20 * M)} live at 0.80 s"),
        at(client, 15, f"{fmt_bytes(6 * M)} live at 0.80 s"),
        at(client, 20, f"{fmt_bytes(20 * M)} live at 0.80 s in calls"),
        at(client, 22, f"{fmt_bytes(6 * M)} live at 0.80 s in calls"),
        at(client, 26, f"{fmt_bytes(26 * M)} live at 0.80 s in calls"),
    ]
    # Lenses: each function's live bytes then (incl. calls).
    assert await lenses(client) == [
        (10, f"memlens: {fmt_bytes(20 * M)} live at 0.80 s, incl. calls"),
        (14, f"memlens: {fmt_bytes(6 * M)} live at 0.80 s, incl. calls"),
        (18, f"memlens: {fmt_bytes(26 * M)} live at 0.80 s, incl. calls"),
    ]
    # The hover leads with the moment's label and says which moment it is.
    text = await hover(client, 15)
    assert text.startswith(f"**memlens** · {fmt_bytes(6 * M)} live at 0.80 s\n\n")
    assert "Shown: the moment 0.80 s (" in text
    # ... and pictures the line's live bytes over the run.
    assert (
        "Live over the run: `▁▁▁▁▁▁▁▁▁▁▁▁▁▁▂▂▄▄▄▆▆███` most 7.6 MiB at 0.90 s, 7.6 MiB at exit"
        in text
    )

    # Back to the run's own figures.
    assert await execute(client, "memlens.setMoment", {"moment": None}) is None
    assert (await hints(client))[0] == at(client, 6, f"{fmt_bytes(30 * M)} at peak · 1 alloc")


async def test_jump_to_peak(timed: LanguageClient) -> None:
    client = timed
    loaded_before = len(client.recorder.run_loaded)  # type: ignore[attr-defined]
    answer = await execute(client, "memlens.jumpToPeak", {})
    assert answer["file"] == str(client.ws.folders["timed"] / "timed.py")  # type: ignore[attr-defined]
    assert answer["line"] == 7
    assert answer["moment"]["kind"] == "peak"
    assert answer["moment"]["t"] == 0.15
    assert (await hints(client))[0] == at(client, 6, f"{fmt_bytes(30 * M)} at peak")
    assert len(client.recorder.run_loaded) == loaded_before  # type: ignore[attr-defined]
    await execute(client, "memlens.setMoment", {"moment": None})


@pytest.mark.parametrize(
    ("moment", "message"),
    [
        ("soon", "memlens: not a moment: 'soon' (use peak, end, a time such as 2.5s"),
        ("3s", "memlens: 3s is after the end of the run (1.00 s)"),
        (5, 'memlens: "moment" must be a string or null'),
    ],
)
async def test_bad_moments_are_refused(timed: LanguageClient, moment: object, message: str) -> None:
    client = timed
    with pytest.raises(JsonRpcException) as err:
        await execute(client, "memlens.setMoment", {"moment": moment})
    assert err.value.code == -32602
    assert str(err.value.message).startswith(message)
    # Nothing changed.
    assert (await hints(client))[0][2].endswith("at peak · 1 alloc")


async def test_leak_rule_warns_on_growth_and_notes_what_is_kept(timed: LanguageClient) -> None:
    client = timed
    for _ in range(100):
        diags = client.diagnostics.get(uri(client))
        if diags:
            break
        await asyncio.sleep(0.05)
    diags = sorted(client.diagnostics[uri(client)], key=lambda d: d.range.start.line)
    assert [(d.range.start.line, d.severity, d.code) for d in diags] == [
        (11, lsp.DiagnosticSeverity.Information, "kept"),
        (15, lsp.DiagnosticSeverity.Warning, "leak"),
    ]
    assert diags[0].message == (
        f"{fmt_bytes(20 * M)} allocated here in 1 objects is kept to the end: held since 0.50 s "
        "and not grown since (allocated once and kept, like a first-use buffer, a cache filled "
        "once or state loaded lazily: not a leak)"
    )
    assert diags[1].message == (
        f"{fmt_bytes(8 * M)} allocated here in 4 objects is still live at exit, and grew during "
        f"the run: {fmt_bytes(6 * M)} by 0.80 s, {fmt_bytes(8 * M)} at exit (likely leak; "
        f"{fmt_bytes(8 * M)} allocated in total)"
    )
    assert diags[1].range.start.character == 4
    assert diags[1].range.end.character == eol(client, 15)
