"""Custom LSP methods and command names of memlens, with their parameter shapes.

Every name here is documented in ``docs/lsp.md`` and defined again for the VS Code client in
``vscode-extension/src/common/protocol.ts``; ``tests/unit/test_protocol_names.py`` checks that
the three agree.
"""

from __future__ import annotations

from typing import Any, TypedDict

#: Notification server -> client: which run and baseline a workspace folder shows.
RUN_LOADED = "memlens/runLoaded"

RUN_FILE = "memlens.runFile"
SET_BASELINE = "memlens.setBaseline"
CLEAR_BASELINE = "memlens.clearBaseline"
CHOOSE_RUN = "memlens.chooseRun"
LIST_RUNS = "memlens.listRuns"
SUMMARY = "memlens.summary"
TIMELINE = "memlens.timeline"
LINE_CHANGES = "memlens.lineChanges"
SET_MOMENT = "memlens.setMoment"
JUMP_TO_PEAK = "memlens.jumpToPeak"
DOCUMENT_RUN = "memlens.documentRun"

COMMANDS = (
    RUN_FILE,
    SET_BASELINE,
    CLEAR_BASELINE,
    CHOOSE_RUN,
    LIST_RUNS,
    SUMMARY,
    TIMELINE,
    LINE_CHANGES,
    SET_MOMENT,
    JUMP_TO_PEAK,
    DOCUMENT_RUN,
)

#: Glob of the run store the server watches (workspace/didChangeWatchedFiles).
RUNS_GLOB = "**/.memlens/runs/**"


class RunSummary(TypedDict):
    id: str
    path: str
    started: str
    command: str
    peak_traced_bytes: int
    duration_s: float
    complete: bool
    mode: str
    kind: str
    checkpoint: bool


class ShownRuns(TypedDict):
    run: RunSummary | None
    baseline: RunSummary | None
    problem: str | None


class MomentInfo(TypedDict):
    kind: str
    name: str
    spec: str
    t: float | None
    traced_bytes: int


class RunLoadedParams(TypedDict):
    workspace: str
    #: The program runs (memlens run): the run shown, its baseline, why it could not be read.
    run: RunSummary | None
    baseline: RunSummary | None
    problem: str | None
    moment: MomentInfo | None
    #: The test runs (pytest --memlens), kept apart: their own latest run and baseline.
    tests: ShownRuns


class RunFileArgs(TypedDict, total=False):
    uri: str
    args: list[str]


class RunFileResult(TypedDict):
    exitCode: int
    run: str | None


class RunListEntry(TypedDict):
    id: str
    path: str
    started: str | None
    command: str | None
    peak_traced_bytes: int | None
    duration_s: float | None
    complete: bool | None
    kind: str | None
    isBaseline: bool
    isLoaded: bool
    error: str | None


class SummaryResult(TypedDict):
    run: dict[str, Any] | None
    baseline: dict[str, Any] | None
    top: list[dict[str, Any]]
