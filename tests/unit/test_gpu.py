"""memlens.gpu: PyTorch's CUDA memory history charged to lines: the checks on a snapshot, the
backward pass's frameless allocations, replaying a device (peak, live, a history that misses its
start), several devices, per-test windows, and the figures added to a run."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memlens import gpu
from memlens.errors import RunFileError
from memlens.imports._build import Sources
from memlens.model import FunctionStats, GpuDeviceLine, LineStats
from memlens.runfile import reader, writer
from tests import runs

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_cuda"
MIB = 1 << 20
TORCH = "/venv/lib/python3.12/site-packages/torch"


def frames(*spec: str) -> list[dict[str, Any]]:
    """Frames innermost first, each ``file:line:function``."""
    out = []
    for s in spec:
        file, line, name = s.rsplit(":", 2)
        out.append({"filename": file, "line": int(line), "name": name})
    return out


#: The main thread in ``loss.backward()`` (line 17 of /p/train.py) and outside it.
MAIN = frames("/p/train.py:26:<module>")
IN_STEP = [*frames("/p/train.py:14:step"), *MAIN]
IN_BACKWARD = [
    *frames(
        f"{TORCH}/autograd/__init__.py:231:_make_grads",
        f"{TORCH}/autograd/__init__.py:374:backward",
        f"{TORCH}/_tensor.py:631:backward",
        "/p/train.py:17:step",
    ),
    *MAIN,
]
OTHER_THREAD = frames("/p/loader.py:5:prefetch", "/usr/lib/python3.12/threading.py:1012:run")


def event(action: str, addr: int, size: int, stack: list[dict[str, Any]], t: int) -> dict[str, Any]:
    return {
        "action": action,
        "addr": addr,
        "size": size,
        "stream": 0,
        "time_us": t,
        "frames": stack,
    }


def snapshot(*traces: list[dict[str, Any]], segments: list[Any] | None = None) -> dict[str, Any]:
    return {"segments": segments or [], "device_traces": list(traces)}


def charge(filename: str) -> str | None:
    return None if "site-packages" in filename or "/usr/lib/" in filename else filename


def figures(snap: dict[str, Any]) -> dict[tuple[str, int], tuple[int, int, int, int]]:
    """(file, line) -> (allocated, allocations, live at the end, held at the peak), all devices."""
    run = gpu.attach(runs.new_run(), gpu.build(gpu.read_snapshot(snap), charge, Sources()))
    return {
        (path, n): (st.gpu_alloc_bytes, st.gpu_alloc_count, st.gpu_live_bytes, st.gpu_peak_bytes)
        for path, sf in run.files.items()
        for n, st in sf.lines.items()
        if st.gpu_alloc_bytes or st.gpu_live_bytes
    }


def test_frameless_allocations_go_to_the_line_waiting_in_backward() -> None:
    trace = [
        event("alloc", 1, 100, IN_STEP, 1),
        event("alloc", 2, 4, IN_BACKWARD, 2),  # the seed gradient: backward() is running
        event("alloc", 3, 1000, [], 3),  # autograd's thread: no frame
        event("alloc", 4, 2000, [], 4),
        event("free_completed", 2, 4, [], 5),
        event("alloc", 5, 10, IN_STEP, 6),  # the main thread again, outside backward: closed
        event("alloc", 6, 7, [], 7),  # frameless outside a backward pass: no line
    ]
    history = gpu.read_snapshot(snapshot(trace))
    assert gpu.attribute(history) == 2
    got = figures(snapshot(trace))
    assert got[("/p/train.py", 17)] == (3004, 3, 3000, 3000)
    assert got[("/p/train.py", 14)] == (110, 2, 110, 110)
    # The 7 bytes count in the device's peak and totals, on no line.
    assert sum(f[2] for f in got.values()) == 3110
    device = gpu.replay(gpu.read_snapshot(snapshot(trace)).devices[0]).summary
    assert (device.live_bytes, device.peak_bytes) == (3117, 3117)


def test_another_threads_events_do_not_close_the_backward_pass() -> None:
    trace = [
        event("alloc", 1, 4, IN_BACKWARD, 1),
        event("alloc", 2, 50, OTHER_THREAD, 2),  # another thread (another root frame)
        event("alloc", 3, 1000, [], 3),  # still the backward pass's
    ]
    got = figures(snapshot(trace))
    assert got[("/p/train.py", 17)] == (1004, 2, 1004, 1004)
    assert got[("/p/loader.py", 5)] == (50, 1, 50, 50)


def test_the_backward_pass_is_followed_across_devices_by_time() -> None:
    on_0 = [event("alloc", 1, 4, IN_BACKWARD, 10)]
    on_1 = [event("alloc", 1, 500, [], 11)]  # the engine's thread for device 1
    got = figures(snapshot(on_0, on_1))
    assert got[("/p/train.py", 17)] == (504, 2, 504, 504)


def test_the_peak_is_what_each_line_held_at_the_moment_of_the_most() -> None:
    trace = [
        event("alloc", 1, 300, IN_STEP, 1),
        event("alloc", 2, 200, [*frames("/p/train.py:15:step"), *MAIN], 2),  # peak: 500
        event("free_completed", 1, 300, [], 3),
        event("free_completed", 2, 200, [], 4),
        event("alloc", 3, 400, [*frames("/p/train.py:16:step"), *MAIN], 5),  # 400 < 500
    ]
    got = figures(snapshot(trace))
    assert got[("/p/train.py", 14)] == (300, 1, 0, 300)
    assert got[("/p/train.py", 15)] == (200, 1, 0, 200)
    assert got[("/p/train.py", 16)] == (400, 1, 400, 0)
    run = gpu.attach(runs.new_run(), gpu.build(gpu.read_snapshot(snapshot(trace)), charge))
    assert run.info.gpu_peak_bytes == 500
    # The caller's line holds it all through its call (inclusive, once per path).
    module = run.files["/p/train.py"].lines[26]
    assert (module.incl_gpu_alloc_bytes, module.incl_gpu_peak_bytes) == (900, 500)


def test_a_history_that_misses_its_start() -> None:
    block_stack = [*frames("/p/train.py:6:<module>")]
    trace = [
        event("free_completed", 7, 50, IN_STEP, 1),  # allocated before the history began
        event("alloc", 8, 10, IN_STEP, 2),
    ]
    segments = [
        {
            "device": 0,
            "total_size": 2 * MIB,
            "blocks": [
                # still allocated, allocated before the history: its own frames say where
                {
                    "address": 9,
                    "size": 512,
                    "requested_size": 100,
                    "state": "active_allocated",
                    "frames": block_stack,
                },
                {
                    "address": 8,
                    "size": 512,
                    "requested_size": 10,
                    "state": "active_allocated",
                    "frames": IN_STEP,
                },
                {"address": 10, "size": 512, "state": "inactive", "frames": []},
            ],
        }
    ]
    history = gpu.read_snapshot(snapshot(trace, segments=segments))
    summary = gpu.replay(history.devices[0]).summary
    assert summary.complete is False
    assert summary.peak_bytes == 150  # 50 + 100 held before the history, then the 50 freed, +10
    assert summary.live_bytes == 110
    assert summary.reserved_peak_bytes == 2 * MIB
    got = figures(snapshot(trace, segments=segments))
    assert got[("/p/train.py", 6)] == (100, 1, 100, 100)
    assert got[("/p/train.py", 14)] == (10, 1, 10, 0)


def test_several_devices_keep_their_own_figures() -> None:
    on_0 = [event("alloc", 1, 100, IN_STEP, 1)]
    on_1 = [event("alloc", 1, 40, IN_STEP, 2), event("free_completed", 1, 40, [], 3)]
    snap = snapshot(on_0, on_1)
    run = gpu.attach(runs.new_run(), gpu.build(gpu.read_snapshot(snap), charge))
    sf = run.files["/p/train.py"]
    assert sf.lines[14].gpu_alloc_bytes == 140
    assert sf.lines[14].gpu_peak_bytes == 140  # each device at its own peak
    assert sf.gpu_devices[14] == (
        GpuDeviceLine(0, 100, 1, 100, 100),
        GpuDeviceLine(1, 40, 1, 0, 40),
    )
    assert [(g.device, g.peak_bytes) for g in run.info.gpus] == [(0, 100), (1, 40)]
    assert run.info.gpu_peak_bytes == 140


def test_attach_adds_to_the_hosts_lines_and_functions() -> None:
    host = runs.new_run(
        [
            runs.source(
                "/p/train.py",
                "def step():\n    pass\n",
                {14: LineStats(1, 1, 0, 0, 1, 1, 0, 1)},
                (FunctionStats("step", 12, 22, 5, 1, 0, 5),),
            )
        ]
    )
    trace = [event("alloc", 1, 100, IN_STEP, 1)]
    history = gpu.read_snapshot(snapshot(trace))

    class Spans(Sources):
        """The source of train.py as the workspace has it (step from 12 to 22)."""

        def resolve(self, name: str) -> tuple[str, str, str | None]:
            text = "\n" * 11 + "def step(i):\n" + "    pass\n" * 10
            return (name, "", text) if name == "/p/train.py" else super().resolve(name)

    run = gpu.attach(host, gpu.build(history, charge, Spans()))
    sf = run.files["/p/train.py"]
    assert sf.text == "def step():\n    pass\n"  # the host's recorded source is kept
    assert (sf.lines[14].alloc_bytes, sf.lines[14].gpu_alloc_bytes) == (1, 100)
    assert sf.lines[26].incl_gpu_alloc_bytes == 100
    # The host's function (same name, same first line) gets the GPU figures: no second one.
    (step,) = sf.functions
    assert (step.qualname, step.alloc_bytes, step.gpu_alloc_bytes) == ("step", 5, 100)


def test_window_peaks() -> None:
    trace = [
        event("alloc", 1, 100, IN_STEP, 10),
        event("alloc", 2, 50, IN_STEP, 20),  # window 1 (15..30): +50
        event("free_completed", 2, 50, [], 25),
        event("alloc", 3, 70, IN_STEP, 40),  # window 2 (35..60): +70 then +20
        event("free_completed", 1, 100, [], 45),
        event("alloc", 4, 30, IN_STEP, 50),
    ]
    history = gpu.read_snapshot(snapshot(trace))
    assert gpu.window_peaks(history, [(15, 30), (35, 60), (70, 80)]) == [50, 70, 0]


@pytest.mark.parametrize(
    ("snap", "reason"),
    [
        ([], "not a PyTorch memory snapshot (no device_traces)"),
        ({"device_traces": {}}, "device_traces or segments is not a list"),
        ({"device_traces": [None]}, "the trace of device 0 is not a list"),
        ({"device_traces": [[1]]}, "an event of device 0 is not a dict"),
        (snapshot([event("alloc", 1, -1, [], 1)]), "an event's size is not an integer"),
        (snapshot([event("alloc", 1, 2**60, [], 1)]), "an event's size is not an integer"),
        (snapshot([event("alloc", 1, True, [], 1)]), "an event's size is not an integer"),
        (snapshot([event("alloc", 1, 1, [], -5)]), "an event's time_us is not an integer"),
        (snapshot([{**event("alloc", 1, 1, [], 1), "frames": "x"}]), "frames is not a list"),
        (snapshot([event("alloc", 1, 1, [1], 1)]), "a frame is not a dict"),
        (
            snapshot([event("alloc", 1, 1, frames("/" + "x" * 5000 + ":1:f"), 1)]),
            "a frame's filename is not a string of at most 4096 characters",
        ),
        (
            snapshot([event("alloc", 1, 1, [{"filename": "a", "line": "1", "name": "f"}], 1)]),
            "a frame's line is not an integer",
        ),
        (snapshot([], segments=[{"device": 5000}]), "a segment's device is not an integer"),
        (snapshot([], segments=[{"blocks": None}]), "a segment's blocks is not a list"),
    ],
)
def test_a_damaged_snapshot_is_named_in_one_line(snap: object, reason: str) -> None:
    with pytest.raises(gpu.SnapshotError) as err:
        gpu.read_snapshot(snap)
    assert str(err.value).startswith(reason)
    assert "\n" not in str(err.value)


def test_unknown_actions_are_skipped() -> None:
    trace = [
        {"action": "oom", "size": 5, "device_free": 0, "frames": []},
        {"action": "snapshot", "addr": 0, "size": 0, "frames": []},
        event("free_requested", 1, 5, [], 1),
        event("alloc", 1, 5, IN_STEP, 2),
    ]
    assert [e[0] for e in gpu.read_snapshot(snapshot(trace)).devices[0].events] == [gpu.ALLOC]


def test_the_real_snapshots_backward_pass() -> None:
    data = pickle.loads((DATA / "snapshot-python-stacks.pickle").read_bytes())
    history = gpu.read_snapshot(data)
    # The allocations autograd made, given the stack of the line waiting in backward().
    assert gpu.attribute(history) == 161
    device = gpu.replay(history.devices[0])
    cut = [
        s
        for s, frames_ in enumerate(history.stacks)
        if frames_ and frames_[0][2] == "backward" and frames_[0][0].endswith("torch/_tensor.py")
    ]
    assert sum(device.by_stack[s][2] for s in cut if s in device.by_stack) == 67_129_344
    assert device.summary.peak_bytes == 320_966_660
    assert device.summary.live_bytes == 286_343_168  # as the snapshot's blocks say


DEVICE = {
    "device": 0,
    "peak_bytes": 1,
    "alloc_bytes": 1,
    "alloc_count": 1,
    "live_bytes": 0,
    "reserved_peak_bytes": 2,
    "complete": True,
}


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("gpus", "not a list", "bad run header: gpus is str"),
        ("gpus", [[0, 1]], "bad run header: gpus"),
        ("gpus", [{"device": 0}], "bad run header: gpus"),
        ("gpus", [{**DEVICE, "complete": 1}], "bad run header: gpus"),
        ("gpus", [{**DEVICE, "peak_bytes": True}], "bad run header: gpus"),
        ("gpus", [{**DEVICE, "peak_bytes": -1}], "bad run header: gpus (a figure out of range)"),
        ("gpus", [{**DEVICE, "live_bytes": 2**63}], "bad run header: gpus (a figure out of range)"),
        ("gpus", [DEVICE] * 4097, "bad run header: more than 4096 GPU devices"),
        ("gpu_peak_bytes", 1.5, "bad run header: gpu_peak_bytes is float"),
        ("gpu_peak_bytes", -1, "bad run header: gpu_peak_bytes out of range"),
    ],
    ids=lambda v: str(v)[:30],
)
def test_a_bad_gpu_header_is_one_line(tmp_path: Path, key: str, value: object, reason: str) -> None:
    path = tmp_path / "r.mlrun"
    writer.write(runs.sample_run(), path)
    con = sqlite3.connect(path)
    header = json.loads(con.execute("SELECT value FROM meta WHERE key='run'").fetchone()[0])
    header[key] = value
    con.execute("UPDATE meta SET value = ? WHERE key = 'run'", (json.dumps(header),))
    con.commit()
    con.close()
    with pytest.raises(RunFileError) as err:
        reader.read_info(path)
    assert str(err.value) == f"cannot read {path}: {reason}"
