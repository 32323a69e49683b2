"""``memlens run``: profile a program and print the annotated hottest lines."""

from __future__ import annotations

import argparse
import os
import sys

HELP = "profile a Python program (script or -m module) and report its hottest lines"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "memlens run [options] (script.py | -m module) [args ...]"
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--exact", action="store_true", help="record every allocation (the default)")
    mode.add_argument(
        "--sample",
        metavar="BYTES",
        help="sampling mode: mean bytes between samples, e.g. 128KiB (near-zero overhead)",
    )
    parser.add_argument("-o", "--output", metavar="FILE", help="write the run file here")
    parser.add_argument(
        "--dir", default=".", help="store root: runs go to DIR/.memlens/runs (default: .)"
    )
    parser.add_argument(
        "--include", action="append", default=[], metavar="GLOB", help="only charge these files"
    )
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="never charge these files"
    )
    parser.add_argument(
        "--libraries",
        action="store_true",
        help="charge lines inside the standard library and installed packages too",
    )
    parser.add_argument("--no-report", action="store_true", help="do not print the report")
    parser.add_argument(
        "--json", action="store_true", help="print the run as JSON (memlens export) instead"
    )
    parser.add_argument(
        "--timeline-interval", type=float, default=10.0, metavar="MS", help="default: 10 ms"
    )
    parser.add_argument(
        "--checkpoint-interval",
        type=float,
        default=5.0,
        metavar="S",
        help="save the run so far every S seconds, so a killed program leaves a run (0: never)",
    )
    parser.add_argument("--top", type=int, default=10, metavar="N", help="lines in the report")
    parser.add_argument(
        "--by", choices=("peak", "alloc", "live"), default="peak", help="rank lines by"
    )
    parser.add_argument("-m", dest="as_module", action="store_true", help="run a module")
    parser.add_argument("target", metavar="script.py | module")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the program's arguments")


def run(args: argparse.Namespace) -> int:
    from memlens import runner, tracer
    from memlens.errors import MemlensError
    from memlens.units import parse_size

    target = runner.Target(
        None if args.as_module else args.target, args.target if args.as_module else None, args.args
    )
    target.check()
    interval = None
    if args.sample is not None:
        try:
            interval = parse_size(args.sample)
        except ValueError as exc:
            raise MemlensError(f"--sample: {exc}") from None
    if args.timeline_interval < 0 or args.checkpoint_interval < 0:
        raise MemlensError("intervals must not be negative")

    store_root = os.path.abspath(args.dir)
    if args.output:
        out_path = os.path.abspath(args.output)
        in_store = False
    else:
        from memlens.store import Store

        out_path = str(Store(store_root).new_run_path())
        in_store = True
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    command = target.command()
    progress = _Progress(target.display) if sys.stderr.isatty() else None

    def on_exit(exit_code: int | None, complete: bool) -> None:
        if progress is not None:
            progress.stop()
        try:
            result = tracer.stop(command=command, exit_code=exit_code, complete=complete)
        except MemlensError as exc:
            print(f"memlens: {exc}", file=sys.stderr)
            return
        _save_and_report(result, out_path, in_store, store_root, args)

    tracer.start(
        mode="sampling" if interval else "exact",
        sample_interval=interval,
        include=args.include,
        exclude=args.exclude,
        libraries=args.libraries,
        hidden=[sys.argv[0]],  # the `memlens` console script that started us
        timeline_interval_ms=args.timeline_interval,
        checkpoint=out_path if args.checkpoint_interval > 0 else None,
        checkpoint_interval_s=args.checkpoint_interval,
        command=command,
    )
    if progress is not None:
        progress.start()
    return runner.run(target, on_exit)


def _save_and_report(
    result: object, out_path: str, in_store: bool, store_root: str, args: argparse.Namespace
) -> None:
    from memlens import fileformat
    from memlens.model import Run
    from memlens.runner import flush_streams

    assert isinstance(result, Run)
    try:
        fileformat.write(result, out_path)
    except OSError as exc:
        print(f"memlens: cannot write {out_path}: {exc.strerror or exc}", file=sys.stderr)
        return
    if in_store:
        from pathlib import Path

        from memlens.store import Store

        Store(store_root).set_pointer("latest", Path(out_path))
    flush_streams()
    print(f"memlens: run written to {_shown(out_path)}", file=sys.stderr)
    if args.json:
        import json

        from memlens.export import to_json_dict

        json.dump(to_json_dict(result), sys.stdout, indent=2)
        print()
    elif not args.no_report:
        from memlens.report import render

        render(result, sys.stdout, by=args.by, top=args.top)
    flush_streams()


def _shown(path: str) -> str:
    from memlens.layout import display_path

    return display_path(path)


class _Progress:
    """A status line on stderr (a terminal only): elapsed time and traced memory.

    It runs in a thread whose allocations are not traced, and redraws in place every half
    second; the line is erased when the program ends.
    """

    def __init__(self, what: str) -> None:
        import threading

        self._what = what
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memlens-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        import time

        from memlens import _tracer
        from memlens.units import fmt_bytes

        _tracer.set_thread_paused(True)
        frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
        t0 = time.monotonic()
        i = 0
        while not self._done.wait(0.5):
            current, peak = _tracer.totals()
            line = (
                f"{frames[i % len(frames)]} memlens: profiling {self._what} · "
                f"{time.monotonic() - t0:.0f} s · {fmt_bytes(current)} traced "
                f"(peak {fmt_bytes(peak)})"
            )
            sys.stderr.write(f"\r\x1b[K{line}")
            sys.stderr.flush()
            i += 1
        if i:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
