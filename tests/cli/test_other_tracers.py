"""A program that traces its own memory with tracemalloc runs under `memlens run` as under
plain Python: tracemalloc's hooks go around ours (started by the program) or inside them
(PYTHONTRACEMALLOC), and tracemalloc allocates its bookkeeping while it holds its lock.
These runs hung before (the tracer named a new code object from inside that allocation)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memlens.runfile import reader
from tests.cli.memlens_cmd import memlens

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)

PROGRAM = """\
import tracemalloc
tracemalloc.start(10)
import json
def encode(n):
    return [json.dumps({"n": i, "s": "x" * (i % 7)}) for i in range(n)]
rows = encode(20000)
snapshot = tracemalloc.take_snapshot()
print("rows", len(rows), "traced", len(snapshot.traces) > 0)
tracemalloc.stop()
"""


@pytest.mark.parametrize(
    "mode", [(), ("--sample", "16KiB", "--seed", "3")], ids=["exact", "sampling"]
)
def test_a_program_that_starts_tracemalloc(tmp_path: Path, mode: tuple[str, ...]) -> None:
    (tmp_path / "app.py").write_text(PROGRAM)
    proc = memlens("run", "--no-report", *mode, "-o", "r.mlrun", "app.py", cwd=tmp_path, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "rows 20000 traced True\n"
    lines = reader.read(tmp_path / "r.mlrun").files[str(tmp_path / "app.py")].lines
    assert lines[5].alloc_bytes > 0  # inside encode(), named though tracemalloc was on


def test_pythontracemalloc_set(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(PROGRAM.replace("tracemalloc.start(10)", "pass"))
    env = {**os.environ, "PYTHONTRACEMALLOC": "5"}
    proc = memlens(
        "run", "--no-report", "-o", "r.mlrun", "app.py", cwd=tmp_path, env=env, timeout=90
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "rows 20000 traced True\n"
    lines = reader.read(tmp_path / "r.mlrun").files[str(tmp_path / "app.py")].lines
    assert lines[5].alloc_bytes > 0
