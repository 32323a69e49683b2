"""Moments on the command line: `memlens show --at MOMENT` and `memlens diff --from --to` on a
real run of a program that holds 30 MB at one line for a while, then keeps 20 MB from another
to the end."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.memlens_cmd import memlens

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"
GOLDEN_V2 = Path(__file__).resolve().parents[1] / "data" / "formats" / "v2.mlrun"
SCRIPT = SCRIPTS / "held_then_kept.py"
HELD, KEPT = 8, 14  # the 30 MB line, the 20 MB line


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("moments")
    proc = memlens("run", "--no-report", str(SCRIPT), cwd=where)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["30000000", "20000000"]  # the program's own output
    return where


def table(stdout: str) -> dict[str, list[str]]:
    """The first table of a report: its header's columns, then each row by its line."""
    lines = stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("#  line"))
    rows = {"#": re.split(r" {2,}", lines[header].strip())}
    for ln in lines[header + 1 :]:
        if not ln.strip():
            break
        cells = re.split(r" {2,}", ln.strip())
        rows[cells[1]] = cells
    return rows


def test_show_at_peak_and_at_end(workspace: Path) -> None:
    held, kept = f"{SCRIPT}:{HELD}", f"{SCRIPT}:{KEPT}"
    proc = memlens("show", "--at", "peak", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert re.search(
        r"^memlens: at peak \(\d+\.\d\d s, 28\.\d MiB traced\)$", proc.stdout, re.MULTILINE
    )
    rows = table(proc.stdout)
    assert rows["#"] == ["#", "line", "at peak", "share of traced", "code"]
    assert rows[held][2] == "28.6 MiB"  # 30 MB at the peak
    assert rows[held][3] in ("99%", "100%")
    assert kept not in rows  # nothing yet
    # The listing labels the lines with the same figure.
    assert re.search(rf"^ +{HELD}  .*# 28\.6 MiB at peak$", proc.stdout, re.MULTILINE)

    proc = memlens("show", "--at", "end", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    rows = table(proc.stdout)
    assert rows["#"] == ["#", "line", "live at exit", "share of traced", "code"]
    assert rows[kept][2] == "19.1 MiB"  # 20 MB at the end
    assert held not in rows  # freed long before
    assert re.search(rf"^ +{KEPT}  .*# 19\.1 MiB live at exit$", proc.stdout, re.MULTILINE)


def test_show_at_a_time_is_a_moment_in_between(workspace: Path) -> None:
    """Some moment of the run held the 30 MB line and not the 20 MB one, a later one the
    reverse: the run's moments are read at times, as the user names them."""
    seen = []
    for share in range(5, 100, 5):
        proc = memlens("show", "--at", f"{share}%", "--top", "0", cwd=workspace)
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"^memlens: at \d+\.\d\d s \(.* traced\)$", proc.stdout, re.MULTILINE)
        rows = table(proc.stdout) if "#  line" in proc.stdout else {}
        seen.append((f"{SCRIPT}:{HELD}" in rows, f"{SCRIPT}:{KEPT}" in rows))
    assert (True, False) in seen
    assert (False, True) in seen
    assert seen.index((True, False)) < seen.index((False, True))


def test_diff_from_peak_to_end(workspace: Path) -> None:
    proc = memlens("diff", "--from", "peak", "--to", "end", "--plain", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.match(r"memlens: live per line in \S+, peak \(.*\) -> end \(.*\)$", lines[0])
    assert lines[1].split() == ["line", "before", "after", "change"]
    assert lines[2].split()[:7] == [f"{SCRIPT}:{HELD}", "28.6", "MiB", "-", "−28.6", "MiB", "−100%"]
    assert lines[3].split()[:6] == [f"{SCRIPT}:{KEPT}", "-", "19.1", "MiB", "+19.1", "MiB"]
    assert re.search(r"^traced: 28\.\d MiB -> 19\.\d MiB", proc.stdout, re.MULTILINE)

    proc = memlens("diff", "--from", "peak", "--json", cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["by"] == "live_bytes"
    assert doc["from"]["kind"] == "peak"
    assert doc["to"]["kind"] == "end"  # --to defaults to the end
    first = doc["lines"][0]
    assert (first["line_a"], first["change"]["live_bytes"]) == (HELD, -30_000_000 - 57)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["show", "--at", "soon"], "memlens: not a moment: 'soon' (use peak, end, a time such"),
        (["show", "--at", "120%"], "memlens: '120%' is more than the whole run (100%)"),
        (["show", "--at", "1h"], "memlens: not a moment: '1h'"),
        (["show", "--at", "999s"], "memlens: 999s is after the end of the run ("),
        (["show", "--at", "peak", "--timeline"], "memlens: --at and --timeline are two views"),
        (["diff", "latest", "latest", "--from", "peak"], "memlens: --from and --to compare two"),
        (["diff", "--from", "peak", "--by", "alloc"], "memlens: --from and --to compare live"),
    ],
)
def test_bad_moments_are_one_line_errors(workspace: Path, args: list[str], message: str) -> None:
    proc = memlens(*args, cwd=workspace)
    assert proc.returncode != 0
    assert proc.stderr.startswith(message), proc.stderr
    assert proc.stderr.count("\n") == 1


def test_a_run_without_moments_shows_its_peak_and_end_only(tmp_path: Path) -> None:
    proc = memlens("show", str(GOLDEN_V2), "--at", "peak", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert table(proc.stdout)["/work/db.py:4"][2] == "24.0 MiB"
    proc = memlens("show", str(GOLDEN_V2), "--at", "1s", cwd=tmp_path)
    assert proc.returncode != 0
    assert proc.stderr == (
        "memlens: this run has no moments (made by an older memlens, imported, or with the "
        "timeline off): only --at peak and --at end\n"
    )


GROWS = """\
import time

HELD = []


def handle():
    HELD.append(bytearray(1_000_000))  # 1 MB more at every call


def main():
    memo = bytearray(4_000_000)  # kept from the start
    for _ in range(8):
        handle()
        time.sleep(0.03)
    return memo


kept = main()
"""


def test_live_tables_say_what_grew_and_what_was_kept(tmp_path: Path) -> None:
    """The leak rule's word on each line live at exit (memlens.growth): ``grew`` for the line
    that adds 1 MB at every call, ``kept`` for the buffer allocated once at the start."""
    (tmp_path / "grows.py").write_text(GROWS)
    proc = memlens("run", "--no-report", "grows.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = memlens("show", "--by", "live", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = table(proc.stdout)
    assert rows["#"][:4] == ["#", "line", "live at exit", "growth"]
    assert rows["grows.py:7"][2:4] == ["7.6 MiB", "grew"]
    assert rows["grows.py:11"][2:4] == ["3.8 MiB", "kept"]
    # Ranked by another figure, the table has no growth column; a moment's table neither.
    assert "growth" not in table(memlens("show", cwd=tmp_path).stdout)["#"]
    assert "growth" not in table(memlens("show", "--at", "end", cwd=tmp_path).stdout)["#"]
    # A run without moments cannot tell: no column.
    proc = memlens("show", str(GOLDEN_V2), "--by", "live", cwd=tmp_path)
    assert "growth" not in table(proc.stdout)["#"]


def test_a_child_process_moments_are_on_the_program_clock(tmp_path: Path) -> None:
    """A child holds 10 MB for 0.4 s while the program waits for it: the merged run's moments
    show the child's line while it ran, and not after it ended."""
    (tmp_path / "child.py").write_text(
        "import time\nx = bytearray(10_000_000)  # the child's\ntime.sleep(0.4)\n"
    )
    (tmp_path / "parent.py").write_text(
        "import subprocess, sys, time\n"
        "proc = subprocess.Popen([sys.executable, 'child.py'])\n"
        "time.sleep(0.1)\n"
        "mine = bytearray(3_000_000)  # the program's\n"
        "proc.wait()\n"
        "time.sleep(0.3)\n"
    )
    proc = memlens("run", "--no-report", "parent.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    seen = []
    for share in range(5, 100, 5):
        proc = memlens("show", "--at", f"{share}%", "--top", "0", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        rows = table(proc.stdout) if "#  line" in proc.stdout else {}
        seen.append((rows.get("child.py:2", [""] * 3)[2], rows.get("parent.py:4", [""] * 3)[2]))
    assert ("9.5 MiB", "2.9 MiB") in seen  # both at once
    assert seen[-1] == ("", "2.9 MiB")  # the child has ended
