"""The command a sampled `memlens run` executes itself with (memlens.cli.run._seeded_command):
the seed named once, right after `run`, so that a drawn seed and the same seed given start
from the same command line; the program's own arguments untouched."""

from __future__ import annotations

import sys

import pytest

from memlens.cli import run


def _command(monkeypatch: pytest.MonkeyPatch, argv: list[str], seed: int) -> list[str] | None:
    monkeypatch.setattr(sys, "argv", ["/x/memlens/__main__.py", *argv])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-X", "dev", "-m", "memlens", *argv])
    args = run.parse(argv[1:])
    assert args is not None
    return run._seeded_command(seed, args)


def test_drawn_and_given_seeds_give_one_command(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = _command(monkeypatch, ["run", "--sample", "1KiB", "app.py", "--seed", "3"], 9)
    given = _command(
        monkeypatch, ["run", "--sample", "1KiB", "--seed=9", "app.py", "--seed", "3"], 9
    )
    spaced = _command(
        monkeypatch, ["run", "--seed", "9", "--sample", "1KiB", "app.py", "--seed", "3"], 9
    )
    expected = ["python", "-X", "dev", "-m", "memlens", "run", "--seed", "9", "--sample", "1KiB"]
    assert drawn == given == spaced == [*expected, "app.py", "--seed", "3"]


def test_only_a_process_started_as_memlens_run(monkeypatch: pytest.MonkeyPatch) -> None:
    args = run.parse(["--sample", "1KiB", "app.py"])
    assert args is not None
    monkeypatch.setattr(sys, "argv", ["pytest", "-q"])  # main() called by a program of its own
    assert run._seeded_command(9, args) is None
