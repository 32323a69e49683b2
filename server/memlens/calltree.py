"""Lookups in a run's call tree: nodes by id and by line, inclusive figures, call paths.

Pure, stdlib only. The editor's hover and the MCP server's ``line_figures`` both show the
heaviest call paths reaching a line from here, so they agree.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from memlens.model import CallNode, CallTree


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
