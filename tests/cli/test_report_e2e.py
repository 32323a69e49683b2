"""The report of `memlens run` / `memlens show` on real programs: what it always lists."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from memlens.runfile import reader
from memlens.store import Store
from tests.cli.memlens_cmd import memlens

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"
LEAKS = "live at exit (what the program still held when it ended):"


def _table(lines: list[str], start: int) -> list[list[str]]:
    """The rows of the table whose header is at ``start``, split on whitespace."""
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def test_default_report_lists_memory_kept_after_a_transient_peak(tmp_path: Path) -> None:
    script = SCRIPTS / "transient_peak.py"
    proc = memlens("run", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"{50 * 1024 * 1024} {5 * 1024 * 1024}"
    # The peak table: the 50 MB scratch buffer (line 2) first; line 7 held nothing then.
    peak = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["#", "line", "peak"])
    assert _table(lines, peak)[0][:4] == ["1", f"{script}:2", "50.0", "MiB"]
    assert all(row[1] != f"{script}:7" for row in _table(lines, peak))
    # ... and the kept 5 MB follow, first in the table of what was still held at exit.
    leaks = lines.index(LEAKS)
    assert lines[leaks + 1].split()[:4] == ["#", "line", "live", "at"]
    assert _table(lines, leaks + 1)[0][:4] == ["1", f"{script}:7", "5.0", "MiB"]

    # `show --by live` is that one table, with no second "live at exit" column.
    proc = memlens("show", "--by", "live", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("#  line"))
    columns = re.split(r" {2,}", lines[header].strip())
    assert columns == ["#", "line", "live at exit", "growth", "allocs", "share of peak", "code"]
    assert _table(lines, header)[0][:4] == ["1", f"{script}:7", "5.0", "MiB"]
    assert LEAKS not in lines


@pytest.mark.parametrize("command", ["run", "show"])
def test_top_0_lists_every_line(tmp_path: Path, command: str) -> None:
    script = SCRIPTS / "transient_peak.py"
    assert memlens("run", "--no-report", str(script), cwd=tmp_path).returncode == 0
    args = [str(script)] if command == "run" else []
    every = memlens(command, "--top", "0", "--by", "alloc", *args, cwd=tmp_path)
    assert every.returncode == 0, every.stderr
    assert "no allocations were attributed" not in every.stdout
    lines = every.stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("#  line"))
    rows = _table(lines, header)
    # Every line that allocated: the two buffers first, then the print, the def, the return
    # (and, on 3.10, the call line: that Python allocates a frame object per call).
    listed = [row[1].rsplit(":", 1)[1] for row in rows]
    run = reader.read(Store(tmp_path).latest() or "")
    allocated = {str(n) for n, st in run.files[str(script)].lines.items() if st.alloc_bytes}
    assert listed[:3] == ["2", "7", "8"]
    assert sorted(listed) == sorted(allocated)
    # (From 3.14 the int that line 3 returns comes from CPython's free list: no allocation.)
    assert ({"1", "3"} if sys.version_info < (3, 14) else {"1"}) <= allocated
    one = memlens(command, "--top", "1", "--by", "alloc", *args, cwd=tmp_path)
    one_lines = one.stdout.splitlines()
    assert len(_table(one_lines, header)) == 1
    negative = memlens(command, "--top", "-1", *args, cwd=tmp_path)
    assert negative.returncode == 2
    assert negative.stderr == "memlens: --top must not be negative\n"


def test_diff_top_must_not_be_negative(tmp_path: Path) -> None:
    proc = memlens("diff", "--top", "-1", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "memlens: --top must not be negative\n"
