"""The leak rule under ``pytest --memlens`` (memlens.growth): a test's ``leaked`` is memory on
lines that grew during the test; what it allocated once and kept (a first matrix product's BLAS
buffer, a memo filled on the first call) is ``kept``, and passes a ``leaks=`` limit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.pytest_plugin.session import export, project, pytest_session, summary

pytest.importorskip("numpy")
MiB = 1024 * 1024

TESTS = """\
import time

import numpy as np
import pytest

HELD = []
_memo = {}


def table():
    if "t" not in _memo:
        _memo["t"] = bytearray(5_000_000)  # a memo filled on the first call
    return _memo["t"]


def handle(i):
    HELD.append(bytearray(1_000_000))  # 1 MB more at every call: a leak


@pytest.mark.memlens(leaks="1 MiB")
def test_first_matmul():
    unit = np.random.rand(600, 64)
    for _ in range(4):  # the session's first matrix product: OpenBLAS allocates its buffer
        sims = unit @ unit.T
        assert sims.shape == (600, 600)
        time.sleep(0.03)


@pytest.mark.memlens(leaks="1 MiB")
def test_memo_filled_once():
    for _ in range(4):
        assert len(table()) == 5_000_000
        time.sleep(0.03)


@pytest.mark.memlens(leaks="1 MiB")
def test_grows_from_call_to_call():
    for i in range(6):
        handle(i)
        time.sleep(0.05)
"""


def test_kept_memory_passes_a_leak_limit_and_growth_fails_it(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_growth.py": TESTS})
    proc = pytest_session(cwd, "--memlens")
    out = proc.stdout
    assert summary(proc) == "1 failed, 2 passed", out + proc.stderr
    failed = [ln for ln in out.splitlines() if ln.startswith("FAILED ")]
    assert [f.split(" - ")[0] for f in failed] == [
        "FAILED test_growth.py::test_grows_from_call_to_call"
    ]
    assert re.search(r"memlens: leaked 5\.[6-8] MiB, over its limit of 1\.0 MiB", out), out
    tests = export(cwd)["run"]["tests"]
    matmul = tests["test_growth.py::test_first_matmul"]
    assert matmul["leaked_bytes"] < MiB
    assert matmul["kept_bytes"] >= MiB  # the BLAS buffer (and numpy.random, imported lazily)
    assert matmul["failures"] == []
    memo = tests["test_growth.py::test_memo_filled_once"]
    assert memo["leaked_bytes"] < MiB
    assert 4_900_000 <= memo["kept_bytes"] < 5_000_000 + 64 * 1024
    grows = tests["test_growth.py::test_grows_from_call_to_call"]
    assert 6_000_000 <= grows["leaked_bytes"] < 6_000_000 + 64 * 1024
    assert grows["kept_bytes"] < MiB
    # The summary shows what each test kept beside what it leaked.
    header = next(ln for ln in out.splitlines() if ln.lstrip().startswith("peak"))
    assert header.split() == ["peak", "allocated", "leaked", "kept", "time", "test"]
