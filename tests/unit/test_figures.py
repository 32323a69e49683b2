"""The one figure table (memlens.model.NAMED_FIGURES) and its users."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

from memlens import report
from memlens.annotate import figure_value, line_label, relative_error
from memlens.flow import flow_graph
from memlens.model import (
    CALL_TREE_COLUMNS,
    ERRORS,
    FIGURES,
    FUNCTION_FIGURES,
    NAMED_FIGURES,
    SELF_FIGURES,
    CallNode,
    FunctionStats,
    LineStats,
    calls_figure,
    replace,
)
from memlens.query import function_figures
from tests import runs

SERVER = Path(__file__).resolve().parents[2] / "server"


def test_every_figure_names_real_attributes() -> None:
    assert SELF_FIGURES == ("peak", "alloc", "live")
    assert list(NAMED_FIGURES) == [*SELF_FIGURES, *(f"incl_{n}" for n in SELF_FIGURES)]
    for name, fig in NAMED_FIGURES.items():
        assert fig.name == name
        assert fig.line in FIGURES
        assert fig.incl in FIGURES
        assert fig.node in FunctionStats.__slots__
        assert fig.node in CallNode.__slots__
        assert fig.title
        assert fig.words
        assert fig.short
        if fig.inclusive:
            assert fig.err == ""
            assert name.startswith("incl_")
            assert calls_figure(name) == name
        else:
            assert fig.err in ERRORS
            assert fig.line == fig.node
            assert calls_figure(name) == f"incl_{name}"
            assert NAMED_FIGURES[calls_figure(name)].node == fig.node


def test_the_figure_mappings_are_written_once() -> None:
    """No module but the model spells out a figure name -> attribute mapping again: a dict
    literal keyed by figure names whose values are attribute names."""
    names = set(NAMED_FIGURES)
    attributes = set(FIGURES) | set(ERRORS)
    for path in sorted(SERVER.rglob("*.py")):
        if path.relative_to(SERVER).as_posix() == "memlens/model/figures.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Dict):
                continue
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            values = {v.value for v in node.values if isinstance(v, ast.Constant)}
            overlap = (keys & names and values & attributes) or (keys & attributes and values)
            assert not overlap, f"{path.relative_to(SERVER)}:{node.lineno} repeats the table"


def test_the_function_figures_are_written_once() -> None:
    """The figures of a function and of a call-tree node are one tuple: no module but the model
    writes it out again (diff, merge, query and the run file read it)."""
    assert set(FUNCTION_FIGURES) <= set(FunctionStats.__slots__) & set(CallNode.__slots__)
    assert CALL_TREE_COLUMNS[5:] == FUNCTION_FIGURES
    for path in sorted(SERVER.rglob("*.py")):
        if path.relative_to(SERVER).as_posix() == "memlens/model/figures.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Call)):
                items = node.args if isinstance(node, ast.Call) else node.elts
                words = tuple(v.value for v in items if isinstance(v, ast.Constant))
                for i in range(len(words) - len(FUNCTION_FIGURES) + 1):
                    found = words[i : i + len(FUNCTION_FIGURES)]
                    assert found != FUNCTION_FIGURES, f"{path.relative_to(SERVER)}:{node.lineno}"


@pytest.mark.parametrize("name", list(NAMED_FIGURES))
def test_every_user_reads_the_table(name: str) -> None:
    """Labels, errors, the report, the query layer and flow graphs read the figure the table
    names (values chosen so that every figure differs)."""
    fig = NAMED_FIGURES[name]
    stats = LineStats(1, 2, 3, 4, 5, 6, 7, 8, alloc_err=0.5, live_err=0.75, peak_err=1.25)
    assert figure_value(stats, name) == getattr(stats, fig.line)
    error = relative_error(stats, name)
    assert error == (None if fig.inclusive else getattr(stats, fig.err) / getattr(stats, fig.line))
    exact = replace(stats, alloc_err=0.0, live_err=0.0, peak_err=0.0)
    value = f"{getattr(stats, fig.line)} B"
    assert line_label(exact, name).startswith(f"{value} {fig.words}")
    assert line_label(exact, name, compact=True) == f"{value} {fig.short}"
    if fig.inclusive:
        return
    run = runs.sample_run()
    top = report.top_lines(run, name, None)
    assert [r.value for r in top] == sorted(
        (getattr(st, fig.line) for sf in run.files.values() for st in sf.lines.values()),
        reverse=True,
    )
    fns = function_figures(run, name)
    assert [f[fig.node] for f in fns] == [
        getattr(fn, fig.node) for sf in run.files.values() for fn in sf.functions
    ]
    graph = flow_graph(run, name)
    assert graph.total == sum(getattr(n, fig.node) for n in run.call_tree)


def test_report_titles_come_from_the_table() -> None:
    run = runs.sample_run()
    stats = run.files["/work/app.py"].lines[4]
    changed = replace(run.files["/work/app.py"], lines={4: replace(stats, live_bytes=1)})
    run = replace(run, files={"/work/app.py": changed})
    out = io.StringIO()
    report.render(run, out, by="alloc", rich_output=False)
    text = out.getvalue()
    assert NAMED_FIGURES["alloc"].title in text
    assert NAMED_FIGURES["live"].title in text
