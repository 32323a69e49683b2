"""Call trees: building one from call paths, figures per line and function counted once per
path, lookups (nodes by id and by line, inclusive figures, call paths).

Pure, stdlib only. The importers build their runs' trees and line figures here; the tracer
does the same sums natively (a test checks they agree). The editor's hover and the MCP
server's ``line_figures`` both show the heaviest call paths reaching a line from here, so they
agree.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from memlens.model import CALL_TREE_COLUMNS, SUMS, CallNode, CallTree, subtree_sums

K = TypeVar("K", bound=Hashable)


class TreeBuilder:
    """Builds a canonical :class:`CallTree` from call paths: :meth:`node` interns a frame under
    its parent (one node per parent, file and line), :meth:`add` gives a node self figures.
    Parents are made before their children, so the tree is canonical as built."""

    def __init__(self) -> None:
        self._ids: dict[tuple[int, str, int], int] = {}
        self.parent: list[int] = []
        self.file: list[str] = []
        self.line: list[int] = []
        self.function: list[str] = []
        #: Self figures by node, one column per name of :data:`memlens.model.SUMS`.
        self.figures: list[list[int]] = [[] for _ in SUMS]

    def __len__(self) -> int:
        return len(self.parent)

    def node(self, parent: int, file: str, line: int, function: str) -> int:
        """The id of the node of ``file:line`` called from node ``parent`` (-1: a root); the
        first call names its function."""
        key = (parent, file, line)
        nid = self._ids.get(key)
        if nid is None:
            nid = self._ids[key] = len(self.parent)
            self.parent.append(parent)
            self.file.append(file)
            self.line.append(line)
            self.function.append(function)
            for column in self.figures:
                column.append(0)
        return nid

    def add(self, node: int, sums: Sequence[int]) -> None:
        """Adds self figures (laid out as :data:`memlens.model.SUMS`) to ``node``."""
        for column, value in zip(self.figures, sums, strict=True):
            column[node] += value

    def subtree_sums(self) -> list[list[int]]:
        """Each node's figures summed over its subtree, as :attr:`figures`."""
        return [subtree_sums(self.parent, column) for column in self.figures]

    def tree(self) -> CallTree:
        files: dict[str, int] = {}
        functions: dict[str, int] = {}
        by_name = dict(zip(SUMS, self.figures, strict=True))
        columns: dict[str, Sequence[int]] = {
            "id": range(len(self.parent)),
            "parent": self.parent,
            "file": [files.setdefault(f, len(files)) for f in self.file],
            "line": self.line,
            "function": [functions.setdefault(f, len(functions)) for f in self.function],
            **{name: by_name[name] for name in CALL_TREE_COLUMNS[5:]},
        }
        return CallTree(tuple(files), tuple(functions), columns)


def once_per_path(
    parent: Sequence[int], keys: Sequence[K | None], inclusive: Sequence[Sequence[int]]
) -> dict[K, list[int]]:
    """Per key (a line, a function), the inclusive figures of the nodes that are the outermost
    of their key on their call path, summed: what ran under the key, each allocation counted
    once however often the key recurs on its path. ``keys`` and each column of ``inclusive``
    are by node of a canonical tree (``parent``, parents first); a node whose key is None
    counts for nothing (its descendants still do)."""
    children: list[list[int]] = [[] for _ in parent]
    roots: list[int] = []
    for i, p in enumerate(parent):
        (children[p] if p >= 0 else roots).append(i)
    sums: dict[K, list[int]] = {}
    active: dict[K, int] = {}
    stack: list[int] = [~r for r in reversed(roots)]
    while stack:
        item = stack.pop()
        if item >= 0:  # leaving node `item`
            key = keys[item]
            if key is not None:
                active[key] -= 1
            continue
        i = ~item
        key = keys[i]
        if key is not None:
            depth = active.get(key, 0)
            if depth == 0:
                row = sums.setdefault(key, [0] * len(inclusive))
                for c, column in enumerate(inclusive):
                    row[c] += column[i]
            active[key] = depth + 1
        stack.append(i)
        stack.extend(~c for c in reversed(children[i]))
    return sums


class _Pairs(Mapping[int, tuple[int, int]]):
    """Two columns of a tree seen as node id -> (first, second)."""

    def __init__(self, first: Sequence[int], second: Sequence[int]) -> None:
        self._first, self._second = first, second

    def __getitem__(self, node_id: int) -> tuple[int, int]:
        if not 0 <= node_id < len(self._first):
            raise KeyError(node_id)
        return self._first[node_id], self._second[node_id]

    def __len__(self) -> int:
        return len(self._first)

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._first)))


#: Longest caller chain followed from a node to its root (a damaged tree could loop).
MAX_DEPTH = 10_000


@dataclass(frozen=True, slots=True)
class CallPath:
    """One way a line was reached: its nodes from the root down to the line's own node, and
    what was allocated under it (inclusive of what the line called), summed over the nodes
    that share the path."""

    frames: tuple[CallNode, ...]
    incl_peak_bytes: int
    incl_alloc_bytes: int


class CallTreeIndex:
    """Indexes of one run's call tree (:attr:`memlens.model.Run.call_tree`)."""

    def __init__(self, nodes: Sequence[CallNode]) -> None:
        self.tree = CallTree.from_nodes(nodes)

    @cached_property
    def _by_line(self) -> dict[tuple[int, int], list[int]]:
        """(file index, line) -> node ids, from the columns (no node objects)."""
        by_loc: dict[tuple[int, int], list[int]] = {}
        for nid, key in enumerate(zip(self.tree.file, self.tree.line, strict=True)):
            by_loc.setdefault(key, []).append(nid)
        return by_loc

    @cached_property
    def _file_ids(self) -> dict[str, int]:
        return {f: i for i, f in enumerate(self.tree.files)}

    def node(self, node_id: int) -> CallNode | None:
        """The node of ``node_id`` (ids are positions in a canonical tree), or None."""
        return self.tree[node_id] if 0 <= node_id < len(self.tree) else None

    def at(self, file: str, line: int) -> list[CallNode]:
        """The nodes of ``file:line`` (one per call path that reached it)."""
        fid = self._file_ids.get(file)
        if fid is None:
            return []
        return [self.tree[i] for i in self._by_line.get((fid, line), ())]

    @property
    def inclusive(self) -> Mapping[int, tuple[int, int]]:
        """Node id -> (peak_bytes, alloc_bytes) summed over the node's subtree."""
        peak, alloc = self.tree.inclusive("peak_bytes"), self.tree.inclusive("alloc_bytes")
        return _Pairs(peak, alloc)

    def path_to(self, node: CallNode) -> tuple[CallNode, ...]:
        """The nodes from the root down to ``node`` (at most :data:`MAX_DEPTH` callers)."""
        frames = [node]
        cur = self.node(node.parent)
        while cur is not None and len(frames) <= MAX_DEPTH:
            frames.append(cur)
            cur = self.node(cur.parent)
        frames.reverse()
        return tuple(frames)

    def heaviest_paths(self, file: str, line: int, limit: int = 3) -> list[CallPath]:
        """The ``limit`` call paths reaching ``file:line`` that held the most at the peak.

        Nodes reached through the same callers (the same file, line and function at every
        level) are one path; their figures are added. Ties go to the larger allocation.
        """
        incl = self.inclusive
        merged: dict[tuple[tuple[str, int, str], ...], tuple[tuple[CallNode, ...], int, int]] = {}
        for node in self.at(file, line):
            frames = self.path_to(node)
            key = tuple((n.file, n.line, n.function) for n in frames)
            peak, alloc = incl[node.id]
            first, p, a = merged.get(key, (frames, 0, 0))
            merged[key] = (first, p + peak, a + alloc)
        ranked = sorted(merged.items(), key=lambda kv: (-kv[1][1], -kv[1][2], kv[0]))
        return [CallPath(frames, p, a) for _, (frames, p, a) in ranked[:limit]]
