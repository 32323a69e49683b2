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


#: Frames of a call path shown at most: its outermost and innermost half each (the hover, the
#: MCP server's ``line_figures``); a deeper path says how many frames between are left out.
SHOWN_FRAMES = 20


@dataclass(frozen=True, slots=True)
class CallPath:
    """One way a line was reached: its nodes from the root down to the line's own node, and
    what was allocated under it (inclusive of what the line called), summed over the nodes
    that share the path.

    ``frames`` are the path's frames as shown: all of them, or for a path of more than
    :data:`SHOWN_FRAMES` frames its outermost and innermost halves; ``depth`` is how many
    frames the whole path has (those left out lie between the halves, after
    ``frames[:left_out_at]``).
    """

    frames: tuple[CallNode, ...]
    incl_peak_bytes: int
    incl_alloc_bytes: int
    depth: int = 0

    @property
    def left_out(self) -> int:
        """How many frames of the path are not in :attr:`frames`."""
        return max(0, self.depth - len(self.frames))

    @property
    def left_out_at(self) -> int:
        """Where in :attr:`frames` the frames left out would be."""
        return len(self.frames) // 2 if self.left_out else len(self.frames)


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
        return [self.tree[i] for i in self._ids_at(file, line)]

    def _ids_at(self, file: str, line: int) -> list[int]:
        fid = self._file_ids.get(file)
        return [] if fid is None else self._by_line.get((fid, line), [])

    @property
    def inclusive(self) -> Mapping[int, tuple[int, int]]:
        """Node id -> (peak_bytes, alloc_bytes) summed over the node's subtree."""
        peak, alloc = self.tree.inclusive("peak_bytes"), self.tree.inclusive("alloc_bytes")
        return _Pairs(peak, alloc)

    def path_to(self, node: CallNode, shown: int | None = None) -> tuple[CallNode, ...]:
        """The nodes from the root down to ``node``; with ``shown``, only the outermost and
        innermost ``shown // 2`` of a deeper path (:class:`CallPath`)."""
        ids = self._path_ids(node.id)
        if shown is not None and len(ids) > shown:
            ids = ids[: shown // 2] + ids[len(ids) - (shown - shown // 2) :]
        return tuple(self.tree[i] for i in ids)

    def _path_ids(self, node_id: int) -> list[int]:
        """The ids of the nodes from the root down to ``node_id`` (a canonical tree: every
        parent comes before its child, so the walk ends)."""
        parent = self.tree.parent
        ids = []
        n = node_id
        while n >= 0:
            ids.append(n)
            p = parent[n]
            n = p if p < n else -1  # (never otherwise in a canonical tree)
        ids.reverse()
        return ids

    def heaviest_paths(
        self, file: str, line: int, limit: int = 3, shown: int = SHOWN_FRAMES
    ) -> list[CallPath]:
        """The ``limit`` call paths reaching ``file:line`` that held the most at the peak,
        each with at most ``shown`` of its frames (:class:`CallPath`).

        Nodes reached through the same callers (the same file, line and function at every
        level) are one path; their figures are added. Ties go to the larger allocation, then
        to the shorter path, then to the one recorded first. The cost is linear in the nodes
        of the line and their callers (each walked once: a line reached 3,000 frames deep by
        recursion is 3,000 nodes, not 3,000 paths of up to 3,000 frames), plus the frames
        shown.
        """
        nodes = self._ids_at(file, line)
        if not nodes:
            return []
        tree = self.tree
        parent, files, lines, functions = tree.parent, tree.file, tree.line, tree.function
        peak, alloc = tree.inclusive("peak_bytes"), tree.inclusive("alloc_bytes")
        # Each path interned as (its callers' path, file, line, function): nodes with the
        # same path get the same id, found by walking up only to a node seen before.
        path_of: dict[int, int] = {}
        interned: dict[tuple[int, int, int, int], int] = {}
        depth: list[int] = []
        merged: dict[int, list[int]] = {}  # path id -> [first node, peak, alloc]
        for n in nodes:
            chain = []
            m = n
            while m >= 0 and m not in path_of:
                chain.append(m)
                m = parent[m] if parent[m] < m else -1
            pid = path_of[m] if m >= 0 else -1
            for k in reversed(chain):
                key = (pid, files[k], lines[k], functions[k])
                found = interned.get(key)
                if found is None:
                    found = interned[key] = len(depth)
                    depth.append((depth[pid] if pid >= 0 else 0) + 1)
                pid = path_of[k] = found
            entry = merged.get(pid)
            if entry is None:
                merged[pid] = [n, peak[n], alloc[n]]
            else:
                entry[1] += peak[n]
                entry[2] += alloc[n]
        ranked = sorted(
            merged.items(), key=lambda kv: (-kv[1][1], -kv[1][2], depth[kv[0]], kv[1][0])
        )
        return [
            CallPath(self.path_to(tree[first], shown), p, a, depth[pid])
            for pid, (first, p, a) in ranked[:limit]
        ]
