"""GPU figures where figures are shown: labels (memlens.annotate), hints, hovers and lenses
(memlens_lsp.views), the terminal report, diffs."""

from __future__ import annotations

import io
from pathlib import Path

from memlens.annotate import gpu_part, label_for_test, line_label
from memlens.diff import diff_runs, ranked_lines, to_json_dict
from memlens.model import (
    FunctionStats,
    GpuDevice,
    GpuDeviceLine,
    LineStats,
    Run,
    TestStats,
    replace,
)
from memlens.report import render
from memlens_lsp import views
from memlens_lsp.index import FolderState, RunData, canonical
from memlens_lsp.settings import Settings
from memlens_lsp.staleness import IDENTITY
from tests import runs

MiB = 1024 * 1024
TEXT = "import torch\n\ndef step(i):\n    cache[i] = torch.empty(n, device='cuda')\n    return helper()\n"


def gpu(
    alloc: int, live: int, peak: int, count: int = 1, incl: tuple[int, int, int] | None = None
) -> LineStats:
    """Self GPU figures; inclusive ones (alloc, live, peak) the same unless ``incl`` says."""
    incl_alloc, incl_live, incl_peak = incl or (alloc, live, peak)
    return LineStats(
        gpu_alloc_bytes=alloc,
        gpu_alloc_count=count,
        gpu_live_bytes=live,
        gpu_peak_bytes=peak,
        incl_gpu_alloc_bytes=incl_alloc,
        incl_gpu_live_bytes=incl_live,
        incl_gpu_peak_bytes=incl_peak,
    )


CACHE = replace(
    gpu(64 * MiB, 64 * MiB, 64 * MiB, 4), alloc_bytes=12288, alloc_count=5, peak_bytes=12288
)


def test_labels_lead_with_the_host_figure_and_add_the_gpus() -> None:
    assert line_label(CACHE) == "12.0 KiB at peak · 5 allocs · GPU 64.0 MiB at peak"
    assert line_label(CACHE, compact=True) == "12.0 KiB peak · GPU 64.0 MiB peak"
    assert line_label(CACHE, "live", compact=True) == "0 B live · GPU 64.0 MiB live"
    assert line_label(CACHE, "gpu_peak") == "GPU 64.0 MiB at peak · 4 allocs"
    assert line_label(CACHE, gpu=False) == "12.0 KiB at peak · 5 allocs"
    # GPU memory only: no "0 B at peak" before it.
    assert line_label(gpu(MiB, 0, MiB)) == "GPU 1.0 MiB at peak"
    # Held at the end but not at the peak: what is still held.
    assert gpu_part(gpu(16 * MiB, 16 * MiB, 0)) == "GPU 16.0 MiB live at exit"
    assert gpu_part(gpu(0, 0, 0, 0, incl=(0, 0, 5 * MiB)), calls=True) == "GPU 5.0 MiB in calls"
    assert gpu_part(LineStats(alloc_bytes=5)) is None
    old = gpu(32 * MiB, 32 * MiB, 32 * MiB)
    assert gpu_part(CACHE, baseline=old, compare=True) == "GPU 64.0 MiB at peak (+32.0 MiB)"


def test_a_tests_label_has_its_gpu_peak() -> None:
    test = TestStats("t.py::test_a", "passed", MiB, MiB, 0, gpu_peak_bytes=2 * MiB)
    assert label_for_test(test) == "test peak 1.0 MiB · leaked 0 B · GPU peak 2.0 MiB"
    assert label_for_test(replace(test, gpu_peak_bytes=0)) == "test peak 1.0 MiB · leaked 0 B"


def folder(tmp_path: Path, lines: dict[int, LineStats], **kw: object) -> tuple[FolderState, str]:
    path = str(tmp_path / "train.py")
    functions = (FunctionStats("step", 3, 5, 0, 0, 0, 0, 80 * MiB, 5, 64 * MiB, 70 * MiB),)
    sf = runs.source(path, TEXT, lines, functions, **kw)  # type: ignore[arg-type]
    info = runs.info(peak_traced_bytes=10 * MiB, gpu_peak_bytes=100 * MiB)
    run = RunData(tmp_path / "r.mlrun", runs.new_run([sf], run_info=info))
    return FolderState(tmp_path, tmp_path.as_uri(), run, None), canonical(path)


def test_hints_show_gpu_memory_even_where_the_host_figure_is_too_small(tmp_path: Path) -> None:
    lines = {4: CACHE, 5: gpu(0, 0, 0, 0, incl=(70 * MiB, 0, 70 * MiB))}
    state, key = folder(tmp_path, lines)
    view = state.view(key)
    assert view is not None
    items = views.hint_items(view, IDENTITY, Settings(), 0, 5, has_baseline=False)
    # 12 KiB is above the default 1 KiB floor: host first; the call line shows its callees'.
    # (A hint fits in 43 characters: the count goes first, the hover has it.)
    assert [(i.line, i.label) for i in items] == [
        (3, "12.0 KiB at peak · GPU 64.0 MiB at peak"),
        (4, "GPU 70.0 MiB in calls"),
    ]
    settings = Settings(min_bytes=64 * 1024)
    items = views.hint_items(view, IDENTITY, settings, 0, 5, has_baseline=False)
    assert [(i.line, i.label) for i in items] == [
        (3, "GPU 64.0 MiB at peak"),
        (4, "GPU 70.0 MiB in calls"),
    ]
    # The share of the peak weighs GPU memory against the run's GPU peak (100 MiB).
    items = views.hint_items(view, IDENTITY, Settings(min_share=0.65), 0, 5, has_baseline=False)
    assert [(i.line, i.label) for i in items] == [(4, "GPU 70.0 MiB in calls")]


def test_the_hover_has_a_gpu_table_and_devices(tmp_path: Path) -> None:
    devices = {
        4: (
            GpuDeviceLine(0, 40 * MiB, 3, 40 * MiB, 40 * MiB),
            GpuDeviceLine(1, 24 * MiB, 1, 24 * MiB, 24 * MiB),
        )
    }
    state, key = folder(tmp_path, {4: CACHE})
    view = state.view(key)
    assert view is not None
    sf = replace(view.source, gpu_devices=devices)
    run = replace(state.run.run, files={view.source.path: sf})  # type: ignore[union-attr]
    data = RunData(tmp_path / "r.mlrun", run)
    view = FolderState(tmp_path, tmp_path.as_uri(), data, None).view(key)
    assert view is not None
    text = views.hover_markdown(view, 4, Settings(), stale=False, has_baseline=False)
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == "**memlens** · 12.0 KiB at peak · 5 allocs · GPU 64.0 MiB at peak"
    table = lines.index("| GPU memory | self | incl. calls |")
    assert lines[table + 2 : table + 6] == [
        "| peak | 64.0 MiB | 64.0 MiB |",
        "| allocated | 64.0 MiB | 64.0 MiB |",
        "| live at exit | 64.0 MiB | 64.0 MiB |",
        "| allocations | 4 | |",
    ]
    devices_at = lines.index("By GPU:")
    assert lines[devices_at + 4 : devices_at + 6] == [
        "| cuda:0 | 40.0 MiB | 40.0 MiB | 40.0 MiB |",
        "| cuda:1 | 24.0 MiB | 24.0 MiB | 24.0 MiB |",
    ]
    assert "64.0% of the run's GPU peak" in text


def test_lenses_have_the_functions_gpu_memory(tmp_path: Path) -> None:
    state, key = folder(tmp_path, {4: CACHE})
    view = state.view(key)
    assert view is not None
    lenses = views.function_lenses(view, IDENTITY, 5, Settings(), has_baseline=False)
    assert [(lens.line, lens.title) for lens in lenses] == [
        (2, "memlens: GPU 70.0 MiB at peak · 80.0 MiB allocated, incl. calls")
    ]


def _gpu_run(path: str, line: LineStats, peak: int) -> Run:
    info = runs.info(gpu_peak_bytes=peak, gpus=(GpuDevice(0, peak, peak, 1, 0, peak, True),))
    return runs.new_run([runs.source(path, TEXT, {4: line})], run_info=info)


def test_diff_compares_gpu_figures() -> None:
    a = _gpu_run("/w/train.py", gpu(32 * MiB, 32 * MiB, 32 * MiB), 40 * MiB)
    b = _gpu_run("/w/train.py", gpu(64 * MiB, 64 * MiB, 64 * MiB), 80 * MiB)
    d = diff_runs(a, b)
    (line,) = ranked_lines(d, "gpu_peak_bytes")
    assert line.change("gpu_peak_bytes") == 32 * MiB
    doc = to_json_dict(d, by="gpu_live_bytes")
    assert doc["totals"]["gpu_peak_bytes"] == {
        "a": 40 * MiB,
        "b": 80 * MiB,
        "delta": 40 * MiB,
        "ratio": 1.0,
    }
    assert doc["lines"][0]["change"]["gpu_live_bytes"] == 32 * MiB
    # Runs without GPU memory keep the diff they had: no gpu keys.
    plain = to_json_dict(diff_runs(runs.sample_run(), runs.sample_run()))
    assert "gpu_peak_bytes" not in plain["totals"]
    assert not any(k.startswith("gpu") for k in plain["lines"][0]["figures"])


def test_the_report_has_a_gpu_table() -> None:
    run = _gpu_run("/w/train.py", replace(CACHE, live_bytes=12288), 64 * MiB)
    out = io.StringIO()
    render(run, out, rich_output=False)
    text = out.getvalue().splitlines()
    assert text[0].startswith(
        "memlens: peak 48.0 MiB traced · peak RSS 80.0 MiB · GPU peak 64.0 MiB · "
    )
    at = text.index("GPU memory (PyTorch CUDA):")
    assert text[at + 1].split() == [
        "#", "line", "GPU", "peak", "allocs", "share", "of", "GPU", "peak", "GPU", "live", "at", "exit", "code",
    ]  # fmt: skip
    assert text[at + 2].split()[:6] == ["1", "/w/train.py:4", "64.0", "MiB", "4", "100%"]


def test_ranking_by_gpu_memory_a_run_without_any_says_so() -> None:
    out = io.StringIO()
    render(runs.sample_run(), out, by="gpu_peak", rich_output=False)
    assert (
        out.getvalue().splitlines()[1] == "memlens: the run recorded no GPU memory (PyTorch CUDA)"
    )
