"""A run's call tree: :class:`CallNode` values, and :class:`CallTree`, the tree stored by column
(nodes are made on access)."""

from __future__ import annotations

from _collections_abc import Sequence as _Sequence  # collections.abc without its import cost
from operator import sub

from memlens.model.figures import FUNCTION_FIGURES
from memlens.model.value import Value, _set

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence
    from typing import Any


class CallNode(Value):
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
CALL_TREE_COLUMNS: tuple[str, ...] = ("id", "parent", "file", "line", "function", *FUNCTION_FIGURES)


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


def parents_first(parent: Sequence[int]) -> bool:
    """Whether every node's parent is -1 (a root) or a node before it, by position: at C speed
    (no Python code runs per node), as a big tree needs."""
    n = len(parent)
    return not n or (min(parent) >= -1 and max(map(sub, parent, range(n))) < 0)


def indexes_in(column: Sequence[int], size: int) -> bool:
    """Whether every value of ``column`` is an index into a table of ``size`` entries (at C
    speed)."""
    return not len(column) or (min(column) >= 0 and max(column) < size)


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
    are one backward pass (:meth:`inclusive`). Its ``file`` and ``function`` columns index
    entries of their tables. A builder that made the form itself says so (``canonical``);
    other trees are checked when written (:meth:`is_canonical`).
    """

    __slots__ = (
        "_canonical",
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
    _canonical: bool | None  # None: not known yet
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
        *,
        canonical: bool = False,
    ) -> None:
        """``columns`` maps every name of :data:`CALL_TREE_COLUMNS` to a column. ``canonical``:
        the builder made the columns canonical itself (the tracer's collapse, the file reader,
        :meth:`from_nodes`), so :meth:`is_canonical` need not check them."""
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
        _set(self, "_canonical", True if canonical else None)

    def is_canonical(self) -> bool:
        """Whether node ids are positions, every parent is -1 or comes before its node, and
        every file and function index names an entry of its table: checked at C speed (a big
        tree's check took a writer 50 ms), once, unless the builder vouched for it."""
        if self._canonical is None:
            n, ids = len(self), self.id
            ok = (isinstance(ids, range) and ids == range(n)) or list(ids) == list(range(n))
            _set(
                self,
                "_canonical",
                ok
                and parents_first(self.parent)
                and indexes_in(self.file, len(self.files))
                and indexes_in(self.function, len(self.functions)),
            )
        return bool(self._canonical)

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
        return cls(tuple(files), tuple(functions), columns, canonical=True)

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
