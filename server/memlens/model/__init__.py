"""The data model of a profiling run: plain, immutable values, standard library only.

Everything imports the model from here; its parts stand alone: :mod:`memlens.model.value` (the
base of the types, :func:`replace`), :mod:`memlens.model.figures` (the figures' names and the
table of the figures users name), :mod:`memlens.model.tree` (the call tree, by column),
:mod:`memlens.model.lines` (a file's line figures, by column).

Everything that shows results (CLI, language server, export, diff) speaks these types; the run
file (:mod:`memlens.runfile`) stores exactly them. Line numbers are 1-based, as in Python
tracebacks; editor layers convert to 0-based positions themselves.

The types are written out by hand rather than with :mod:`dataclasses`: ``memlens run`` builds
and writes a run at the end of every profiled program, and importing ``dataclasses`` (which
imports ``inspect``) and generating seven classes cost more CPU than the rest of that work.
"""

from __future__ import annotations

from memlens.model.figures import (
    DEVICE_FIGURES,
    ERRORS,
    FIGURES,
    FUNCTION_FIGURES,
    GPU_FIGURES,
    GPU_FUNCTION_FIGURES,
    GPU_SELF_FIGURES,
    NAMED_FIGURES,
    NATIVE,
    SELF_FIGURES,
    SUMS,
    TEST_FIGURE_KEYWORDS,
    TEST_FIGURE_WORDS,
    TEST_FIGURES,
    TEST_LINE_FIGURE,
    TEST_LINE_WORDS,
    TEST_LINES_TITLE,
    TEST_MARKER_LIMITS,
    Figure,
    calls_figure,
    gpu_figure,
)
from memlens.model.holders import HOP_KINDS, OUTCOMES, ROOT_KINDS, HeldBy, Hop
from memlens.model.lines import (
    LineStats,
    LineTable,
    LineTableBuilder,
    line_values,
    ranked_values,
)
from memlens.model.moments import FunctionKey, Moments, value_at
from memlens.model.tree import CALL_TREE_COLUMNS, CallNode, CallTree, subtree_sums
from memlens.model.value import Value, _set, replace

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "CALL_TREE_COLUMNS",
    "DEVICE_FIGURES",
    "ERRORS",
    "FIGURES",
    "FUNCTION_FIGURES",
    "GPU_FIGURES",
    "GPU_FUNCTION_FIGURES",
    "GPU_SELF_FIGURES",
    "HOP_KINDS",
    "NAMED_FIGURES",
    "NATIVE",
    "OUTCOMES",
    "ROOT_KINDS",
    "SELF_FIGURES",
    "SUMS",
    "TEST_FIGURES",
    "TEST_FIGURE_KEYWORDS",
    "TEST_FIGURE_WORDS",
    "TEST_LINES_TITLE",
    "TEST_LINE_FIGURE",
    "TEST_LINE_WORDS",
    "TEST_MARKER_LIMITS",
    "CallNode",
    "CallTree",
    "Figure",
    "FunctionKey",
    "FunctionStats",
    "GpuDevice",
    "GpuDeviceLine",
    "HeldBy",
    "Hop",
    "LineStats",
    "LineTable",
    "LineTableBuilder",
    "Moments",
    "NotebookCell",
    "ProcessInfo",
    "Run",
    "RunInfo",
    "SourceFile",
    "TestFailure",
    "TestStats",
    "TimelinePoint",
    "Value",
    "calls_figure",
    "gpu_figure",
    "line_values",
    "ranked_values",
    "replace",
    "subtree_sums",
    "value_at",
]


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
        *GPU_FUNCTION_FIGURES,
    )
    qualname: str
    first_line: int
    last_line: int
    alloc_bytes: int
    alloc_count: int
    live_bytes: int
    peak_bytes: int
    gpu_alloc_bytes: int
    gpu_alloc_count: int
    gpu_live_bytes: int
    gpu_peak_bytes: int

    def __init__(
        self,
        qualname: str,
        first_line: int,
        last_line: int,
        alloc_bytes: int = 0,
        alloc_count: int = 0,
        live_bytes: int = 0,
        peak_bytes: int = 0,
        gpu_alloc_bytes: int = 0,
        gpu_alloc_count: int = 0,
        gpu_live_bytes: int = 0,
        gpu_peak_bytes: int = 0,
    ) -> None:
        _set(self, "qualname", qualname)
        _set(self, "first_line", first_line)
        _set(self, "last_line", last_line)
        _set(self, "alloc_bytes", alloc_bytes)
        _set(self, "alloc_count", alloc_count)
        _set(self, "live_bytes", live_bytes)
        _set(self, "peak_bytes", peak_bytes)
        _set(self, "gpu_alloc_bytes", gpu_alloc_bytes)
        _set(self, "gpu_alloc_count", gpu_alloc_count)
        _set(self, "gpu_live_bytes", gpu_live_bytes)
        _set(self, "gpu_peak_bytes", gpu_peak_bytes)

    @classmethod
    def from_sums(
        cls, qualname: str, first_line: int, last_line: int, sums: Sequence[int]
    ) -> FunctionStats:
        """From inclusive sums laid out as :data:`SUMS`."""
        return cls(qualname, first_line, last_line, sums[0], sums[1], sums[2], sums[4])


class GpuDeviceLine(Value):
    """One line's self GPU figures on one device (``device`` is the CUDA device index); its
    peak figure is what it held at that device's own peak."""

    __slots__ = ("alloc_bytes", "alloc_count", "device", "live_bytes", "peak_bytes")
    device: int
    alloc_bytes: int
    alloc_count: int
    live_bytes: int
    peak_bytes: int

    def __init__(
        self, device: int, alloc_bytes: int, alloc_count: int, live_bytes: int, peak_bytes: int
    ) -> None:
        _set(self, "device", device)
        _set(self, "alloc_bytes", alloc_bytes)
        _set(self, "alloc_count", alloc_count)
        _set(self, "live_bytes", live_bytes)
        _set(self, "peak_bytes", peak_bytes)


class SourceFile(Value):
    """One profiled source file: identity, recorded text and per-line figures.

    ``text`` is the source as it was when profiled; None when it could not be read.
    ``gpu_devices`` splits the GPU figures of a line by device (only in runs that used several
    devices; a line's :class:`LineStats` holds their sums).
    """

    __slots__ = ("functions", "gpu_devices", "lines", "path", "sha256", "text")
    path: str
    sha256: str
    text: str | None
    lines: Mapping[int, LineStats]
    functions: tuple[FunctionStats, ...]
    gpu_devices: Mapping[int, tuple[GpuDeviceLine, ...]]

    def __init__(
        self,
        path: str,
        sha256: str,
        text: str | None,
        lines: Mapping[int, LineStats] | None = None,
        functions: tuple[FunctionStats, ...] = (),
        gpu_devices: Mapping[int, tuple[GpuDeviceLine, ...]] | None = None,
    ) -> None:
        _set(self, "path", path)
        _set(self, "sha256", sha256)
        _set(self, "text", text)
        _set(self, "lines", {} if lines is None else lines)
        _set(self, "functions", functions)
        _set(self, "gpu_devices", {} if gpu_devices is None else gpu_devices)


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
    in the baseline run; None for limits). ``lines`` are the lines responsible, heaviest first:
    (absolute file, 1-based line, bytes their figure grew by during the test)."""

    __test__ = False  # not a test class, whatever pytest's name patterns say
    __slots__ = ("baseline", "figure", "kind", "limit", "lines", "value")
    figure: str
    value: int
    limit: int
    kind: str
    baseline: int | None
    lines: tuple[tuple[str, int, int], ...]

    def __init__(
        self,
        figure: str,
        value: int,
        limit: int,
        kind: str,
        baseline: int | None = None,
        lines: tuple[tuple[str, int, int], ...] = (),
    ) -> None:
        _set(self, "figure", figure)
        _set(self, "value", value)
        _set(self, "limit", limit)
        _set(self, "kind", kind)
        _set(self, "baseline", baseline)
        _set(self, "lines", lines)


class TestStats(Value):
    """One test of a pytest session (``pytest --memlens``), by its node id.

    ``peak_bytes``: the most traced memory held during the test above what was live when it
    started; ``alloc_bytes``: bytes allocated during it; ``leaked_bytes``: bytes still live
    after its teardown that were not live before it (never below 0). ``outcome`` is one of
    ``passed``, ``failed``, ``error``, ``skipped``, ``xfailed``, ``xpassed``, ``interrupted``. ``file``
    (absolute, as :attr:`Run.files` keys; "" when unknown) and ``line`` (1-based first line of
    the test function, decorators included; 0 when unknown) say where ``function`` (its
    qualified name) is. ``limits`` maps figure names to the marker's limits in bytes.
    ``gpu_peak_bytes``: the most GPU memory (PyTorch CUDA) allocated during the test above what
    was allocated when it started (0 without GPU memory).
    """

    __test__ = False
    __slots__ = (
        "alloc_bytes",
        "duration_s",
        "failures",
        "file",
        "function",
        "gpu_peak_bytes",
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
    gpu_peak_bytes: int

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
        gpu_peak_bytes: int = 0,
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
        _set(self, "gpu_peak_bytes", gpu_peak_bytes)


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


class NotebookCell(Value):
    """The notebook cell a run profiled (``%%memlens`` or ``%memlens`` in IPython or Jupyter).

    ``file`` is the cell's key in :attr:`Run.files` (``In [5]``; its recorded text is the
    cell's, magic line included, so that line numbers are the cell's own); ``execution_count``
    its number; ``notebook`` the notebook's absolute path ("" when the kernel does not know
    it, e.g. in a terminal); ``cell_id`` the front end's id for the cell (VS Code: the cell
    document's URI; JupyterLab: the nbformat cell id; "" when none was sent); ``sha256`` the
    digest of the recorded cell text (:func:`memlens.source.text_digest`), so that an editor
    finds a cell's runs from their headers alone.
    """

    __slots__ = ("cell_id", "execution_count", "file", "notebook", "sha256")
    file: str
    execution_count: int
    notebook: str
    cell_id: str
    sha256: str

    def __init__(
        self, file: str, execution_count: int, notebook: str, cell_id: str, sha256: str
    ) -> None:
        _set(self, "file", file)
        _set(self, "execution_count", execution_count)
        _set(self, "notebook", notebook)
        _set(self, "cell_id", cell_id)
        _set(self, "sha256", sha256)


class GpuDevice(Value):
    """The GPU memory one device's history holds (PyTorch's CUDA caching allocator).

    ``peak_bytes``: the most allocated at once; ``alloc_bytes``/``alloc_count``: allocations
    recorded; ``live_bytes``: still allocated at the end; ``reserved_peak_bytes``: the most
    the allocator held from CUDA (allocated plus cached); ``complete`` is False when the
    history does not reach back to the device's first allocation (recording started late, or
    its ring buffer dropped the oldest events): then allocations and the peak count only what
    it holds."""

    __slots__ = (
        "alloc_bytes",
        "alloc_count",
        "complete",
        "device",
        "live_bytes",
        "peak_bytes",
        "reserved_peak_bytes",
    )
    device: int
    peak_bytes: int
    alloc_bytes: int
    alloc_count: int
    live_bytes: int
    reserved_peak_bytes: int
    complete: bool

    def __init__(
        self,
        device: int,
        peak_bytes: int,
        alloc_bytes: int,
        alloc_count: int,
        live_bytes: int,
        reserved_peak_bytes: int,
        complete: bool,
    ) -> None:
        _set(self, "device", device)
        _set(self, "peak_bytes", peak_bytes)
        _set(self, "alloc_bytes", alloc_bytes)
        _set(self, "alloc_count", alloc_count)
        _set(self, "live_bytes", live_bytes)
        _set(self, "reserved_peak_bytes", reserved_peak_bytes)
        _set(self, "complete", complete)


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
    ``peak_at_s`` says when the peak happened (seconds since the start, to within the tracer's
    timeline resolution; None when unknown: imports, older runs).
    ``checkpoint`` is True for a checkpoint: the run so far of a program still running (or
    killed before its end), never compared as a final run.
    ``attached`` is true for a run of a process that was already running (``memlens
    attach``): what it allocated before is not in the figures, and "live" means live at detach.
    ``cell`` is the notebook cell the run profiled (None for a program).
    ``gpu_peak_bytes`` is the run's GPU memory peak (PyTorch CUDA: each device at its own
    peak, summed; 0 when the run recorded no GPU memory), ``gpus`` its devices.
    """

    __slots__ = (
        "attached",
        "cell",
        "checkpoint",
        "command",
        "complete",
        "cwd",
        "duration_s",
        "ended",
        "exit_code",
        "gpu_peak_bytes",
        "gpus",
        "max_depth",
        "memlens_version",
        "mode",
        "peak_at_s",
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
    peak_at_s: float | None
    checkpoint: bool
    attached: bool
    cell: NotebookCell | None
    gpu_peak_bytes: int
    gpus: tuple[GpuDevice, ...]

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
        peak_at_s: float | None = None,
        checkpoint: bool = False,
        attached: bool = False,
        cell: NotebookCell | None = None,
        gpu_peak_bytes: int = 0,
        gpus: tuple[GpuDevice, ...] = (),
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
        _set(self, "peak_at_s", peak_at_s)
        _set(self, "checkpoint", checkpoint)
        _set(self, "attached", attached)
        _set(self, "cell", cell)
        _set(self, "gpu_peak_bytes", gpu_peak_bytes)
        _set(self, "gpus", gpus)


class Run(Value):
    """A whole profiling run. ``moments`` holds each line's live bytes at moments of the run
    (empty for runs made without them: imports, older run files). ``holders``: what held the
    lines live at its end (:class:`HeldBy`, by file and line; empty when not recorded)."""

    __slots__ = ("call_tree", "files", "holders", "info", "moments", "timeline")
    info: RunInfo
    files: Mapping[str, SourceFile]
    call_tree: CallTree
    timeline: tuple[TimelinePoint, ...]
    moments: Moments
    holders: tuple[HeldBy, ...]

    def __init__(
        self,
        info: RunInfo,
        files: Mapping[str, SourceFile] | None = None,
        call_tree: Iterable[CallNode] = (),
        timeline: tuple[TimelinePoint, ...] = (),
        moments: Moments | None = None,
        holders: tuple[HeldBy, ...] = (),
    ) -> None:
        _set(self, "info", info)
        _set(self, "files", {} if files is None else files)
        _set(self, "call_tree", CallTree.from_nodes(call_tree))
        _set(self, "timeline", timeline)
        _set(self, "moments", Moments() if moments is None else moments)
        _set(self, "holders", holders)
