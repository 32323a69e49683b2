"""Native memory against memray (which traces the C allocator the same way): on a program whose
memory is mostly C libraries' (libxml2 through lxml, Pillow, numpy's BLAS), memlens's peak is
memray's within 5%."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memlens.runfile import reader
from tests.cli.memlens_cmd import memlens

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "native_libraries.py"

pytestmark = pytest.mark.slow


def test_peak_matches_memray(tmp_path: Path) -> None:
    for module in ("memray", "lxml", "PIL", "numpy"):
        pytest.importorskip(module)
    run_file = tmp_path / "r.mlrun"
    ours = memlens("run", "--no-report", "-o", str(run_file), str(EXAMPLE), timeout=300)
    assert ours.returncode == 0, ours.stderr
    capture = tmp_path / "r.bin"
    theirs = subprocess.run(
        [sys.executable, "-m", "memray", "run", "-q", "-f", "-o", str(capture), str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert theirs.returncode == 0, theirs.stderr
    assert ours.stdout == theirs.stdout  # the same program, the same output
    stats = tmp_path / "stats.json"
    subprocess.run(
        [sys.executable, "-m", "memray", "stats", "--json", "-f", "-o", str(stats), str(capture)],
        capture_output=True,
        timeout=300,
        check=True,
    )
    memray_peak = json.loads(stats.read_text())["metadata"]["peak_memory"]
    run = reader.read(run_file)
    ratio = run.info.peak_traced_bytes / memray_peak
    assert 0.95 <= ratio <= 1.05, (run.info.peak_traced_bytes, memray_peak)
    # And the native part is where the libraries allocate: libxml2's nodes, BLAS buffers.
    lines = run.files[str(EXAMPLE)].lines
    text = EXAMPLE.read_text().splitlines()
    by_tag = {
        tag: i
        for i, t in enumerate(text, start=1)
        for tag in ("libxml2", "BLAS:", "Pillow")
        if tag in t
    }
    assert lines[by_tag["libxml2"]].native_alloc_bytes > 10_000_000
    assert lines[by_tag["Pillow"]].native_alloc_bytes > 30_000_000
    assert lines[by_tag["BLAS:"]].native_alloc_bytes > 10_000_000
