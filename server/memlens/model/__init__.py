"""The data model of a profiling run: plain, immutable values, standard library only.

Everything imports the model from here; its parts stand alone: :mod:`memlens.model.value` (the
base of the types, :func:`replace`), :mod:`memlens.model.figures` (the figures' names and the
table of the figures users name), :mod:`memlens.model.tree` (the call tree, by column).

Everything that shows results (CLI, language server, export, diff) speaks these types; the run
file (:mod:`memlens.runfile`) stores exactly them. Line numbers are 1-based, as in Python
tracebacks; editor layers convert to 0-based positions themselves.

The types are written out by hand rather than with :mod:`dataclasses`: ``memlens run`` builds
and writes a run at the end of every profiled program, and importing ``dataclasses`` (which
imports ``inspect``) and generating seven classes cost more CPU than the rest of that work.
"""

from __future__ import annotations

import math

from memlens.model.figures import (
    ERRORS,
    FIGURES,
    FUNCTION_FIGURES,
    NAMED_FIGURES,
    NATIVE,
    SELF_FIGURES,
    SUMS,
    TEST_FIGURE_WORDS,
    TEST_FIGURES,
    TEST_LINE_FIGURE,
    TEST_LINES_TITLE,
    TEST_MARKER_LIMITS,
    Figure,
    calls_figure,
)
from memlens.model.tree import CALL_TREE_COLUMNS, CallNode, CallTree, subtree_sums
from memlens.model.value import Value, _set, replace

TYPE_CHECKING = False  # see memlens/__init__.py: typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "CALL_TREE_COLUMNS",
    "ERRORS",
    "FIGURES",
    "FUNCTION_FIGURES",
    "NAMED_FIGURES",
    "NATIVE",
    "SELF_FIGURES",
    "SUMS",
    "TEST_FIGURES",
    "TEST_FIGURE_WORDS",
    "TEST_LINES_TITLE",
    "TEST_LINE_FIGURE",
    "TEST_MARKER_LIMITS",
    "CallNode",
    "CallTree",
    "Figure",
    "FunctionStats",
    "LineStats",
    "ProcessInfo",
    "Run",
    "RunInfo",
    "SourceFile",
    "TestFailure",
    "TestStats",
    "TimelinePoint",
    "Value",
    "calls_figure",
    "replace",
    "subtree_sums",
]


class LineStats(Value):
    """Figures recorded for one source line (self and inclusive of callees), with the native
    part of the self figures."""

    __slots__ = (*FIGURES, *NATIVE, *ERRORS)
    alloc_bytes: int
    alloc_count: int
    live_bytes: int
    live_count: int
    peak_bytes: int
    incl_alloc_bytes: int
    incl_live_bytes: int
    incl_peak_bytes: int
    native_alloc_bytes: int
    native_live_bytes: int
    native_peak_bytes: int
    alloc_err: float
    live_err: float
    peak_err: float

    def __init__(
        self,
        alloc_bytes: int = 0,
        alloc_count: int = 0,
        live_bytes: int = 0,
        live_count: int = 0,
        peak_bytes: int = 0,
        incl_alloc_bytes: int = 0,
        incl_live_bytes: int = 0,
        incl_peak_bytes: int = 0,
        native_alloc_bytes: int = 0,
        native_live_bytes: int = 0,
        native_peak_bytes: int = 0,
        alloc_err: float = 0.0,
        live_err: float = 0.0,
        peak_err: float = 0.0,
    ) -> None:
        _set(self, "alloc_bytes", alloc_bytes)
        _set(self, "alloc_count", alloc_count)
        _set(self, "live_bytes", live_bytes)
        _set(self, "live_count", live_count)
        _set(self, "peak_bytes", peak_bytes)
        _set(self, "incl_alloc_bytes", incl_alloc_bytes)
        _set(self, "incl_live_bytes", incl_live_bytes)
        _set(self, "incl_peak_bytes", incl_peak_bytes)
        _set(self, "native_alloc_bytes", native_alloc_bytes)
        _set(self, "native_live_bytes", native_live_bytes)
        _set(self, "native_peak_bytes", native_peak_bytes)
        _set(self, "alloc_err", alloc_err)
        _set(self, "live_err", live_err)
        _set(self, "peak_err", peak_err)

    @classmethod
    def from_sums(
        cls,
        own: Sequence[int],
        incl: Sequence[int],
        variances: Sequence[float] = (0.0, 0.0, 0.0),
        native: Sequence[int] = (0, 0, 0, 0, 0),
    ) -> LineStats:
        """From self, inclusive and native sums laid out as :data:`SUMS`, and the variances of
        the alloc, live and peak estimates (sampling mode; their square roots are the errors)."""
        alloc_var, live_var, peak_var = (math.sqrt(max(v, 0.0)) for v in variances)
        return cls(
            own[0], own[1], own[2], own[3], own[4], incl[0], incl[2], incl[4],
            native[0], native[2], native[4], alloc_var, live_var, peak_var,
        )  # fmt: skip

    def figure(self, name: str) -> int:
        """Return one figure by its name in :data:`FIGURES`."""
        if name not in FIGURES:
            raise KeyError(name)
        value: int = getattr(self, name)
        return value

    def is_empty(self) -> bool:
        return not any(self._values())


class FunctionStats(Value):
    """Inclusive figures for one function (each stack counted once)."""

    __slots__ = (
        "alloc_bytes",
        "alloc_count",
        "first_line",
        "last_line",
        "live_bytes",
        "peak_bytes",
        "qualname",
    )
    qualname: str
    first_line: int
    last_line: int
    alloc_bytes: int
    alloc_count: int
    live_bytes: int
    peak_bytes: int

    def __init__(
        self,
        qualname: str,
        first_line: int,
        last_line: int,
        alloc_bytes: int = 0,
        alloc_count: int = 0,
        live_bytes: int = 0,
        peak_bytes: int = 0,
    ) -> None:
        _set(self, "qualname", qualname)
        _set(self, "first_line", first_line)
        _set(self, "last_line", last_line)
        _set(self, "alloc_bytes", alloc_bytes)
        _set(self, "alloc_count", alloc_count)
        _set(self, "live_bytes", live_bytes)
        _set(self, "peak_bytes", peak_bytes)

    @classmethod
    def from_sums(
        cls, qualname: str, first_line: int, last_line: int, sums: Sequence[int]
    ) -> FunctionStats:
        """From inclusive sums laid out as :data:`SUMS`."""
        return cls(qualname, first_line, last_line, sums[0], sums[1], sums[2], sums[4])


class SourceFile(Value):
    """One profiled source file: identity, recorded text and per-line figures.

    ``text`` is the source as it was when profiled; None when it could not be read.
    """

    __slots__ = ("functions", "lines", "path", "sha256", "text")
    path: str
    sha256: str
    text: str | None
    lines: Mapping[int, LineStats]
    functions: tuple[FunctionStats, ...]

    def __init__(
        self,
        path: str,
        sha256: str,
        text: str | None,
        lines: Mapping[int, LineStats] | None = None,
        functions: tuple[FunctionStats, ...] = (),
    ) -> None:
        _set(self, "path", path)
        _set(self, "sha256", sha256)
        _set(self, "text", text)
        _set(self, "lines", {} if lines is None else lines)
        _set(self, "functions", functions)


class TimelinePoint(Value):
    """Memory over time: seconds since start, traced bytes and resident set size."""

    __slots__ = ("rss_bytes", "t", "traced_bytes")
    t: float
    traced_bytes: int
    rss_bytes: int

    def __init__(self, t: float, traced_bytes: int, rss_bytes: int) -> None:
        _set(self, "t", t)
        _set(self, "traced_bytes", traced_bytes)
        _set(self, "rss_bytes", rss_bytes)


class TestFailure(Value):
    """Why a test failed on memory: ``figure`` (a name of :data:`TEST_FIGURES`) was ``value``
    bytes, over ``limit``. ``kind`` is ``"limit"`` (the test's ``memlens`` marker) or
    ``"increase"`` (more than the allowed growth over ``baseline``, the figure of the same test
    in the baseline run; None for limits)."""

    __test__ = False  # not a test class, whatever pytest's name patterns say
    __slots__ = ("baseline", "figure", "kind", "limit", "value")
    figure: str
    value: int
    limit: int
    kind: str
    baseline: int | None

    def __init__(
        self, figure: str, value: int, limit: int, kind: str, baseline: int | None = None
    ) -> None:
        _set(self, "figure", figure)
        _set(self, "value", value)
        _set(self, "limit", limit)
        _set(self, "kind", kind)
        _set(self, "baseline", baseline)


class TestStats(Value):
    """One test of a pytest session (``pytest --memlens``), by its node id.

    ``peak_bytes``: the most traced memory held during the test above what was live when it
    started; ``alloc_bytes``: bytes allocated during it; ``leaked_bytes``: bytes still live
    after its teardown that were not live before it (never below 0). ``outcome`` is one of
    ``passed``, ``failed``, ``error``, ``skipped``, ``xfailed``, ``xpassed``, ``interrupted``. ``file``
    (absolute, as :attr:`Run.files` keys; "" when unknown) and ``line`` (1-based first line of
    the test function, decorators included; 0 when unknown) say where ``function`` (its
    qualified name) is. ``limits`` maps figure names to the marker's limits in bytes.
    """

    __test__ = False
    __slots__ = (
        "alloc_bytes",
        "duration_s",
        "failures",
        "file",
        "function",
        "leaked_bytes",
        "limits",
        "line",
        "nodeid",
        "outcome",
        "peak_bytes",
    )
    nodeid: str
    outcome: str
    peak_bytes: int
    alloc_bytes: int
    leaked_bytes: int
    duration_s: float
    file: str
    line: int
    function: str
    limits: tuple[tuple[str, int], ...]
    failures: tuple[TestFailure, ...]

    def __init__(
        self,
        nodeid: str,
        outcome: str,
        peak_bytes: int = 0,
        alloc_bytes: int = 0,
        leaked_bytes: int = 0,
        duration_s: float = 0.0,
        file: str = "",
        line: int = 0,
        function: str = "",
        limits: tuple[tuple[str, int], ...] = (),
        failures: tuple[TestFailure, ...] = (),
    ) -> None:
        _set(self, "nodeid", nodeid)
        _set(self, "outcome", outcome)
        _set(self, "peak_bytes", peak_bytes)
        _set(self, "alloc_bytes", alloc_bytes)
        _set(self, "leaked_bytes", leaked_bytes)
        _set(self, "duration_s", duration_s)
        _set(self, "file", file)
        _set(self, "line", line)
        _set(self, "function", function)
        _set(self, "limits", limits)
        _set(self, "failures", failures)


class ProcessInfo(Value):
    """One process whose figures a run holds (``memlens run`` follows child processes).

    ``parent_pid`` is the process that started it (for the run's own process: its parent,
    which was not traced); ``complete`` is False when the process left no final run (killed,
    crashed, or still running when the program ended: what its last checkpoint held, if
    anything, is counted); ``peak_traced_bytes`` is the process's own peak.
    """

    __slots__ = ("command", "complete", "parent_pid", "peak_traced_bytes", "pid")
    pid: int
    parent_pid: int
    command: tuple[str, ...]
    complete: bool
    peak_traced_bytes: int

    def __init__(
        self,
        pid: int,
        parent_pid: int,
        command: tuple[str, ...],
        complete: bool,
        peak_traced_bytes: int,
    ) -> None:
        _set(self, "pid", pid)
        _set(self, "parent_pid", parent_pid)
        _set(self, "command", command)
        _set(self, "complete", complete)
        _set(self, "peak_traced_bytes", peak_traced_bytes)


class RunInfo(Value):
    """Provenance and totals of a run (the run file's header).

    ``started`` and ``ended`` are ISO-8601 (UTC); ``mode`` is "exact", "sampling" or
    "imported"; ``seed`` is the sampling seed (None when not sampled); ``source`` is the
    free-form origin of the data, e.g. "memlens", "tracemalloc", "pymemtrace";
    ``workspace_root`` is the folder whose store the run was written to (absolute; "" when
    unknown), so that its files can be found in a copy. ``tests`` holds the per-test figures
    of a pytest session (``pytest --memlens``), in the order tests ran.
    unknown), so that its files can be found in a copy.
    ``processes`` lists the processes whose figures the run holds when memlens followed
    child processes (the run's own process first), and is empty for a run of one process.
    """

    __slots__ = (
        "command",
        "complete",
        "cwd",
        "duration_s",
        "ended",
        "exit_code",
        "max_depth",
        "memlens_version",
        "mode",
        "peak_rss_bytes",
        "peak_traced_bytes",
        "pid",
        "platform",
        "processes",
        "python",
        "sample_interval_bytes",
        "seed",
        "source",
        "started",
        "tests",
        "workspace_root",
    )
    command: tuple[str, ...]
    python: str
    platform: str
    started: str
    ended: str
    duration_s: float
    pid: int
    exit_code: int | None
    mode: str
    sample_interval_bytes: int | None
    peak_traced_bytes: int
    peak_rss_bytes: int
    complete: bool
    cwd: str
    memlens_version: str
    max_depth: int
    source: str
    seed: int | None
    workspace_root: str
    tests: tuple[TestStats, ...]
    processes: tuple[ProcessInfo, ...]

    def __init__(
        self,
        command: tuple[str, ...],
        python: str,
        platform: str,
        started: str,
        ended: str,
        duration_s: float,
        pid: int,
        exit_code: int | None,
        mode: str,
        sample_interval_bytes: int | None,
        peak_traced_bytes: int,
        peak_rss_bytes: int,
        complete: bool,
        cwd: str = "",
        memlens_version: str = "",
        max_depth: int = 0,
        source: str = "memlens",
        seed: int | None = None,
        workspace_root: str = "",
        tests: tuple[TestStats, ...] = (),
        processes: tuple[ProcessInfo, ...] = (),
    ) -> None:
        _set(self, "command", command)
        _set(self, "python", python)
        _set(self, "platform", platform)
        _set(self, "started", started)
        _set(self, "ended", ended)
        _set(self, "duration_s", duration_s)
        _set(self, "pid", pid)
        _set(self, "exit_code", exit_code)
        _set(self, "mode", mode)
        _set(self, "sample_interval_bytes", sample_interval_bytes)
        _set(self, "peak_traced_bytes", peak_traced_bytes)
        _set(self, "peak_rss_bytes", peak_rss_bytes)
        _set(self, "complete", complete)
        _set(self, "cwd", cwd)
        _set(self, "memlens_version", memlens_version)
        _set(self, "max_depth", max_depth)
        _set(self, "source", source)
        _set(self, "seed", seed)
        _set(self, "workspace_root", workspace_root)
        _set(self, "tests", tests)
        _set(self, "processes", processes)


class Run(Value):
    """A whole profiling run."""

    __slots__ = ("call_tree", "files", "info", "timeline")
    info: RunInfo
    files: Mapping[str, SourceFile]
    call_tree: CallTree
    timeline: tuple[TimelinePoint, ...]

    def __init__(
        self,
        info: RunInfo,
        files: Mapping[str, SourceFile] | None = None,
        call_tree: Iterable[CallNode] = (),
        timeline: tuple[TimelinePoint, ...] = (),
    ) -> None:
        _set(self, "info", info)
        _set(self, "files", {} if files is None else files)
        _set(self, "call_tree", CallTree.from_nodes(call_tree))
        _set(self, "timeline", timeline)
