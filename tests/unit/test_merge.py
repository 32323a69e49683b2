"""Merging the runs of several processes (memlens.merge), and the header's process list."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from memlens.errors import MemlensError, RunFileError
from memlens.merge import MAX_COMMAND_CHARS, MAX_MOMENTS, combine, merge, onto
from memlens.model import (
    CallNode,
    GpuDevice,
    GpuDeviceLine,
    LineStats,
    Moments,
    ProcessInfo,
    Run,
    TimelinePoint,
    replace,
)
from memlens.runfile import reader, writer
from tests.runs import MIB, sample_run

ROOT = ProcessInfo(100, 1, ("python", "app.py"), True, 48 * MIB)
CHILD = ProcessInfo(101, 100, ("python", "app.py"), True, 48 * MIB)


def child_run(started: str, timeline: tuple[TimelinePoint, ...], **overrides: object) -> Run:
    run = sample_run(started=started, pid=101, **overrides)
    return replace(run, timeline=timeline)


def test_line_function_and_call_tree_figures_are_summed() -> None:
    root = sample_run()
    child = sample_run(pid=101, exit_code=3)
    merged = merge([root, child], [ROOT, CHILD])
    line = merged.files["/work/app.py"].lines[4]
    assert line.alloc_bytes == 80 * MIB
    assert line.alloc_count == 2400
    assert line.live_bytes == 60 * MIB  # each process's live memory at its own end
    assert line.peak_bytes == 80 * MIB  # each process's share at its own peak
    assert merged.files["/work/app.py"].functions[0].alloc_bytes == 80 * MIB
    # One node per call path, figures summed; parents before children, ids are positions.
    assert [(n.id, n.parent, n.line, n.alloc_bytes) for n in merged.call_tree] == [
        (0, -1, 6, 2048),
        (1, 0, 4, 80 * MIB),
    ]
    # The program's header is kept (exit code, pid), with the processes listed.
    assert (merged.info.pid, merged.info.exit_code) == (4242, 0)
    assert merged.info.processes == (ROOT, CHILD)


def test_a_line_only_a_child_reached_and_a_new_call_path_are_added() -> None:
    root = sample_run()
    other = sample_run(path="/work/worker.py")
    merged = merge([root, other], [ROOT, CHILD])
    assert set(merged.files) == {"/work/app.py", "/work/worker.py"}
    assert merged.files["/work/worker.py"].lines[4].alloc_bytes == 40 * MIB
    assert [(n.parent, n.file) for n in merged.call_tree] == [
        (-1, "/work/app.py"),
        (0, "/work/app.py"),
        (-1, "/work/worker.py"),
        (2, "/work/worker.py"),
    ]


def test_native_parts_of_a_line_are_summed_too() -> None:
    a = LineStats(alloc_bytes=10, native_alloc_bytes=4, native_live_bytes=2, native_peak_bytes=3)
    b = LineStats(alloc_bytes=20, native_alloc_bytes=5, native_live_bytes=1, native_peak_bytes=6)
    root = sample_run()
    sf = root.files["/work/app.py"]
    one = replace(root, files={sf.path: replace(sf, lines={4: a})}, call_tree=())
    two = replace(root, files={sf.path: replace(sf, lines={4: b})}, call_tree=())
    line = merge([one, two], [ROOT, CHILD]).files[sf.path].lines[4]
    assert (line.alloc_bytes, line.native_alloc_bytes) == (30, 9)
    assert (line.native_live_bytes, line.native_peak_bytes) == (3, 9)


def test_gpu_figures_of_processes_are_summed(tmp_path: Path) -> None:
    # Two processes, each on its own GPU (as with DDP): per line and function, summed; the
    # run's GPU peak is each process's own, summed; its devices are theirs.
    root = sample_run()
    sf = root.files["/work/app.py"]
    gpu_line = LineStats(gpu_alloc_bytes=10, gpu_alloc_count=1, gpu_live_bytes=4, gpu_peak_bytes=7)
    split = {4: (GpuDeviceLine(0, 6, 1, 4, 5), GpuDeviceLine(1, 4, 1, 0, 2))}
    fn = replace(sf.functions[0], gpu_alloc_bytes=10, gpu_peak_bytes=7)

    def on(device: int, peak: int) -> Run:
        return replace(
            root,
            files={sf.path: replace(sf, lines={4: gpu_line}, functions=(fn,), gpu_devices=split)},
            call_tree=(),
            info=replace(
                root.info,
                gpu_peak_bytes=peak,
                gpus=(GpuDevice(device, peak, 10, 1, 4, 2 * peak, True),),
            ),
        )

    merged = merge([on(0, 7), on(1, 9)], [ROOT, CHILD])
    out = merged.files[sf.path]
    assert (out.lines[4].gpu_alloc_bytes, out.lines[4].gpu_peak_bytes) == (20, 14)
    assert (out.functions[0].gpu_alloc_bytes, out.functions[0].gpu_peak_bytes) == (20, 14)
    assert out.gpu_devices[4] == (GpuDeviceLine(0, 12, 2, 8, 10), GpuDeviceLine(1, 8, 2, 0, 4))
    assert merged.info.gpu_peak_bytes == 16
    assert [g.device for g in merged.info.gpus] == [0, 1]
    path = writer.write(merged, tmp_path / "m.mlrun")
    assert reader.read(path) == merged


def test_sampling_errors_add_in_quadrature() -> None:
    a = LineStats(alloc_bytes=10, alloc_err=3.0)
    b = LineStats(alloc_bytes=20, alloc_err=4.0)
    root = sample_run()
    sf = root.files["/work/app.py"]
    one = replace(root, files={sf.path: replace(sf, lines={4: a})}, call_tree=())
    two = replace(root, files={sf.path: replace(sf, lines={4: b})}, call_tree=())
    line = merge([one, two], [ROOT, CHILD]).files[sf.path].lines[4]
    assert (line.alloc_bytes, line.alloc_err) == (30, 5.0)


def test_peak_is_the_largest_sum_over_processes_alive_together() -> None:
    # The program holds 10 MiB from 0 to 2 s; a child, started 1 s later, 20 MiB for 0.5 s.
    root = replace(
        sample_run(peak_traced_bytes=10 * MIB, peak_rss_bytes=0),
        timeline=(TimelinePoint(0.0, 10 * MIB, 0), TimelinePoint(2.0, 10 * MIB, 0)),
    )
    overlapping = child_run(
        "2026-11-22T10:00:01+00:00",
        (TimelinePoint(0.0, 20 * MIB, 0), TimelinePoint(0.5, 20 * MIB, 0)),
        peak_traced_bytes=20 * MIB,
        peak_rss_bytes=0,
    )
    merged = merge([root, overlapping], [ROOT, CHILD])
    assert merged.info.peak_traced_bytes == 30 * MIB
    assert [(p.t, p.traced_bytes) for p in merged.timeline] == [
        (0.0, 10 * MIB),
        (1.0, 30 * MIB),
        (1.5, 30 * MIB),
        (2.0, 10 * MIB),
    ]
    # The same child 3 s later: the program had ended; the peak is the larger own peak.
    later = child_run(
        "2026-11-22T10:00:03+00:00",
        overlapping.timeline,
        peak_traced_bytes=20 * MIB,
        peak_rss_bytes=0,
    )
    assert merge([root, later], [ROOT, CHILD]).info.peak_traced_bytes == 20 * MIB


def test_long_commands_are_cut_in_the_header() -> None:
    long = replace(CHILD, command=("python", "x" * 5000))
    merged = merge([sample_run(), sample_run()], [ROOT, long])
    listed = merged.info.processes[1].command
    assert listed[0] == "python"
    assert sum(len(a) for a in listed) == MAX_COMMAND_CHARS


def test_processes_round_trip_and_are_absent_from_a_one_process_header(tmp_path: Path) -> None:
    path = tmp_path / "r.mlrun"
    run = merge([sample_run(), sample_run(pid=101)], [ROOT, replace(CHILD, complete=False)])
    writer.write(run, path)
    assert reader.read(path).info.processes == (ROOT, replace(CHILD, complete=False))
    writer.write(sample_run(), path)
    con = sqlite3.connect(path)
    header = json.loads(con.execute("SELECT value FROM meta WHERE key='run'").fetchone()[0])
    con.close()
    assert "processes" not in header


@pytest.mark.parametrize(
    "processes",
    [
        "not a list",
        [[100, 1]],
        [{"pid": 100}],
        [{**ROOT.as_dict(), "command": "python app.py"}],
        [{**ROOT.as_dict(), "command": ["python", 3]}],
        [{**ROOT.as_dict(), "complete": 1}],
        [{**ROOT.as_dict(), "pid": True}],
        [{**ROOT.as_dict(), "pid": -1}],
        [{**ROOT.as_dict(), "parent_pid": 2**63}],
        [{**ROOT.as_dict(), "peak_traced_bytes": 1.5}],
    ],
    ids=lambda p: json.dumps(p, default=list)[:40],
)
def test_a_bad_process_list_is_one_line(tmp_path: Path, processes: object) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(sample_run(), path)
    con = sqlite3.connect(path)
    header = json.loads(con.execute("SELECT value FROM meta WHERE key='run'").fetchone()[0])
    header["processes"] = processes
    con.execute("UPDATE meta SET value = ? WHERE key = 'run'", (json.dumps(header, default=list),))
    con.commit()
    con.close()
    with pytest.raises(RunFileError) as err:
        reader.read(path)
    assert "\n" not in str(err.value)
    assert "bad run header: processes" in str(err.value)


def test_call_nodes_of_a_child_keep_their_parents() -> None:
    """A child whose tree lists a node before its parent still merges parents first."""
    root = sample_run()
    path = "/work/app.py"
    nodes = (
        CallNode(5, 9, path, 4, "load", MIB, 1, 0, MIB),
        CallNode(9, -1, path, 6, "<module>", 1, 1, 0, 1),
    )
    child = replace(sample_run(pid=101), call_tree=nodes)
    merged = merge([root, child], [ROOT, CHILD])
    assert [(n.id, n.parent, n.alloc_bytes) for n in merged.call_tree] == [
        (0, -1, 1025),
        (1, 0, 40 * MIB + MIB),
    ]


def with_moments(run: Run, t: list[float], line4: list[int]) -> Run:
    """``run`` with moments at times ``t``: line 4 (function load) holds ``line4`` then."""
    n = len(t)
    moments = Moments(
        t,
        line4,
        ["/work/app.py"],
        {
            "moment": list(range(n)),
            "file": [0] * n,
            "line": [4] * n,
            "live_bytes": line4,
            "incl_live_bytes": line4,
        },
        [("/work/app.py", "load", 3, 4)],
        {"moment": list(range(n)), "function": [0] * n, "live_bytes": line4},
    )
    return replace(run, moments=moments)


def test_moments_are_laid_on_one_clock_and_summed() -> None:
    """The child starts 0.5 s after the program and lasts 0.4 s: at each moment, a line holds
    what each process alive then held at its latest moment, summed."""
    root = with_moments(sample_run(duration_s=1.5), [0.2, 0.7, 1.2], [10, 20, 30])
    child = with_moments(
        child_run("2026-11-22T10:00:00.500000+00:00", (), duration_s=0.4), [0.1, 0.3], [5, 7]
    )
    merged = merge([root, child], [ROOT, CHILD])
    moments = merged.moments
    assert [round(t, 3) for t in moments.t] == [0.2, 0.6, 0.7, 0.8, 1.2]
    line = [moments.values_at(k)["/work/app.py"][4] for k in range(len(moments))]
    # 0.2: the program alone; 0.6: + the child's first; 0.7: the program's second; 0.8: the
    # child's second; 1.2: the child has ended (at 0.9), the program's third.
    assert line == [(10, 10), (15, 15), (25, 25), (27, 27), (30, 30)]
    assert list(moments.traced_bytes) == [10, 15, 25, 27, 30]
    load = ("/work/app.py", "load", 3, 4)
    assert [moments.function_values_at(k)[load] for k in range(len(moments))] == [
        10,
        15,
        25,
        27,
        30,
    ]
    # A run of one process keeps its own moments.
    assert merge([root], [ROOT]).moments == root.moments


def test_merged_moments_are_bounded() -> None:
    times = [i / 1000 for i in range(1, 401)]
    root = with_moments(sample_run(), times, list(range(1, 401)))
    child = with_moments(child_run("2026-11-22T10:00:00.000500+00:00", ()), times, [1] * 400)
    moments = merge([root, child], [ROOT, CHILD]).moments
    assert len(moments) <= MAX_MOMENTS
    assert moments.t[-1] == pytest.approx(0.4005)  # the last of them kept


def test_runs_made_apart_are_combined_by_the_same_rule() -> None:
    """memlens merge: two workers' runs (the later-started given first) become one run with
    the first-started's header, every process listed, the span of both, the lines summed."""
    first = sample_run(pid=7, command=("dask", "worker", "a"))
    second = replace(
        sample_run(pid=7, command=("dask", "worker", "b"), started="2026-11-22T10:00:01+00:00"),
        timeline=(TimelinePoint(0.0, 5 * MIB, 0), TimelinePoint(2.0, 5 * MIB, 0)),
    )
    merged = combine([second, first])
    assert merged.files["/work/app.py"].lines[4].alloc_bytes == 80 * MIB
    assert merged.info.command == ("dask", "worker", "a")
    assert [p.command[-1] for p in merged.info.processes] == ["a", "b"]
    assert all(p.parent_pid == 0 and p.complete for p in merged.info.processes)
    assert merged.info.duration_s == 2.5  # from the first start to the second's end (1 + 1.5 s)
    assert merged.info.ended == "2026-11-22T10:00:02.500000+00:00"
    assert merged.info.complete


def test_a_merged_run_lists_its_own_processes_and_an_incomplete_run_marks_the_merge() -> None:
    parent = merge([sample_run(), sample_run(pid=101)], [ROOT, CHILD])
    killed = sample_run(pid=300, complete=False)
    merged = combine([parent, killed])
    assert [p.pid for p in merged.info.processes] == [100, 101, 300]
    assert not merged.info.processes[2].complete
    assert not merged.info.complete
    assert merged.files["/work/app.py"].lines[4].alloc_bytes == 120 * MIB


def test_runs_of_different_modes_are_refused_in_one_line() -> None:
    sampled = sample_run(mode="sampling", sample_interval_bytes=4096)
    with pytest.raises(MemlensError, match=r"different modes \(exact, sampling every 4096"):
        combine([sample_run(), sampled])
    with pytest.raises(MemlensError, match="nothing to merge"):
        combine([])


def test_files_of_another_checkout_are_the_first_runs_files() -> None:
    """A worker's run made in /b/proj (another machine's checkout) and one made in /a/proj:
    /b/proj/app.py is /a/proj/app.py, one file with the lines and call paths of both; files
    outside the checkout stay where they were recorded."""
    mine = sample_run(path="/a/proj/app.py", workspace_root="/a/proj")
    theirs = sample_run(
        path="/b/proj/app.py", workspace_root="/b/proj", started="2026-11-22T10:00:01+00:00"
    )
    merged = combine([theirs, mine])
    assert set(merged.files) == {"/a/proj/app.py"}
    assert merged.files["/a/proj/app.py"].lines[4].alloc_bytes == 80 * MIB
    assert [(n.file, n.line, n.alloc_bytes) for n in merged.call_tree] == [
        ("/a/proj/app.py", 6, 2048),
        ("/a/proj/app.py", 4, 80 * MIB),
    ]
    outside = sample_run(path="/usr/lib/python3/x.py", workspace_root="/b/proj")
    assert set(onto(outside, "/a/proj").files) == {"/usr/lib/python3/x.py"}
    # A process started from / (its store root): nothing is moved.
    from_root = sample_run(path="/b/proj/app.py", workspace_root="/")
    assert set(onto(from_root, "/a/proj").files) == {"/b/proj/app.py"}


def test_moments_of_another_checkout_move_with_its_files() -> None:
    theirs = with_moments(sample_run(workspace_root="/work"), [0.1, 0.2], [5, 6])
    moved = onto(theirs, "/a/proj")
    assert set(moved.files) == {"/a/proj/app.py"}
    assert list(moved.moments.files) == ["/a/proj/app.py"]
    assert list(moved.moments.function_keys) == [("/a/proj/app.py", "load", 3, 4)]
    assert moved.moments.values_at(1) == {"/a/proj/app.py": {4: (6, 6)}}
