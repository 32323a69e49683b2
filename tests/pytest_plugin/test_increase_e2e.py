"""``pytest --memlens --memlens-fail-on-increase``: tests compared with the baseline run (CI)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.cli.memlens_cmd import memlens
from tests.pytest_plugin.session import export, project, pytest_session, summary

TEST_GROWTH = """\
import os


def test_grows():
    data = bytearray(int(os.environ["GROWS_KIB"]) * 1024)
    assert data is not None


def test_steady():
    rows = [bytearray(1000) for _ in range(100)]
    assert len(rows) == 100
"""


def _session(cwd: Path, kib: int, *args: str) -> tuple[int, str, str]:
    proc = pytest_session(cwd, "--memlens", *args, env={**os.environ, "GROWS_KIB": str(kib)})
    return proc.returncode, proc.stdout, summary(proc)


def _memlens_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("memlens: ")]


def test_tests_that_grew_fail(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_growth.py": TEST_GROWTH})
    code, out, result = _session(cwd, 4096)
    assert (code, result) == (0, "2 passed"), out
    assert memlens("baseline", "set", "latest", cwd=cwd).returncode == 0
    # A test run: the baseline of test runs (a program's baseline is another pointer).
    baseline = (cwd / ".memlens" / "runs" / "baseline-tests").read_text().strip()
    assert not (cwd / ".memlens" / "runs" / "baseline").exists()

    # Twice the memory: the test fails, naming both figures and the line.
    code, out, result = _session(cwd, 8192, "--memlens-fail-on-increase")
    assert (code, result) == (1, "1 failed, 1 passed"), out
    assert re.search(
        r"memlens: peak 8\.0 MiB, \+(99|100)% over the baseline's 4\.0 MiB \(allowed: up to "
        r"4\.4 MiB\) \(8,[34]\d\d,\d\d\d bytes\)",
        out,
    ), out
    assert 'test_growth.py:5  data = bytearray(int(os.environ["GROWS_KIB"]) * 1024)' in out
    assert _memlens_lines(out)[-2] == (
        f"memlens: 2 tests compared with .memlens/runs/{baseline} (allowed growth +10%, at "
        "least 256.0 KiB): 1 grew beyond it, 0 new"
    )
    grown = export(cwd)["run"]["tests"]["test_growth.py::test_grows"]
    assert grown["outcome"] == "failed"
    (failure,) = grown["failures"]
    assert failure["kind"] == "increase"
    assert failure["figure"] == "peak_bytes"
    assert 4 * 2**20 <= failure["baseline"] < 4 * 2**20 + 65536
    assert failure["limit"] == int(failure["baseline"] * 1.1)

    # Allowed by a larger percentage, or when within the floor.
    code, out, result = _session(cwd, 8192, "--memlens-fail-on-increase=150")
    assert (code, result) == (0, "2 passed"), out
    code, out, result = _session(cwd, 4096 + 200, "--memlens-fail-on-increase=1")
    assert (code, result) == (0, "2 passed"), out
    code, out, result = _session(
        cwd, 4096 + 200, "--memlens-fail-on-increase=1", "--memlens-min-increase=100KiB"
    )
    assert (code, result) == (1, "1 failed, 1 passed"), out

    # A run named on the command line (a CI artifact, say) instead of the store's baseline.
    (cwd / ".memlens" / "runs" / "baseline-tests").unlink()
    code, out, result = _session(
        cwd, 8192, "--memlens-fail-on-increase", f"--memlens-baseline=.memlens/runs/{baseline}"
    )
    assert (code, result) == (1, "1 failed, 1 passed"), out


def test_without_a_usable_baseline_nothing_is_compared(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_growth.py": TEST_GROWTH, "app.py": "x = [1] * 1000\n"})
    code, out, result = _session(cwd, 64, "--memlens-fail-on-increase")
    assert (code, result) == (0, "2 passed"), out
    no_baseline = (
        "memlens: no test compared: no baseline of test runs set (use `memlens baseline set "
        "RUN` with a run of pytest --memlens)"
    )
    assert _memlens_lines(out)[0] == no_baseline
    # A program's run is the baseline of program runs: test runs are not compared with it.
    assert memlens("run", "--no-report", "app.py", cwd=cwd).returncode == 0
    assert memlens("baseline", "set", "latest", cwd=cwd).returncode == 0
    code, out, result = _session(cwd, 64, "--memlens-fail-on-increase")
    assert (code, result) == (0, "2 passed"), out
    assert _memlens_lines(out)[0] == no_baseline
    # Named on the command line, a run that is not a test session has no per-test figures.
    program = (cwd / ".memlens" / "runs" / "baseline").read_text().strip()
    code, out, result = _session(
        cwd, 64, "--memlens-fail-on-increase", f"--memlens-baseline=.memlens/runs/{program}"
    )
    assert (code, result) == (0, "2 passed"), out
    assert _memlens_lines(out)[0].startswith("memlens: no test compared: the baseline ")
    assert _memlens_lines(out)[0].endswith(
        " has no per-test figures (not a run of pytest --memlens)"
    )


@pytest.mark.any_interpreter
def test_bad_options_and_baselines_are_usage_errors(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_growth.py": TEST_GROWTH})
    (cwd / "garbage.mlrun").write_bytes(b"\x00" * 512)
    cases = [
        (
            ("--memlens-fail-on-increase", "test_growth.py"),
            (
                "ERROR: memlens: --memlens-fail-on-increase: 'test_growth.py' is not a "
                "percentage (write --memlens-fail-on-increase=PERCENT, with the =)"
            ),
        ),
        (
            ("--memlens-fail-on-increase=-5",),
            "ERROR: memlens: --memlens-fail-on-increase: '-5' is not a percentage",
        ),
        (
            ("--memlens-fail-on-increase", "--memlens-min-increase=lots"),
            "ERROR: memlens: --memlens-min-increase: not a size: 'lots'",
        ),
        (
            ("--memlens-fail-on-increase", "--memlens-baseline=garbage.mlrun"),
            (
                "ERROR: memlens: --memlens-baseline: cannot read garbage.mlrun: not a memlens "
                "run file"
            ),
        ),
        (
            ("--memlens-fail-on-increase", "--memlens-baseline=nothing"),
            "ERROR: memlens: --memlens-baseline: no run 'nothing' in ",
        ),
        (("--memlens-sample=lots",), "ERROR: memlens: --memlens-sample: not a size: 'lots'"),
    ]
    for args, message in cases:
        proc = pytest_session(cwd, "--memlens", *args, env={**os.environ, "GROWS_KIB": "1"})
        assert proc.returncode == 4, (args, proc.stdout, proc.stderr)
        lines = [line for line in proc.stderr.splitlines() if line.startswith("ERROR: ")]
        assert len(lines) == 1, (args, proc.stderr)
        assert lines[0].startswith(message), (args, proc.stderr)
        assert "Traceback" not in proc.stderr + proc.stdout
        assert not list((cwd / ".memlens" / "runs").glob("*.mlrun")), args


TEST_GATES = """\
import os

import pytest


def grow(name):
    return bytearray(int(os.environ.get(name, "4096")) * 1024)


@pytest.mark.memlens(increase="150%")
def test_wide():
    assert grow("WIDE_KIB")


@pytest.mark.memlens(increase=False)
def test_left_out():
    assert grow("OUT_KIB")


def test_plain():
    assert grow("PLAIN_KIB")


@pytest.mark.memlens(compare=("alloc", "leaks"))
def test_overlap():
    # As threads whose lifetimes overlap differently from run to run: the same allocations,
    # held together or one after the other.
    held = []
    for _ in range(64):
        chunk = bytearray(64 * 1024)
        if os.environ.get("HOLD") == "1":
            held.append(chunk)
"""


def _gated(cwd: Path, *args: str, **kib: str) -> tuple[int, str, str]:
    proc = pytest_session(cwd, "--memlens", *args, env={**os.environ, **kib})
    return proc.returncode, proc.stdout, summary(proc)


def test_a_tests_own_tolerance_exemption_and_figures(tmp_path: Path) -> None:
    """The marker and the command line widen the gate for one test, or leave it out; a test
    whose peak changes with how its work overlaps is compared on what it allocates."""
    cwd = project(tmp_path, **{"test_gate.py": TEST_GATES})
    code, out, result = _gated(cwd)
    assert (code, result) == (0, "4 passed"), out
    assert memlens("baseline", "set", "latest", cwd=cwd).returncode == 0
    baseline = (cwd / ".memlens" / "runs" / "baseline-tests").read_text().strip()

    # (test_plain grows by 105%, away from a step of the suggested tolerance: a baseline a few
    # bytes apart from 4 MiB must not change the suggestion)
    doubled = {"WIDE_KIB": "8192", "OUT_KIB": "8192", "PLAIN_KIB": "8400", "HOLD": "1"}
    code, out, result = _gated(cwd, "--memlens-fail-on-increase", **doubled)
    assert (code, result) == (1, "1 failed, 3 passed"), out
    assert "FAILED test_gate.py::test_plain - " in out
    # The failure says how to widen the gate for this test, or leave it out.
    lines = out.split("memlens: peak 8.2 MiB, +", 1)[1].splitlines()
    assert lines[1:4] == [
        (
            'to allow it more: @pytest.mark.memlens(increase="120%") on the test, or '
            "--memlens-tolerance='test_gate.py::test_plain=120%'"
        ),
        (
            "to leave it out of the comparison: @pytest.mark.memlens(increase=False), or "
            "--memlens-exempt='test_gate.py::test_plain'"
        ),
        (
            'a peak that changes with how its threads overlap: compare=("alloc", "leaks") '
            '(docs/pytest.md: "What varies between unchanged runs")'
        ),
    ], out
    assert _memlens_lines(out)[-2] == (
        f"memlens: 3 tests compared with .memlens/runs/{baseline} (allowed growth +10%, at "
        "least 256.0 KiB; 2 with a tolerance of its own; 1 left out): 1 grew beyond it, 0 new"
    )

    # The command line does the same for the tests it names (globs, files).
    for args in (
        ("--memlens-exempt=test_gate.py::test_plain",),
        ("--memlens-tolerance=test_gate.py::test_pl*=120%",),
        ("--memlens-tolerance=test_gate.py=5", "--memlens-tolerance=test_gate.py=120%"),
    ):
        code, out, result = _gated(cwd, "--memlens-fail-on-increase", *args, **doubled)
        assert (code, result) == (0, "4 passed"), (args, out)
    # Without its marker, the test that overlaps its work fails on its peak.
    cwd.joinpath("test_gate.py").write_text(
        TEST_GATES.replace('@pytest.mark.memlens(compare=("alloc", "leaks"))\n', "")
    )
    code, out, result = _gated(cwd, "--memlens-fail-on-increase", **doubled)
    assert (code, result) == (1, "2 failed, 2 passed"), out
    assert "FAILED test_gate.py::test_overlap - " in out


@pytest.mark.any_interpreter
def test_bad_gate_options_are_usage_errors(tmp_path: Path) -> None:
    cases = [
        ('increase="lots"', "increase: 'lots' is not a percentage (write it as \"50%\")"),
        ("increase=-5", 'increase: -5 is not a percentage (write it as "50%")'),
        ('compare="held"', "compare: unknown figure 'held' (use peak, alloc, leaks)"),
        ("compare=()", 'compare=(): name the figures, e.g. compare=("alloc", "leaks")'),
        (
            "tolerance=5",
            (
                "unknown keyword 'tolerance' (use peak=, leaks=, gpu_peak=, warmups=, "
                "increase= and compare=)"
            ),
        ),
        ("warmups=-1", "warmups=-1: a number of calls, from 0 to 100"),
        ('warmups="2"', "warmups='2': a number of calls, from 0 to 100"),
    ]
    for n, (marker, message) in enumerate(cases):
        (tmp_path / f"case{n}").mkdir()
        cwd = project(
            tmp_path / f"case{n}",
            **{
                "test_m.py": f"import pytest\n\n\n@pytest.mark.memlens({marker})\ndef test_a():\n    pass\n"
            },
        )
        proc = pytest_session(cwd, "--memlens")
        assert proc.returncode == 4, (marker, proc.stdout, proc.stderr)
        assert f"ERROR: memlens: test_m.py::test_a: @pytest.mark.memlens: {message}" in proc.stderr
    proc = pytest_session(cwd, "--memlens", "--memlens-tolerance=150%")
    assert proc.returncode == 4
    assert (
        "ERROR: memlens: --memlens-tolerance: '150%' is not PATTERN=PERCENT (e.g. "
        "'tests/test_x.py::test_threads=150%')"
    ) in proc.stderr


TEST_THREADS = """\
import random
import threading
import time

import pytest


def work(seconds):
    # Each thread holds its buffers a random while: how many overlap differs from run to run.
    held = [bytearray(256 * 1024) for _ in range(4)]
    time.sleep(seconds)
    del held


@pytest.mark.memlens(compare=("alloc", "leaks"))
def test_threads():
    threads = [
        threading.Thread(target=work, args=(random.uniform(0, 0.02),)) for _ in range(16)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_steady():
    rows = [bytearray(1000) for _ in range(1000)]
    assert len(rows) == 1000
"""


def test_an_unchanged_thread_heavy_suite_passes_its_gate_three_times(tmp_path: Path) -> None:
    """A suite whose thread-heavy test peaks differently from run to run passes the gate
    against its baseline run after run, with that test compared on what it allocates and
    keeps (docs/pytest.md, "One test's tolerance")."""
    cwd = project(tmp_path, **{"test_threads.py": TEST_THREADS})
    code, out, result = _gated(cwd)
    assert (code, result) == (0, "2 passed"), out
    assert memlens("baseline", "set", "latest", cwd=cwd).returncode == 0
    for _ in range(3):
        code, out, result = _gated(cwd, "--memlens-fail-on-increase")
        assert (code, result) == (0, "2 passed"), out
        assert "2 tests compared with" in out
