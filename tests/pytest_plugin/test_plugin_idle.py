"""Without ``--memlens`` the plugin does nothing and loads nothing; with an old pytest it says
what it needs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert len(in_help) == 9
    assert in_docs == in_help


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
