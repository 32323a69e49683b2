"""Hand-made runs for tests (no tracer needed): every run a test builds by hand is made here
(:func:`new_run`, with :func:`info` and :func:`source`), so a change to how runs are made is
made once."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

from memlens.model import (
    CallNode,
    FunctionStats,
    HeldBy,
    Hop,
    LineStats,
    LineTable,
    Run,
    RunInfo,
    SourceFile,
    TimelinePoint,
)

MIB = 1024 * 1024


def info(**overrides: object) -> RunInfo:
    base: dict[str, object] = {
        "command": ("python", "app.py"),
        "python": "3.11.7",
        "platform": "Linux-test",
        "started": "2026-11-22T10:00:00+00:00",
        "ended": "2026-11-22T10:00:01.500000+00:00",
        "duration_s": 1.5,
        "pid": 4242,
        "exit_code": 0,
        "mode": "exact",
        "sample_interval_bytes": None,
        "peak_traced_bytes": 48 * MIB,
        "peak_rss_bytes": 80 * MIB,
        "complete": True,
        "cwd": "/work",
        "memlens_version": "0.1.0",
        "max_depth": 128,
    }
    base.update(overrides)
    return RunInfo(**base)  # type: ignore[arg-type]


def source(
    path: str,
    text: str | None,
    lines: Mapping[int, LineStats] | None = None,
    functions: tuple[FunctionStats, ...] = (),
    *,
    sha256: str | None = None,
) -> SourceFile:
    """A recorded file; its digest is that of ``text`` saved as UTF-8 unless ``sha256`` says.
    A :class:`LineTable` stays one (as a run file's lines are read)."""
    if sha256 is None:
        sha256 = hashlib.sha256((text or "").encode()).hexdigest()
    table = lines if isinstance(lines, LineTable) else dict(lines or {})
    return SourceFile(str(path), sha256, text, table, functions)


def new_run(
    files: Mapping[str, SourceFile] | Iterable[SourceFile] = (),
    call_tree: Iterable[CallNode] = (),
    timeline: tuple[TimelinePoint, ...] = (),
    *,
    run_info: RunInfo | None = None,
    holders: tuple[HeldBy, ...] = (),
    **info_overrides: object,
) -> Run:
    """A run of ``files`` (keyed by their paths unless given as a mapping); its info is
    ``run_info``, or :func:`info` with ``info_overrides``; ``holders``: what holds its lines."""
    if not isinstance(files, Mapping):
        files = {sf.path: sf for sf in files}
    if run_info is None:
        run_info = info(**info_overrides)
    elif info_overrides:
        raise TypeError("give run_info or info overrides, not both")
    return Run(
        info=run_info, files=dict(files), call_tree=call_tree, timeline=timeline, holders=holders
    )


def sample_holders(path: str = "/work/app.py") -> tuple[HeldBy, ...]:
    """What holds :func:`sample_run`'s live lines: ``data`` (line 6) holds the list line 4
    makes; line 6's own bytes were found in no object."""
    return (
        HeldBy(
            path,
            4,
            5,
            "found",
            (
                Hop("module", "__main__", "module"),
                Hop("attribute", "data", "list", path, 4),
                Hop("buffer", "items", "", path, 4),
            ),
        ),
        HeldBy(path, 6, 0, "unreached"),
    )


def sample_run(
    path: str = "/work/app.py", text: str | None = None, **info_overrides: object
) -> Run:
    text = (
        text
        if text is not None
        else "import x\n\ndef load():\n    return [0] * 10\n\ndata = load()\n"
    )
    lines = {
        4: LineStats(
            alloc_bytes=40 * MIB,
            alloc_count=1200,
            live_bytes=30 * MIB,
            live_count=10,
            peak_bytes=40 * MIB,
            incl_alloc_bytes=40 * MIB,
            incl_live_bytes=30 * MIB,
            incl_peak_bytes=40 * MIB,
        ),
        6: LineStats(
            alloc_bytes=1024,
            alloc_count=3,
            live_bytes=1024,
            live_count=3,
            peak_bytes=1024,
            incl_alloc_bytes=40 * MIB + 1024,
            incl_live_bytes=30 * MIB + 1024,
            incl_peak_bytes=40 * MIB + 1024,
        ),
    }
    sf = SourceFile(
        path=path,
        sha256="ab" * 32,
        text=text,
        lines=lines,
        functions=(FunctionStats("load", 3, 4, 40 * MIB, 1200, 30 * MIB, 40 * MIB),),
    )
    nodes = (
        CallNode(0, -1, path, 6, "<module>", 1024, 3, 1024, 1024),
        CallNode(1, 0, path, 4, "load", 40 * MIB, 1200, 30 * MIB, 40 * MIB),
    )
    return new_run(
        [sf],
        nodes,
        (TimelinePoint(0.0, 0, 10 * MIB), TimelinePoint(1.5, 48 * MIB, 80 * MIB)),
        **info_overrides,
    )
