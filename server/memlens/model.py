"""The data model of a profiling run: plain, immutable values, no imports.

Everything that shows results (CLI, language server, export, diff) speaks these types; the run
file (:mod:`memlens.runfile`) stores exactly them. Line numbers are 1-based, as in Python
tracebacks; editor layers convert to 0-based positions themselves.

The types are written out by hand rather than with :mod:`dataclasses`: ``memlens run`` builds
and writes a run at the end of every profiled program, and importing ``dataclasses`` (which
imports ``inspect``) and generating seven classes cost more CPU than the rest of that work.
"""

from __future__ import annotations

import math
from _collections_abc import Sequence as _Sequence  # collections.abc without its import cost

TYPE_CHECKING = False  # see memlens/__init__.py: typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Any, TypeVar

    _V = TypeVar("_V", bound="_Value")

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

#: The layout of the figure sums that run builders (the tracer, the importers) accumulate per
#: line, function or call-tree node, self or inclusive; the ``from_sums`` constructors read it.
SUMS: tuple[str, ...] = ("alloc_bytes", "alloc_count", "live_bytes", "live_count", "peak_bytes")


_set = object.__setattr__


class _Value:
    """Base of the model's types: slotted, immutable, compared and hashed by value.

    The fields are the ``__slots__``, in order.
    """

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, _Value)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({inner})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name}")

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict (shallow)."""
        return {name: getattr(self, name) for name in self.__slots__}


def replace(value: _V, **changes: Any) -> _V:
    """A copy of ``value`` with some fields changed (as :func:`dataclasses.replace`)."""
    unknown = set(changes) - set(value.__slots__)
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field {', '.join(sorted(unknown))}")
    return type(value)(**{**value.as_dict(), **changes})


class Figure(_Value):
    """A figure users name (``--by``, ``memlens.inlayHints.figure``, the MCP tools' ``by``)
    and where each part of memlens finds it.

    ``line`` is its :class:`LineStats` attribute; ``incl`` the LineStats attribute of its
    inclusive counterpart (what a call site holds through its callees; ``line`` itself for an
    inclusive figure); ``err`` the LineStats attribute of its standard error ("" when it has
    none: inclusive figures); ``node`` the :class:`FunctionStats` and :class:`CallNode`
    attribute (inclusive on functions, self on call-tree nodes, whose subtree sums are the
    inclusive figure); ``title`` names it in tables and hovers, ``words`` follow its size in a
    label (``48.2 MiB at peak``), ``short`` in a compact label (``48.2 MiB peak``).
    """

    __slots__ = ("err", "incl", "line", "name", "node", "short", "title", "words")
    name: str
    line: str
    incl: str
    err: str
    node: str
    title: str
    words: str
    short: str

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
    ) -> None:
        _set(self, "name", name)
        _set(self, "line", line)
        _set(self, "incl", incl)
        _set(self, "err", err)
        _set(self, "node", node)
        _set(self, "title", title)
        _set(self, "words", words)
        _set(self, "short", short)

    @property
    def inclusive(self) -> bool:
        return self.line == self.incl


#: The one table of named figures (user-facing name -> :class:`Figure`), self figures first.
#: Labels use plain words: a newcomer reads them without the docs (no glyphs that could read
#: as "increased").
NAMED_FIGURES: dict[str, Figure] = {
    f.name: f
    for f in (
        Figure("peak", "peak_bytes", "incl_peak_bytes", "peak_err", "peak_bytes",
               "peak", "at peak", "peak"),
        Figure("alloc", "alloc_bytes", "incl_alloc_bytes", "alloc_err", "alloc_bytes",
               "allocated", "allocated", "alloc"),
        Figure("live", "live_bytes", "incl_live_bytes", "live_err", "live_bytes",
               "live at exit", "live at exit", "live"),
        Figure("incl_peak", "incl_peak_bytes", "incl_peak_bytes", "", "peak_bytes",
               "peak incl. calls", "at peak incl. calls", "peak+calls"),
        Figure("incl_alloc", "incl_alloc_bytes", "incl_alloc_bytes", "", "alloc_bytes",
               "allocated incl. calls", "allocated incl. calls", "alloc+calls"),
        Figure("incl_live", "incl_live_bytes", "incl_live_bytes", "", "live_bytes",
               "live at exit incl. calls", "live at exit incl. calls", "live+calls"),
    )
}  # fmt: skip

#: The self figures (the CLI's and the MCP tools' ``--by``/``by`` choices), in table order.
SELF_FIGURES: tuple[str, ...] = tuple(n for n, f in NAMED_FIGURES.items() if not f.inclusive)


def calls_figure(name: str) -> str:
    """The figure a call site shows for figure ``name``, what it holds through its callees:
    the inclusive counterpart (an inclusive figure is its own)."""
    incl = NAMED_FIGURES[name].incl
    return next(n for n, f in NAMED_FIGURES.items() if f.line == incl)


class LineStats(_Value):
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


class FunctionStats(_Value):
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


class SourceFile(_Value):
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


class CallNode(_Value):
    """A node of the call tree: one line reached through one call path.

    ``parent`` is the id of the caller's node, or -1 for a root. ``file`` is a key of
    :attr:`Run.files`. Figures are *self* figures of this node (allocations whose innermost
    attributed frame is this node); inclusive figures are sums over subtrees.
    """

    __slots__ = (
        "alloc_bytes",
        "alloc_count",
        "file",
        "function",
        "id",
        "line",
        "live_bytes",
        "parent",
        "peak_bytes",
    )
    id: int
    parent: int
    file: str
    line: int
    function: str
    alloc_bytes: int
    alloc_count: int
    live_bytes: int
    peak_bytes: int

    def __init__(
        self,
        id: int,
        parent: int,
        file: str,
        line: int,
        function: str,
        alloc_bytes: int = 0,
        alloc_count: int = 0,
        live_bytes: int = 0,
        peak_bytes: int = 0,
    ) -> None:
        _set(self, "id", id)
        _set(self, "parent", parent)
        _set(self, "file", file)
        _set(self, "line", line)
        _set(self, "function", function)
        _set(self, "alloc_bytes", alloc_bytes)
        _set(self, "alloc_count", alloc_count)
        _set(self, "live_bytes", live_bytes)
        _set(self, "peak_bytes", peak_bytes)

    @classmethod
    def from_sums(
        cls,
        id: int,
        parent: int,
        file: str,
        line: int,
        function: str,
        sums: Sequence[int],
    ) -> CallNode:
        """From self sums laid out as :data:`SUMS`."""
        return cls(id, parent, file, line, function, sums[0], sums[1], sums[2], sums[4])


#: The columns of a :class:`CallTree`, in :class:`CallNode` field order.
CALL_TREE_COLUMNS: tuple[str, ...] = (
    "id",
    "parent",
    "file",
    "line",
    "function",
    "alloc_bytes",
    "alloc_count",
    "live_bytes",
    "peak_bytes",
)


def _parents_first(parent: Sequence[int]) -> Sequence[int]:
    """Positions of a tree's nodes (``parent``: each node's parent position, -1 for a root)
    with every parent before its children, otherwise in their order (depth first where they
    must move). ValueError when some nodes form a loop."""
    if all(p < i for i, p in enumerate(parent)):
        return range(len(parent))
    children: dict[int, list[int]] = {}
    for i, p in enumerate(parent):
        children.setdefault(p, []).append(i)
    order: list[int] = []
    stack = list(reversed(children.get(-1, ())))
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(children.get(i, ())))
    if len(order) != len(parent):
        raise ValueError("the call tree has a loop")
    return order


def subtree_sums(parent: Sequence[int], values: Sequence[int]) -> list[int]:
    """``values`` (by node of a canonical tree: ``parent`` before child) summed over each
    node's subtree: one backward pass."""
    out = list(values)
    for i in range(len(out) - 1, -1, -1):
        p = parent[i]
        if p >= 0:
            out[p] += out[i]
    return out


class CallTree(_Sequence["CallNode"]):
    """A run's call tree, stored by column: a sequence of :class:`CallNode`.

    A big program's tree has hundreds of thousands of nodes; one object per node would cost
    more time and memory than the rest of the run. Nodes are made on access. ``file`` and
    ``function`` columns index the ``files`` and ``functions`` name tables; the other columns
    hold the :class:`CallNode` fields of the same name (any sequences of ints: lists, or the
    typed arrays the tracer builds).

    A tree is canonical: node ids are positions (0 to n-1) and a node's parent comes before it
    (-1 for a root). Every builder keeps that (the tracer, :class:`memlens.calltree.TreeBuilder`,
    the file reader checks it); :meth:`from_nodes` puts any nodes in that form. So subtree sums
    are one backward pass (:meth:`inclusive`).
    """

    __slots__ = (
        "_inclusive",
        "alloc_bytes",
        "alloc_count",
        "file",
        "files",
        "function",
        "functions",
        "id",
        "line",
        "live_bytes",
        "parent",
        "peak_bytes",
    )
    _inclusive: dict[str, Sequence[int]]
    files: tuple[str, ...]
    functions: tuple[str, ...]
    id: Sequence[int]
    parent: Sequence[int]
    file: Sequence[int]
    line: Sequence[int]
    function: Sequence[int]
    alloc_bytes: Sequence[int]
    alloc_count: Sequence[int]
    live_bytes: Sequence[int]
    peak_bytes: Sequence[int]

    def __init__(
        self,
        files: Sequence[str],
        functions: Sequence[str],
        columns: Mapping[str, Sequence[int]],
    ) -> None:
        """``columns`` maps every name of :data:`CALL_TREE_COLUMNS` to a column."""
        _set(self, "files", tuple(files))
        _set(self, "functions", tuple(functions))
        lengths = set()
        for name in CALL_TREE_COLUMNS:
            column = columns[name]
            lengths.add(len(column))
            _set(self, name, column)
        if len(lengths) > 1:
            raise ValueError("call-tree columns differ in length")
        _set(self, "_inclusive", {})

    @classmethod
    def from_nodes(cls, nodes: Iterable[CallNode]) -> CallTree:
        """The canonical tree of some nodes: parents before children (otherwise in the given
        order), ids renumbered to positions; a parent id no node has makes a root. ValueError
        when the nodes form a loop or two share an id."""
        if isinstance(nodes, CallTree):
            return nodes
        nodes = list(nodes)
        position: dict[int, int] = {}
        for i, n in enumerate(nodes):
            if position.setdefault(n.id, i) != i:
                raise ValueError(f"two call-tree nodes have the id {n.id}")
        parent_pos = [position.get(n.parent, -1) for n in nodes]
        order = _parents_first(parent_pos)
        new_id = [0] * len(nodes)
        for new, old in enumerate(order):
            new_id[old] = new
        files: dict[str, int] = {}
        functions: dict[str, int] = {}
        columns: dict[str, Sequence[int]] = {
            "id": range(len(nodes)),
            "parent": [-1 if parent_pos[i] < 0 else new_id[parent_pos[i]] for i in order],
            "file": [files.setdefault(nodes[i].file, len(files)) for i in order],
            "line": [nodes[i].line for i in order],
            "function": [functions.setdefault(nodes[i].function, len(functions)) for i in order],
        }
        for name in CALL_TREE_COLUMNS[5:]:
            columns[name] = [getattr(nodes[i], name) for i in order]
        return cls(tuple(files), tuple(functions), columns)

    def inclusive(self, column: str) -> Sequence[int]:
        """The figure ``column`` (``alloc_bytes``, ``peak_bytes``...) summed over each node's
        subtree, by position: one backward pass, computed once per tree and column."""
        found: Sequence[int] | None = self._inclusive.get(column)
        if found is None:
            found = self._inclusive[column] = subtree_sums(self.parent, getattr(self, column))
        return found

    def __len__(self) -> int:
        return len(self.id)

    def node(self, i: int) -> CallNode:
        """The node at position ``i``."""
        return CallNode(
            self.id[i],
            self.parent[i],
            self.files[self.file[i]],
            self.line[i],
            self.functions[self.function[i]],
            self.alloc_bytes[i],
            self.alloc_count[i],
            self.live_bytes[i],
            self.peak_bytes[i],
        )

    def __getitem__(self, i: int) -> CallNode:  # type: ignore[override]  # no slices
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("call-tree index out of range")
        return self.node(i)

    def __iter__(self) -> Iterator[CallNode]:
        files, functions = self.files, self.functions
        for row in zip(*(getattr(self, name) for name in CALL_TREE_COLUMNS), strict=True):
            yield CallNode(row[0], row[1], files[row[2]], row[3], functions[row[4]], *row[5:])

    def rows(self, file_ids: Mapping[str, int]) -> Iterator[tuple[Any, ...]]:
        """Plain rows in :data:`CALL_TREE_COLUMNS` order with ``file`` mapped through
        ``file_ids`` and ``function`` as its name (for writers: no node objects)."""
        fids = [file_ids[f] for f in self.files]
        functions = self.functions
        for row in zip(*(getattr(self, name) for name in CALL_TREE_COLUMNS), strict=True):
            yield (row[0], row[1], fids[row[2]], row[3], functions[row[4]], *row[5:])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CallTree):
            if len(self) != len(other):
                return False
            return tuple(self) == tuple(other)
        if isinstance(other, tuple):
            return tuple(self) == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"CallTree({list(self)!r})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"CallTree is immutable: cannot set {name}")


class TimelinePoint(_Value):
    """Memory over time: seconds since start, traced bytes and resident set size."""

    __slots__ = ("rss_bytes", "t", "traced_bytes")
    t: float
    traced_bytes: int
    rss_bytes: int

    def __init__(self, t: float, traced_bytes: int, rss_bytes: int) -> None:
        _set(self, "t", t)
        _set(self, "traced_bytes", traced_bytes)
        _set(self, "rss_bytes", rss_bytes)


#: The per-test figures of a :class:`TestStats`, in the order the run file and the export use.
TEST_FIGURES: tuple[str, ...] = ("peak_bytes", "alloc_bytes", "leaked_bytes")
#: How each per-test figure is named in labels and messages.
TEST_FIGURE_WORDS: dict[str, str] = {
    "peak_bytes": "peak",
    "alloc_bytes": "allocated",
    "leaked_bytes": "leaked",
}
#: The figures a ``memlens`` marker limits: its keyword -> test figure.
TEST_MARKER_LIMITS: dict[str, str] = {"peak": "peak_bytes", "leaks": "leaked_bytes"}
#: Which line figure names the lines responsible for a test figure: what is still live for a
#: leak; what was allocated during the test for a peak.
TEST_LINE_FIGURE: dict[str, str] = {
    "leaked_bytes": "live_bytes",
    "peak_bytes": "alloc_bytes",
    "alloc_bytes": "alloc_bytes",
}
#: The title of those lines in a failure message, by line figure.
TEST_LINES_TITLE: dict[str, str] = {
    "live_bytes": "lines still holding memory the test allocated",
    "alloc_bytes": "lines that allocated most during the test",
}


class TestFailure(_Value):
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


class TestStats(_Value):
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


class ProcessInfo(_Value):
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


class RunInfo(_Value):
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


class Run(_Value):
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
