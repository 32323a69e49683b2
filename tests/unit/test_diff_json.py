"""``memlens diff --json``'s document, pinned: two runs with every kind of line pair (same,
moved, edited, new, gone, without figures on one side), files matched each way or in one run
only, GPU figures on some lines, functions paired by name, and ties in the ranking; read back
from run files (the reader's line tables), diffed in file order and ranked, compared once parsed
with the document the diff gave when it was written (tests/data/diff/)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from memlens.diff import diff_runs, to_json_dict
from memlens.model import FunctionStats, GpuDevice, LineStats, Run
from memlens.runfile import reader, writer
from tests import runs

GOLDEN = Path(__file__).parent.parent / "data" / "diff"


def _text(n: int, seed: int) -> str:
    return "".join(f"x{(i * seed) % 97} = make({i})\n" for i in range(n))


def _stats(rnd: random.Random, gpu: bool) -> LineStats:
    size = rnd.choice([0, 100, 4096, rnd.randint(1, 10**9)])
    g = rnd.randint(1, 10**6) if gpu else 0
    return LineStats(
        alloc_bytes=size * 2,
        alloc_count=rnd.randint(0, 9),
        live_bytes=size // 3,
        live_count=rnd.randint(0, 2),
        peak_bytes=size,
        incl_alloc_bytes=size * 2,
        incl_live_bytes=size // 3,
        incl_peak_bytes=size + 7,
        native_alloc_bytes=size // 5,
        gpu_alloc_bytes=g,
        gpu_peak_bytes=g // 2,
        incl_gpu_peak_bytes=g,
    )


def _lines(rnd: random.Random, n: int, gpu: bool = False) -> dict[int, LineStats]:
    return {i: _stats(rnd, gpu and i % 7 == 0) for i in range(1, n + 1) if rnd.random() < 0.6}


def _pair(tmp: Path) -> tuple[Run, Run]:
    rnd = random.Random(32)
    old = _text(60, 1)
    moved = old.splitlines(keepends=True)
    # A block moves past other code, a line is edited, two lines are inserted.
    new = "".join(moved[30:40] + moved[:10] + ["edited = 1\n"] + moved[11:30] + moved[40:])
    new = "# head\n# more\n" + new
    fns_a = (
        FunctionStats("f", 1, 9, 100, 2, 0, 50),
        FunctionStats("<lambda>", 3, 3, 10, 1, 0, 10),
        FunctionStats("<lambda>", 5, 5, 20, 1, 0, 20),
        FunctionStats("gone", 40, 50, 7, 1, 7, 7),
    )
    fns_b = (
        FunctionStats("f", 3, 11, 300, 2, 0, 50),
        FunctionStats("<lambda>", 4, 4, 15, 1, 0, 15, gpu_peak_bytes=8),
        FunctionStats("new", 60, 62, 1, 1, 0, 1),
    )
    tie = {n: LineStats(peak_bytes=1000, alloc_bytes=5) for n in (2, 3, 4)}
    a_files = [
        runs.source("/w/app.py", old, _lines(rnd, 60, gpu=True), fns_a),
        runs.source("/w/only_a.py", "a\nb\n", _lines(rnd, 2)),
        runs.source("/w/no%dsrc.py", None, _lines(rnd, 8), sha256="ab" * 32),
        runs.source("/w/same.py", None, _lines(rnd, 8), sha256="cd" * 32),
        runs.source("/w/ünï.py", "p\nq\nr\ns\n", tie),
    ]
    b_files = [
        runs.source("/w/app.py", new, _lines(rnd, 62, gpu=True), fns_b),
        runs.source("/w/only_b.py", "c\n", _lines(rnd, 1)),
        runs.source("/w/no%dsrc.py", _text(8, 3), _lines(rnd, 8)),
        runs.source("/w/same.py", _text(8, 5), _lines(rnd, 8), sha256="cd" * 32),
        runs.source("/w/ünï.py", "p\nq\nr\ns\n", {n: LineStats() for n in (2, 3, 4)}),
    ]
    gpus = (GpuDevice(0, 10**6, 10**6, 1, 0, 10**6, True),)
    out = []
    for name, files, peak in (("a", a_files, 0), ("b", b_files, 10**6)):
        info = runs.info(gpu_peak_bytes=peak, gpus=gpus if peak else ())
        path = tmp / f"{name}.mlrun"
        writer.write(runs.new_run(files, run_info=info), path)
        out.append(reader.read(path))
    return out[0], out[1]


CASES: dict[str, dict[str, Any]] = {
    "file-order": {},
    "by-peak": {"by": "peak_bytes"},
    "by-alloc-top-5": {"by": "alloc_bytes", "top": 5},
    "by-gpu-live": {"by": "gpu_live_bytes"},
}


@pytest.mark.parametrize("case", CASES)
def test_diff_json_is_as_pinned(tmp_path: Path, case: str) -> None:
    a, b = _pair(tmp_path)
    got = to_json_dict(diff_runs(a, b), **CASES[case])
    want = json.loads((GOLDEN / f"{case}.json").read_text(encoding="utf-8"))
    assert got == want
