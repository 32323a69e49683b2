"""Building call trees from paths and counting figures once per path (memlens.calltree)."""

from __future__ import annotations

import pytest

from memlens.calltree import TreeBuilder, once_per_path
from memlens.model import CallTree


def test_paths_make_a_canonical_tree_and_share_their_prefixes() -> None:
    tb = TreeBuilder()
    main = tb.node(-1, "a.py", 1, "<module>")
    f = tb.node(main, "a.py", 5, "f")
    g = tb.node(f, "a.py", 9, "g")
    assert tb.node(-1, "a.py", 1, "<module>") == main  # interned
    assert tb.node(main, "a.py", 5, "f") == f
    other = tb.node(g, "a.py", 5, "f")  # the same line deeper down is another node
    assert other not in (main, f, g)
    tb.add(g, [100, 1, 40, 1, 60])
    tb.add(other, [7, 1, 0, 0, 7])
    tb.add(g, [1, 1, 0, 0, 0])
    tree = tb.tree()
    assert list(tree.parent) == [-1, 0, 1, 2]
    assert CallTree.from_nodes(list(tree)) == tree  # already canonical
    assert list(tree.alloc_bytes) == [0, 0, 101, 7]
    assert tree.inclusive("alloc_bytes") == [108, 108, 108, 7]
    assert tb.subtree_sums()[3] == [1, 1, 1, 0]  # live_count (not a tree column) by node
    assert tree.node(2).function == "g"


def test_a_recursive_line_counts_what_ran_under_it_once() -> None:
    # f:5 -> g:9 -> f:5 -> leaf:12 (100 bytes); and f:5 -> leaf:12 (10 bytes)
    parent = [-1, 0, 1, 2, 0]
    sites = [("a.py", 5), ("a.py", 9), ("a.py", 5), ("a.py", 12), ("a.py", 12)]
    own = [0, 0, 0, 100, 10]
    incl = [110, 100, 100, 100, 10]
    sums = once_per_path(parent, sites, [incl, own])
    assert sums[("a.py", 5)] == [110, 0]  # not 210: the inner f:5 is under the outer one
    assert sums[("a.py", 9)] == [100, 0]
    assert sums[("a.py", 12)] == [110, 110]  # two paths, each counted


def test_keys_of_none_count_for_nothing_but_their_subtrees_do() -> None:
    sums = once_per_path([-1, 0], [None, "f"], [[5, 3]])
    assert sums == {"f": [3]}


@pytest.mark.parametrize("depth", [1, 50_000])
def test_deep_paths_do_not_recurse(depth: int) -> None:
    parent = [i - 1 for i in range(depth)]
    sums = once_per_path(parent, ["x"] * depth, [[1] * depth])
    assert sums == {"x": [1]}
