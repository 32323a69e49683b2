"""Flow graphs of the call tree, as Graphviz DOT text. Stdlib only, pure.

A node is a source line. Its *local* usage is what the line allocated itself (its self figure)
and its *cumulative* usage what it and everything it called allocated (inclusive figure). The
weight of an edge A -> B is what was allocated under calls that went from line A directly to
line B. Nodes whose cumulative usage is below ``min_node_fraction`` of the total and edges below
``min_edge_fraction`` of their source's cumulative usage are dropped; nodes are drawn larger
the more they allocate locally. Several runs can be compared in one graph: each node then
shows every run's local / cumulative figures, and is coloured by its largest share. A node of a
comparison is the same code in every run, followed where it moved between them (the lines are
matched as ``memlens diff`` matches them: :func:`memlens.diff.match_lines`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memlens.diff import match_lines
from memlens.layout import printable
from memlens.model import NAMED_FIGURES, SELF_FIGURES, Run
from memlens.units import fmt_bytes

Site = tuple[str, int]
ROOT: Site = ("", 0)

#: The call tree holds the process's own memory: GPU figures have no node figure.
_NODE_FIELD = {
    name: NAMED_FIGURES[name].node for name in SELF_FIGURES if not NAMED_FIGURES[name].device
}


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
    tree = run.call_tree
    subtree = tree.inclusive(attr)
    sites = [(tree.files[f], line) for f, line in zip(tree.file, tree.line, strict=True)]
    local: dict[Site, int] = {}
    cumulative: dict[Site, int] = {}
    edges: dict[tuple[Site, Site], int] = {}
    for i, (own, p) in enumerate(zip(getattr(tree, attr), tree.parent, strict=True)):
        site = sites[i]
        local[site] = local.get(site, 0) + own
        parent_site = sites[p] if p >= 0 else ROOT
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


def compare_graphs(
    runs: Sequence[Run], by: str = "alloc"
) -> tuple[list[FlowGraph], dict[Site, str]]:
    """The flow graphs of several runs, with one site per piece of code across them all.

    Lines are matched from each run to the previous one that has the file, as ``memlens
    diff`` matches them (moved code is followed, edited code is new). A site is then
    ``(file, k)`` where ``k`` orders the file's code by where it is last seen; the second
    value maps each site to the line to show, ``"14"`` or ``"14 (moved from 12)"`` (its line
    in the newest run that has it, and in the first).
    """
    graphs = [flow_graph(run, by) for run in runs]
    rename: list[dict[Site, Site]] = [{} for _ in runs]  # per run: its line -> shared site
    shown: dict[Site, str] = {}
    for path in sorted({site[0] for g in graphs for site in g.local if site != ROOT}):
        code_of: dict[tuple[int, int], int] = {}  # (run index, line) -> piece of code
        places: list[list[int]] = []  # piece of code -> its line in each run that has it
        previous: int | None = None
        for k, run in enumerate(runs):
            sf = run.files.get(path)
            if sf is None:
                continue
            lines = {site[1] for site in graphs[k].local if site[0] == path}
            if sf.text is not None:
                lines.update(range(1, len(sf.text.splitlines()) + 1))
            back: dict[int, int] = {}
            if previous is not None:
                old_file = runs[previous].files[path]
                back = {new: old for old, new in match_lines(old_file, sf).items()}
            for line in sorted(lines):
                old = back.get(line)
                code = (
                    code_of.get((previous, old))
                    if previous is not None and old is not None
                    else None
                )
                if code is None:
                    code = len(places)
                    places.append([])
                code_of[(k, line)] = code
                places[code].append(line)
            previous = k
        order = sorted(range(len(places)), key=lambda c: (places[c][-1], places[c][0], c))
        site_of = {code: (path, rank) for rank, code in enumerate(order, start=1)}
        for (k, line), code in code_of.items():
            rename[k][(path, line)] = site_of[code]
        for code, site in site_of.items():
            first, last = places[code][0], places[code][-1]
            shown[site] = f"{last}" if first == last else f"{last} (moved from {first})"
    return [_renamed(g, names) for g, names in zip(graphs, rename, strict=True)], shown


def _renamed(g: FlowGraph, names: Mapping[Site, Site]) -> FlowGraph:
    def site(s: Site) -> Site:
        return names.get(s, s)

    return FlowGraph(
        {site(s): v for s, v in g.local.items()},
        {site(s): v for s, v in g.cumulative.items()},
        {(site(a), site(b)): w for (a, b), w in g.edges.items()},
        g.total,
    )


def to_dot(
    graphs: Sequence[FlowGraph],
    names: Sequence[str] = (),
    min_node_fraction: float = 0.01,
    min_edge_fraction: float = 0.05,
    size_by_local: bool = True,
    cwd: str | None = None,
    lines: Mapping[Site, str] | None = None,
) -> str:
    """DOT text for one graph, or several compared node by node.

    ``lines`` says which line to show for a site (as :func:`compare_graphs` gives it);
    by default the site's own line number.
    """
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
        label = _label(site, graphs, names, cwd, lines or {})
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


def _label(
    site: Site,
    graphs: Sequence[FlowGraph],
    names: Sequence[str],
    cwd: str,
    lines: Mapping[Site, str],
) -> str:
    if site == ROOT:
        head = "Program root"
    else:
        path = site[0]
        rel = os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path
        head = f"{rel}:{lines.get(site, site[1])}"
    parts = [_escape(head)]
    for i, g in enumerate(graphs):
        prefix = f"{names[i]}: " if i < len(names) and len(graphs) > 1 else ""
        loc = fmt_bytes(g.local.get(site, 0))
        cum = fmt_bytes(g.cumulative.get(site, 0))
        parts.append(_escape(f"{prefix}{loc} / {cum}"))
    return "\\n".join(parts)


def _escape(text: str) -> str:

    return printable(text).replace("\\", "\\\\").replace('"', '\\"')


def _heat(share: float) -> str:
    """Blue (small share of the total) to red (large share), as an RGB hex colour."""
    s = min(max(share, 0.0), 1.0)
    r = int(255 * s + 200 * (1 - s))
    g = int(120 * s + 220 * (1 - s))
    b = int(120 * s + 255 * (1 - s))
    return f"#{r:02x}{g:02x}{b:02x}"
