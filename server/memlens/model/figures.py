"""The figures of a run: their names (per line, native, errors, the sums run builders keep) and
the one table of the figures users name (:data:`NAMED_FIGURES`)."""

from __future__ import annotations

from memlens.model.value import Value, _set

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

#: The part of a line's self alloc, live and peak bytes that C libraries allocated themselves
#: (malloc & co., anonymous mmap; see docs/how-it-works.md): already included in the figures.
NATIVE: tuple[str, ...] = ("native_alloc_bytes", "native_live_bytes", "native_peak_bytes")

#: Names of the error estimates (one standard error, in bytes) kept beside the figures.
#: They are 0 in exact mode.
ERRORS: tuple[str, ...] = ("alloc_err", "live_err", "peak_err")

#: GPU memory per line (PyTorch's CUDA caching allocator; see docs/how-it-works.md, "GPU
#: memory"): bytes and allocations made, bytes still allocated at the end, bytes held at the
#: GPU peak (each device at its own peak), self then inclusive. 0 on runs without GPU figures.
GPU_FIGURES: tuple[str, ...] = (
    "gpu_alloc_bytes",
    "gpu_alloc_count",
    "gpu_live_bytes",
    "gpu_peak_bytes",
    "incl_gpu_alloc_bytes",
    "incl_gpu_live_bytes",
    "incl_gpu_peak_bytes",
)

#: A function's GPU figures (inclusive, as :data:`FUNCTION_FIGURES`), in the order the run file
#: and the export use.
GPU_FUNCTION_FIGURES: tuple[str, ...] = (
    "gpu_alloc_bytes",
    "gpu_alloc_count",
    "gpu_live_bytes",
    "gpu_peak_bytes",
)

#: The layout of the figure sums that run builders (the tracer, the importers) accumulate per
#: line, function or call-tree node, self or inclusive; the ``from_sums`` constructors read it.
SUMS: tuple[str, ...] = ("alloc_bytes", "alloc_count", "live_bytes", "live_count", "peak_bytes")

#: The figures of a :class:`memlens.model.FunctionStats` (inclusive: what the function and its
#: callees allocated and held), in the order the run file and the export use.
FUNCTION_FIGURES: tuple[str, ...] = ("alloc_bytes", "alloc_count", "live_bytes", "peak_bytes")

#: A line's self GPU figures on one device (:class:`memlens.model.GpuDeviceLine`): the same
#: four a function has, in the order the run file and the export use.
DEVICE_FIGURES: tuple[str, ...] = FUNCTION_FIGURES


class Figure(Value):
    """A figure users name (``--by``, ``memlens.inlayHints.figure``, the MCP tools' ``by``)
    and where each part of memlens finds it.

    ``line`` is its :class:`LineStats` attribute; ``incl`` the LineStats attribute of its
    inclusive counterpart (what a call site holds through its callees; ``line`` itself for an
    inclusive figure); ``err`` the LineStats attribute of its standard error ("" when it has
    none: inclusive figures); ``node`` the :class:`FunctionStats` and :class:`CallNode`
    attribute (inclusive on functions, self on call-tree nodes, whose subtree sums are the
    inclusive figure); ``title`` names it in tables and hovers, ``words`` follow its size in a
    label (``48.2 MiB at peak``), ``short`` in a compact label (``48.2 MiB peak``).
    ``device`` is "" for the process's own memory and ``GPU`` for GPU memory, whose figures
    lead with it (``GPU 64.0 MiB live``); a GPU figure's ``node`` is only a
    :class:`FunctionStats` attribute (the call tree holds host memory).
    """

    __slots__ = ("device", "err", "incl", "line", "name", "node", "short", "title", "words")
    name: str
    line: str
    incl: str
    err: str
    node: str
    title: str
    words: str
    short: str
    device: str

    def __init__(
        self,
        name: str,
        line: str,
        incl: str,
        err: str,
        node: str,
        title: str,
        words: str,
        short: str,
        device: str = "",
    ) -> None:
        _set(self, "name", name)
        _set(self, "line", line)
        _set(self, "incl", incl)
        _set(self, "err", err)
        _set(self, "node", node)
        _set(self, "title", title)
        _set(self, "words", words)
        _set(self, "short", short)
        _set(self, "device", device)

    @property
    def inclusive(self) -> bool:
        return self.line == self.incl


def _in_calls(fig: Figure) -> Figure:
    """The inclusive counterpart of self figure ``fig``: what a line holds with its callees."""
    return Figure(f"incl_{fig.name}", fig.incl, fig.incl, "", fig.node,
                  f"{fig.title} incl. calls", f"{fig.words} incl. calls", f"{fig.short}+calls",
                  fig.device)  # fmt: skip


#: The self figures, each with the LineStats attributes of it, its inclusive counterpart and
#: its error, then the node attribute and the words.
_SELF: tuple[Figure, ...] = (
    Figure("peak", "peak_bytes", "incl_peak_bytes", "peak_err", "peak_bytes",
           "peak", "at peak", "peak"),
    Figure("alloc", "alloc_bytes", "incl_alloc_bytes", "alloc_err", "alloc_bytes",
           "allocated", "allocated", "alloc"),
    Figure("live", "live_bytes", "incl_live_bytes", "live_err", "live_bytes",
           "live at exit", "live at exit", "live"),
    Figure("gpu_peak", "gpu_peak_bytes", "incl_gpu_peak_bytes", "", "gpu_peak_bytes",
           "GPU peak", "at peak", "peak", "GPU"),
    Figure("gpu_alloc", "gpu_alloc_bytes", "incl_gpu_alloc_bytes", "", "gpu_alloc_bytes",
           "GPU allocated", "allocated", "alloc", "GPU"),
    Figure("gpu_live", "gpu_live_bytes", "incl_gpu_live_bytes", "", "gpu_live_bytes",
           "GPU live at exit", "live at exit", "live", "GPU"),
)  # fmt: skip

#: The one table of named figures (user-facing name -> :class:`Figure`): the self figures,
#: then their inclusive counterparts in the same order. Labels use plain words: a newcomer
#: reads them without the docs (no glyphs that could read as "increased").
NAMED_FIGURES: dict[str, Figure] = {f.name: f for f in (*_SELF, *map(_in_calls, _SELF))}

#: The self figures (the CLI's and the MCP tools' ``--by``/``by`` choices), in table order.
SELF_FIGURES: tuple[str, ...] = tuple(n for n, f in NAMED_FIGURES.items() if not f.inclusive)
#: The self figures of GPU memory (a subset of :data:`SELF_FIGURES`).
GPU_SELF_FIGURES: tuple[str, ...] = tuple(n for n in SELF_FIGURES if NAMED_FIGURES[n].device)


def gpu_figure(name: str) -> str | None:
    """The GPU figure that goes with figure ``name`` in a label (``peak`` -> ``gpu_peak``,
    ``incl_live`` -> ``incl_gpu_live``); a GPU figure is its own."""
    fig = NAMED_FIGURES[name]
    if fig.device:
        return name
    base = fig.line.removeprefix("incl_")
    line = f"incl_gpu_{base}" if fig.inclusive else f"gpu_{base}"
    return next((n for n, f in NAMED_FIGURES.items() if f.line == line), None)


def calls_figure(name: str) -> str:
    """The figure a call site shows for figure ``name``, what it holds through its callees:
    the inclusive counterpart (an inclusive figure is its own)."""
    return _CALLS[name]


#: calls_figure's answers (it is asked per line of every hint).
_CALLS: dict[str, str] = {
    name: next(n for n, f in NAMED_FIGURES.items() if f.line == fig.incl)
    for name, fig in NAMED_FIGURES.items()
}


#: The per-test figures of a :class:`TestStats`, one row each, in the order the run file and
#: the export use: the figure; how labels and messages name it; its keyword in a ``memlens``
#: marker's ``compare=`` (pytest) and as a limit of the marker ("": neither); and the line
#: figure that names the lines responsible for it: what is still live for a leak, what was
#: allocated during the test for a peak (GPU memory for the GPU peak, the most GPU memory the
#: test held, PyTorch CUDA). The tables below are read from these rows.
_TESTS: tuple[tuple[str, str, str, str, str], ...] = (
    # figure          words        compare=  limit       lines
    ("peak_bytes",     "peak",      "peak",   "peak",     "alloc_bytes"),
    ("alloc_bytes",    "allocated", "alloc",  "",         "alloc_bytes"),
    ("leaked_bytes",   "leaked",    "leaks",  "leaks",    "live_bytes"),
    ("gpu_peak_bytes", "GPU peak",  "",       "gpu_peak", "gpu_alloc_bytes"),
)  # fmt: skip
#: The per-test figures.
TEST_FIGURES: tuple[str, ...] = tuple(row[0] for row in _TESTS)
#: How each per-test figure is named in labels and messages.
TEST_FIGURE_WORDS: dict[str, str] = {row[0]: row[1] for row in _TESTS}
#: The names of the per-test figures in a ``memlens`` marker's ``compare=``.
TEST_FIGURE_KEYWORDS: dict[str, str] = {row[2]: row[0] for row in _TESTS if row[2]}
#: The figures a ``memlens`` marker limits: its keyword -> test figure.
TEST_MARKER_LIMITS: dict[str, str] = {row[3]: row[0] for row in _TESTS if row[3]}
#: The line figure that names the lines responsible for each test figure.
TEST_LINE_FIGURE: dict[str, str] = {row[0]: row[4] for row in _TESTS}

#: Those lines in a failure message, by line figure: their title, and what one of them did,
#: after its size (``10.0 MiB still held after the test``; "": nothing is said).
_BLAMED: tuple[tuple[str, str, str], ...] = (
    ("live_bytes", "lines still holding memory the test allocated", "still held after the test"),
    ("alloc_bytes", "lines that allocated most during the test", "allocated during the test"),
    ("gpu_alloc_bytes", "lines that allocated most GPU memory during the test", ""),
)
#: The title of the lines in a failure message, by line figure.
TEST_LINES_TITLE: dict[str, str] = {row[0]: row[1] for row in _BLAMED}
#: What one of those lines did, by line figure.
TEST_LINE_WORDS: dict[str, str] = {row[0]: row[2] for row in _BLAMED if row[2]}
