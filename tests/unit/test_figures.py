"""The one figure table (memlens.model.NAMED_FIGURES) and its users."""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pytest

from memlens import report
from memlens.annotate import figure_error, figure_text, figure_value, line_label
from memlens.flow import flow_graph
from memlens.model import (
    CALL_TREE_COLUMNS,
    ERRORS,
    FIGURES,
    FUNCTION_FIGURES,
    GPU_FIGURES,
    GPU_SELF_FIGURES,
    NAMED_FIGURES,
    SELF_FIGURES,
    CallNode,
    FunctionStats,
    LineStats,
    calls_figure,
    gpu_figure,
    replace,
)
from memlens.query import function_figures
from tests import runs

SERVER = Path(__file__).resolve().parents[2] / "server"


def test_every_figure_names_real_attributes() -> None:
    assert SELF_FIGURES == ("peak", "alloc", "live", "gpu_peak", "gpu_alloc", "gpu_live")
    assert GPU_SELF_FIGURES == ("gpu_peak", "gpu_alloc", "gpu_live")
    assert list(NAMED_FIGURES) == [*SELF_FIGURES, *(f"incl_{n}" for n in SELF_FIGURES)]
    for name, fig in NAMED_FIGURES.items():
        gpu = name.startswith(("gpu_", "incl_gpu_"))
        assert fig.name == name
        assert fig.line in (GPU_FIGURES if gpu else FIGURES)
        assert fig.incl in (GPU_FIGURES if gpu else FIGURES)
        assert fig.node in FunctionStats.__slots__
        # The call tree holds the process's own memory: GPU figures have no node figure.
        assert (fig.node in CallNode.__slots__) is not gpu
        assert fig.device == ("GPU" if gpu else "")
        assert fig.title
        assert fig.words
        assert fig.short
        assert gpu_figure(name) == (
            name if gpu else name.replace("incl_", "incl_gpu_") if fig.inclusive else f"gpu_{name}"
        )
        if fig.inclusive:
            assert fig.err == ""
            assert name.startswith("incl_")
            assert calls_figure(name) == name
        else:
            assert fig.err == ("" if gpu else fig.err)
            assert gpu or fig.err in ERRORS
            assert fig.line == fig.node
            assert calls_figure(name) == f"incl_{name}"
            assert NAMED_FIGURES[calls_figure(name)].node == fig.node


def test_the_figure_mappings_are_written_once() -> None:
    """No module but the model spells out a figure name -> attribute mapping again: a dict
    literal keyed by figure names whose values are attribute names."""
    names = set(NAMED_FIGURES)
    attributes = set(FIGURES) | set(ERRORS) | set(GPU_FIGURES)
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
    stats = replace(stats, **{f: 20 + i for i, f in enumerate(GPU_FIGURES)})
    assert figure_value(stats, name) == getattr(stats, fig.line)
    assert figure_error(stats, name) == (getattr(stats, fig.err) if fig.err else 0.0)
    value, error = getattr(stats, fig.line), getattr(stats, fig.err) if fig.err else 0.0
    sampled = f"~{value} B ±{error / value * 100:.0f}%" if fig.err else f"{value} B"
    assert figure_text(stats, name) == sampled  # the label reads the figure's error
    exact = replace(stats, alloc_err=0.0, live_err=0.0, peak_err=0.0)
    value = f"{fig.device} {getattr(stats, fig.line)} B".lstrip()
    assert line_label(exact, name, gpu=False).startswith(f"{value} {fig.words}")
    assert line_label(exact, name, compact=True, gpu=False) == f"{value} {fig.short}"
    if fig.inclusive:
        return
    run = runs.sample_run()
    top = report.top_lines(run, name, None)
    assert [r.value for r in top] == sorted(
        (
            v
            for sf in run.files.values()
            for st in sf.lines.values()
            if (v := getattr(st, fig.line)) > 0
        ),
        reverse=True,
    )
    # A GPU figure of a function is inclusive only (the call tree holds host memory).
    key = f"incl_{fig.node}" if fig.device else fig.node
    fns = function_figures(replace(run, info=replace(run.info, gpu_peak_bytes=1)), name)
    assert [f[key] for f in fns] == [
        getattr(fn, fig.node) for sf in run.files.values() for fn in sf.functions
    ]
    if fig.device:
        return  # flow graphs are of the call tree: host memory only (memlens flow --by)
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
