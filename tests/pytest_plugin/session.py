"""The one helper the plugin's tests use: a real ``python -m pytest`` in a folder of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.cli.memlens_cmd import command, memlens

#: A pytest.ini of the folder: its own rootdir (no configuration found above it). The editable
#: install's redirect module cannot be rewritten by pytest (see pyproject.toml); wheels have
#: no such module.
PYTEST_INI = """\
[pytest]
filterwarnings =
    ignore:Module already imported so cannot be rewritten; _editable_skbc_memlens:pytest.PytestAssertRewriteWarning
"""


def project(tmp_path: Path, **files: str) -> Path:
    """A folder with a pytest.ini and ``files`` (name -> source, dedented)."""
    (tmp_path / "pytest.ini").write_text(PYTEST_INI)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


def pytest_session(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in ``cwd`` (no cache folder written). By default in this
    process's environment less pytest-xdist's variables: a suite run with ``-n`` would make
    the inner session take itself for a worker."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    return command(argv, cwd=cwd, env=env, timeout=timeout)


def summary(proc: subprocess.CompletedProcess[str]) -> str:
    """pytest's closing line without its decoration and time: ``2 failed, 2 passed``."""
    last = proc.stdout.strip().splitlines()[-1].strip("= ")
    return last.rsplit(" in ", 1)[0]


def export(cwd: Path, run: str = "latest") -> dict[str, Any]:
    """``memlens export RUN`` of the store in ``cwd``."""
    proc = memlens("export", run, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert isinstance(doc, dict)
    return doc
