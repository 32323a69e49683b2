"""The session as a whole under ``pytest --memlens``: conftest imports are profiled, sampling
mode, an interrupted session, the store option."""

from __future__ import annotations

import os
from pathlib import Path

from tests.pytest_plugin.session import export, project, pytest_session, summary

MiB = 1024 * 1024

CONFTEST = """\
TABLE = bytearray(3 * 1024 * 1024)  # imported before any test: the run has it
"""
TESTS = """\
HELD = []


def test_leaks():
    HELD.append(bytearray(10 * 1024 * 1024))


def test_interrupted():
    raise KeyboardInterrupt


def test_never_runs():
    pass
"""


def test_conftest_imports_are_profiled_and_interrupts_leave_an_incomplete_run(
    tmp_path: Path,
) -> None:
    cwd = project(tmp_path, **{"conftest.py": CONFTEST, "test_session.py": TESTS})
    proc = pytest_session(cwd, "--memlens", "--memlens-dir=store")
    assert proc.returncode == 2, proc.stdout  # pytest's exit code for an interrupted session
    assert "memlens: run written to store/.memlens/runs/" in proc.stdout
    doc = export(cwd / "store")
    assert doc["run"]["exit_code"] == 2
    assert doc["run"]["workspace_root"] == os.path.realpath(cwd / "store")
    assert doc["run"]["complete"] is False
    tests = doc["run"]["tests"]
    assert list(tests) == ["test_session.py::test_leaks", "test_session.py::test_interrupted"]
    assert [t["outcome"] for t in tests.values()] == ["passed", "interrupted"]
    conftest = doc["files"][os.path.realpath(cwd / "conftest.py")]
    assert conftest["lines"]["1"]["live_bytes"] >= 3 * MiB
    assert not (cwd / ".memlens").exists()


def test_sampling_mode(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_session.py": TESTS.split("def test_interrupted")[0]})
    proc = pytest_session(cwd, "--memlens", "--memlens-sample=64KiB")
    assert proc.returncode == 0, proc.stdout
    assert summary(proc) == "1 passed"
    doc = export(cwd)
    assert doc["run"]["mode"] == "sampling"
    assert doc["run"]["sample_interval_bytes"] == 64 * 1024
    leaks = doc["run"]["tests"]["test_session.py::test_leaks"]
    # A 10 MiB block is sampled for sure; its estimate is within a sample interval or so.
    assert 10 * MiB - 256 * 1024 <= leaks["leaked_bytes"] <= 10 * MiB + 256 * 1024
