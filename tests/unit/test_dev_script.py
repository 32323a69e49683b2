"""`./dev` and the project's files say the same: the build tools it installs are
pyproject.toml's build requirements, and the interpreter matrix collects every test marked
as interpreter-dependent, each of which exists."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.conftest import INTERPRETER_DEPENDENT

ROOT = Path(__file__).resolve().parents[2]
DEV = (ROOT / "dev").read_text()


def test_build_tools_are_pyprojects_build_requirements() -> None:
    written = re.search(r"^BUILD_TOOLS=\((.*)\)$", DEV, re.MULTILINE)
    assert written is not None
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert shlex.split(written.group(1)) == pyproject["build-system"]["requires"]


def test_the_matrix_collects_every_interpreter_dependent_test() -> None:
    collected = re.search(r"-m interpreter[\s\\]*((?:tests/\w+ ?)+)", DEV)
    assert collected is not None
    folders = [f.removeprefix("tests/") + "/" for f in collected.group(1).split()]
    for path in INTERPRETER_DEPENDENT:
        assert (ROOT / "tests" / path).exists(), path
        assert any(path.startswith(folder) for folder in folders), path


def test_the_matrix_is_the_one_docs_install_md_lists() -> None:
    matrix = re.search(r"^MATRIX=\((.*)\)$", DEV, re.MULTILINE)
    assert matrix is not None
    names = matrix.group(1).split()
    assert names == [
        "system-3.11",
        "debian-3.13",
        "debian-3.14",
        "debian-3.15",
        "pyenv-3.10",
        "pyenv-3.12",
    ]
    install = (ROOT / "docs" / "install.md").read_text()
    for name in names:
        version = name.split("-")[1]
        assert version in install, name


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--python", "no-such-python3"],
            1,
            (
                "./dev wheel: no Python 'no-such-python3' (a command, a path, or one of: "
                "system-3.11 debian-3.13 debian-3.14 debian-3.15 pyenv-3.10 pyenv-3.12)"
            ),
        ),
        (["--python"], 2, "usage: ./dev wheel [--python PY]..."),
        (
            ["--fast"],
            2,
            "./dev wheel: unknown argument '--fast' (usage: ./dev wheel [--python PY]...)",
        ),
    ],
)
def test_dev_wheel_says_what_is_wrong(args: list[str], code: int, message: str) -> None:
    """``./dev wheel --python PY`` builds for any Python; a wrong one is one line, before any
    build."""
    env = dict(os.environ, MEMLENS_VENV=sys.prefix)
    proc = subprocess.run(
        ["bash", str(ROOT / "dev"), "wheel", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == code, proc.stderr
    assert (
        proc.stderr.splitlines()[-1].removeprefix("\x1b[1m==> ").removesuffix("\x1b[0m") == message
    )
