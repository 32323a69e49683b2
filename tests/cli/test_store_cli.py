"""runs / baseline / export / diff / import, end to end through the `memlens` command."""

from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

from memlens import fileformat
from memlens.store import Store
from tests.runs import MIB, sample_run


def memlens(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlens", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _store_with_two_runs(tmp: Path) -> tuple[Path, Path]:
    store = Store(tmp)
    a = store.runs_dir / "20261122-100000-1.mlrun"
    b = store.runs_dir / "20261122-110000-2.mlrun"
    fileformat.write(sample_run(), a)
    moved = "# new header\n" + sample_run().files["/work/app.py"].text  # type: ignore[operator]
    run_b = sample_run(text=moved)
    sf = run_b.files["/work/app.py"]
    from dataclasses import replace

    from memlens.model import LineStats

    lines = {
        5: replace(sf.lines[4], peak_bytes=30 * MIB),
        7: sf.lines[6],
        1: LineStats(peak_bytes=MIB),
    }
    run_b = replace(run_b, files={"/work/app.py": replace(sf, lines=lines)})
    fileformat.write(run_b, b)
    store.set_pointer("latest", b)
    return a, b


def test_runs_list_baseline_and_prune(tmp_path: Path) -> None:
    a, _b = _store_with_two_runs(tmp_path)
    out = memlens("runs", cwd=tmp_path)
    assert out.returncode == 0
    rows = out.stdout.splitlines()
    assert rows[0].split() == ["id", "started", "peak", "duration", "command"]
    assert rows[1].startswith("20261122-100000-1")
    assert "48.0 MiB" in rows[1]
    assert "1.50 s" in rows[1]
    assert "python app.py" in rows[1]
    assert rows[2].endswith("latest")
    assert memlens("baseline", "set", "20261122-100000", cwd=tmp_path).returncode == 0
    assert Store(tmp_path).baseline() == a
    listed = json.loads(memlens("runs", "--json", cwd=tmp_path).stdout)
    assert [(r["id"], r["baseline"], r["latest"]) for r in listed] == [
        ("20261122-100000-1", True, False),
        ("20261122-110000-2", False, True),
    ]
    # prune never removes the baseline
    assert memlens("runs", "prune", "--keep", "0", cwd=tmp_path).returncode == 0
    assert Store(tmp_path).run_files() == [a]


def test_export_prints_the_documented_json(tmp_path: Path) -> None:
    _a, b = _store_with_two_runs(tmp_path)
    out = memlens("export", "latest", cwd=tmp_path)
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert doc["format"] == "memlens-run"
    assert doc["run"]["peak_traced_bytes"] == 48 * MIB
    assert doc["files"]["/work/app.py"]["lines"]["5"]["peak_bytes"] == 30 * MIB
    by_path = json.loads(memlens("export", str(b), cwd=tmp_path).stdout)
    assert by_path == doc


def test_diff_table_and_json_follow_moved_lines(tmp_path: Path) -> None:
    _store_with_two_runs(tmp_path)
    assert memlens("baseline", "set", "20261122-100000-1", cwd=tmp_path).returncode == 0
    out = memlens("diff", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0] == "memlens: peak per line, 20261122-100000-1 -> 20261122-110000-2"
    first = rows[2].split()
    assert first[0] == "/work/app.py:5"
    assert " ".join(first[1:4]) == "(was 4) 40.0"
    assert "−10.0 MiB" in rows[2]
    assert rows[2].rstrip().endswith("−25%")
    doc = json.loads(memlens("diff", "--json", cwd=tmp_path).stdout)
    moved = next(ld for ld in doc["lines"] if ld["line_b"] == 5)
    assert moved["line_a"] == 4
    assert moved["change"]["peak_bytes"] == -10 * MIB


def test_import_tracemalloc_into_the_store(tmp_path: Path) -> None:
    tracemalloc.start(5)
    try:
        keep = [bytearray(1 << 20) for _ in range(2)]
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    snap.dump(str(tmp_path / "s.pickle"))
    out = memlens("import", "tracemalloc", "s.pickle", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "only import snapshots you trust" in out.stderr
    run = fileformat.read(Store(tmp_path).latest())  # type: ignore[arg-type]
    assert run.info.source == "tracemalloc"
    assert keep


def test_bad_run_file_is_one_line_everywhere(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlrun"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    for args in (("export", str(bad)), ("diff", str(bad), str(bad)), ("show", str(bad))):
        out = memlens(*args, cwd=tmp_path)
        assert out.returncode == 2
        lines = out.stderr.splitlines()
        assert len(lines) == 1, out.stderr
        assert lines[0].startswith(f"memlens: cannot read {bad}: ")
