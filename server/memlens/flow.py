"""Flow graphs of the call tree, as Graphviz DOT text. Stdlib only, pure.

A node is a source line. Its *local* usage is what the line allocated itself (its self figure)
and its *cumulative* usage what it and everything it called allocated (inclusive figure). The
weight of an edge A -> B is what was allocated under calls that went from line A directly to
line B. Nodes whose cumulative usage is below ``min_node_fraction`` of the total and edges below
``min_edge_fraction`` of their source's cumulative usage are dropped; nodes are drawn larger
the more they allocate locally. Several runs can be compared in one graph: each node then
shows every run's local / cumulative figures, and is coloured by its largest share.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from memlens.model import Run
from memlens.units import fmt_bytes

Site = tuple[str, int]
ROOT: Site = ("", 0)

_NODE_FIELD = {"alloc": "alloc_bytes", "peak": "peak_bytes", "live": "live_bytes"}


@dataclass(frozen=True, slots=True)
class FlowGraph:
    """Local and cumulative usage per line, edge weights, and the total."""

    local: dict[Site, int]
    cumulative: dict[Site, int]
    edges: dict[tuple[Site, Site], int]
    total: int


def flow_graph(run: Run, by: str = "alloc") -> FlowGraph:
    """Build the flow graph of a run's call tree for one figure (alloc, peak or live)."""
    attr = _NODE_FIELD[by]
    nodes = run.call_tree
    index = {n.id: i for i, n in enumerate(nodes)}
    subtree = [getattr(n, attr) for n in nodes]
    # Parents precede children in the call tree: sum subtrees bottom-up.
    for i in range(len(nodes) - 1, -1, -1):
        p = index.get(nodes[i].parent)
        if p is not None:
            subtree[p] += subtree[i]
    local: dict[Site, int] = {}
    cumulative: dict[Site, int] = {}
    edges: dict[tuple[Site, Site], int] = {}
    for i, n in enumerate(nodes):
        site = (n.file, n.line)
        local[site] = local.get(site, 0) + getattr(n, attr)
        p = index.get(n.parent)
        parent_site = (nodes[p].file, nodes[p].line) if p is not None else ROOT
        if parent_site != site:
            key = (parent_site, site)
            edges[key] = edges.get(key, 0) + subtree[i]
    total = sum(local.values())
    # Cumulative figures from the run's inclusive line figures (each stack counted once).
    incl_attr = "incl_" + attr
    for site, own in local.items():
        stats = run.files[site[0]].lines.get(site[1]) if site[0] in run.files else None
        cumulative[site] = getattr(stats, incl_attr) if stats is not None else own
    cumulative[ROOT] = total
    local[ROOT] = 0
    return FlowGraph(local, cumulative, edges, total)


def to_dot(
    graphs: Sequence[FlowGraph],
    names: Sequence[str] = (),
    min_node_fraction: float = 0.01,
    min_edge_fraction: float = 0.05,
    size_by_local: bool = True,
    cwd: str | None = None,
) -> str:
    """DOT text for one graph, or several compared node by node."""
    if not graphs:
        raise ValueError("no graphs")
    cwd = cwd or os.getcwd()
    totals = [g.total or 1 for g in graphs]
    keep: set[Site] = {ROOT}
    for g, t in zip(graphs, totals, strict=True):
        keep.update(s for s, c in g.cumulative.items() if c >= min_node_fraction * t)
    ids = {site: f"n{i}" for i, site in enumerate(sorted(keep))}
    out = [
        "digraph memlens {",
        '  graph [rankdir=TB, fontname="Helvetica"];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica"];',
    ]
    for site in sorted(keep):
        label = _label(site, graphs, names, cwd)
        share = max(g.cumulative.get(site, 0) / t for g, t in zip(graphs, totals, strict=True))
        local_share = max(g.local.get(site, 0) / t for g, t in zip(graphs, totals, strict=True))
        color = _heat(share)
        size = 10 + round(30 * local_share) if size_by_local else 12
        out.append(f'  {ids[site]} [label="{label}", fillcolor="{color}", fontsize={size}];')
    edge_keys: set[tuple[Site, Site]] = set()
    for g in graphs:
        for (a, b), w in g.edges.items():
            if a in keep and b in keep and w >= min_edge_fraction * max(g.cumulative.get(a, 0), 1):
                edge_keys.add((a, b))
    for a, b in sorted(edge_keys):
        weights = [g.edges.get((a, b), 0) for g in graphs]
        label = " / ".join(fmt_bytes(w) for w in weights)
        width = 1 + 4 * max(w / t for w, t in zip(weights, totals, strict=True))
        out.append(f'  {ids[a]} -> {ids[b]} [label="{label}", penwidth={width:.1f}];')
    out.append("}")
    return "\n".join(out) + "\n"


def _label(site: Site, graphs: Sequence[FlowGraph], names: Sequence[str], cwd: str) -> str:
    if site == ROOT:
        head = "Program root"
    else:
        path = site[0]
        rel = os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path
        head = f"{rel}:{site[1]}"
    parts = [_escape(head)]
    for i, g in enumerate(graphs):
        prefix = f"{names[i]}: " if i < len(names) and len(graphs) > 1 else ""
        loc = fmt_bytes(g.local.get(site, 0))
        cum = fmt_bytes(g.cumulative.get(site, 0))
        parts.append(_escape(f"{prefix}{loc} / {cum}"))
    return "\\n".join(parts)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _heat(share: float) -> str:
    """Blue (small share of the total) to red (large share), as an RGB hex colour."""
    s = min(max(share, 0.0), 1.0)
    r = int(255 * s + 200 * (1 - s))
    g = int(120 * s + 220 * (1 - s))
    b = int(120 * s + 255 * (1 - s))
    return f"#{r:02x}{g:02x}{b:02x}"
