"""The session as a whole under ``pytest --memlens``: conftest imports are profiled, sampling
mode, an interrupted session, the store option."""

from __future__ import annotations

import os
import signal
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


KILLED = """\
import os
import signal
import time

HELD = []


def test_first():
    HELD.append(bytearray(4 * 1024 * 1024))


def test_second():
    HELD.append(bytearray(2 * 1024 * 1024))


def test_killed():
    os.kill(os.getpid(), signal.SIGTERM)  # as a CI job's timeout ends the session
    time.sleep(60)
"""


def test_session_killed_by_sigterm_writes_the_tests_that_ran(tmp_path: Path) -> None:
    """pytest dies of SIGTERM as without memlens, and the run holds the figures of every test
    that ran before it (no checkpoint was written yet)."""
    cwd = project(tmp_path, **{"test_killed.py": KILLED})
    plain = pytest_session(cwd, "-q")
    proc = pytest_session(cwd, "-q", "--memlens")
    assert plain.returncode == proc.returncode == -signal.SIGTERM, proc.stdout
    doc = export(cwd)
    assert doc["run"]["complete"] is False
    assert doc["run"]["exit_code"] is None
    tests = doc["run"]["tests"]
    assert list(tests) == ["test_killed.py::test_first", "test_killed.py::test_second"]
    # Each test's buffer (leaked is net: what pytest freed meanwhile, a few KiB, is taken off).
    assert tests["test_killed.py::test_first"]["leaked_bytes"] >= 4 * MiB - 64 * 1024
    assert tests["test_killed.py::test_second"]["leaked_bytes"] >= 2 * MiB - 64 * 1024


def test_checkpoints_hold_the_tests_that_ran(tmp_path: Path) -> None:
    """A session killed outright (SIGKILL) leaves its last checkpoint, with the per-test
    figures of the tests that ran before it."""
    # (A checkpoint every 5 s: one is written while the last test waits.)
    tests = KILLED.replace("os.kill(os.getpid(), signal.SIGTERM)", "time.sleep(7)").replace(
        "time.sleep(60)", "os.kill(os.getpid(), signal.SIGKILL)"
    )
    cwd = project(tmp_path, **{"test_killed.py": tests})
    proc = pytest_session(cwd, "-q", "--memlens")
    assert proc.returncode == -signal.SIGKILL, proc.stdout
    doc = export(cwd)
    assert doc["run"]["complete"] is False
    assert list(doc["run"]["tests"]) == [
        "test_killed.py::test_first",
        "test_killed.py::test_second",
    ]


FORKS = """\
import os


def test_forks():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_no_fork_warning_for_memlens_threads(tmp_path: Path) -> None:
    """Python 3.12+ warns at os.fork in a multi-threaded process: memlens's own threads do not
    make a test's process multi-threaded."""
    cwd = project(tmp_path, **{"test_forks.py": FORKS})
    strict = ("-q", "-p", "no:asyncio", "-W", "error::DeprecationWarning")
    plain = pytest_session(cwd, *strict)
    proc = pytest_session(cwd, *strict, "--memlens")
    assert plain.returncode == proc.returncode == 0, proc.stdout
    assert "multi-threaded" not in proc.stdout
    assert summary(proc) == summary(plain) == "1 passed"
