"""``memlens run``: profile a program and print the annotated hottest lines.

Everything this module imports at its top is loaded before the profiled program starts, in
the program's process: it is overhead, and it hides the cost of the program's own imports of
the same modules (``import argparse`` would cost the program nothing). So the options are one
table, :data:`OPTIONS`, read by two parsers: :func:`parse`, which reads the usual command
lines without importing anything, and argparse (:func:`add_arguments`), which is imported
only for ``--help``, errors and rare spellings (abbreviated options, ``-oFILE``).
"""

from __future__ import annotations

import os
import sys

from memlens.cli.options import LISTING_OPTION, TOP_OPTION, top_rows

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import argparse
    from argparse import Namespace
    from collections.abc import Mapping, Sequence
    from typing import Any, TextIO

    from memlens.model import Run
    from memlens.tracing import runner
    from memlens.tracing.runner import Target
else:

    class Namespace:
        """Parsed options as attributes, like ``argparse.Namespace`` (without argparse)."""

        def __init__(self, **values: object) -> None:
            self.__dict__.update(values)

        def __eq__(self, other: object) -> bool:
            return vars(self) == vars(other)


USAGE = "memlens run [options] (script.py | -m module) [args ...]"
NOTHING_TO_RUN = (
    "nothing to run: give a script (memlens run app.py) or a module (memlens run -m pkg)"
)

#: The options of ``memlens run``: flags and argparse keywords, for both parsers.
OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("--exact",), {"action": "store_true", "help": "record every allocation (the default)"}),
    (
        ("--sample",),
        {
            "metavar": "BYTES",
            "help": "sampling mode: mean bytes between samples, e.g. 128KiB (a fraction of exact "
            "mode's overhead)",
        },
    ),
    (
        ("--seed",),
        {
            "type": int,
            "metavar": "N",
            "help": "sampling mode: start the samples from this seed, so that the run can be "
            "repeated exactly (default: a new seed each run, recorded in the run)",
        },
    ),
    (
        ("-o", "--output"),
        {"metavar": "FILE", "help": "write the run file here (default: in the store, see --dir)"},
    ),
    (("--dir",), {"default": ".", "help": "store root: runs go to DIR/.memlens/runs (default: .)"}),
    (
        ("--include",),
        {
            "action": "append",
            "default": [],
            "metavar": "GLOB",
            "help": "charge figures only to files matching GLOB (repeatable; default: all but "
            "libraries)",
        },
    ),
    (
        ("--exclude",),
        {
            "action": "append",
            "default": [],
            "metavar": "GLOB",
            "help": "never charge files matching GLOB: their allocations go to the calling line "
            "(repeatable)",
        },
    ),
    (
        ("--libraries",),
        {
            "action": "store_true",
            "help": "charge lines inside the standard library and installed packages too",
        },
    ),
    (
        ("--no-native",),
        {
            "action": "store_true",
            "help": "leave out what C libraries allocate themselves (malloc & co., anonymous "
            "mmap: SQLite, BLAS, libxml2...); counted by default, charged to the calling line",
        },
    ),
    (
        ("--no-gpu",),
        {
            "action": "store_true",
            "help": "leave out GPU memory (PyTorch CUDA), which is recorded by default from "
            "when the program initialises CUDA",
        },
    ),
    (
        ("--no-holders",),
        {
            "action": "store_true",
            "help": "do not look for what holds the lines still live at exit (the search, done "
            "as the program ends, takes at most a fifth of the run's time)",
        },
    ),
    (
        ("--no-report",),
        {
            "action": "store_true",
            "help": "print no report: stdout is then exactly the program's",
        },
    ),
    (
        ("--json",),
        {
            "metavar": "FILE",
            "help": "also write the run as JSON (the memlens export format) to FILE, apart from "
            "the program's output; '-': print it on stdout after the program's output, instead "
            "of the report",
        },
    ),
    (
        ("--timeline-interval",),
        {
            "type": float,
            "default": 10.0,
            "metavar": "MS",
            "help": "sample the memory timeline every MS milliseconds (default: 10)",
        },
    ),
    (
        ("--checkpoint-interval",),
        {
            "type": float,
            "default": 5.0,
            "metavar": "S",
            "help": "save the run so far every S seconds (the first times sooner: after 1 s, "
            "then at doubling waits), so that a killed program leaves a run (default: 5; 0: never)",
        },
    ),
    (
        ("--no-follow",),
        {
            "action": "store_true",
            "help": "do not follow child processes (os.fork, multiprocessing, Python programs "
            "started with subprocess): profile the program's own process only",
        },
    ),
    (
        ("--follow-wait",),
        {
            "type": float,
            "default": 5.0,
            "metavar": "S",
            "help": "when the program ends, wait at most S seconds for child processes still "
            "running (default: 5); those still running then are recorded as incomplete",
        },
    ),
    TOP_OPTION,
    LISTING_OPTION,
    (
        ("--by",),
        {
            "choices": ("peak", "alloc", "live", "gpu_peak", "gpu_alloc", "gpu_live"),
            "default": "peak",
            "help": "rank lines by peak, allocated or live-at-exit bytes, or the same of GPU "
            "memory (gpu_peak, gpu_alloc, gpu_live) (default: peak)",
        },
    ),
    (
        ("-m",),
        {"dest": "as_module", "action": "store_true", "help": "run a module, as python -m"},
    ),
)
#: --exact and --sample exclude each other.
_EXCLUSIVE = ("--exact", "--sample")


def _dest(flags: tuple[str, ...], keywords: dict[str, Any]) -> str:
    dest: str = keywords.get("dest") or flags[-1].lstrip("-").replace("-", "_")
    return dest


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import argparse

    parser.usage = USAGE
    mode = parser.add_mutually_exclusive_group()
    for flags, keywords in OPTIONS:
        (mode if flags[0] in _EXCLUSIVE else parser).add_argument(*flags, **keywords)
    parser.add_argument(
        "target",
        nargs="?",
        metavar="script.py | module",
        help="the program: a script (or a directory or zip with __main__.py), or with -m a module",
    )
    parser.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        help="the program's arguments: everything after the script or module is the program's",
    )


def parse(argv: list[str]) -> Namespace | None:
    """Parse the usual ``memlens run`` command lines as argparse would, without argparse.

    None for anything else (``-h``, an unknown or abbreviated option, a bad value, ``--``,
    ``-oFILE``): argparse then parses it, for its help and its error messages.
    """
    by_flag = {flag: (flags, kw) for flags, kw in OPTIONS for flag in flags}
    values: dict[str, Any] = {}
    for flags, keywords in OPTIONS:
        flag = keywords.get("action") == "store_true"
        default = keywords.get("default", False if flag else None)
        values[_dest(flags, keywords)] = list(default) if isinstance(default, list) else default
    seen: set[str] = set()
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
        name, equals, inline = (
            argv[i].partition("=") if argv[i].startswith("--") else (argv[i], "", "")
        )
        option = by_flag.get(name)
        if option is None:
            return None
        flags, keywords = option
        seen.add(flags[0])
        dest = _dest(flags, keywords)
        if keywords.get("action") == "store_true":
            if equals:
                return None
            values[dest] = True
            i += 1
            continue
        if equals:
            raw, i = inline, i + 1
        elif i + 1 < len(argv) and not _looks_like_option(argv[i + 1]):
            raw, i = argv[i + 1], i + 2
        else:
            return None
        try:
            value = keywords.get("type", str)(raw)
        except ValueError:
            return None
        choices = keywords.get("choices")
        if choices is not None and value not in choices:
            return None
        if keywords.get("action") == "append":
            values[dest].append(value)
        else:
            values[dest] = value
    if all(flag in seen for flag in _EXCLUSIVE) or i == len(argv):
        return None  # argparse says what is wrong
    return Namespace(**values, target=argv[i], args=argv[i + 1 :])


def _looks_like_option(token: str) -> bool:
    """As argparse sees a value: "-1" is a number, "-x" an option."""
    if not token.startswith("-") or token == "-":
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def run(args: Namespace) -> int:
    from memlens.errors import MemlensError
    from memlens.tracing import runner, tracer

    if args.target is None:
        raise MemlensError(NOTHING_TO_RUN)
    interval = None
    if args.sample is not None:  # (the units are not loaded before the program otherwise)
        from memlens.units import sample_option

        interval = sample_option(args.sample)
    if args.seed is not None and interval is None:
        raise MemlensError("--seed is for sampling mode: add --sample BYTES")
    _CONSOLE.keep()  # before the program: where memlens's own output goes (see _Console)
    if args.timeline_interval < 0 or args.checkpoint_interval < 0 or args.follow_wait < 0:
        raise MemlensError("intervals must not be negative")
    top_rows(args.top)  # a bad --top is reported before the program runs
    target = runner.Target(
        None if args.as_module else args.target, args.target if args.as_module else None, args.args
    )
    target.check()
    seed = _repeatable(tracer.sampling_seed(args.seed), args) if interval else None
    if args.json not in (None, "-"):
        args.json = _json_path(args.json, target)

    out_path, in_store = output_path(args.dir, args.output)
    store_root = os.path.abspath(args.dir)  # (a program that execs goes on in the same store)
    command = target.command()
    # The live status line works (allocates) at moments of its own, which would move a sampled
    # run's samples (any sampled run can be repeated with its seed): the one line at the start
    # is shown instead.
    show = _progress_mode()
    if show == "live" and interval is not None:
        show = "line"
    progress = _Progress(target.display) if show == "live" else None

    def on_exit(ending: runner.Ending) -> None:
        if progress is not None:
            progress.stop()
        try:
            result = tracer.stop(
                command=command, exit_code=ending.exit_code, complete=ending.complete
            )
        except MemlensError as exc:
            _say(f"memlens: {exc}")
            return
        if not ending.started:
            # It did not compile: Python's own error is all there is to see; no empty run.
            _say("memlens: no run written (the program did not start)")
            return
        if following:
            # Ended by SIGTERM or SIGHUP, which plain python dies of at once: only a moment
            # for children (ended by the same signal when it was sent to the process group).
            wait = args.follow_wait
            if ending.signum is not None:
                wait = min(wait, follow.SIGNALLED_WAIT_S)
            result = _with_children(result, out_path, wait)
        _save_and_report(result, out_path, in_store, args, ending)

    pointed = [False]

    def first_checkpoint() -> None:
        if not pointed[0]:
            pointed[0] = True
            _point_latest_at(out_path)

    from memlens.tracing import child, follow

    child.leave()  # a `memlens run` started by a followed program profiles its own program
    # What the program's process is traced with, and the children it starts too.
    options: dict[str, Any] = {
        "mode": "sampling" if interval else "exact",
        "sample_interval": interval,
        "seed": seed,
        "include": args.include,
        "exclude": args.exclude,
        "libraries": args.libraries,
        "native": not args.no_native,
        "gpu": not args.no_gpu,
        "holders": not args.no_holders,
        "timeline_interval_ms": args.timeline_interval,
        "checkpoint_interval_s": args.checkpoint_interval,
    }
    following = not args.no_follow and follow.follow(out_path, command, **options)
    tracer.start(
        **options,
        # The workspace the run belongs to (the store's root), so that editors map its absolute
        # paths onto a copy of the folder (another checkout, CI, a colleague's machine); the
        # checkpoints record it too.
        workspace_root=os.path.realpath(args.dir),
        hidden=[sys.argv[0]],  # the `memlens` console script that started us
        checkpoint=out_path if args.checkpoint_interval > 0 else None,
        command=command,
        # A checkpoint is the newest run: `latest` names it as soon as it is written, so a
        # program that is killed (SIGKILL, a crash) leaves `latest` naming what it recorded.
        on_checkpoint=first_checkpoint if in_store else None,
    )
    # memlens's own set-up on this thread (reading and compiling the program, ...) is not
    # traced: the program's figures, and the moment of its peak, are the program's alone.
    from memlens import _tracer

    _tracer.set_thread_paused(True)
    if not args.no_native and not _tracer.traces_native():
        # An interpreter or platform whose layout the interposer does not understand: the
        # run goes on with the Python allocators' figures.
        why = _tracer.native_problem() or "not supported here"
        _say(f"memlens: native memory (C libraries' malloc) is not traced: {why}")
    if progress is not None:
        progress.start()
    elif show == "line":
        print(
            f"memlens: profiling {target.display} (Ctrl-C stops it; the run is still written)",
            file=sys.stderr,
            flush=True,
        )

    def on_start() -> None:
        _tracer.restart_sampling()  # memlens's own work so far moves no sample
        _tracer.set_thread_paused(False)

    def on_exec(path: str, argv: Sequence[str], env: Mapping[str, str]) -> runner.Exec | None:
        """The program replaces itself (os.execv): with the same Python running a program
        (a script or -m), that one runs under `memlens run` too and goes on with this run, in
        which the program's part so far is one process (kept in the processes folder). Any
        other program: None (this run ends there)."""
        if not following:
            return None
        again = _continued_command(path, argv, args, seed, out_path, store_root)
        if again is None:
            return None
        if progress is not None:
            progress.stop()
        try:
            part = tracer.stop(command=command, exit_code=None, complete=True)
            follow.keep_part(part, out_path)
        except (MemlensError, OSError, ValueError) as exc:
            _say(f"memlens: the run so far is lost: {exc}")
        return runner.Exec(
            path, again, {**child.without_following(env), follow.CONTINUE_ENV: out_path}
        )

    return runner.run(
        target,
        on_exit,
        on_start=on_start,
        on_end=follow.end_children if following else None,
        on_exec=on_exec,
        plain_env=child.without_following,
    )


def output_path(store: str, output: str | None, pid: int | None = None) -> tuple[str, bool]:
    """Where a run goes (``-o OUTPUT``, else a new name in the store of ``store``, named after
    ``pid``: this process by default), and whether that is in the store (a run written there
    becomes latest); its folder made, and checked writable now, not after a long run."""
    from memlens.errors import MemlensError
    from memlens.layout import RUNS_DIR, STORE_DIR

    runs_dir = os.path.join(os.path.realpath(os.path.abspath(store)), STORE_DIR, RUNS_DIR)
    if output:
        out_path = os.path.abspath(output)
        if os.path.isdir(out_path):
            raise MemlensError(f"-o {output}: is a directory")
        # A run written into the store by hand still becomes the latest one.
        in_store = os.path.realpath(os.path.dirname(out_path)) == runs_dir
    else:
        from memlens.layout import new_run_path

        out_path = new_run_path(runs_dir, pid=pid)
        in_store = True
    try:
        os.makedirs(os.path.dirname(out_path), exist_ok=True)
    except OSError as exc:
        raise MemlensError(f"cannot write {out_path}: {exc.strerror or exc}") from None
    if not os.access(os.path.dirname(out_path), os.W_OK):
        raise MemlensError(f"cannot write {out_path}: permission denied")
    return out_path, in_store


#: Set across the one re-execution that makes a sampled run repeatable (see _repeatable): "1"
#: when memlens set PYTHONHASHSEED, "0" otherwise.
REPEAT_ENV = "MEMLENS_REPEAT"


def _repeatable(seed: int, args: Namespace) -> int:
    """Make this sampled run repeatable with ``seed`` (returned; the re-execution below is
    given it with ``--seed``, drawn or not).

    The sampler's draws come from the seed, but which allocations they fall on also depends
    on what else changes from run to run: Python's string hashes (set and dict order), and the
    address-space layout (CPython's type attribute cache is indexed by the address of the
    name looked up and keeps that name alive, so objects' lifetimes follow the layout). So
    memlens executes itself once more, as gdb starts programs: with PYTHONHASHSEED derived
    from the seed (unless it is set) and, on Linux, address randomisation off. The program's
    environment is as it was (PYTHONHASHSEED is removed again); the processes it starts keep
    the layout without randomisation and hash as Python does by default. The command executed
    names the seed in one place, right after ``run``, whether it was given or drawn: a run with
    a drawn seed and one given that seed then start from the same command line, and so from
    the same memory layout.
    """
    hash_set = os.environ.pop(REPEAT_ENV, None)
    if hash_set is not None:  # this is the re-execution
        if hash_set == "1":
            os.environ.pop("PYTHONHASHSEED", None)
        return seed
    argv = _seeded_command(seed, args)
    if argv is None:
        return seed
    set_hash = bool(sys.flags.hash_randomization) and "PYTHONHASHSEED" not in os.environ
    from memlens import _tracer

    layout = _tracer.disable_address_randomization()  # for what this process executes
    if not (set_hash or layout):
        return seed
    env = {**os.environ, REPEAT_ENV: str(int(set_hash))}
    if set_hash:
        env["PYTHONHASHSEED"] = str(seed % 2**32)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    try:
        os.execve(sys.executable, argv, env)
    except OSError:
        return seed  # runs as it is: the samples may differ from another run's


def _seeded_command(seed: int, args: Namespace) -> list[str] | None:
    """This process's command line with ``--seed SEED`` right after ``run`` (and nowhere
    else); None unless this process was started as ``memlens run`` (not main() called by a
    program of its own) and its command line reads as expected."""
    original: list[str] = list(getattr(sys, "orig_argv", []))
    own = sys.argv[1:]
    program = [args.target, *args.args]
    if (
        not sys.executable
        or own[:1] != ["run"]
        or len(original) < len(own)
        or original[len(original) - len(own) :] != own
        or own[len(own) - len(program) :] != program
    ):
        return None
    options: list[str] = []
    tokens = iter(own[1 : len(own) - len(program)])
    for token in tokens:
        if token == "--seed":
            next(tokens, None)
        elif not token.startswith("--seed="):
            options.append(token)
    interpreter = original[: len(original) - len(own)]
    return [*interpreter, "run", "--seed", str(seed), *options, *program]


def _continued_command(
    path: str, argv: Sequence[str], args: Namespace, seed: int | None, out_path: str, root: str
) -> list[str] | None:
    """What executing the Python program ``argv`` (with this interpreter, ``path``) becomes
    under ``memlens run`` going on with this run: the same interpreter options, then ``-m
    memlens run`` with this run's options and file, then the program and its arguments. None
    when ``path`` is another program, or the command line is not a script or a module run by
    Python (``-c``, an interactive interpreter, ``-S`` which would not find memlens)."""
    try:
        same = os.path.samefile(path, sys.executable)
    except (OSError, ValueError):
        same = False
    split = _python_command(list(argv[1:])) if same else None
    if split is None:
        return None
    python_options, program = split
    options: list[str] = []
    for flags, keywords in OPTIONS:
        dest = _dest(flags, keywords)
        value = getattr(args, dest, None)
        if dest in ("as_module", "output", "dir", "seed"):
            continue
        if keywords.get("action") == "store_true":
            options += [flags[-1]] if value else []
        elif keywords.get("action") == "append":
            options += [token for v in value or () for token in (flags[-1], v)]
        elif value is not None and value != keywords.get("default"):
            options += [flags[-1], str(value)]
    if seed is not None:
        options += ["--seed", str(seed)]
    options += ["--output", out_path, "--dir", root]
    return [argv[0] if argv else path, *python_options, "-m", "memlens", "run", *options, *program]


#: Python's options that take a value (single letters; the value attached or the next word).
_PYTHON_VALUE_OPTIONS = "WX"


def _python_command(tokens: list[str]) -> tuple[list[str], list[str]] | None:
    """A Python command line (without argv[0]) split into the interpreter's options and the
    program (``[script, args...]`` or ``["-m", module, args...]``); None for anything else."""
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "-m" or (token.startswith("-m") and not token.startswith("--")):
            module = token[2:] or (tokens[i + 1] if i + 1 < len(tokens) else "")
            rest = tokens[i + 1 :] if token[2:] else tokens[i + 2 :]
            return (tokens[:i], ["-m", module, *rest]) if module else None
        if not token.startswith("-"):
            return tokens[:i], tokens[i:]
        if token in ("-", "--") or token.startswith("--"):
            if token != "--check-hash-based-pycs":
                return None  # stdin, or a long option that is not worth understanding here
            i += 2
            continue
        letters = token[1:]
        valued = next((k for k, c in enumerate(letters) if c in _PYTHON_VALUE_OPTIONS), None)
        flags = letters if valued is None else letters[:valued]  # (then the value)
        if "c" in flags or "m" in flags or "S" in flags:
            return None
        i += 2 if valued == len(letters) - 1 else 1
    return None  # no program: an interactive interpreter


def _with_children(result: Run, out_path: str, wait_s: float) -> Run:
    """The program's run merged with the runs of the processes it started (memlens.tracing.follow);
    the program's own run, with one message, when they cannot be merged."""
    from memlens.tracing import follow

    try:
        return follow.collect(result, out_path, wait_s)
    except Exception as exc:  # noqa: BLE001 - the program's own run is still written
        _say(f"memlens: the runs of child processes are not merged: {exc}")
        return result


def _json_path(name: str, target: Target) -> str:
    """The absolute path ``--json FILE`` names, checked before the program runs."""
    from memlens.errors import MemlensError

    path = os.path.abspath(name)
    # `memlens run --json app.py data.txt` (from when --json took no value) must not
    # overwrite the script with JSON.
    if name.endswith((".py", ".pyw")) or (
        target.script is not None and os.path.realpath(path) == os.path.realpath(target.script)
    ):
        raise MemlensError(
            f"--json {name}: a Python file; --json takes the file to write the JSON to"
        )
    if os.path.isdir(path):
        raise MemlensError(f"--json {name}: is a directory")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise MemlensError(f"cannot write {name}: no such directory or permission denied")
    return path


def _progress_mode() -> str | None:
    """How to show progress on stderr: not at all (not a terminal), one line at the start
    (the program's output shares that terminal: a redrawn line would mix with it), or a live
    status line (the program's stdout goes elsewhere)."""
    try:
        if not os.isatty(2):
            return None
        return "line" if os.path.samestat(os.fstat(1), os.fstat(2)) else "live"
    except OSError:
        return None


def _save_and_report(
    result: object,
    out_path: str,
    in_store: bool,
    args: Namespace,
    ending: runner.Ending,
) -> None:
    from memlens.model import Run
    from memlens.runfile import writer
    from memlens.tracing.runner import flush_streams

    assert isinstance(result, Run)
    try:
        # Over the last checkpoint, making room for the final run on a full disk.
        writer.write_final(result, out_path, seal=ending.seal)
    except OSError as exc:
        _say(f"memlens: cannot write {out_path}: {exc.strerror or exc}")
        return
    if in_store:
        _point_latest_at(out_path)
    flush_streams()
    _say(f"memlens: run written to {_shown(out_path)}")
    if args.json not in (None, "-"):
        _write_json(result, args.json)
    out = _CONSOLE.stream(1)
    if out is None:
        return  # the program closed its stdout: no report, as python would print nothing
    try:
        if args.json == "-":
            from memlens.export import write_json

            write_json(result, out)
        elif not args.no_report:
            from memlens.report import render

            render(
                result,
                out,
                by=args.by,
                top=top_rows(args.top),
                show_listing=not args.no_listing,
            )
        out.flush()
    except OSError:
        # `memlens run app.py | head`: the reader left (BrokenPipeError); or the terminal hung
        # up (EIO after SIGHUP). The exit code stays the program's, and nothing complains at
        # exit about the unflushed rest.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, out.fileno())
        os.close(devnull)
    flush_streams()


def _write_json(run: object, path: str) -> None:
    """The export of ``run`` into ``path``, replaced whole (readers never see half of it)."""
    from memlens.export import write_json
    from memlens.model import Run

    assert isinstance(run, Run)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as fh:
            write_json(run, fh)
        os.replace(temporary, path)
    except OSError as exc:
        _say(f"memlens: cannot write {_shown(path)}: {exc.strerror or exc}")
        import contextlib

        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return
    _say(f"memlens: JSON written to {_shown(path)}")


def _point_latest_at(run_path: str) -> None:
    from memlens.layout import point_latest_at

    problem = point_latest_at(run_path)
    if problem is not None:
        _say(f"memlens: {problem}")


def _closed(stream: object) -> bool:
    return stream is None or bool(getattr(stream, "closed", False))


class _Console:
    """The standard output and error ``memlens run`` was started with: where its messages and
    report go, wherever the program sent its own output.

    A program may redirect its output into files of its own (``sys.stdout = open(...)``,
    ``contextlib.redirect_stdout`` left in place, ``os.dup2(log, 1)``): the report still goes
    where the user looks. A copy of each descriptor, made before the program starts
    (non-inheritable, numbered high so that the program's own descriptors are numbered as
    under python), is used once the descriptor itself leads elsewhere. A program that closed
    its stream gets no report, as it would print nothing. A child the program forks closes
    the copies at once: it reports nothing, and a copy of a pipe left open in a child that
    outlives the program would keep the pipe's reader waiting.
    """

    #: The copies are the highest free descriptors below this (or the open-files limit).
    TOP = 256

    def __init__(self) -> None:
        #: descriptor -> (its copy, st_dev, st_ino when memlens started)
        self._saved: dict[int, tuple[int, int, int]] = {}
        self._streams: dict[int, TextIO] = {}

    def keep(self) -> None:
        if not self._saved and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget)
        for fd in (1, 2):
            if fd in self._saved:
                continue
            try:
                st = os.fstat(fd)
                copy = _high_copy(fd, self.TOP)
            except OSError:
                continue
            if copy is not None:
                self._saved[fd] = (copy, st.st_dev, st.st_ino)

    def _forget(self) -> None:
        saved, self._saved = self._saved, {}
        self._streams.clear()
        for copy, _, _ in saved.values():
            try:  # noqa: SIM105 - contextlib costs start-up time
                os.close(copy)
            except OSError:
                pass

    def stream(self, fd: int) -> TextIO | None:
        """The stream for memlens's output on ``fd`` (1 or 2); None when the program closed
        it."""
        program = sys.__stdout__ if fd == 1 else sys.__stderr__
        if program is None or _closed(program):
            return None
        saved = self._saved.get(fd)
        if saved is None or _leads_to(fd, saved[1:]):
            return program
        if fd in self._streams:
            return self._streams[fd]
        copy = saved[0]
        if not _leads_to(copy, saved[1:]):
            return None  # the copy was closed by the program: nowhere to write
        encoding = getattr(program, "encoding", None) or "utf-8"
        errors = getattr(program, "errors", None) or "strict"
        stream = open(copy, "w", encoding=encoding, errors=errors, closefd=False)  # noqa: SIM115
        self._streams[fd] = stream
        return stream

    def fd(self, fd: int) -> int:
        """The descriptor to write memlens's raw output for ``fd`` to (the status line)."""
        saved = self._saved.get(fd)
        if saved is None or _leads_to(fd, saved[1:]) or not _leads_to(saved[0], saved[1:]):
            return fd
        return saved[0]


def _high_copy(fd: int, top: int) -> int | None:
    """A non-inheritable copy of ``fd`` at the highest free descriptor below ``top``."""
    limit = min(top, os.sysconf("SC_OPEN_MAX")) if hasattr(os, "sysconf") else top
    for n in range(limit - 1, 2, -1):
        try:
            os.fstat(n)
        except OSError:
            return os.dup2(fd, n, inheritable=False)
    return None


def _leads_to(fd: int, identity: tuple[int, int]) -> bool:
    """Whether ``fd`` is open on the file (device, inode) ``identity``."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == identity


_CONSOLE = _Console()


def _say(message: str) -> None:
    """A memlens message on memlens's stderr (:class:`_Console`), unless the program closed
    or broke it."""
    err = _CONSOLE.stream(2)
    if err is None:
        return
    try:
        print(message, file=err, flush=True)
    except (OSError, ValueError):
        return


def _shown(path: str) -> str:
    from memlens.layout import display_path

    return display_path(path)


class _Progress:
    """A status line on stderr (a terminal only): elapsed time and traced memory.

    It runs in a thread whose allocations are not traced, and redraws in place every half
    second; the line is erased when the program ends. It writes to file descriptor 2, not to
    ``sys.stderr``, which belongs to the program (it may replace or redirect it). A ``_thread``
    thread, as the tracer's checkpoints: ``threading`` stays the program's to import.
    """

    def __init__(self, what: str) -> None:
        import _thread

        self._what = what
        self._stop = _thread.allocate_lock()
        self._stop.acquire()  # released by stop()
        self._done = _thread.allocate_lock()
        self._started = False

    def start(self) -> None:
        import _thread

        self._done.acquire()  # released when the thread ends
        self._started = True
        _thread.start_new_thread(self._loop, ())

    def stop(self) -> None:
        if self._started:
            self._started = False
            self._stop.release()
            self._done.acquire()

    def _loop(self) -> None:
        import time

        from memlens import _tracer
        from memlens.tracing import tracer
        from memlens.units import fmt_bytes

        _tracer.set_thread_paused(True)
        _tracer.name_thread("memlens-progress")
        tracer.block_signals()
        frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
        t0 = time.monotonic()
        i = 0
        try:
            while not self._stop.acquire(timeout=0.5):
                current, peak = _tracer.totals()
                line = (
                    f"{frames[i % len(frames)]} memlens: profiling {self._what} · "
                    f"{time.monotonic() - t0:.0f} s · {fmt_bytes(current)} traced "
                    f"(peak {fmt_bytes(peak)})"
                )
                _write_fd2(f"\r\x1b[K{line}")
                i += 1
            if i:
                _write_fd2("\r\x1b[K")
        finally:
            self._done.release()


def _write_fd2(text: str) -> None:
    import contextlib

    with contextlib.suppress(OSError):  # a closed terminal: nothing to show it on
        os.write(_CONSOLE.fd(2), text.encode("utf-8", "replace"))
