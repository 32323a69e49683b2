"""The one helper CLI tests use to run `python -m memlens ...` as a user would (and `python
script.py` without memlens, to compare), and to find the run it made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from memlens import fileformat
from memlens.model import Run
from memlens.store import Store


def start_memlens(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """`python -m memlens ARGS` started in the background, its output piped (text)."""
    return subprocess.Popen(
        [sys.executable, "-m", "memlens", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def memlens(
    *args: str, cwd: Path | None = None, stdin: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memlens", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def plain(
    script: Path, *args: str, cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python SCRIPT ARGS` without memlens: what a profiled run must match."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def latest_run(cwd: Path) -> Run:
    """The run that ``latest`` names in the store of ``cwd``."""
    path = Store(cwd).latest()
    assert path is not None
    return fileformat.read(path)


def latest_name(cwd: Path) -> str:
    """The path of the run that ``latest`` names, relative to ``cwd`` (as memlens prints it)."""
    path = Store(cwd).latest()
    assert path is not None
    return str(path.relative_to(cwd))
