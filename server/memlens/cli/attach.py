"""``memlens attach PID``: profile a running Python process (3.14+) without restarting it.

The attaching half is :mod:`memlens.attach`; docs/attach.md says what is promised and refused.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from types import FrameType
from typing import Any

from memlens import attach
from memlens.cli import run as run_command
from memlens.cli.options import (
    BY_OPTION,
    DIR_OPTION,
    OUTPUT_OPTION,
    TOP_OPTION,
    add_option,
    top_rows,
)
from memlens.errors import MemlensError
from memlens.layout import display_path, printable
from memlens.runfile import reader
from memlens.units import fmt_bytes, sample_option

#: How the process is traced: these options of ``memlens run``'s table (by flag).
_TRACING = (
    "--sample",
    "--include",
    "--exclude",
    "--libraries",
    "--no-native",
    "--timeline-interval",
    "--checkpoint-interval",
)
#: How the run is reported: these options of ``memlens run``'s table, with help of their own
#: (there is no program output here to keep apart from the report).
_REPORTING = {
    "--json": "also write the run as JSON (the memlens export format) to FILE; '-': print it "
    "on stdout instead of the report",
    "--no-report": "print no report, only where the run is written",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "pid",
        nargs="?",
        type=int,
        metavar="PID",
        help="the process to attach to (a Python 3.14+ process)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        metavar="S",
        help="detach after S seconds (default: when Ctrl-C is pressed, or the process ends)",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=attach.DEFAULT_START_TIMEOUT_S,
        metavar="S",
        help="give up when the process runs no Python code for S seconds, e.g. its main thread "
        "sleeps or waits on a lock (default: %(default)g)",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the Python processes this user can see, and whether each can be attached",
    )
    parser.add_argument(
        "--list-json", action="store_true", help="the same list as JSON (for editors)"
    )
    run_options = {flags[0]: (flags, keywords) for flags, keywords in run_command.OPTIONS}
    for flag, option in run_options.items():
        if flag in _TRACING:
            add_option(parser, option)
    add_option(parser, OUTPUT_OPTION)
    add_option(parser, DIR_OPTION)
    for flag, help_text in _REPORTING.items():
        add_option(parser, run_options[flag], help=help_text)
    add_option(parser, TOP_OPTION)
    add_option(parser, BY_OPTION)


def run(args: argparse.Namespace) -> int:
    if args.list or args.list_json:
        return _list(args.list_json)
    if args.pid is None:
        raise MemlensError(
            "give a process id: memlens attach PID (memlens attach --list lists them)"
        )
    if args.duration is not None and args.duration <= 0:
        raise MemlensError("--duration must be a positive number of seconds")
    if args.start_timeout <= 0:
        raise MemlensError("--start-timeout must be a positive number of seconds")
    if args.timeline_interval < 0 or args.checkpoint_interval < 0:
        raise MemlensError("intervals must not be negative")
    top_rows(args.top)
    interval = sample_option(args.sample)
    if args.json not in (None, "-"):
        args.json = os.path.abspath(args.json)
    out_path, in_store = run_command.output_path(args.dir, args.output, pid=args.pid)
    options = attach.Options(
        mode="sampling" if interval else "exact",
        sample_interval=interval,
        include=args.include,
        exclude=args.exclude,
        libraries=args.libraries,
        native=not args.no_native,
        timeline_interval_ms=args.timeline_interval,
        checkpoint_interval_s=args.checkpoint_interval,
        workspace_root=os.path.realpath(args.dir),
    )
    attachment = attach.Attachment(args.pid, options)
    previous = _stop_on_signals()
    try:
        return _attached(attachment, args, out_path, in_store)
    finally:
        attachment.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _attached(
    att: attach.Attachment, args: argparse.Namespace, out_path: str, in_store: bool
) -> int:
    pid = att.pid
    started = att.start(
        args.start_timeout,
        waiting=lambda: _say(f"memlens: waiting for process {pid} to run Python code…"),
    )
    what = printable(" ".join(att.process.command))[:120]
    mode = "a sample of the allocations" if att.options.mode == "sampling" else "every allocation"
    until = f"for {args.duration:g} s" if args.duration else "until Ctrl-C"
    _say(f"memlens: attached to process {pid} ({what}): tracing {mode} {until}")
    if started.native_problem:
        _say(
            f"memlens: native memory (C libraries' malloc) is not traced: {started.native_problem}"
        )
    pointed = [False]

    def on_checkpoint() -> None:
        problem = att.checkpoint_into(out_path, in_store and not pointed[0])
        pointed[0] = pointed[0] or problem is None
        if problem is not None:
            _say(f"memlens: {problem}")

    try:
        ended = att.wait(args.duration, on_checkpoint if args.checkpoint_interval > 0 else None)
    except KeyboardInterrupt:
        ended = None
    if ended is None:
        ended = att.stop(waiting=lambda: _say(f"memlens: process {pid} is writing its run…"))
    seconds = f"{att.elapsed_s:.1f} s"
    if ended.why == "exit":
        _say(f"memlens: process {pid} exited while attached (after {seconds}); its run is written")
    elif ended.why == "vanished":
        if not att.copy_run(out_path):
            raise MemlensError(
                f"process {pid} ended while attached (killed?) before its first checkpoint: "
                "no run was written"
            )
        _say(
            f"memlens: process {pid} ended while attached without writing its run (killed?): "
            "its last checkpoint is saved (incomplete)"
        )
    else:
        _say(f"memlens: detached from process {pid} after {seconds}")
    if ended.problem:
        raise MemlensError(f"process {pid} could not write its run: {ended.problem}")
    if ended.left:
        _say(f"memlens: left in process {pid}: {'; '.join(ended.left)}")
    if ended.why != "vanished" and not att.copy_run(out_path):
        raise MemlensError(f"process {pid} wrote no run")
    result = reader.read(out_path)  # the target's file is checked like any other
    if in_store:
        run_command._point_latest_at(out_path)  # the one way a run becomes latest
    _say(f"memlens: run written to {display_path(out_path)}")
    _say(
        f"memlens: {fmt_bytes(result.info.peak_traced_bytes)} at the peak while attached · "
        "memory allocated before attaching is not counted"
    )
    if args.json not in (None, "-"):
        run_command._write_json(result, args.json)
    if args.json == "-":
        from memlens.export import write_json  # noqa: PLC0415 - only for --json -

        write_json(result, sys.stdout)
    elif not args.no_report:
        from memlens.report import render  # noqa: PLC0415 - rich: only for the report

        render(result, sys.stdout, by=args.by, top=top_rows(args.top))
    return 0


def _stop_on_signals() -> dict[int, Any]:
    """SIGINT (also when inherited as ignored: started in the background), SIGTERM and SIGHUP
    detach: Ctrl-C, the editor's Cancel, the MCP server's stop, a closed terminal."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous: dict[int, Any] = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None:
            previous[signum] = signal.signal(signum, stop)
    return previous


def _list(as_json: bool) -> int:
    processes = attach.python_processes()
    if as_json:
        json.dump({"processes": [p.as_json() for p in processes]}, sys.stdout, indent=2)
        print()
        return 0
    if not processes:
        print("no Python processes found")
        return 0
    print(f"{'PID':>7}  {'PYTHON':<6}  {'USER':<10}  COMMAND")
    indent = " " * 29
    for p in processes:
        python = "?" if p.python is None else f"{p.python[0]}.{p.python[1]}"
        command = printable(" ".join(p.command))
        print(f"{p.pid:>7}  {python:<6}  {printable(p.user)[:10]:<10}  {command[:120]}")
        if p.problem is not None:
            print(f"{indent}cannot attach: {printable(p.problem)}")
    return 0


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
