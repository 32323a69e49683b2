"""Lookups in a run's call tree: nodes by id and by line, inclusive figures, call paths.

Pure, stdlib only. The editor's hover and the MCP server's ``line_figures`` both show the
heaviest call paths reaching a line from here, so they agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from memlens.model import CallNode

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
        self.nodes = nodes

    @cached_property
    def _index(self) -> tuple[dict[int, CallNode], dict[tuple[str, int], list[int]]]:
        by_id = {n.id: n for n in self.nodes}
        by_loc: dict[tuple[str, int], list[int]] = {}
        for n in self.nodes:
            by_loc.setdefault((n.file, n.line), []).append(n.id)
        return by_id, by_loc

    def node(self, node_id: int) -> CallNode | None:
        return self._index[0].get(node_id)

    def at(self, file: str, line: int) -> list[CallNode]:
        """The nodes of ``file:line`` (one per call path that reached it)."""
        by_id, by_loc = self._index
        return [by_id[i] for i in by_loc.get((file, line), ())]

    @cached_property
    def inclusive(self) -> Mapping[int, tuple[int, int]]:
        """Node id -> (peak_bytes, alloc_bytes) summed over the node's subtree."""
        by_id, _ = self._index
        children: dict[int, list[int]] = {}
        for n in self.nodes:
            children.setdefault(n.parent, []).append(n.id)
        totals: dict[int, tuple[int, int]] = {}
        # Iterative post-order from every root (parent not in the tree).
        roots = [n.id for n in self.nodes if n.parent not in by_id]
        for root in roots:
            stack: list[tuple[int, bool]] = [(root, False)]
            while stack:
                nid, done = stack.pop()
                if done:
                    node = by_id[nid]
                    peak, alloc = node.peak_bytes, node.alloc_bytes
                    for c in children.get(nid, ()):
                        cp, ca = totals.get(c, (0, 0))
                        peak += cp
                        alloc += ca
                    totals[nid] = (peak, alloc)
                    continue
                stack.append((nid, True))
                stack.extend((c, False) for c in children.get(nid, ()) if c not in totals)
        return totals

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
            peak, alloc = incl.get(node.id, (node.peak_bytes, node.alloc_bytes))
            first, p, a = merged.get(key, (frames, 0, 0))
            merged[key] = (first, p + peak, a + alloc)
        ranked = sorted(merged.items(), key=lambda kv: (-kv[1][1], -kv[1][2], kv[0]))
        return [CallPath(frames, p, a) for _, (frames, p, a) in ranked[:limit]]
