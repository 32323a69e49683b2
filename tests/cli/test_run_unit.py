"""Run-file naming: the one rule (memlens.layout) that `memlens run` and the store share."""

from __future__ import annotations

import os
import re
from pathlib import Path

from memlens.layout import new_run_path
from memlens.store import Store


def test_run_path_is_named_like_the_store_names_runs(tmp_path: Path) -> None:
    store = Store(tmp_path)
    ours = Path(new_run_path(str(store.runs_dir)))
    theirs = store.new_run_path()
    assert ours.parent == theirs.parent == store.runs_dir
    pattern = rf"\d{{8}}-\d{{6}}-{os.getpid()}\.mlrun"
    assert re.fullmatch(pattern, ours.name)
    assert re.fullmatch(pattern, theirs.name)


def test_run_path_never_reuses_a_file(tmp_path: Path) -> None:
    runs = tmp_path / ".memlens" / "runs"
    runs.mkdir(parents=True)
    first = Path(new_run_path(str(runs)))
    first.write_bytes(b"")
    second = Path(new_run_path(str(runs)))
    if second.name.startswith(first.stem):  # same second: numbered like the store does
        assert second.name == f"{first.stem}-2.mlrun"
    assert second != first
    assert not second.exists()
