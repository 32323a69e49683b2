"""Loading runs, and reloading them when the run store changes.

Per workspace folder and kind of run (a program's, a test suite's: :data:`memlens.layout.KINDS`)
the server shows the latest run of that kind (or the one chosen with ``memlens.chooseRun``,
until a new run of that kind appears) and the baseline of that kind. Changes are noticed two
ways: ``workspace/didChangeWatchedFiles`` (registered dynamically when the client can) and a
cheap poll of the store every second (directory and pointer ``stat``), so it works in every
client. A reload builds a new :class:`FolderState` off the event loop, swaps it in, then
re-publishes diagnostics, asks the client to refresh hints and lenses, and sends
``memlens/runLoaded``. An unreadable run file is reported (at most once every few minutes,
however often it is rewritten) and never stops the server.

Folders load concurrently, each on a daemon thread with a time limit: a folder whose store
cannot be read (a pointer that is a FIFO, a file on a hung mount) is reported and skipped
while the others load; it is not read again while that read is still stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.uris import from_fs_path

from memlens.errors import RunFileError
from memlens.layout import KINDS, POINTERS
from memlens.merge import split_by_process
from memlens.runfile import reader
from memlens.store import Store
from memlens_lsp import convert, protocol, settings, views
from memlens_lsp.background import in_thread
from memlens_lsp.features import diagnostics
from memlens_lsp.index import FolderState, Index, Memo, RunData
from memlens_lsp.state import ClientFeatures, MemlensServer, Method, uri_path

WATCH_REGISTRATION_ID = "memlens-runs-watcher"
#: Seconds to wait for the client's answer to a server request before going on without it.
CLIENT_TIMEOUT_S = 5.0
#: Seconds a folder's runs may take to load before the folder is reported and skipped.
LOAD_TIMEOUT_S = 20.0


# -- pure-ish loading (runs in a worker thread) ---------------------------------------------
def store_signature(root: Path) -> tuple[Any, ...]:
    """A cheap fingerprint of a folder's run store: changes when runs or pointers change."""
    runs = root / ".memlens" / "runs"
    out: list[Any] = []
    for p in (runs, *(runs / name for name in POINTERS)):
        try:
            st = p.lstat()  # a pointer that is a link is ignored, not followed (memlens.store)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append(None)
    return tuple(out)


def _load(
    path: Path | None,
    previous: RunData | None,
    root: Path,
    errors: list[tuple[Path, str]],
    split: bool = True,
) -> RunData | None:
    if path is None:
        return None
    if previous is not None and previous.path == path:
        try:
            if path.stat().st_mtime_ns == previous.mtime_ns:
                return previous
        except OSError:
            return None
    try:
        run = reader.read(path)
        # A run of several processes: each one's own figures on the lines they shared (hover).
        by_process = split_by_process(str(path), run) if split else None
        return RunData(path, run, (root,), root, by_process)
    except RunFileError as exc:
        errors.append((path, str(exc)))
        return None


def load_folder(prev: FolderState) -> tuple[FolderState, list[tuple[Path, str]]]:
    """The folder's new state (reusing unchanged runs) and the run files that failed."""
    errors: list[tuple[Path, str]] = []
    # A hostile pointer (a FIFO, a link to /dev/zero...) is ignored and reported once.
    store = Store(prev.root, on_problem=lambda p, why: errors.append((p, f"ignoring {p}: {why}")))
    latest = store.latest(prev.kind)
    chosen = prev.chosen
    if chosen is not None and (prev.chosen_latest != latest or not chosen.is_file()):
        chosen = None
    run = _load(chosen or latest, prev.run, prev.root, errors)
    problem = errors[0][1] if errors else None  # the run to show could not be read
    base_path = store.baseline(prev.kind)
    base = _load(base_path, prev.baseline, prev.root, errors, split=False)
    state = prev.with_runs(run, base, problem)
    if chosen is None and prev.chosen is not None:
        state = replace(state, chosen=None, chosen_latest=None, memo=Memo())
    return state, errors


def _identity(state: FolderState | None) -> tuple[Any, ...]:
    if state is None:
        return (None,)
    return (
        *((r.path, r.mtime_ns) if r is not None else None for r in (state.run, state.baseline)),
        state.problem,
    )


# -- reloading --------------------------------------------------------------------------------
def folder_states(ls: MemlensServer) -> list[FolderState]:
    """Folder states for the workspace's folders, one per kind of run (keeping loaded runs of
    known ones)."""
    ws = ls.workspace
    uris = [f.uri for f in ws.folders.values()]
    if not uris and ws.root_uri:
        uris = [ws.root_uri]
    out = []
    for uri in uris:
        path = uri_path(uri)
        if path is None:
            continue
        root = Path(path).resolve()
        for kind in KINDS:
            out.append(ls.index.get(uri, kind) or FolderState(root, uri, kind=kind))
    return out


def _lock(ls: MemlensServer) -> asyncio.Lock:
    if ls.reload_lock is None:
        ls.reload_lock = asyncio.Lock()
    return ls.reload_lock


def swap(ls: MemlensServer, index: Index) -> None:
    """Show ``index``: the one place the server's index is replaced, always under the reload
    lock (reloads, workspace folder changes and a chosen run all come here), so a change is
    never lost to a reload that started before it. Caches of the old index go with it."""
    assert _lock(ls).locked(), "the index is replaced only under the reload lock"
    ls.index = index
    ls.mappings.clear()
    ls.hint_cache.clear()


async def reload(ls: MemlensServer, uris: list[str] | None = None, *, force: bool = False) -> None:
    """Reload the folders ``uris`` (default: all); notify the client about what changed."""
    async with _lock(ls):
        changed = await _reload(ls, uris, force)
    if changed:
        _loaded()


async def choose(
    ls: MemlensServer, uri: str, kind: str, chosen: Path | None, latest: Path | None
) -> None:
    """Show run ``chosen`` (of ``kind``) in folder ``uri`` (None: the latest again) until the
    latest of that kind leaves ``latest`` (its target when the choice was made); reload."""
    async with _lock(ls):
        folder = ls.index.get(uri, kind)
        if folder is None:
            return
        swap(ls, ls.index.replace_folder(replace(folder, chosen=chosen, chosen_latest=latest)))
        changed = await _reload(ls, [uri], True)
    if changed:
        _loaded()


async def _reload(ls: MemlensServer, uris: list[str] | None, force: bool) -> bool:
    """Reload (under the lock) the folders ``uris`` (None: all); whether any changed."""
    states = folder_states(ls)
    known = {(f.uri, f.kind) for f in ls.index.folders}
    if {(s.uri, s.kind) for s in states} != known:
        swap(ls, Index(tuple(states)))
        force = True
    by_folder: dict[str, list[FolderState]] = {}
    for state in states:
        if uris is None or state.uri in uris:
            by_folder.setdefault(state.uri, []).append(state)
    return any(
        await asyncio.gather(*(_reload_folder(ls, prev, force) for prev in by_folder.values()))
    )


def _loaded() -> None:
    # Loaded runs live until the next reload: move them out of the collector's sight, so full
    # collections during big responses do not walk 100,000s of line records.
    gc.freeze()


def load_kinds(
    prev: list[FolderState],
) -> tuple[list[FolderState], list[tuple[Path, str]]]:
    """:func:`load_folder` for each kind of run of one folder (one thread does both)."""
    states: list[FolderState] = []
    errors: list[tuple[Path, str]] = []
    for state in prev:
        new, problems = load_folder(state)
        states.append(new)
        errors.extend(p for p in problems if p not in errors)
    return states, errors


async def _reload_folder(ls: MemlensServer, prev: list[FolderState], force: bool) -> bool:
    """Load one folder's runs (each kind); when what it shows changed, swap it in and tell the
    client (one ``memlens/runLoaded`` for the folder)."""
    uri, root = prev[0].uri, prev[0].root
    if uri in ls.loading:
        return False  # an earlier read of this folder is still stuck
    ls.signatures[uri] = store_signature(root)
    ls.loading.add(uri)
    work = asyncio.ensure_future(in_thread(load_kinds, prev, name="memlens-load"))
    done: Callable[[object], None] = lambda _: ls.loading.discard(uri)  # noqa: E731
    work.add_done_callback(done)
    try:
        new, errors = await asyncio.wait_for(asyncio.shield(work), LOAD_TIMEOUT_S)
    except asyncio.TimeoutError:
        work.add_done_callback(lambda f: f.cancelled() or f.exception())
        ls.warn(
            f"load-timeout:{uri}",
            f"memlens: the runs of {root} could not be read within {LOAD_TIMEOUT_S:.0f} s; "
            "skipping that folder",
        )
        return False
    for path, message in errors:
        _report_bad_run(ls, path, message)
    changed = []
    for state in new:
        current = ls.index.get(state.uri, state.kind)
        if current is None:
            return False  # the folder was removed meanwhile
        if force or _identity(state) != _identity(current) or state.chosen != current.chosen:
            changed.append(state)
    if not changed:
        return False
    index = ls.index
    for state in changed:
        index = index.replace_folder(state)
    swap(ls, index)
    diagnostics.publish_all(ls)
    notify_loaded(ls, uri)
    # Not awaited: a slow or silent client must not hold up the next reload.
    task = asyncio.create_task(refresh(ls))
    ls.background.add(task)
    task.add_done_callback(ls.background.discard)
    return True


def _report_bad_run(ls: MemlensServer, path: Path, message: str) -> None:
    # Keyed by path: a file rewritten in place again and again is one problem.
    ls.warn(f"bad-run:{path}", f"memlens: {message}", error=False)


def notify_loaded(ls: MemlensServer, uri: str) -> None:
    """``memlens/runLoaded`` for folder ``uri``: its program runs (``run``, ``baseline``,
    ``problem``, as before kinds, and ``moment``: the moment shown, as the program run has it)
    and its test runs (``tests``, the same three)."""

    def shown(state: FolderState | None) -> dict[str, Any]:
        return {
            "run": views.run_summary(state.run if state else None),
            "baseline": views.run_summary(state.baseline if state else None),
            "problem": state.problem if state else None,
        }

    program = ls.index.get(uri, "program")
    params = {"workspace": uri, **shown(program)}
    params["moment"] = views.moment_info(program.run if program else None, ls.moment)
    params["tests"] = shown(ls.index.get(uri, "tests"))
    ls.protocol.notify(protocol.RUN_LOADED, params)


async def refresh(ls: MemlensServer) -> None:
    """Ask the client to re-request hints and lenses, when it supports refresh."""
    requests = []
    if ls.features.inlay_hint_refresh:
        requests.append(ls.workspace_inlay_hint_refresh_async(None))
    if ls.features.code_lens_refresh:
        requests.append(ls.workspace_code_lens_refresh_async(None))
    results = await asyncio.wait_for(
        asyncio.gather(*requests, return_exceptions=True), CLIENT_TIMEOUT_S
    )
    for result in results:
        if isinstance(result, BaseException):
            ls.log_message(f"memlens: refresh request failed: {result!r}", "warning")


async def poll(ls: MemlensServer) -> None:
    """The fallback watcher: stat each folder's store every ``poll_interval`` seconds."""
    while True:
        await asyncio.sleep(ls.poll_interval)
        try:
            stale = [
                f.uri
                for f in ls.index.folders
                if store_signature(f.root) != ls.signatures.get(f.uri)
            ]
            if stale:
                await reload(ls, stale)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - never let the watcher die
            ls.log_message(f"memlens: reload failed: {exc}", "error")


# -- handlers ----------------------------------------------------------------------------------
def initialize(ls: MemlensServer, params: lsp.InitializeParams) -> None:
    ls.features = ClientFeatures.from_capabilities(params.capabilities)
    ls.first_load = asyncio.Event()
    _apply_settings(ls, params.initialization_options)
    interval = os.environ.get("MEMLENS_LSP_POLL_INTERVAL")
    if interval:
        with contextlib.suppress(ValueError):
            ls.poll_interval = max(0.05, float(interval))


def _apply_settings(ls: MemlensServer, raw: object) -> bool:
    # A configuration is complete: keys it leaves out take their defaults.
    new, problems = settings.parse(raw)
    if problems:
        ls.warn("settings:" + "|".join(problems), "memlens: bad settings: " + "; ".join(problems))
    changed = new != ls.settings
    ls.settings = new
    return changed


async def _fetch_configuration(ls: MemlensServer) -> bool:
    if not ls.features.configuration:
        return False
    try:
        result = await asyncio.wait_for(
            ls.workspace_configuration_async(convert.configuration_request()), CLIENT_TIMEOUT_S
        )
    except Exception as exc:  # noqa: BLE001 - client errors: keep the settings we have
        ls.log_message(f"memlens: workspace/configuration failed: {exc}", "warning")
        return False
    if not result or result[0] is None:
        return False  # nothing configured: keep initializationOptions
    return _apply_settings(ls, result[0])


async def initialized(ls: MemlensServer, params: lsp.InitializedParams) -> None:
    await _fetch_configuration(ls)
    if ls.features.watched_files_dynamic:
        try:
            await asyncio.wait_for(
                ls.client_register_capability_async(
                    convert.watch_registration(WATCH_REGISTRATION_ID, protocol.RUNS_GLOB)
                ),
                CLIENT_TIMEOUT_S,
            )
        except Exception as exc:  # noqa: BLE001 - the poll covers it
            ls.log_message(f"memlens: cannot register a file watcher ({exc}); polling", "info")
    try:
        await reload(ls, force=True)
    finally:
        if ls.first_load is not None:
            ls.first_load.set()
    if ls.poll_task is None:
        ls.poll_task = asyncio.create_task(poll(ls))


def shutdown(ls: MemlensServer, params: None) -> None:
    if ls.poll_task is not None:
        ls.poll_task.cancel()
        ls.poll_task = None
    for program in list(ls.running.values()):
        program.kill()


async def did_change_configuration(
    ls: MemlensServer, params: lsp.DidChangeConfigurationParams
) -> None:
    raw = params.settings
    if ls.features.configuration:
        changed = await _fetch_configuration(ls)
    elif isinstance(raw, dict) and "memlens" in raw:
        changed = _apply_settings(ls, raw["memlens"])
    else:
        return
    if changed:
        diagnostics.publish_all(ls)
        await refresh(ls)


async def did_change_watched_files(
    ls: MemlensServer, params: lsp.DidChangeWatchedFilesParams
) -> None:
    touched = []
    for change in params.changes:
        path = uri_path(change.uri)
        if path is None:
            continue
        for folder in ls.index.folders:
            if folder.contains(path) and folder.uri not in touched:
                touched.append(folder.uri)
    stale = [
        u
        for u in touched
        if (f := ls.index.get(u)) and store_signature(f.root) != ls.signatures.get(u)
    ]
    if stale:
        await reload(ls, stale)


async def did_change_workspace_folders(
    ls: MemlensServer, params: lsp.DidChangeWorkspaceFoldersParams
) -> None:
    await reload(ls, force=True)


def folder_uri(path: Path) -> str:
    return from_fs_path(str(path)) or path.as_uri()


#: Lifecycle, settings and the run store.
METHODS: tuple[Method, ...] = (
    (lsp.INITIALIZE, initialize, None),
    (lsp.INITIALIZED, initialized, None),
    (lsp.SHUTDOWN, shutdown, None),
    (lsp.WORKSPACE_DID_CHANGE_CONFIGURATION, did_change_configuration, None),
    (lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES, did_change_watched_files, None),
    (lsp.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS, did_change_workspace_folders, None),
)
