"""Without ``--memlens`` the plugin does nothing and loads nothing; under pytest-xdist it
refuses the session with a usage error (it does not work there yet)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memlens import pytest_plugin
from tests.pytest_plugin.session import project, pytest_session, summary

IDLE = """\
import sys


def test_memlens_is_idle():
    loaded = sorted(m for m in sys.modules if m == "memlens" or m.startswith("memlens."))
    assert loaded == ["memlens", "memlens._version", "memlens.pytest_plugin"], loaded
"""


def test_sessions_without_memlens_are_untouched(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_idle.py": IDLE})
    proc = pytest_session(cwd, "-v")
    assert proc.returncode == 0, proc.stdout
    assert summary(proc) == "1 passed"
    assert "memlens-" in proc.stdout.split("plugins: ", 1)[1].splitlines()[0]  # registered
    assert "= memlens =" not in proc.stdout
    assert not (cwd / ".memlens").exists()
    # ... and it can be switched off like any plugin.
    off = pytest_session(cwd, "-p", "no:memlens", "-k", "nothing")
    assert off.returncode == 5, off.stdout  # no test selected, no error


def test_importing_the_plugin_loads_nothing_else() -> None:
    code = (
        "import sys, pytest; before = set(sys.modules); import memlens.pytest_plugin; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert out == ["memlens", "memlens._version", "memlens.pytest_plugin"]


def test_docs_list_every_option(tmp_path: Path) -> None:
    """docs/pytest.md's table of options is the plugin's options, as ``pytest --help`` has
    them, in the same order."""
    cwd = project(tmp_path)
    proc = pytest_session(cwd, "--help")
    assert proc.returncode == 0, proc.stderr
    group = proc.stdout.split("memory profiling with memlens (docs: docs/pytest.md):\n", 1)[1]
    group = group.split("\n\n", 1)[0]
    in_help = re.findall(r"^  (--memlens[a-z-]*)", group, re.MULTILINE)
    docs = (Path(__file__).parents[2] / "docs" / "pytest.md").read_text()
    table = docs.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    in_docs = re.findall(r"^\| `(--memlens[a-z-]*)", table, re.MULTILINE)
    assert len(in_help) == 7
    assert in_docs == in_help


FAKE_XDIST = """\
def pytest_addoption(parser):
    group = parser.getgroup("xdist")  # as pytest-xdist adds them (-n is a reserved letter)
    group._addoption(
        "-n",
        "--numprocesses",
        dest="numprocesses",
        default=None,
        type=lambda n: n if n in ("auto", "logical") else int(n),
    )
    group.addoption("--dist", dest="dist", default="no")
"""


def test_under_xdist_it_is_a_usage_error_and_writes_no_run(tmp_path: Path) -> None:
    """pytest-xdist's options (its controller) and its workers' environment, played by a
    plugin with the same options (xdist is not a dependency: the plugin does not support it).
    Refused, so that a CI gate run with -n cannot pass tests over their limits."""
    cwd = project(tmp_path, **{"test_idle.py": "def test_a():\n    pass\n", "xd.py": FAKE_XDIST})
    proc = pytest_session(cwd, "-p", "xd", "--memlens", "-n", "2")
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert (
        "memlens: --memlens does not work with pytest-xdist yet (-n/--dist): run without -n "
        "(or with -n 0) to profile the tests"
    ) in proc.stderr
    assert "1 passed" not in proc.stdout
    assert not list(cwd.glob(".memlens/runs/*.mlrun"))
    worker = pytest_session(
        cwd, "-p", "xd", "--memlens", env={**os.environ, "PYTEST_XDIST_WORKER": "gw0"}
    )
    assert worker.returncode == 0, worker.stdout
    assert not list(cwd.glob(".memlens/runs/*.mlrun"))
    # -n 0 is no distribution: profiled as usual.
    plain = pytest_session(cwd, "-p", "xd", "--memlens", "-n", "0")
    assert plain.returncode == 0, plain.stdout
    assert len(list(cwd.glob(".memlens/runs/*.mlrun"))) == 1


@pytest.mark.parametrize(
    ("options", "distributed"),
    [
        ({}, False),
        ({"numprocesses": None, "dist": "no"}, False),
        ({"numprocesses": 0, "dist": "no"}, False),
        ({"numprocesses": 4, "dist": "load"}, True),
        ({"numprocesses": "auto", "dist": "no"}, True),
        ({"numprocesses": None, "dist": "each"}, True),
    ],
)
def test_distributed(options: dict[str, object], distributed: bool) -> None:
    assert pytest_plugin._distributed(argparse.Namespace(**options)) is distributed


def test_an_old_pytest_gets_a_usage_error_not_a_broken_plugin(tmp_path: Path) -> None:
    """pytest before 8 (pluggy without new-style wrappers): sessions without --memlens work,
    --memlens says what it needs (played by a plugin that makes pytest look older)."""
    cwd = project(
        tmp_path,
        **{
            "test_idle.py": "def test_a():\n    pass\n",
            "oldpytest.py": "import pytest\n\npytest.version_tuple = (7, 4, 4)\n",
        },
    )
    proc = pytest_session(cwd, "-p", "oldpytest")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = pytest_session(cwd, "-p", "oldpytest", "--memlens")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR: ")]
    assert errors == [
        (
            "ERROR: memlens: pytest --memlens needs pytest 8.0 or newer (this is pytest "
            f"{pytest.__version__})"
        )
    ]
    assert "Traceback" not in proc.stderr
