"""The data model of a profiling run: plain, frozen, stdlib-only.

Everything that shows results (CLI, language server, export, diff) speaks these types; the run
file (:mod:`memlens.fileformat`) stores exactly them. Line numbers are 1-based, as in Python
tracebacks; editor layers convert to 0-based positions themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

#: Names of the per-line figures, in the order the run file and the export use.
FIGURES: tuple[str, ...] = (
    "alloc_bytes",
    "alloc_count",
    "live_bytes",
    "live_count",
    "peak_bytes",
    "incl_alloc_bytes",
    "incl_live_bytes",
    "incl_peak_bytes",
)

#: Names of the error estimates (one standard error, in bytes) kept beside the figures.
#: They are 0 in exact mode.
ERRORS: tuple[str, ...] = ("alloc_err", "live_err", "peak_err")


@dataclass(frozen=True, slots=True)
class LineStats:
    """Figures recorded for one source line (self and inclusive of callees)."""

    alloc_bytes: int = 0
    alloc_count: int = 0
    live_bytes: int = 0
    live_count: int = 0
    peak_bytes: int = 0
    incl_alloc_bytes: int = 0
    incl_live_bytes: int = 0
    incl_peak_bytes: int = 0
    alloc_err: float = 0.0
    live_err: float = 0.0
    peak_err: float = 0.0

    def figure(self, name: str) -> int:
        """Return one figure by its name in :data:`FIGURES`."""
        if name not in FIGURES:
            raise KeyError(name)
        value: int = getattr(self, name)
        return value

    def as_dict(self) -> dict[str, int]:
        """The eight figures as a dict (the export's per-line shape)."""
        return {name: getattr(self, name) for name in FIGURES}

    def is_empty(self) -> bool:
        return all(getattr(self, f.name) == 0 for f in fields(self))


@dataclass(frozen=True, slots=True)
class FunctionStats:
    """Inclusive figures for one function (each stack counted once)."""

    qualname: str
    first_line: int
    last_line: int
    alloc_bytes: int = 0
    alloc_count: int = 0
    live_bytes: int = 0
    peak_bytes: int = 0


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One profiled source file: identity, recorded text and per-line figures."""

    path: str
    sha256: str
    #: Source text as it was when profiled; None when it could not be read.
    text: str | None
    lines: Mapping[int, LineStats] = field(default_factory=dict)
    functions: tuple[FunctionStats, ...] = ()


@dataclass(frozen=True, slots=True)
class CallNode:
    """A node of the call tree: one line reached through one call path.

    ``parent`` is the id of the caller's node, or -1 for a root. ``file`` is a key of
    :attr:`Run.files`. Figures are *self* figures of this node (allocations whose innermost
    attributed frame is this node); inclusive figures are sums over subtrees.
    """

    id: int
    parent: int
    file: str
    line: int
    function: str
    alloc_bytes: int = 0
    alloc_count: int = 0
    live_bytes: int = 0
    peak_bytes: int = 0


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    """Memory over time: seconds since start, traced bytes and resident set size."""

    t: float
    traced_bytes: int
    rss_bytes: int


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Provenance and totals of a run (the run file's header)."""

    command: tuple[str, ...]
    python: str
    platform: str
    started: str  # ISO-8601, UTC
    ended: str  # ISO-8601, UTC
    duration_s: float
    pid: int
    exit_code: int | None
    mode: str  # "exact" | "sampling" | "imported"
    sample_interval_bytes: int | None
    peak_traced_bytes: int
    peak_rss_bytes: int
    complete: bool
    cwd: str = ""
    memlens_version: str = ""
    max_depth: int = 0
    #: Free-form origin of the data, e.g. "memlens", "tracemalloc", "pymemtrace".
    source: str = "memlens"


@dataclass(frozen=True, slots=True)
class Run:
    """A whole profiling run."""

    info: RunInfo
    files: Mapping[str, SourceFile] = field(default_factory=dict)
    call_tree: tuple[CallNode, ...] = ()
    timeline: tuple[TimelinePoint, ...] = ()
