"""``pytest --memlens`` on tests that use GPU memory (PyTorch CUDA): each test's GPU peak,
``gpu_peak=`` limits that fail tests with the lines responsible, the figures in the run.

CI has no GPU: the session imports the stand-in for PyTorch (tests/data/fake_torch), whose
allocator history has PyTorch's API and shape (see tests/cli/test_gpu_live.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.fake_torch import environment
from tests.pytest_plugin.session import export, project, pytest_session, summary

MiB = 1024 * 1024

TEST_GPU = """\
import pytest
import torch

KEPT = []


@pytest.mark.memlens(gpu_peak="1 MiB")
def test_over_its_gpu_limit():
    scratch = torch.empty(4 << 20, device="cuda")
    assert scratch.nbytes


@pytest.mark.memlens(gpu_peak="8 MiB")
def test_within_its_gpu_limit():
    scratch = torch.empty(2 << 20, device="cuda")
    assert scratch.nbytes


def test_not_judged():
    KEPT.append(torch.empty(3 << 20, device="cuda"))


def test_without_gpu():
    assert sum(range(10)) == 45
"""


def test_gpu_peak_limits(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    cwd = project(tmp_path / "proj", **{"test_gpu.py": TEST_GPU})
    proc = pytest_session(cwd, "--memlens", env=environment(tmp_path))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert summary(proc) == "1 failed, 3 passed"
    failure = out[out.index("_ test_over_its_gpu_limit _") :].splitlines()
    start = next(i for i, line in enumerate(failure) if line.startswith("memlens: "))
    assert failure[start : start + 3] == [
        "memlens: GPU peak 4.0 MiB, over its limit of 1.0 MiB (4,194,304 bytes)",
        "lines that allocated most GPU memory during the test:",
        '     4.0 MiB  test_gpu.py:9  scratch = torch.empty(4 << 20, device="cuda")',
    ]
    # The terminal summary has a GPU column.
    head = out.index("heaviest tests")
    assert out.splitlines()[out[:head].count("\n") + 1].split() == [
        "peak", "allocated", "leaked", "GPU", "peak", "time", "test",
    ]  # fmt: skip
    tests = export(cwd)["run"]["tests"]
    gpu = {nodeid.split("::")[1]: t.get("gpu_peak_bytes", 0) for nodeid, t in tests.items()}
    assert gpu == {
        "test_over_its_gpu_limit": 4 * MiB,  # measured as it ended (judged)
        "test_within_its_gpu_limit": 2 * MiB,
        "test_not_judged": 3 * MiB,  # measured at the end, from the session's history
        "test_without_gpu": 0,
    }
    over = tests["test_gpu.py::test_over_its_gpu_limit"]
    assert over["limits"] == {"gpu_peak_bytes": MiB}
    gpu_line = os.path.realpath(cwd / "test_gpu.py")
    assert over["failures"] == [
        {
            "figure": "gpu_peak_bytes",
            "value": 4 * MiB,
            "limit": MiB,
            "kind": "limit",
            # the line that allocated the GPU memory (for the editor's related information)
            "lines": [[gpu_line, 9, 4 * MiB]],
        }
    ]
    # The run's GPU figures: the line kept by the list.
    doc = export(cwd)
    (lines,) = [f["lines"] for p, f in doc["files"].items() if p.endswith("test_gpu.py")]
    assert lines["20"]["gpu_live_bytes"] == 3 * MiB


def test_an_unknown_limit_names_gpu_peak(tmp_path: Path) -> None:
    cwd = project(
        tmp_path,
        **{"test_x.py": "import pytest\n\n@pytest.mark.memlens(gpu=1)\ndef test_x():\n    pass\n"},
    )
    proc = pytest_session(cwd, "--memlens")
    assert proc.returncode == 4
    assert (
        "unknown keyword 'gpu' (use peak=, leaks=, gpu_peak=, warmups=, increase= and compare=)"
        in proc.stderr
    )
