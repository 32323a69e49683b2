"""The rich diff table prints paths and names as data: brackets are not rich markup."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pytest

from memlens.cli import main
from memlens.model import FunctionStats, replace
from memlens.runfile import writer
from tests.runs import MIB, sample_run


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "path", ["/tmp/a[/b]/app.py", "/srv/[old]/app.py", "/srv/[bold red]x[/]/app.py"]
)
def test_bracketed_paths_print_verbatim_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    old = sample_run(path=path)
    sf = old.files[path]
    new = replace(
        old,
        files={
            path: replace(
                sf,
                lines={**sf.lines, 4: replace(sf.lines[4], peak_bytes=50 * MIB)},
                functions=(FunctionStats("load.<locals>[x]", 3, 4, 1, 1, 1, 50 * MIB),),
            )
        },
    )
    a = writer.write(old, tmp_path / "a.mlrun")
    b = writer.write(new, tmp_path / "b.mlrun")
    screen = _Terminal()
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["diff", str(a), str(b), "--dir", str(tmp_path)]) == 0
    plain = re.sub(r"\x1b\[[0-9;]*m", "", screen.getvalue())
    row = next(line for line in plain.splitlines() if f"{path}:4" in line)
    assert "40.0 MiB" in row
    assert "50.0 MiB" in row
    assert "+10.0 MiB" in row
    assert f"{path}::load.<locals>[x]" in plain
