"""``memlens export``: a run as JSON on stdout (shape documented in docs/file-format.md)."""

from __future__ import annotations

import argparse
import sys

from memlens.cli.options import add_dir, add_run_spec
from memlens.export import write_json
from memlens.runfile import reader
from memlens.store import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_spec(parser)
    add_dir(parser)


def run(args: argparse.Namespace) -> int:
    result = reader.read(Store(args.dir).resolve(args.run))
    write_json(result, sys.stdout)
    return 0
