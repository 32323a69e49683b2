"""``memlens import``: turn another tool's output into a memlens run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memlens.cli.options import OUTPUT_OPTION, add_dir, add_option
from memlens.errors import MemlensError
from memlens.imports.pymemtrace_import import import_log
from memlens.imports.torch_import import import_snapshot as import_torch_snapshot
from memlens.imports.tracemalloc_import import import_snapshot
from memlens.model import replace
from memlens.runfile import writer
from memlens.store import Store

#: Each tool's importer, by its name on the command line: FILE and the --source-dir folders
#: (none given: each its default) -> the run.
_IMPORTERS = {
    "tracemalloc": import_snapshot,
    "pymemtrace": import_log,
    "torch-snapshot": import_torch_snapshot,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "tool",
        choices=tuple(_IMPORTERS),
        help="the tool that wrote FILE",
    )
    parser.add_argument(
        "file",
        help="tracemalloc.Snapshot.dump() file, cPyMemTrace log, or "
        "torch.cuda.memory._dump_snapshot() file",
    )
    add_option(parser, OUTPUT_OPTION)
    add_dir(parser)
    parser.add_argument(
        "--source-dir",
        action="append",
        metavar="DIR",
        help="where to look for relative file names of the import, and for torch-snapshot "
        "the files of another machine by their path's end (repeatable; default: the current "
        "directory, and for pymemtrace also the log's directory)",
    )


def run(args: argparse.Namespace) -> int:
    result = _IMPORTERS[args.tool](args.file, args.source_dir or ())
    store = Store(args.dir)
    result = replace(result, info=replace(result.info, workspace_root=str(store.root)))
    out = Path(args.output) if args.output else store.new_run_path()
    try:
        writer.write(result, out)
    except ValueError as exc:  # a figure the file format cannot hold
        raise MemlensError(str(exc)) from None
    except OSError as exc:
        raise MemlensError(f"cannot write {out}: {exc.strerror or exc}") from None
    if not args.output:
        store.point_latest(out)
    print(f"memlens: imported {args.file} as {out}", file=sys.stderr)
    return 0
