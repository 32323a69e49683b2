"""The ``memlens`` command line: a registry of small command modules.

Each command lives in its own module under :mod:`memlens.cli`, registered in
:data:`COMMANDS` with its one line of help, and provides:

- ``add_arguments(parser)``: fills its argparse sub-parser;
- ``run(args) -> int``: does the work and returns the exit code.

Only the module of the command that runs is imported (``memlens --help`` and ``--version``
import none: some import rich, pygls or the MCP SDK, together most of a second), and command
modules import heavy dependencies (rich, pygls, the tracer) inside ``run`` so that
``memlens run`` starts the profiled program quickly. ``memlens run``'s usual command lines do
not even import argparse (:func:`memlens.cli.run.parse`): what memlens imports before the
program starts is overhead, and hides the cost of the program's own imports. Errors meant for
the user are raised as :class:`memlens.errors.MemlensError` and printed here as one line:
``memlens: <message>``.
"""

from __future__ import annotations

import sys

from memlens._version import __version__
from memlens.errors import MemlensError

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Protocol

#: Sub-command name -> (its module, its line in ``memlens --help``). The one place commands
#: are registered (each module is imported only when its command runs or shows its help).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": (
        "memlens.cli.run",
        "profile a Python program (script or -m module) and report its hottest lines",
    ),
    "attach": (
        "memlens.cli.attach",
        "profile a running Python process (3.14+) for a while, without restarting it",
    ),
    "show": ("memlens.cli.show", "print the report of a saved run (default: the latest)"),
    "annotate": ("memlens.cli.annotate", "print a source file with each line's figures beside it"),
    "flow": (
        "memlens.cli.flow",
        "write the call tree as a Graphviz flow graph (--compare for several runs)",
    ),
    "runs": (
        "memlens.cli.runs",
        "list saved runs (id, time, peak, duration, command); `runs prune --keep N`",
    ),
    "baseline": (
        "memlens.cli.baseline",
        "set, show or clear the baseline run of each kind (`baseline set RUN`)",
    ),
    "export": ("memlens.cli.export", "print a run as JSON (RUN: path, run id, latest or baseline)"),
    "diff": (
        "memlens.cli.diff",
        (
            "compare two runs per line and function (default: baseline vs latest), or two "
            "moments of one run (--from, --to)"
        ),
    ),
    "merge": ("memlens.cli.merge", "merge runs of several processes or machines into one run"),
    "import": (
        "memlens.cli.importer",
        (
            "import a tracemalloc snapshot, a pymemtrace log or a PyTorch CUDA memory snapshot "
            "as a run"
        ),
    ),
    "lsp": ("memlens.cli.lsp", "start the language server (LSP over stdio) for editors"),
    "mcp": (
        "memlens.cli.mcp",
        "serve the runs to coding agents (MCP over stdio; --http for streamable HTTP)",
    ),
}


if TYPE_CHECKING:

    class Command(Protocol):
        def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

        def run(self, args: argparse.Namespace) -> int: ...


def _load(module: str) -> Command:
    # A command module satisfies the Command protocol structurally.
    import importlib

    return importlib.import_module(module)


def _help_width() -> int:
    """Width for help text, as argparse would choose it, but without importing shutil (argparse
    imports it for every formatter it makes, i.e. for every option added)."""
    import os

    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(columns - 2, 20)


def build_parser(only: str | None = None, *, bare: bool = False) -> argparse.ArgumentParser:
    """The argument parser; with ``only``, just that command's sub-parser is built. ``bare``:
    every command's sub-parser with its line of help only, no module imported (what
    ``memlens --help`` shows).

    Building one sub-parser instead of all keeps ``memlens run`` quick to start: only the
    command that runs is imported.
    """
    import argparse

    width = _help_width()

    def formatter(prog: str) -> argparse.HelpFormatter:
        return argparse.HelpFormatter(prog, width=width)

    parser = argparse.ArgumentParser(
        prog="memlens",
        description="Line-level Python memory profiler whose results live in your editor.",
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"memlens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_line) in COMMANDS.items():
        if only is not None and name != only:
            continue
        p = sub.add_parser(name, help=help_line, description=help_line, formatter_class=formatter)
        if not bare:
            command = _load(module)
            command.add_arguments(p)
            p.set_defaults(_command=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = args_list[0] if args_list else None
    try:
        return _main(args_list, first)
    except MemlensError as exc:
        from memlens.layout import printable  # messages quote names from runs and the disk

        print(f"memlens: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("memlens: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # The system refused something memlens itself did (a read-only store, a full disk):
        # one line, as every other error. (The profiled program's own errors never get here.)
        import os

        from memlens.errors import os_error_reason
        from memlens.layout import display_path

        where = f"{display_path(os.fsdecode(exc.filename))}: " if exc.filename else ""
        print(f"memlens: {where}{os_error_reason(exc)}", file=sys.stderr)
        return 1


def _main(args_list: list[str], first: str | None) -> int:
    if first == "run":
        from memlens.cli import run

        quick = run.parse(args_list[1:])
        if quick is not None:
            return run.run(quick)
    # (Not a command: the top level's help, --version or an error, which need no command's
    # module.)
    parser = build_parser(first) if first in COMMANDS else build_parser(bare=True)
    args = parser.parse_args(args_list)
    command: Command | None = getattr(args, "_command", None)
    if command is None:
        parser.print_help()
        return 2
    return command.run(args)
