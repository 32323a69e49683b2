"""Helpers of the tracer's tests: profile a function, load a program from a real file, find a
tagged line (``# @tag`` at its end or before a colon), tell which allocator is in use."""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memlens
from memlens.model import LineStats, Run
from tests.conftest import own_files_env


@pytest.fixture(autouse=True)
def _allocator_hooks(allocator_hooks_restored: None) -> None:
    """Every tracer test starts and ends with CPython's own allocators in place."""


def profiled(fn: Callable[[], Any], **options: Any) -> tuple[Run, Any]:
    """The run of ``fn()`` under ``memlens.profile(**options)``, and what ``fn`` returned."""
    gc.collect()  # garbage of earlier tests is not freed inside this run
    with memlens.profile(**options) as p:
        result = fn()
    assert p.run is not None
    return p.run, result


def profile(fn: Callable[[], Any], **options: Any) -> Run:
    """The run of ``fn()`` under ``memlens.profile(**options)``."""
    return profiled(fn, **options)[0]


def load(tmp_path: Path, source: str, name: str = "prog") -> tuple[dict[str, Any], str]:
    """Runs ``source`` as a fresh module from a real file (so its lines can be charged): its
    namespace and its path."""
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    namespace: dict[str, Any] = {"__name__": name}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - our own source
    return namespace, str(path)


def tagged(path: str | Path, tag: str) -> int:
    """The number of the line of ``path`` tagged ``# @tag``."""
    pattern = re.compile(rf"# @{re.escape(tag)}\b")
    for i, text in enumerate(Path(path).read_text().splitlines(), start=1):
        if pattern.search(text):
            return i
    raise AssertionError(f"no line tagged @{tag} in {path}")


def line(run: Run, path: str | Path, tag: str) -> LineStats:
    """The figures of the line of ``path`` tagged ``tag`` (which must have some)."""
    found = run.files[str(path)].lines.get(tagged(path, tag))
    assert found is not None, f"the run has no figures on the line tagged @{tag}"
    return found


#: The other allocators' re-runs (PYTHONMALLOC) parametrize with "malloc" and this: CPython's
#: debug hooks around pymalloc, under which memlens uses the same general hooks as over malloc.
#: What differs between interpreters is seen with malloc, so this case runs once, not again on
#: each Python of the matrix.
PYMALLOC_DEBUG = pytest.param("pymalloc_debug", marks=pytest.mark.any_interpreter)


def passes_under_allocator(allocator: str, *files: str | Path) -> None:
    """The test ``files`` pass again in a process allocating with ``PYTHONMALLOC=allocator``."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *map(str, files)],
        env=own_files_env(PYTHONMALLOC=allocator),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


def pymalloc_in_use() -> bool:
    """Whether this process allocates with plain pymalloc (not debug hooks, not malloc)."""
    return os.environ.get("PYTHONMALLOC", "pymalloc") == "pymalloc" and not sys.flags.dev_mode
