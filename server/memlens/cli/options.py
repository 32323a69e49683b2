"""Options several commands take, each defined once here: ``--dir``, ``-o``, ``--top``,
``--by`` and the positional run spec.

As flags and argparse keywords, so that ``memlens run``'s option table
(:data:`memlens.cli.run.OPTIONS`, read before the profiled program starts, without argparse) can
hold them too: this module imports nothing but the errors.
"""

from __future__ import annotations

from memlens.errors import MemlensError

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import argparse
    from typing import Any

    #: An option as flags and argparse keywords.
    Option = tuple[tuple[str, ...], dict[str, Any]]

#: ``--no-listing``: the reports (``run``, ``show``) leave out the annotated file.
LISTING_OPTION: Option = (
    ("--no-listing",),
    {
        "action": "store_true",
        "help": "leave out the annotated listing of the hottest file (or --file) after the tables",
    },
)

#: ``--dir DIR``: the store root of every command that reads or writes runs.
DIR_OPTION: Option = (
    ("--dir",),
    {"default": ".", "help": "store root: runs are in DIR/.memlens/runs (default: .)"},
)

#: ``-o FILE``: where a command that makes a run writes it.
OUTPUT_OPTION: Option = (
    ("-o", "--output"),
    {"metavar": "FILE", "help": "write the run file here (default: in the store, see --dir)"},
)

#: The ``--top N`` option of the reports (``run``, ``show``): 0 lists every line.
TOP_OPTION: Option = (
    ("--top",),
    {
        "type": int,
        "default": 10,
        "metavar": "N",
        "help": "lines in each table, and lines annotated in the listing; 0: all (default: 10)",
    },
)

#: ``--by``'s choices: :data:`memlens.model.SELF_FIGURES`, written out because ``memlens run``
#: reads this module before the program starts and imports no model there
#: (tests/cli/test_main.py checks that the two agree).
BY_CHOICES = ("peak", "alloc", "live", "gpu_peak", "gpu_alloc", "gpu_live")

#: ``--by peak|alloc|live|gpu_*``: which figure ranks, labels or weighs what a command shows.
BY_OPTION: Option = (
    ("--by",),
    {
        "choices": BY_CHOICES,
        "default": "peak",
        "help": "the figure: peak (held at the program's peak), alloc (allocated in all) or "
        "live (still held at exit); gpu_peak, gpu_alloc, gpu_live: the same of GPU memory "
        "(PyTorch CUDA) (default: %(default)s)",
    },
)


def add_option(parser: argparse.ArgumentParser, option: Option, **changes: Any) -> None:
    """Add a shared option; ``changes`` override its keywords (a command's own default)."""
    flags, keywords = option
    parser.add_argument(*flags, **{**keywords, **changes})


def add_run_spec(
    parser: argparse.ArgumentParser, name: str = "run", default: str = "latest", what: str = ""
) -> None:
    """The positional RUN of the commands that read a saved run (``what``: which run, when a
    command takes two)."""
    parser.add_argument(
        name,
        nargs="?",
        default=default,
        metavar=name.upper(),
        help=f"{what}a run file, a run id (or a unique prefix of one), latest or baseline "
        "(default: %(default)s)",
    )


def add_dir(parser: argparse.ArgumentParser) -> None:
    add_option(parser, DIR_OPTION)


#: The figures of the process's own memory (what the call tree holds): flow graphs.
HOST_BY_CHOICES = BY_CHOICES[:3]


def add_by(parser: argparse.ArgumentParser, default: str = "peak", *, gpu: bool = True) -> None:
    """``--by``; without ``gpu`` only the host figures (a command over the call tree)."""
    if gpu:
        add_option(parser, BY_OPTION, default=default)
    else:
        help_text = "the figure: peak, alloc or live (default: %(default)s)"
        add_option(parser, BY_OPTION, default=default, choices=HOST_BY_CHOICES, help=help_text)


def add_top(parser: argparse.ArgumentParser) -> None:
    add_option(parser, TOP_OPTION)


def add_listing(parser: argparse.ArgumentParser) -> None:
    add_option(parser, LISTING_OPTION)


def top_rows(top: int) -> int | None:
    """The number of rows ``--top N`` asks for: None (every row) for 0."""
    if top < 0:
        raise MemlensError("--top must not be negative")
    return top or None
