"""`memlens merge RUN... [-o OUT]` end to end: runs, run specs and folders in; a run file or
the store's newest run out; each process's own run kept beside it; one-line refusals."""

from __future__ import annotations

import os
from pathlib import Path

from memlens.runfile import reader, writer
from memlens.store import Store
from tests.cli.memlens_cmd import memlens
from tests.runs import MIB, sample_run


def _worker_runs(folder: Path) -> None:
    folder.mkdir()
    writer.write(sample_run(pid=11), folder / "a.mlrun")
    writer.write(sample_run(pid=12, started="2026-11-22T10:00:02+00:00"), folder / "b.mlrun")
    (folder / "notes.txt").write_text("not a run\n")


def test_a_folder_of_worker_runs_merges_into_the_store(tmp_path: Path) -> None:
    _worker_runs(tmp_path / "shared")
    proc = memlens("merge", "shared", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("memlens: 2 runs (2 processes) merged into ")
    store = Store(tmp_path)
    out = store.resolve("latest")
    merged = reader.read(out)
    assert merged.files["/work/app.py"].lines[4].alloc_bytes == 80 * MIB
    assert [p.pid for p in merged.info.processes] == [11, 12]
    kept = out.with_suffix(".processes")
    assert sorted(os.listdir(kept)) == ["11.mlrun", "12.mlrun"]
    assert reader.read(kept / "12.mlrun").info.pid == 12


def test_the_same_run_twice_counts_once_and_ids_that_collide_are_numbered(
    tmp_path: Path,
) -> None:
    _worker_runs(tmp_path / "shared")
    writer.write(sample_run(pid=11), tmp_path / "other.mlrun")  # another machine's pid 11
    proc = memlens(
        "merge", "shared/a.mlrun", "shared", "other.mlrun", "-o", "all.mlrun", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    merged = reader.read(tmp_path / "all.mlrun")
    assert merged.files["/work/app.py"].lines[4].alloc_bytes == 120 * MIB
    assert sorted(os.listdir(tmp_path / "all.processes")) == [
        "11-2.mlrun",
        "11.mlrun",
        "12.mlrun",
    ]


def test_refusals_are_one_line(tmp_path: Path) -> None:
    _worker_runs(tmp_path / "shared")
    (tmp_path / "empty").mkdir()
    writer.write(
        sample_run(mode="sampling", sample_interval_bytes=4096), tmp_path / "sampled.mlrun"
    )
    for args, message in (
        (("shared", "-o", "shared/a.mlrun"), "shared/a.mlrun would be overwritten"),
        (("empty",), "no run files in empty"),
        (("shared", "sampled.mlrun"), "cannot merge runs made in different modes"),
        (("missing.mlrun",), "missing.mlrun"),
    ):
        proc = memlens("merge", *args, cwd=tmp_path)
        assert proc.returncode != 0
        lines = proc.stderr.splitlines()
        assert len(lines) == 1, proc.stderr
        assert lines[0].startswith("memlens: ")
        assert message in lines[0]
