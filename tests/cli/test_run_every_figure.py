"""`memlens run` in its default mode on the interpreter it runs on (./dev versions: Debian's
statically linked builds as well as pyenv's): Python objects, C `malloc` through ctypes and a
spawned child's memory each land on their own line, with plain Python's output and exit code.
On a statically linked, non-PIE interpreter the C allocator's functions are seen through the
executable's own stubs, which once made the native-memory interposer call itself (SIGSEGV
before the program started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlens.runfile import reader
from tests.cli.memlens_cmd import memlens, plain

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)

SCRIPT = Path(__file__).resolve().parents[1] / "data" / "scripts" / "objects_malloc_child.py"
MB = 1_000_000


def test_objects_malloc_and_a_spawned_child_each_on_their_line(tmp_path: Path) -> None:
    reference = plain(SCRIPT, cwd=tmp_path)
    out = tmp_path / "run.mlrun"
    proc = memlens("run", "--no-report", "-o", str(out), str(SCRIPT), cwd=tmp_path, timeout=300)
    assert (proc.returncode, proc.stdout) == (reference.returncode, reference.stdout)
    assert proc.stdout == "kept 10000 blocks 10 child 0\n"
    assert proc.returncode == 3
    assert "not traced" not in proc.stderr, proc.stderr  # native memory was traced
    lines = reader.read(out).files[str(SCRIPT)].lines
    objects, native, child = lines[14], lines[15], lines[7]
    assert 10 * MB <= objects.live_bytes < 11.5 * MB  # (+ object headers: 6-11% by version)
    assert 10 * MB <= native.native_live_bytes < 10.1 * MB
    assert 10 * MB <= native.live_bytes < 10.2 * MB  # (native bytes are part of a line's own)
    assert 20 * MB <= child.alloc_bytes < 20.5 * MB
