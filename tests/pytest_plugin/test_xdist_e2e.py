"""``pytest -n N --memlens``: pytest-xdist's workers each profile and judge their tests; the
session's run in the store merges them (per test, per line) with the controller's own."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from memlens.model import TestFailure, TestStats
from memlens.pytest_plugin.session import merge_tests
from tests.pytest_plugin.session import export, project, pytest_session, summary

MiB = 1024 * 1024

#: A test's leaked and peak figures are net over the process: what anything else frees during
#: the test (pytest, its plugins) is taken off, a few bytes or KiB (docs/pytest.md).
NET = 64 * 1024


FOUR_TESTS = """\
import os

import pytest

HELD = []


@pytest.mark.memlens(peak="5 MiB")
def test_over_its_limit():
    scratch = bytearray(20_000_000)
    assert len(scratch) == 20_000_000


@pytest.mark.memlens(leaks="1 MiB")
def test_within_its_limit():
    rows = [bytearray(1000) for _ in range(200)]
    assert len(rows) == 200


def test_leaks():
    HELD.append(bytearray(int(os.environ.get("LEAK_KIB", "3000")) * 1024))


def test_plain():
    assert sum(range(1000)) == 499500
"""
OVER_LINE = 10  # scratch = bytearray(20_000_000)
LEAK_LINE = 21  # HELD.append(...)
NAMES = ["test_over_its_limit", "test_within_its_limit", "test_leaks", "test_plain"]


def _session(cwd: Path, *args: str, leak_kib: int = 3000) -> tuple[int, str]:
    env = {**os.environ, "LEAK_KIB": str(leak_kib)}
    proc = pytest_session(cwd, "--memlens", *args, env=env)
    assert "INTERNALERROR" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return proc.returncode, proc.stdout


def test_workers_judge_their_tests_and_the_run_has_every_test(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_four.py": FOUR_TESTS})
    code, out = _session(cwd, "-n", "2")
    assert code == 1, out
    assert out.strip().splitlines()[-1].strip("= ").startswith("1 failed, 3 passed in ")
    # The worker's failure, as without pytest-xdist: the figure and the line responsible.
    assert re.search(
        r"memlens: peak 19\.[01] MiB, over its limit of 5\.0 MiB \((20,0\d\d|19,99\d),\d\d\d bytes\)",
        out,
    ), out
    assert f"test_four.py:{OVER_LINE}  scratch = bytearray(20_000_000)" in out
    written = re.search(
        r"memlens: run written to (\.memlens/runs/\S+\.mlrun) \(4 tests from 2 pytest-xdist "
        r"workers; memlens show, or open the folder in your editor\)",
        out,
    )
    assert written, out

    doc = export(cwd)  # latest: the session's run
    run = doc["run"]
    assert (cwd / written.group(1)).is_file()
    assert run["exit_code"] == 1
    assert run["complete"] is True
    tests = run["tests"]
    assert sorted(tests) == sorted(f"test_four.py::{name}" for name in NAMES)
    over = tests["test_four.py::test_over_its_limit"]
    assert over["outcome"] == "failed"
    assert 20.0e6 - NET <= over["peak_bytes"] <= 20.5e6
    assert [(f["figure"], f["kind"], f["limit"]) for f in over["failures"]] == [
        ("peak_bytes", "limit", 5 * MiB)
    ]
    leaks = tests["test_four.py::test_leaks"]
    assert leaks["outcome"] == "passed"
    assert 3000 * 1024 - NET <= leaks["leaked_bytes"] <= 3000 * 1024 + NET
    within = tests["test_four.py::test_within_its_limit"]
    assert (within["outcome"], within["failures"]) == ("passed", [])
    assert 200_000 <= within["peak_bytes"] <= 5 * MiB
    assert tests["test_four.py::test_plain"]["outcome"] == "passed"
    assert all(t["duration_s"] > 0 for t in tests.values())
    source = os.path.realpath(cwd / "test_four.py")
    assert all(t["file"] == source for t in tests.values())

    # The controller and its two workers, each with its run in the processes folder; the
    # lines are the sum of theirs (each test ran in one worker).
    processes = run["processes"]
    assert len(processes) == 3
    assert all(p["complete"] for p in processes)
    assert processes[0]["pid"] != processes[1]["pid"] != processes[2]["pid"]
    folder = cwd / written.group(1).removesuffix(".mlrun")
    folder = folder.with_name(folder.name + ".processes")
    assert sorted(p.stem for p in folder.glob("*.mlrun")) == sorted(
        str(p["pid"]) for p in processes
    )
    lines = doc["files"][source]["lines"]
    assert lines[str(OVER_LINE)]["alloc_bytes"] >= 20_000_000
    assert lines[str(LEAK_LINE)]["live_bytes"] >= 3000 * 1024
    worker_tests = [
        export(cwd, str(folder / f"{p['pid']}.mlrun"))["run"]["tests"] for p in processes
    ]
    assert min(len(t) for t in worker_tests) == 0  # the controller ran no test
    assert sum(len(t) for t in worker_tests) == 4

    # In CI: the next session compares with this one as its baseline, in the workers.
    assert (
        _session(cwd, "-n", "2", "--memlens-baseline=latest", "--memlens-fail-on-increase")[0] == 1
    )  # (test_over_its_limit still fails on its limit)
    code, out = _session(
        cwd, "-n", "2", f"--memlens-baseline={written.group(1)}", "--memlens-fail-on-increase",
        leak_kib=6000,
    )  # fmt: skip
    assert code == 1, out
    assert re.search(
        r"memlens: leaked 5\.9 MiB, \+(99|100)% over the baseline's 2\.9 MiB \(allowed: up "
        r"to 3\.2 MiB\)",
        out,
    ), out
    assert (
        f"memlens: 4 tests compared with {written.group(1)} (allowed growth +10%, at least "
        "256.0 KiB): 1 grew beyond it, 0 new"
    ) in out
    assert out.strip().splitlines()[-1].strip("= ").startswith("2 failed, 2 passed in ")


def test_a_bad_marker_in_a_worker_errors_its_test(tmp_path: Path) -> None:
    """Without pytest-xdist a bad marker is a usage error; a worker cannot end the session
    with one (its controller would take it for a crash): the test errors, with one line."""
    cwd = project(
        tmp_path,
        **{
            "test_bad.py": """\
            import pytest

            @pytest.mark.memlens(peak="lots")
            def test_bad():
                pass

            def test_good():
                pass
            """
        },
    )
    code, out = _session(cwd, "-n", "2")
    assert code == 1, out
    assert out.strip().splitlines()[-1].strip("= ").startswith("1 passed, 1 error in ")
    assert (
        "memlens: test_bad.py::test_bad: @pytest.mark.memlens: peak: not a size: 'lots'"
    ) in out.splitlines()
    assert "ERROR test_bad.py::test_bad - Failed: memlens: " in out


def test_without_workers_the_session_is_profiled_as_usual(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_four.py": FOUR_TESTS})
    for args in (("-n", "0"), ("-p", "no:xdist")):
        code, out = _session(cwd, *args)
        assert code == 1, out
        run = export(cwd)["run"]
        assert len(run["tests"]) == 4
        assert run["processes"] == []
    # A pytest that a worker's test starts inherits the worker's environment: it is a session
    # of its own all the same, with its run in the store.
    proc = pytest_session(
        cwd, "--memlens", "-k", "plain", env={**os.environ, "PYTEST_XDIST_WORKER": "gw0"}
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary(proc) == "1 passed, 3 deselected"
    assert list(export(cwd)["run"]["tests"]) == ["test_four.py::test_plain"]


def _test(
    nodeid: str, outcome: str, peak: int, failures: tuple[TestFailure, ...] = ()
) -> TestStats:
    return TestStats(nodeid, outcome, peak, peak, peak // 2, 0.5, failures=failures)


def test_merging_the_workers_tests() -> None:
    """Each test once, in the order the controller heard of them; a test several workers ran
    (``--dist each``) keeps the largest figures, its worst outcome and every failure."""
    over = TestFailure("peak_bytes", 9, 5, "limit")
    gw0 = [_test("t::a", "passed", 10), _test("t::b", "passed", 30), _test("t::c", "passed", 1)]
    gw1 = [_test("t::b", "failed", 20, (over,)), _test("t::d", "skipped", 0)]
    merged = merge_tests([gw0, gw1], {"t::d": 0, "t::b": 1, "t::a": 2})
    assert [t.nodeid for t in merged] == ["t::d", "t::b", "t::a", "t::c"]
    b = merged[1]
    assert (b.outcome, b.peak_bytes, b.leaked_bytes, b.failures) == ("failed", 30, 15, (over,))
    assert merge_tests([], {}) == []


@pytest.mark.parametrize("outcomes", [("passed", "error"), ("xfailed", "passed")])
def test_the_worst_outcome_wins(outcomes: tuple[str, str]) -> None:
    merged = merge_tests([[_test("t::a", o, 1)] for o in outcomes], {})
    assert merged[0].outcome == outcomes[1]
