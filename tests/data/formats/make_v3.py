"""Writes tests/data/formats/v3.mlrun: run ONCE when format version 3 was current.

The file is committed and must be readable by every later memlens forever
(tests/unit/test_runfile.py::test_golden_v3_file, which spells out what it holds). Do not
regenerate it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from memlens.runfile import writer  # noqa: E402
from memlens.model import (  # noqa: E402
    CallNode,
    FunctionStats,
    GpuDevice,
    GpuDeviceLine,
    HeldBy,
    Hop,
    LineStats,
    Moments,
    Run,
    RunInfo,
    SourceFile,
    TimelinePoint,
)

MIB = 1024 * 1024


def golden_v3_run() -> Run:
    """A training step on two GPUs: host figures as in version 2, GPU figures per line
    (self and inclusive), per function, per device, and the run's GPU devices; and what holds
    the lines live at the end: line 4's objects by the module's `history` list through a
    thread's frame and through the module, line 5's by nothing the search could see; when the
    peak happened (1.5 s) and the moments: train.py:4 holds 2048 B and :5 512 B from 1.0 s (:8
    all that in calls), then from 2.5 s :4 holds 1024 B and :5 nothing; step() likewise."""
    train = SourceFile(
        path="/work/train.py",
        sha256="ef" * 32,
        text=(
            "import torch\n\ndef step(model, x):\n    y = model(x)\n    y.sum().backward()\n"
            "    return y\n\nstep(torch.nn.Linear(8, 8).cuda(), torch.ones(8, device='cuda'))\n"
        ),
        lines={
            4: LineStats(
                2048, 4, 1024, 2, 2048, 2048, 1024, 2048,
                gpu_alloc_bytes=48 * MIB, gpu_alloc_count=3, gpu_live_bytes=16 * MIB,
                gpu_peak_bytes=32 * MIB, incl_gpu_alloc_bytes=48 * MIB,
                incl_gpu_live_bytes=16 * MIB, incl_gpu_peak_bytes=32 * MIB,
            ),
            5: LineStats(
                512, 1, 0, 0, 512, 512, 0, 512,
                gpu_alloc_bytes=8 * MIB, gpu_alloc_count=2, gpu_live_bytes=8 * MIB,
                gpu_peak_bytes=8 * MIB, incl_gpu_alloc_bytes=8 * MIB,
                incl_gpu_live_bytes=8 * MIB, incl_gpu_peak_bytes=8 * MIB,
            ),
            8: LineStats(
                0, 0, 0, 0, 0, 2560, 1024, 2560,
                incl_gpu_alloc_bytes=56 * MIB, incl_gpu_live_bytes=24 * MIB,
                incl_gpu_peak_bytes=40 * MIB,
            ),
        },  # fmt: skip
        functions=(
            FunctionStats(
                "step", 3, 6, 2560, 5, 1024, 2560,
                gpu_alloc_bytes=56 * MIB, gpu_alloc_count=5, gpu_live_bytes=24 * MIB,
                gpu_peak_bytes=40 * MIB,
            ),
        ),  # fmt: skip
        gpu_devices={
            4: (
                GpuDeviceLine(0, 32 * MIB, 2, 8 * MIB, 24 * MIB),
                GpuDeviceLine(1, 16 * MIB, 1, 8 * MIB, 8 * MIB),
            ),
            5: (GpuDeviceLine(0, 8 * MIB, 2, 8 * MIB, 8 * MIB),),
        },
    )
    nodes = (
        CallNode(0, -1, "/work/train.py", 8, "<module>", 0, 0, 0, 0),
        CallNode(1, 0, "/work/train.py", 4, "step", 2048, 4, 1024, 2048),
        CallNode(2, 0, "/work/train.py", 5, "step", 512, 1, 0, 512),
    )
    info = RunInfo(
        command=("python", "train.py"),
        python="3.12.3",
        platform="Linux-test",
        started="2026-11-26T10:00:00+00:00",
        ended="2026-11-26T10:00:03+00:00",
        duration_s=3.0,
        pid=4444,
        exit_code=0,
        mode="exact",
        sample_interval_bytes=None,
        peak_traced_bytes=2560,
        peak_rss_bytes=900 * MIB,
        complete=True,
        cwd="/work",
        memlens_version="0.3.0",
        max_depth=0,
        peak_at_s=1.5,
        gpu_peak_bytes=40 * MIB,
        gpus=(
            GpuDevice(0, 32 * MIB, 40 * MIB, 4, 16 * MIB, 40 * MIB, True),
            GpuDevice(1, 8 * MIB, 16 * MIB, 1, 8 * MIB, 20 * MIB, False),
        ),
    )
    return Run(
        info=info,
        files={train.path: train},
        call_tree=nodes,
        timeline=(TimelinePoint(0.0, 0, 400 * MIB), TimelinePoint(3.0, 2560, 900 * MIB)),
        moments=Moments(
            [1.0, 2.0, 2.5],
            [2560, 2560, 1024],
            ["/work/train.py"],
            {
                "moment": [0, 0, 0, 2, 2, 2],
                "file": [0, 0, 0, 0, 0, 0],
                "line": [4, 5, 8, 4, 5, 8],
                "live_bytes": [2048, 512, 0, 1024, 0, 0],
                "incl_live_bytes": [2048, 512, 2560, 1024, 0, 1024],
            },
            [("/work/train.py", "step", 3, 6)],
            {"moment": [0, 2], "function": [0, 0], "live_bytes": [2560, 1024]},
        ),
        holders=(
            HeldBy(
                "/work/train.py",
                4,
                3,
                "found",
                (
                    Hop("thread", "loader in step", "frame"),
                    Hop("local", "y", "Tensor", "/work/train.py", 4),
                    Hop("buffer", "data", "", "/work/train.py", 4),
                ),
            ),
            HeldBy(
                "/work/train.py",
                4,
                2,
                "found",
                (
                    Hop("module", "train", "module", "/work/train.py", 1),
                    Hop("attribute", "history", "list", "/work/train.py", 8),
                    Hop("index", "[0]", "Tensor", "/work/train.py", 4),
                ),
            ),
            HeldBy("/work/train.py", 5, 0, "unreached"),
        ),
    )


if __name__ == "__main__":
    writer.write(golden_v3_run(), HERE / "v3.mlrun")
