"""Distributed tasks' memory on their source lines (docs/distributed.md): a Dask LocalCluster
and a joblib (loky) pool under `memlens run`; `dask worker` processes under `memlens run -m
distributed.cli.dask_worker`, ended by SIGTERM, and `memlens merge` of their runs. Real
scheduler, workers and client."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlens.runfile import reader
from tests.cli.memlens_cmd import command, memlens

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)
pytest.importorskip("distributed", reason="needs Dask's distributed (the dev extra)")

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts" / "distributed"
MiB = 1024 * 1024
TOTAL = 8 * 5 * MiB  # 8 tasks of 5 MiB
PRINTED = f"{TOTAL + sum(range(8))}\n"


def task_line(script: Path) -> int:
    lines = script.read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if "bytearray(5 * 1024 * 1024)" in text)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_local_cluster_tasks_are_charged_to_the_tasks_line(tmp_path: Path, method: str) -> None:
    """Dask's nannies start their worker processes with multiprocessing (`method`)."""
    script = SCRIPTS / "local_cluster.py"
    out = tmp_path / "run.mlrun"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD": method}
    proc = memlens(
        "run", "--no-report", "-o", str(out), str(script), cwd=tmp_path, env=env, timeout=300
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == PRINTED
    run = reader.read(out)
    assert len(run.info.processes) == 3  # the program and its two workers
    line = run.files[str(script)].lines[task_line(script)]
    assert TOTAL <= line.alloc_bytes < TOTAL + 64 * 1024
    assert line.alloc_count >= 8


def test_the_worker_plugin_profiles_a_running_clusters_workers(tmp_path: Path) -> None:
    """A cluster started without memlens; a client registers memlens.dask.ProfileWorkers:
    each worker writes its run into the folder when the cluster closes; merged, they hold the
    tasks' 40 MiB on the task's line."""
    script = SCRIPTS / "plugin.py"
    folder = tmp_path / "runs"
    proc = command([sys.executable, str(script), str(folder)], cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == PRINTED
    names = sorted(os.listdir(folder))
    assert len(names) == 2, names
    runs = [reader.read(folder / n) for n in names]
    assert all(r.info.complete and not r.info.checkpoint for r in runs)
    out = tmp_path / "merged.mlrun"
    merged = memlens("merge", str(folder), "-o", str(out), cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    line = reader.read(out).files[str(script)].lines[task_line(script)]
    assert TOTAL <= line.alloc_bytes < TOTAL + 64 * 1024


def test_joblib_loky_tasks_are_charged_to_the_tasks_line(tmp_path: Path) -> None:
    """loky's workers are followed (not its resource tracker, a helper that outlives the
    program, as multiprocessing's is not): the run ends without waiting for it."""
    pytest.importorskip("joblib", reason="needs joblib (the dev extra)")
    script = SCRIPTS / "joblib_pool.py"
    out = tmp_path / "run.mlrun"
    proc = memlens(
        "run", "--no-report", "-o", str(out), str(script), cwd=tmp_path, timeout=300
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == PRINTED
    run = reader.read(out)
    assert all(p.complete for p in run.info.processes)
    assert [p.command[1:3] for p in run.info.processes[1:]] == [
        ("-m", "joblib.externals.loky.backend.popen_loky_posix")
    ] * 2
    line = run.files[str(script)].lines[task_line(script)]
    assert TOTAL <= line.alloc_bytes < TOTAL + 64 * 1024


def _start(argv: list[str], cwd: Path, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as f:
        return subprocess.Popen(argv, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)


def _end(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
        raise


def test_dask_workers_ended_by_sigterm_write_runs_that_merge(tmp_path: Path) -> None:
    """A scheduler and a client without memlens; two `dask worker`s under `memlens run` (one
    with its nanny, whose worker process is followed, one without). SIGTERM ends them; their
    runs hold the tasks' 40 MiB between them, and `memlens merge` of the two holds all of it."""
    scheduler_file = tmp_path / "scheduler.json"
    scheduler = _start(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--no-dashboard", "--scheduler-file", str(scheduler_file)],
        tmp_path, tmp_path / "scheduler.log",
    )  # fmt: skip
    workers: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + 120
        while not scheduler_file.exists() and time.monotonic() < deadline:
            assert scheduler.poll() is None, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.1)
        for name, extra in (("nanny", []), ("alone", ["--no-nanny"])):
            argv = [
                sys.executable, "-m", "memlens", "run", "--no-report",
                "-o", str(tmp_path / f"{name}.mlrun"),
                "-m", "distributed.cli.dask_worker", "--scheduler-file", str(scheduler_file),
                "--nthreads", "1", "--no-dashboard", *extra,
            ]  # fmt: skip
            workers.append(_start(argv, tmp_path, tmp_path / f"{name}.log"))
        client = command(
            [sys.executable, str(SCRIPTS / "client.py"), str(scheduler_file)],
            cwd=tmp_path, timeout=240,
        )  # fmt: skip
        assert client.returncode == 0, client.stderr
        assert client.stdout == PRINTED
        codes = [_end(w) for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait(timeout=10)
        _end(scheduler)
    for name, code in zip(("nanny", "alone"), codes, strict=True):
        assert code == 0, (tmp_path / f"{name}.log").read_text()

    script = SCRIPTS / "client.py"  # the task's file, as the client's globals name it
    line = task_line(script)
    runs = [reader.read(tmp_path / f"{name}.mlrun") for name in ("nanny", "alone")]
    assert all(r.info.complete for r in runs)
    assert len(runs[0].info.processes) == 2  # the nanny and its worker process
    each = [
        r.files[str(script)].lines[line].alloc_bytes if str(script) in r.files else 0 for r in runs
    ]
    assert TOTAL <= sum(each) < TOTAL + 64 * 1024

    merged_path = tmp_path / "merged.mlrun"
    proc = memlens(
        "merge", str(tmp_path / "nanny.mlrun"), str(tmp_path / "alone.mlrun"),
        "-o", str(merged_path), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "2 runs (3 processes) merged into" in proc.stderr
    merged = reader.read(merged_path)
    assert merged.files[str(script)].lines[line].alloc_bytes == sum(each)
    assert len(merged.info.processes) == 3
    # Each process's own run beside it, as memlens run leaves them (the hover's "By process").
    kept = sorted(os.listdir(tmp_path / "merged.processes"))
    assert kept == sorted(f"{p.pid}.mlrun" for p in merged.info.processes)
