"""``workspace/executeCommand`` handlers: run the current file, baseline, choose and list runs.

``memlens.runFile`` runs the file under ``memlens run`` in a subprocess in its workspace folder
(never inside the server; :class:`memlens.launch.ProfiledProgram`: its own run file, its own
process group, a clean stop), streams its output as ``$/progress`` reports and can be
cancelled (``window/workDoneProgress/cancel`` or ``$/cancelRequest``). When it ends the folder
is reloaded, which sends ``memlens/runLoaded``. Shapes are documented in docs/lsp.md.
"""

from __future__ import annotations

import asyncio
import functools
import os
import stat
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.uris import to_fs_path

from memlens import moment as memlens_moment
from memlens import timeline as memlens_timeline
from memlens.errors import MemlensError, RunFileError
from memlens.launch import ProfiledProgram
from memlens.layout import KINDS, pointer_name
from memlens.runfile import reader
from memlens.store import Store, run_kind
from memlens_lsp import convert, protocol, views
from memlens_lsp.background import in_thread
from memlens_lsp.features import runs
from memlens_lsp.index import FolderState
from memlens_lsp.state import MemlensServer, uri_path

#: Seconds a command may spend finding and checking a run file.
RESOLVE_TIMEOUT_S = 10.0


def _arg(args: tuple[object, ...]) -> dict[str, Any]:
    if not args:
        return {}
    first = args[0]
    if isinstance(first, dict):
        return first
    if isinstance(first, str):  # tolerate a bare run spec or uri
        return {"run": first, "uri": first}
    raise JsonRpcInvalidParams(message="memlens: expected one object argument")


def _folder(ls: MemlensServer, a: dict[str, Any]) -> FolderState:
    uri = a.get("workspace")
    if isinstance(uri, str):
        state = ls.index.get(uri)
        if state is None:
            path = uri_path(uri)
            if path is not None:
                state = ls.index.folder_for(path)
        if state is not None:
            return state
    doc = a.get("uri")
    if isinstance(doc, str) and (path := uri_path(doc)) is not None:
        state = ls.index.folder_for(path)
        if state is not None:
            return state
    if not ls.index.folders:
        raise JsonRpcInvalidParams(message="memlens: no workspace folder is open")
    return ls.index.folders[0]


def _shown(ls: MemlensServer, a: dict[str, Any]) -> FolderState:
    """The folder state (one kind of run) a command is about: ``kind`` when given, else the
    kind whose run shows the document ``uri``, else the program runs when there is one, else
    the test runs."""
    folder = _folder(ls, a)
    kind = a.get("kind")
    if kind not in KINDS:
        doc = a.get("uri")
        key = uri_path(doc) if isinstance(doc, str) else None
        found = ls.index.lookup(key) if key is not None else None
        if found is not None and found[0].uri == folder.uri:
            return found[0]
        program = ls.index.get(folder.uri, "program")
        kind = "program" if program is not None and program.run is not None else "tests"
    return ls.index.get(folder.uri, kind) or folder


def _kind_arg(a: dict[str, Any]) -> list[str]:
    """The kinds a command acts on: ``kind`` when given, else all."""
    kind = a.get("kind")
    if kind is None:
        return list(KINDS)
    if kind not in KINDS:
        raise JsonRpcInvalidParams(message=f'memlens: "kind" must be one of {", ".join(KINDS)}')
    return [kind]


def _resolve(folder: FolderState, spec: object) -> Path:
    """The run file a spec names: a regular file that reads as a run (checked off the loop:
    never a device, FIFO or directory, whatever a path or pointer says)."""
    if not isinstance(spec, str) or not spec:
        raise JsonRpcInvalidParams(message='memlens: missing "run" (a run id, path or latest)')
    try:
        path = Store(folder.root).resolve(spec)
    except MemlensError as exc:
        raise JsonRpcInvalidParams(message=f"memlens: {exc}") from None
    if not path.is_absolute():
        path = (folder.root / path).resolve()
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise JsonRpcInvalidParams(message=f"memlens: cannot read {spec}: {exc.strerror}") from None
    if not stat.S_ISREG(mode):
        raise JsonRpcInvalidParams(message=f"memlens: {spec} is not a run file")
    try:
        reader.read_info(path)
    except RunFileError as exc:
        raise JsonRpcInvalidParams(message=f"memlens: {exc}") from None
    return path


async def _run_path(folder: FolderState, spec: object) -> Path:
    try:
        return await asyncio.wait_for(
            in_thread(_resolve, folder, spec, name="memlens-resolve"), RESOLVE_TIMEOUT_S
        )
    except asyncio.TimeoutError:
        raise JsonRpcInvalidParams(message=f"memlens: cannot read {spec}: timed out") from None


async def _kind_of(path: Path) -> str:
    info = await in_thread(reader.read_info, path, name="memlens-resolve")
    return run_kind(info)


async def set_baseline(ls: MemlensServer, *args: object) -> dict[str, Any] | None:
    """The run becomes the baseline of its kind (program runs, test runs)."""
    a = _arg(args)
    folder = _folder(ls, a)
    path = await _run_path(folder, a.get("run", "latest"))
    kind = await _kind_of(path)
    Store(folder.root).set_pointer(pointer_name("baseline", kind), path)
    await runs.reload(ls, [folder.uri])
    state = ls.index.get(folder.uri, kind)
    return views.run_summary(state.baseline if state else None)


async def clear_baseline(ls: MemlensServer, *args: object) -> None:
    a = _arg(args)
    folder = _folder(ls, a)
    store = Store(folder.root)
    for kind in _kind_arg(a):
        store.clear_pointer(pointer_name("baseline", kind))
    await runs.reload(ls, [folder.uri])


async def choose_run(ls: MemlensServer, *args: object) -> dict[str, Any] | None:
    """Show the run in place of the latest of its kind (until a new run of that kind)."""
    a = _arg(args)
    folder = _folder(ls, a)
    path = await _run_path(folder, a.get("run"))
    kind = await _kind_of(path)
    latest = await in_thread(Store(folder.root).latest, kind, name="memlens-resolve")
    await runs.choose(ls, folder.uri, kind, None if path == latest else path, latest)
    state = ls.index.get(folder.uri, kind)
    return views.run_summary(state.run if state else None)


async def document_run(ls: MemlensServer, *args: object) -> dict[str, Any] | None:
    """Which run a document's figures come from: ``{"workspace", "kind", "run"}``, or null
    when none has figures for it (the status bar shows that run)."""
    a = _arg(args)
    uri = a.get("uri")
    key = uri_path(uri) if isinstance(uri, str) else None
    found = ls.index.lookup(key) if key is not None else None
    if found is None:
        return None
    state = found[0]
    return {"workspace": state.uri, "kind": state.kind, "run": views.run_summary(state.run)}


async def list_runs(ls: MemlensServer, *args: object) -> list[protocol.RunListEntry]:
    folder = _folder(ls, _arg(args))
    store = Store(folder.root)

    def baselines() -> dict[str, Path | None]:
        return {kind: store.baseline(kind) for kind in KINDS}

    baseline = await in_thread(baselines, name="memlens-list")
    loaded = [
        state.run.path.resolve()
        for kind in KINDS
        if (state := ls.index.get(folder.uri, kind)) is not None and state.run is not None
    ]
    out: list[protocol.RunListEntry] = []
    for e in await in_thread(store.entries, name="memlens-list"):
        info = e.info
        kind = run_kind(info) if info else None
        base = baseline.get(kind) if kind else None
        out.append(
            {
                "id": e.id,
                "path": str(e.path),
                "started": info.started if info else None,
                "command": " ".join(info.command) if info else None,
                "peak_traced_bytes": info.peak_traced_bytes if info else None,
                "duration_s": info.duration_s if info else None,
                "complete": info.complete if info else None,
                "kind": kind,
                "isBaseline": base is not None and e.path.resolve() == base.resolve(),
                "isLoaded": e.path.resolve() in loaded,
                "error": e.error,
            }
        )
    return out


async def summary(ls: MemlensServer, *args: object) -> dict[str, Any]:
    folder = _shown(ls, _arg(args))
    settings = ls.settings
    top: list[dict[str, Any]] = []
    gone: list[dict[str, Any]] = []
    if folder.run is not None:
        run = folder.run
        top = views.top_lines(run, settings.figure)
        if folder.baseline is not None and not run.run.info.checkpoint:
            top, gone = await in_thread(views.compare_summary, folder, top, settings)
    delta = None
    final = folder.run is not None and not folder.run.run.info.checkpoint
    if final and folder.run is not None and folder.baseline is not None:
        delta = folder.run.run.info.peak_traced_bytes - folder.baseline.run.info.peak_traced_bytes
    return {
        "run": views.run_summary(folder.run),
        "baseline": views.run_summary(folder.baseline),
        "delta": delta,
        "top": top,
        "gone": gone,
    }


async def line_changes(ls: MemlensServer, *args: object) -> dict[str, Any]:
    """Comparison mode, per document: how each line's figure changed against the baseline
    (clients colour them) and the baseline lines whose code is gone."""
    a = _arg(args)
    uri = a.get("uri")
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams(message='memlens: missing "uri"')
    ctx = await ls.context(uri)
    if ctx is None or ctx.folder.baseline is None:
        return {"changes": [], "gone": []}
    size = len(ctx.lines)
    changes = views.line_changes(ctx.view, ctx.mapping, ls.settings, size)
    gone = views.gone_lines(ctx.view, ctx.mapping, ls.settings, size)
    return {
        "changes": [
            {"line": c.line, "kind": c.kind, "delta": c.delta, "level": c.level} for c in changes
        ],
        "gone": [
            {"line": g.line, "baselineLine": g.baseline_line, "text": g.text, "label": g.label}
            for g in gone
        ],
    }


async def timeline(ls: MemlensServer, *args: object) -> dict[str, Any]:
    """Memory over time of the shown run: an SVG (peak marked, the lines that held most at
    the peak beside it) and the same facts as data."""
    folder = _shown(ls, _arg(args))
    run = folder.run
    if run is None:
        raise JsonRpcInvalidParams(message="memlens: no run is loaded in this folder")
    # The client lists the lines held most at the peak itself (as links to them).
    svg = await in_thread(
        functools.partial(memlens_timeline.svg, run.run, beside=False), name="memlens-timeline"
    )
    peak = memlens_timeline.peak_point(run.run)
    moments = run.run.moments
    return {
        "run": views.run_summary(run),
        "svg": svg,
        "peak": None if peak is None else {"t": peak.t, "traced_bytes": peak.traced_bytes},
        "peak_at_s": run.run.info.peak_at_s,
        "duration_s": run.run.info.duration_s,
        "moments": {"t": list(moments.t), "traced_bytes": list(moments.traced_bytes)},
        "moment": views.moment_info(run, ls.moment),
        "top": [
            {
                "file": run.local_path(row.file),
                "line": row.line,
                "peak_bytes": row.peak_bytes,
                "text": row.text,
            }
            for row in memlens_timeline.top_at_peak(run.run)
        ],
    }


# -- moments ---------------------------------------------------------------------------------
async def set_moment(ls: MemlensServer, *args: object) -> dict[str, Any] | None:
    """Hints, hovers and lenses show each line's live bytes at the moment given (``peak``,
    ``end``, ``2.5s``, ``40%``), or the run's own figures again (``null``); the result is the
    moment as the folder's run has it."""
    a = _arg(args)
    spec = a.get("moment")
    if spec is None or spec == "":
        ls.moment = None
        await runs.refresh(ls)
        return None
    if not isinstance(spec, str):
        raise JsonRpcInvalidParams(message='memlens: "moment" must be a string or null')
    folder = _shown(ls, a)
    try:
        memlens_moment.parse(spec)
        if folder.run is not None:
            memlens_moment.resolve(folder.run.run, spec)
    except MemlensError as exc:
        raise JsonRpcInvalidParams(message=f"memlens: {exc}") from None
    ls.moment = spec.strip()
    await runs.refresh(ls)
    return views.moment_info(folder.run, ls.moment)


async def jump_to_peak(ls: MemlensServer, *args: object) -> dict[str, Any]:
    """The peak moment is shown (as ``memlens.setMoment`` with ``peak``); the result names the
    line that held the most then, for the client to open."""
    folder = _shown(ls, _arg(args))
    run = folder.run
    if run is None:
        raise JsonRpcInvalidParams(message="memlens: no run is loaded in this folder")
    ls.moment = "peak"
    await runs.refresh(ls)
    top = views.top_lines(run, "peak", 1)
    return {
        "moment": views.moment_info(run, ls.moment),
        "file": top[0]["file"] if top else None,
        "line": top[0]["line"] if top else None,
    }


# -- memlens.runFile ---------------------------------------------------------------------------
async def run_file(ls: MemlensServer, *args: object) -> protocol.RunFileResult:
    a = _arg(args)
    uri = a.get("uri")
    # The file as the client names it is run (its links kept, as `python FILE` would); its
    # canonical path says which folder it belongs to.
    path = to_fs_path(uri) if isinstance(uri, str) and uri.startswith("file:") else None
    key = uri_path(uri) if isinstance(uri, str) else None
    try:
        regular = path is not None and key is not None and stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        regular = False
    if path is None or key is None or not regular:
        raise JsonRpcInvalidParams(message=f"memlens: cannot run {uri!r}: not a file")
    extra = a.get("args") or []
    if not isinstance(extra, list) or not all(isinstance(x, str) for x in extra):
        raise JsonRpcInvalidParams(message='memlens: "args" must be a list of strings')
    # Only files of an open workspace folder run, and their runs go to that folder's store:
    # never a store in a directory the user did not open (a system directory, say).
    folder_state = ls.index.folder_for(key)
    if folder_state is None:
        raise JsonRpcInvalidParams(
            message=f"memlens: cannot run {path}: it is outside every workspace folder"
        )
    root = folder_state.root
    loop = asyncio.get_running_loop()
    token = f"memlens-run-{uuid.uuid4().hex[:12]}"
    progress = ls.features.work_done_progress
    tail: list[str] = []

    def on_line(text: str) -> None:  # on the program's output thread
        loop.call_soon_threadsafe(show, text)

    def show(text: str) -> None:
        if not text.strip():
            return
        tail.append(text)
        del tail[:-20]
        ls.log_message(f"[memlens run] {text}", "log")
        if progress:
            ls.work_done_progress.report(token, convert.progress_report(text[:200]))

    program = ProfiledProgram(root, path, extra, report=True, on_line=on_line)
    if progress:
        try:
            await ls.work_done_progress.create_async(token)
        except Exception as exc:  # noqa: BLE001 - a client error only costs the progress bar
            ls.log_message(f"memlens: no progress bar ({exc})", "info")
            progress = False
    title = f"memlens run {os.path.basename(path)}"
    if progress:
        ls.work_done_progress.begin(token, convert.progress_begin(title, "starting"))
    ls.log_message(f"memlens: running {' '.join(program.command)} in {root}")
    try:
        program.start()
    except MemlensError as exc:
        if progress:
            ls.work_done_progress.end(token, convert.progress_end(str(exc)))
        raise JsonRpcInternalError(message=f"memlens: {exc}") from None
    ls.running[token] = program
    cancelled = False
    code: int | None = None
    try:
        ended: asyncio.Future[int | None] = asyncio.ensure_future(in_thread(program.wait))
        waiters: set[asyncio.Future[Any]] = {ended}
        cancel_token = ls.work_done_progress.tokens.get(token)
        if cancel_token is not None:
            waiters.add(asyncio.wrap_future(cancel_token))
        _done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for fut in pending - {ended}:
            fut.cancel()
        if ended.done():
            code = ended.result()
        else:
            cancelled = True
            code = await in_thread(program.stop)
        assert code is not None
    except asyncio.CancelledError:  # $/cancelRequest for the executeCommand request
        await in_thread(program.stop)
        raise
    finally:
        ls.running.pop(token, None)
        ls.work_done_progress.tokens.pop(token, None)
        if progress:
            ls.work_done_progress.end(
                token, convert.progress_end("cancelled" if cancelled else f"exit code {code}")
            )
    new_run = str(program.run_path) if program.run_path.is_file() else None
    if code != 0 and not cancelled:
        detail = tail[-1] if tail else "no output"
        ls.warn(
            f"run-failed:{token}",
            f"memlens run {os.path.basename(path)} exited with {code}: {detail}",
        )
    await runs.reload(ls, [folder_state.uri])
    return {"exitCode": code, "run": new_run}


Handler = Callable[..., Coroutine[Any, Any, Any]]

HANDLERS: dict[str, Handler] = {
    protocol.RUN_FILE: run_file,
    protocol.SET_BASELINE: set_baseline,
    protocol.CLEAR_BASELINE: clear_baseline,
    protocol.CHOOSE_RUN: choose_run,
    protocol.LIST_RUNS: list_runs,
    protocol.SUMMARY: summary,
    protocol.TIMELINE: timeline,
    protocol.LINE_CHANGES: line_changes,
    protocol.SET_MOMENT: set_moment,
    protocol.JUMP_TO_PEAK: jump_to_peak,
    protocol.DOCUMENT_RUN: document_run,
}
