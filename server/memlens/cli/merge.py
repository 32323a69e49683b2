"""``memlens merge``: runs made apart (workers on several machines, processes that were not
children of one profiled program) combined into one run, by the rule ``memlens run`` merges
followed child processes with (docs/distributed.md)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from memlens.cli.options import OUTPUT_OPTION, add_dir, add_option
from memlens.errors import MemlensError
from memlens.layout import (
    RUN_SUFFIX,
    clear_processes,
    display_path,
    printable,
    process_run_name,
    processes_folder,
)
from memlens.merge import combine, processes_of
from memlens.model import Run
from memlens.runfile import reader, writer
from memlens.store import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="a run file, a run id (or a unique prefix of one), latest, baseline, or a folder "
        "(every run file in it)",
    )
    add_option(parser, OUTPUT_OPTION)
    add_dir(parser)


def run(args: argparse.Namespace) -> int:
    store = Store(args.dir)
    paths = _inputs(args.runs, store)
    out = Path(args.output) if args.output else store.new_run_path()
    folder = processes_folder(str(out))
    for p in paths:
        if _same_file(p, out) or _same_file(p.parent, Path(folder)):
            raise MemlensError(f"{display_path(str(p))} would be overwritten by the merged run")
    runs = [reader.read(p) for p in paths]
    merged = combine(runs)
    # Each process's own run beside the merged one (its processes folder), as `memlens run`
    # leaves them: the editor's hover splits a line by process from them.
    problem = clear_processes(folder)
    if problem is not None:
        raise MemlensError(f"cannot use {printable(problem)}")
    try:
        writer.write(merged, out)
        _keep_process_runs(paths, runs, folder)
    except ValueError as exc:  # a figure the file format cannot hold
        raise MemlensError(str(exc)) from None
    except OSError as exc:
        raise MemlensError(
            f"cannot write {display_path(str(out))}: {exc.strerror or exc}"
        ) from None
    if not args.output:
        store.point_latest(out)
    count = sum(len(processes_of(r)) for r in runs)
    print(
        f"memlens: {len(runs)} runs ({count} processes) merged into {display_path(str(out))}",
        file=sys.stderr,
    )
    return 0


def _inputs(specs: list[str], store: Store) -> list[Path]:
    """The run files named: folders give every run file directly in them (in name order)."""
    paths: list[Path] = []
    for spec in specs:
        if os.path.isdir(spec):
            found = sorted(
                Path(spec, n)
                for n in os.listdir(spec)
                if n.endswith(RUN_SUFFIX) and not n.startswith(".")
                and os.path.isfile(os.path.join(spec, n)) and not os.path.islink(os.path.join(spec, n))
            )  # fmt: skip
            if not found:
                raise MemlensError(f"no run files in {display_path(spec)}")
            paths.extend(found)
        else:
            paths.append(store.resolve(spec))
    unique: list[Path] = []
    for p in paths:
        if not any(_same_file(p, q) for q in unique):
            unique.append(p)
    return unique


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _keep_process_runs(paths: list[Path], runs: list[Run], folder: str) -> None:
    """Copy each input's per-process runs (its processes folder, when it followed children)
    or the input itself into ``folder``, named by process id."""
    os.makedirs(folder, exist_ok=True)
    taken: set[str] = set()
    for path, run in zip(paths, runs, strict=True):
        own = processes_folder(str(path))
        sources: list[tuple[int, str]] = []
        if len(run.info.processes) > 1 and os.path.isdir(own) and not os.path.islink(own):
            for process in run.info.processes:
                name = os.path.join(own, process_run_name(process.pid))
                if os.path.isfile(name) and not os.path.islink(name):
                    sources.append((process.pid, name))
        else:
            sources.append((run.info.pid, str(path)))
        for pid, source in sources:
            n = 1
            while process_run_name(pid, n) in taken:
                n += 1
            taken.add(process_run_name(pid, n))
            shutil.copyfile(source, os.path.join(folder, process_run_name(pid, n)))
