"""The one helper tests use to run a command (`python -m memlens ...` as a user would, `python
script.py` without memlens to compare, pytest, pip...), and to find the run memlens made."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from memlens.model import Run
from memlens.runfile import reader
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


def command(
    argv: Sequence[str | Path],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``argv`` run to its end, its output captured as text. ``env`` is the whole environment
    (None: this process's)."""
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=None if env is None else dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def memlens(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`python -m memlens ARGS`."""
    argv = [sys.executable, "-m", "memlens", *args]
    return command(argv, cwd=cwd, env=env, stdin=stdin, timeout=timeout)


def plain(
    script: Path, *args: str, cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python SCRIPT ARGS` without memlens: what a profiled run must match."""
    return command([sys.executable, script, *args], cwd=cwd, timeout=timeout)


def latest_run(cwd: Path) -> Run:
    """The run that ``latest`` names in the store of ``cwd``."""
    path = Store(cwd).latest()
    assert path is not None
    return reader.read(path)


def latest_name(cwd: Path) -> str:
    """The path of the run that ``latest`` names, relative to ``cwd`` (as memlens prints it)."""
    path = Store(cwd).latest()
    assert path is not None
    return str(path.relative_to(cwd))
