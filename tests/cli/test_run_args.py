"""`memlens run`'s quick parser (no argparse before the program) reads what argparse reads."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlens.cli import build_parser
from memlens.cli import run as run_command

TOKENS = [
    *("--exact", "--sample", "128KiB", "--sample=1M", "--seed", "7", "--seed=x"),
    *("-o", "out.mlrun", "--output=o.mlrun", "-oX", "--dir", ".", "--include", "src/*"),
    *("--exclude=t*", "--libraries", "--no-report", "--json", "-", "--json=r.json"),
    *("--timeline-interval", "5", "--checkpoint-interval", "0", "--top", "0", "-1", "--top=x"),
    *("--by", "live", "--by=nope", "-m", "app.py", "x", "--", "-h", "--samp", "--exact=1", ""),
]


def _argparse(argv: list[str]) -> argparse.Namespace | None:
    """argparse's reading of `memlens run ARGV`, or None when it refuses it."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = build_parser("run").parse_args(["run", *argv])
        except SystemExit:
            return None
    values = vars(args)
    del values["command"], values["_command"]
    return argparse.Namespace(**values)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=9))
def test_quick_parser_agrees_with_argparse(argv: list[str]) -> None:
    quick = run_command.parse(argv)
    if quick is None:
        return
    # argparse reads the same options and target ...
    expected = _argparse(argv)
    assert expected is not None
    assert {**vars(expected), "args": None} == {**vars(quick), "args": None}
    # ... and the program gets every argument after its name, as under python: argparse drops
    # a "--" that comes first (`memlens run app.py -- x`), the quick parser keeps it.
    position = len(argv) - len(quick.args) - 1
    assert argv[position] == quick.target
    if quick.args[:1] == ["--"]:
        assert expected.args == quick.args[1:]
    else:
        assert expected.args == quick.args


@pytest.mark.parametrize(
    "argv",
    [
        ["app.py"],
        ["app.py", "--top", "3", "-x"],
        ["--sample", "128KiB", "--seed", "7", "-o", "r.mlrun", "app.py", "a"],
        ["--no-report", "--json", "run.json", "--include", "src/*", "--include", "lib/*", "app.py"],
        ["--json=-", "--top=0", "--by", "live", "--checkpoint-interval", "0", "app.py"],
        ["-m", "pkg.tool", "--flag"],
        ["--timeline-interval", "2.5", "--dir", "/tmp/x", "--libraries", "--exact", "app.py"],
    ],
)
def test_usual_command_lines_need_no_argparse(argv: list[str]) -> None:
    quick = run_command.parse(argv)
    assert quick is not None
    assert quick == _argparse(argv)


@pytest.mark.parametrize(
    "argv",
    [[], ["--help"], ["--samp", "1k", "app.py"], ["--exact", "--sample", "1k", "app.py"]],
)
def test_help_errors_and_abbreviations_go_to_argparse(argv: list[str]) -> None:
    assert run_command.parse(argv) is None


@pytest.mark.parametrize(
    ("argv", "split"),
    [
        (["app.py", "a"], ([], ["app.py", "a"])),
        (["-u", "-W", "ignore", "app.py"], (["-u", "-W", "ignore"], ["app.py"])),
        (
            ["-Werror::DeprecationWarning", "-X", "dev", "app.py"],
            (["-Werror::DeprecationWarning", "-X", "dev"], ["app.py"]),
        ),
        (["-uB", "-m", "pkg.tool", "-c"], (["-uB"], ["-m", "pkg.tool", "-c"])),
        (["-mpkg", "x"], ([], ["-m", "pkg", "x"])),
        (
            ["--check-hash-based-pycs", "never", "a.py"],
            (["--check-hash-based-pycs", "never"], ["a.py"]),
        ),
        (["-c", "print(1)"], None),  # memlens runs files and modules
        (["-S", "app.py"], None),  # no site: memlens would not be found
        (["-"], None),
        (["-i"], None),
        (["--help"], None),
    ],
)
def test_python_command_lines_a_program_replaces_itself_with(
    argv: list[str], split: tuple[list[str], list[str]] | None
) -> None:
    assert run_command._python_command(argv) == split
