from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from memlens._version import __version__
from memlens.cli import COMMANDS, build_parser
from memlens.cli.options import BY_CHOICES
from memlens.model import SELF_FIGURES
from tests.cli.memlens_cmd import memlens as _memlens

ROOT = Path(__file__).resolve().parents[2]


def test_version() -> None:
    proc = _memlens("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"memlens {__version__}"
    assert __version__ != "0.0.0+unknown"


def test_help_lists_commands() -> None:
    proc = _memlens("--help")
    assert proc.returncode == 0
    for name in COMMANDS:
        assert f"    {name} " in proc.stdout or f"    {name}\n" in proc.stdout, name


def _options(command: str) -> list[argparse.Action]:
    parser = build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in sub.choices[command]._actions if not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_option_has_help_and_says_its_default(command: str) -> None:
    for action in _options(command):
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"memlens {command} {name} has no help text"
        # An option (or optional positional) with a default says which, repeatable ones say so.
        if action.default not in (None, False, [], argparse.SUPPRESS):
            assert f"(default: {action.default}" in action.help or "default: " in action.help, name
        if isinstance(action, argparse._AppendAction):
            assert "repeatable" in action.help, name


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_s_help_formats(command: str) -> None:
    # argparse %-formats help strings (Python 3.14 checks them as options are added): a bare
    # "%" in one breaks the command on every Python, not only its --help.
    sub = next(
        a for a in build_parser(command)._actions if isinstance(a, argparse._SubParsersAction)
    )
    assert sub.choices[command].format_help()


#: (command, option) of options that mean something else in that command than in others.
OWN_MEANING = {
    # each command prints its own document (memlens run writes it to FILE)
    ("run", "--json"),
    ("runs", "--json"),
    ("diff", "--json"),
    # memlens diff counts changes, and its default depends on the output
    ("diff", "--top"),
    # memlens run's own entries of its option table (memlens.cli.run.OPTIONS): to take
    # DIR_OPTION and BY_OPTION of memlens.cli, as it takes TOP_OPTION
    ("run", "--dir"),
    ("run", "--by"),
    # memlens attach has no program output to keep stdout for
    ("attach", "--json"),
    ("attach", "--no-report"),
    # a flow graph is of the call tree, which holds the process's own memory: no GPU figures
    ("flow", "--by"),
}


def test_options_shared_by_commands_are_defined_once() -> None:
    """An option several commands take (the store root, run selection, --by, -o, --top) comes
    from one definition: the same flags, help and choices."""
    assert BY_CHOICES == SELF_FIGURES
    commands = [(c, _options(c)) for c in COMMANDS]
    seen: dict[str, tuple[str, argparse.Action]] = {}
    shared = set()
    for command, actions in commands:
        for action in actions:
            if not action.option_strings and action.dest != "run":
                continue  # a command's own positionals (the run to read is shared)
            name = action.option_strings[-1] if action.option_strings else "<run>"
            if (command, name) in OWN_MEANING:
                continue
            first = seen.setdefault(name, (command, action))
            if first[1] is action:
                continue
            shared.add(name)
            other = first[1]
            where = f"{name} of {command} and {first[0]}"
            assert action.option_strings == other.option_strings, where
            assert action.help == other.help, where
            assert action.choices == other.choices, where
            assert action.metavar == other.metavar, where
    assert {"--dir", "<run>", "--by", "--output", "--top"} <= shared


def test_run_help_shows_each_default() -> None:
    proc = _memlens("run", "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for shown in (
        "every MS milliseconds (default: 10)",
        "(default: 5; 0: never)",
        "0: all (default: 10)",
        "GLOB (repeatable;",
        "(default: peak)",
    ):
        assert shown in text, shown


@pytest.mark.parametrize("args", [(), ("--top", "3"), ("--sample", "1KiB", "--no-report")])
def test_run_with_nothing_to_run_is_one_line(args: tuple[str, ...]) -> None:
    proc = _memlens("run", *args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr == (
        "memlens: nothing to run: give a script (memlens run app.py) or a module "
        "(memlens run -m pkg)\n"
    )


def test_dev_help_is_the_usage_only() -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "dev"), "help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("memlens developer entry point.")
    assert all(not line.startswith("set ") for line in lines), proc.stdout
    for command in ("run", "test", "lint", "bench", "wheel", "vsix"):
        assert any(line.lstrip().startswith(f"./dev {command}") for line in lines), command
    unknown = subprocess.run(
        ["bash", str(ROOT / "dev"), "nonsense"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert unknown.returncode == 2
    assert unknown.stdout == proc.stdout


@pytest.mark.parametrize("argv", [["--version"], ["--help"], []])
def test_top_level_help_and_version_import_no_command(argv: list[str]) -> None:
    # Every command module imported for `memlens --help` took most of a second (rich, pygls,
    # lsprotocol): the top level needs only the registry's lines.
    code = (
        "import sys\n"
        "from memlens.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('MODULES', *sorted(sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, cwd=ROOT
    )
    loaded = proc.stdout.split("MODULES", 1)[1].split()
    commands = {module for module, _ in COMMANDS.values()}
    assert not commands & set(loaded)
    assert not {"rich", "pygls", "lsprotocol", "memlens_lsp", "mcp"} & set(loaded)
    assert "COMMAND" in proc.stdout or "memlens " in proc.stdout
