"""Flow graphs from hand-made call trees (no tracer needed)."""

from __future__ import annotations

import re

from memlens.flow import ROOT, compare_graphs, flow_graph, to_dot
from memlens.model import CallNode, LineStats, Run, SourceFile
from tests.runs import new_run, source

F = "/proj/app.py"
A, B, C, D, E = ((F, n) for n in (1, 2, 3, 4, 5))


def _run(files: list[SourceFile], tree: tuple[CallNode, ...]) -> Run:
    return new_run(files, tree, command=("python", F), peak_traced_bytes=83, peak_rss_bytes=0)


def heapprof_example(scale: int = 1) -> Run:
    """The stacks AD=16 ACD=17 ACE=19 AC=21 BC=3 BCD=7 (lines A..E = 1..5)."""
    nodes = [
        (0, -1, 1, 0),  # A
        (1, 0, 4, 16),  # A D
        (2, 0, 3, 21),  # A C
        (3, 2, 4, 17),  # A C D
        (4, 2, 5, 19),  # A C E
        (5, -1, 2, 0),  # B
        (6, 5, 3, 3),  # B C
        (7, 6, 4, 7),  # B C D
    ]
    tree = tuple(
        CallNode(i, p, F, line, "f", alloc_bytes=b * scale, alloc_count=1 if b else 0)
        for i, p, line, b in nodes
    )
    local = {1: 0, 2: 0, 3: 24, 4: 40, 5: 19}
    cumulative = {1: 73, 2: 10, 3: 67, 4: 40, 5: 19}
    lines = {
        n: LineStats(alloc_bytes=local[n] * scale, incl_alloc_bytes=cumulative[n] * scale)
        for n in local
    }
    return _run([source(F, None, lines, sha256="x")], tree)


def test_local_cumulative_and_edges_match_the_definition() -> None:
    g = flow_graph(heapprof_example(), "alloc")
    assert g.total == 83
    assert {s: g.local[s] for s in (A, B, C, D, E)} == {A: 0, B: 0, C: 24, D: 40, E: 19}
    assert {s: g.cumulative[s] for s in (A, B, C, D, E)} == {A: 73, B: 10, C: 67, D: 40, E: 19}
    assert g.cumulative[ROOT] == 83
    assert g.edges == {
        (ROOT, A): 73,
        (ROOT, B): 10,
        (A, D): 16,
        (A, C): 57,
        (B, C): 10,
        (C, D): 24,
        (C, E): 19,
    }
    # Flow is conserved: what enters a node is what it allocates plus what leaves it.
    for site in (C, D, E):
        incoming = sum(w for (_, b), w in g.edges.items() if b == site)
        outgoing = sum(w for (a, _), w in g.edges.items() if a == site)
        assert incoming == g.local[site] + outgoing


def _nodes(dot: str) -> dict[str, str]:
    return dict(re.findall(r'^  (n\d+) \[label="([^"]*)"', dot, re.MULTILINE))


def _edges(dot: str) -> list[tuple[str, str, str]]:
    return re.findall(r'^  (n\d+) -> (n\d+) \[label="([^"]*)"', dot, re.MULTILINE)


def test_dot_drops_small_nodes_and_edges() -> None:
    g = flow_graph(heapprof_example(), "alloc")
    dot = to_dot([g], min_node_fraction=0.2, min_edge_fraction=0.25, cwd="/proj")
    assert dot.startswith("digraph memlens {\n")
    assert dot.endswith("}\n")
    labels = sorted(_nodes(dot).values())
    # B (10 of 83 < 20%) is dropped; the root and A, C, D, E stay.
    assert labels == [
        "Program root\\n0 B / 83 B",
        "app.py:1\\n0 B / 73 B",
        "app.py:3\\n24 B / 67 B",
        "app.py:4\\n40 B / 40 B",
        "app.py:5\\n19 B / 19 B",
    ]
    by_id = {v.split("\\n")[0]: k for k, v in _nodes(dot).items()}
    edges = {(a, b): w for a, b, w in _edges(dot)}
    # A -> D carries 16 of A's 73 (< 25%): dropped; A -> C (57) and C -> D (24 of 67) stay.
    assert (by_id["app.py:1"], by_id["app.py:4"]) not in edges
    assert edges[(by_id["app.py:1"], by_id["app.py:3"])] == "57 B"
    assert edges[(by_id["app.py:3"], by_id["app.py:4"])] == "24 B"
    assert edges[(by_id["Program root"], by_id["app.py:1"])] == "73 B"
    assert len(edges) == 4  # root->A, A->C, C->D, C->E


def test_nodes_are_sized_by_local_usage() -> None:
    dot = to_dot([flow_graph(heapprof_example(), "alloc")], cwd="/proj")
    sizes = dict(re.findall(r'label="(app\.py:\d)[^"]*".*fontsize=(\d+)', dot))
    assert sizes["app.py:1"] == "10"  # allocates nothing itself
    assert int(sizes["app.py:4"]) > int(sizes["app.py:3"]) > int(sizes["app.py:5"]) > 10


def test_compare_shows_every_runs_figures() -> None:
    one = flow_graph(heapprof_example(1), "alloc")
    two = flow_graph(heapprof_example(1024), "alloc")
    dot = to_dot([one, two], names=["before", "after"], cwd="/proj")
    labels = _nodes(dot)
    c = next(v for v in labels.values() if v.startswith("app.py:3"))
    assert c == "app.py:3\\nbefore: 24 B / 67 B\\nafter: 24.0 KiB / 67.0 KiB"
    edge_labels = {w for _, _, w in _edges(dot)}
    assert "57 B / 57.0 KiB" in edge_labels


def test_paths_outside_cwd_stay_absolute_and_quotes_are_escaped() -> None:
    odd = '/other/we"ird.py'
    run = _run(
        [source(odd, None, {1: LineStats(alloc_bytes=5, incl_alloc_bytes=5)}, sha256="x")],
        (CallNode(0, -1, odd, 1, "f", alloc_bytes=5),),
    )
    dot = to_dot([flow_graph(run)], cwd="/proj")
    assert 'label="/other/we\\"ird.py:1\\n5 B / 5 B"' in dot


def _module_run(text: str, allocs: dict[int, int]) -> Run:
    """Module-level lines of F allocating ``allocs[line]`` bytes each (no calls)."""
    lines = {n: LineStats(alloc_bytes=b, incl_alloc_bytes=b) for n, b in allocs.items()}
    tree = tuple(
        CallNode(i, -1, F, n, "<module>", alloc_bytes=b) for i, (n, b) in enumerate(allocs.items())
    )
    return _run([source(F, text, lines, sha256="x")], tree)


BEFORE = _module_run("import x\ntable = build()\nnames = load()\n", {2: 4000, 3: 100})
# Two lines inserted above the table (now on line 4), new code on line 2.
AFTER = _module_run(
    "import x\nextra = more()\n# note\ntable = build()\nnames = load()\n",
    {2: 50, 4: 8000, 5: 100},
)


def test_compare_follows_moved_lines_as_diff_does() -> None:
    # Matched by number, line 2 would mix the table (before) with the new code (after).
    graphs, lines = compare_graphs([BEFORE, AFTER], "alloc")
    dot = to_dot(graphs, names=["a", "b"], cwd="/proj", min_node_fraction=0, lines=lines)
    assert sorted(_nodes(dot).values()) == [
        "Program root\\na: 0 B / 4.0 KiB\\nb: 0 B / 8.0 KiB",
        "app.py:2\\na: 0 B / 0 B\\nb: 50 B / 50 B",
        "app.py:4 (moved from 2)\\na: 3.9 KiB / 3.9 KiB\\nb: 7.8 KiB / 7.8 KiB",
        "app.py:5 (moved from 3)\\na: 100 B / 100 B\\nb: 100 B / 100 B",
    ]


def test_compare_of_three_runs_shows_the_newest_line_and_the_first() -> None:
    third = _module_run("table = build()\nimport x\nnames = load()\n", {1: 2000, 3: 100})
    graphs, lines = compare_graphs([BEFORE, AFTER, third], "alloc")
    table = next(site for site, shown in lines.items() if shown == "1 (moved from 2)")
    assert [g.local.get(table, 0) for g in graphs] == [4000, 8000, 2000]
    names = next(site for site, shown in lines.items() if shown == "3")
    assert [g.local.get(names, 0) for g in graphs] == [100, 100, 100]
    # import x (1, 1, 2), extra (after only, 2), the comment (3), the table, names.
    assert sorted(lines.values()) == ["1 (moved from 2)", "2", "2 (moved from 1)", "3", "3"]
    extra = next(site for site, shown in lines.items() if shown == "2")
    assert [g.local.get(extra, 0) for g in graphs] == [0, 50, 0]


def test_compare_of_one_run_is_its_own_graph() -> None:
    run = heapprof_example()
    graphs, lines = compare_graphs([run], "alloc")
    assert to_dot(graphs, lines=lines, cwd="/proj") == to_dot([flow_graph(run)], cwd="/proj")
