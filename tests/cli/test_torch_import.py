"""``memlens import torch-snapshot``: a real PyTorch snapshot as a run, and crafted pickles.

tests/data/torch_cuda holds a snapshot of a training loop recorded on an H100 (its README says
how, and what it says read by hand). Imported into a workspace that holds ``train.py``, the
export has the figures read by hand; a pickle that asks for anything but plain data is
refused with one line, and nothing it asks for runs.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from tests.cli.memlens_cmd import memlens

DATA = Path(__file__).resolve().parents[1] / "data" / "torch_cuda"
SNAPSHOT = DATA / "snapshot-python-stacks.pickle"
MIB = 1 << 20


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    shutil.copy(DATA / "train.py", root / "train.py")
    return root


def test_the_snapshot_gives_the_figures_read_by_hand(workspace: Path) -> None:
    proc = memlens("import", "torch-snapshot", str(SNAPSHOT), cwd=workspace)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"memlens: imported {SNAPSHOT} as ")
    exported = memlens("export", cwd=workspace)
    assert exported.returncode == 0, exported.stderr
    doc = json.loads(exported.stdout)
    assert doc["run"]["gpu_peak_bytes"] == 320_966_660
    assert doc["run"]["source"] == "torch"
    (device,) = doc["run"]["gpus"]
    assert device["device"] == 0
    assert device["complete"] is True
    # The paths are those of the machine that recorded it; the text is the workspace's copy.
    train = doc["files"]["/home/dev/proj/train.py"]
    live = {int(n): f["gpu_live_bytes"] / MIB for n, f in train["lines"].items()}
    assert {n: round(live[n], 1) for n in (6, 14, 17, 18, 21)} == {
        6: 32.0,  # the model's parameters
        14: 49.0,  # y = model(x): the outputs and graphs history keeps
        17: 64.0,  # loss.backward(): the gradients, allocated with no Python frame
        18: 64.0,  # opt.step(): Adam's state
        21: 64.0,  # the cache leak
    }
    assert train["lines"]["21"]["gpu_alloc_count"] == 4
    (step,) = train["functions"]
    assert (step["qualname"], step["first_line"], step["last_line"]) == ("step", 12, 22)
    # No library frame is charged: torch's own lines are transparent.
    assert [p for p in doc["files"] if "site-packages" in p] == []


def test_show_ranks_the_lines_by_gpu_memory(workspace: Path) -> None:
    assert memlens("import", "torch-snapshot", str(SNAPSHOT), cwd=workspace).returncode == 0
    shown = memlens("show", "--by", "gpu_live", "--top", "3", cwd=workspace)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "memlens: GPU peak 306.1 MiB · 5.41 s · imported from torch"
    assert lines[2] == "GPU memory (PyTorch CUDA):"
    assert lines[3].split() == [
        "#", "line", "GPU", "live", "at", "exit", "allocs", "share", "of", "GPU", "peak", "code",
    ]  # fmt: skip
    assert [row.split()[1] for row in lines[4:7]] == [
        "/home/dev/proj/train.py:18",
        "/home/dev/proj/train.py:17",
        "/home/dev/proj/train.py:21",
    ]


class Exploit:
    """Pickles as ``os.system`` runs: what an unpickler must never do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_crafted_pickle_is_refused_and_runs_nothing(workspace: Path) -> None:
    marker = workspace / "pwned"
    crafted = workspace / "snapshot.pickle"
    crafted.write_bytes(pickle.dumps({"device_traces": [[Exploit(marker)]]}, protocol=4))
    # What the standard unpickler does with it: runs the command.
    assert pickle.loads(crafted.read_bytes()) == {"device_traces": [[0]]}
    assert marker.exists()
    marker.unlink()
    proc = memlens("import", "torch-snapshot", str(crafted), cwd=workspace)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        f"memlens: cannot read {crafted}: not a PyTorch memory snapshot: opcode STACK_GLOBAL "
        "(imports a Python object) at byte 50: only plain data is read\n"
    )
    assert not marker.exists()
    assert not (workspace / ".memlens").exists()  # no run written


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "not a PyTorch memory snapshot: the data is cut short (no STOP)"),
        (b"\x80\x04\x95", "not a PyTorch memory snapshot: the data is cut short"),
        (pickle.dumps([1, 2]), "not a PyTorch memory snapshot (no device_traces)"),
        (
            pickle.dumps({"device_traces": [[{"action": "alloc", "addr": -1, "size": 1}]]}),
            "an event's addr is not an integer from 0 to 18,446,744,073,709,551,616",
        ),
        (
            pickle.dumps({"device_traces": [], "segments": []}),
            "the snapshot holds no allocation",
        ),
    ],
)
def test_damaged_or_foreign_files_get_one_line(
    workspace: Path, content: bytes, reason: str
) -> None:
    path = workspace / "x.pickle"
    path.write_bytes(content)
    proc = memlens("import", "torch-snapshot", str(path), cwd=workspace)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"memlens: cannot read {path}: ")
    assert reason in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_a_fifo_or_directory_is_refused_at_once(workspace: Path) -> None:
    fifo = workspace / "fifo.pickle"
    os.mkfifo(fifo)
    proc = memlens("import", "torch-snapshot", str(fifo), cwd=workspace, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr == f"memlens: cannot read {fifo}: not a regular file\n"
    proc = memlens("import", "torch-snapshot", str(workspace), cwd=workspace)
    assert proc.stderr == f"memlens: cannot read {workspace}: is a directory\n"
