"""Run a program in this process exactly as ``python script.py`` / ``python -m mod`` would.

``sys.argv``, ``sys.path[0]``, ``__main__``, ``__file__``, standard streams, the exit code
(``sys.exit(n)``, uncaught exceptions -> 1 with the usual traceback) and death by signal are
kept. The caller supplies ``on_exit(ending)``, called exactly once when the program ends,
however it ends (normal end, exception, SIGINT, SIGTERM, SIGHUP), before the process exits; the
:class:`Ending` says how, and seals what the run records (see :meth:`Ending.seal`).

Signals while ``on_exit`` runs (it writes the run) are held, not lost: the run is written,
records the signal, and then the process ends by it as plain Python would have.

Imports are kept to what running the program needs: everything imported here is start-up
overhead for every profiled program.
"""

from __future__ import annotations

import atexit
import os
import sys

from memlens.errors import MemlensError

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import signal
    import types
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from memlens.model import RunInfo
else:
    # signal's C core, with the same functions and numbers: `import signal` loads enum,
    # functools, collections... before the program starts (see memlens/cli/run.py).
    import _signal as signal

#: memlens's own files (the package above this one).
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))

#: Signals whose default action ends the program without a traceback: unless the program
#: handles them itself, memlens writes the run first, then dies by the same signal.
ENDING_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Ending:
    """How the program ended, as ``on_exit`` is told.

    ``exit_code`` is the program's exit code, or None when it did not exit by itself (a signal
    or Ctrl-C ended it); ``complete`` is False when it was interrupted; ``started`` is False
    when its code never ran (it did not compile): there is nothing to record; ``signum`` is
    the ending signal (SIGTERM, SIGHUP) that killed it, which plain python would have died of
    at once (None otherwise).

    While ``on_exit`` runs, SIGINT, SIGTERM and SIGHUP are held. The writer calls
    :meth:`seal` once the run's rows are written: a signal held by then is recorded (the run
    says the program did not exit by itself) and, after ``on_exit``, ends the process as it
    would have ended plain Python. A signal that arrives after the seal comes too late for the
    run, which is written as the program left it: the process then exits as the run says.
    """

    __slots__ = ("_held", "_sealed_with", "complete", "exit_code", "sealed", "signum", "started")

    def __init__(
        self, exit_code: int | None, complete: bool, started: bool, signum: int | None = None
    ) -> None:
        self.exit_code = exit_code
        self.complete = complete
        self.started = started
        self.signum = signum
        self.sealed = False
        self._held: int | None = None  # the first signal held while on_exit ran
        self._sealed_with: int | None = None

    def seal(self, info: RunInfo) -> RunInfo:
        """The header to record: ``info``, or, when a signal is held, ``info`` saying so."""
        self.sealed = True
        self._sealed_with = self._held
        if self._held is None or info.exit_code is None:
            return info
        from memlens.model import replace

        return replace(info, exit_code=None)

    def _hold(self, signum: int, frame: types.FrameType | None) -> None:
        if self._held is None and not self.sealed:
            self._held = signum

    def signal_to_end_by(self) -> int | None:
        """The held signal the process must now end by (None: exit as the program did)."""
        return self._sealed_with if self.sealed else self._held


class Target:
    """What to run: a script path or a module name (``-m``), and its arguments."""

    def __init__(self, script: str | None, module: str | None, args: Sequence[str]) -> None:
        if (script is None) == (module is None):
            raise ValueError("give exactly one of script and module")
        self.script = script
        self.module = module
        self.args = list(args)

    @property
    def display(self) -> str:
        return f"-m {self.module}" if self.module else str(self.script)

    def command(self) -> list[str]:
        """The command line as the user would type it without memlens."""
        head = ["python", "-m", self.module] if self.module else ["python", str(self.script)]
        return [*head, *self.args]

    def check(self) -> None:
        """Raise a one-line MemlensError when the target cannot be run at all."""
        if self.script is not None:
            if not os.path.exists(self.script):
                raise MemlensError(f"can't open file {self.script!r}: no such file")
            if os.path.isdir(self.script) and not os.path.exists(
                os.path.join(self.script, "__main__.py")
            ):
                raise MemlensError(f"can't find '__main__' module in {self.script!r}")
        else:
            import importlib.util

            assert self.module is not None
            # Found where `python -m` looks: the working directory first, unless -P, -I or
            # PYTHONSAFEPATH leaves it out.
            cwd = [] if getattr(sys.flags, "safe_path", False) else [os.getcwd()]
            sys.path[:0] = cwd
            try:
                spec = importlib.util.find_spec(self.module)
            except (ImportError, ValueError) as exc:
                raise MemlensError(f"no module named {self.module!r} ({exc})") from None
            finally:
                del sys.path[: len(cwd)]
            if spec is None:
                raise MemlensError(f"no module named {self.module!r}")


def run(
    target: Target,
    on_exit: Callable[[Ending], None],
    on_start: Callable[[], None] | None = None,
    on_end: Callable[[], None] | None = None,
    on_exec: Callable[[str, Sequence[str], Mapping[str, str]], Exec | None] | None = None,
    plain_env: Callable[[Mapping[str, str]], dict[str, str]] = dict,
) -> int:
    """Run ``target``; return its exit code (or die by the signal that killed it).

    ``on_start`` is called right before the program's own code starts (after its source is
    read and compiled), so a caller can exclude its set-up work from what it measures.
    ``on_end`` is called when the program has ended by itself and its threads are joined,
    right before ``on_exit`` (signals are not held yet: Ctrl-C still interrupts it).

    When the program replaces itself with another (``os.execv`` & co.), ``on_exec(path, argv,
    env)`` may say what to execute instead (the same program under ``memlens run``, which
    goes on with the run: :class:`Exec`); otherwise the program has ended there: ``on_exit``
    is called (exit code None, complete), then it executes ``path`` as asked, in the
    environment ``plain_env`` makes of the one it was given (where children are followed: one
    that follows nothing, since the run has ended).
    """
    program_started = [False]  # (its source read and compiled: see _run_script)

    def start_program() -> None:
        program_started[0] = True
        if on_start is not None:
            on_start()

    finished = False
    pid = os.getpid()
    # Registered before the program registers its own handlers, so it runs after them.
    interrupted = [False]
    atexit.register(_after_atexit, interrupted)

    def finish(
        code: int | None, complete: bool, started: bool = True, signum: int | None = None
    ) -> None:
        nonlocal finished
        # A child forked by the program is not traced and has no run of its own to write.
        if finished or os.getpid() != pid:
            return
        finished = True
        ending = Ending(code, complete, started, signum)
        held = hold_signals(ending)
        try:
            on_exit(ending)
        finally:
            programs = restore_signals(held)
        signum = ending.signal_to_end_by()
        if signum is None:
            return
        if signum in programs:
            signal.raise_signal(signum)  # the program's own handler: it runs now, as usual
        elif signum == signal.SIGINT:
            # As a Ctrl-C at the program's very end: "KeyboardInterrupt", atexit handlers,
            # then death by SIGINT (see _after_atexit).
            _print_exception(KeyboardInterrupt())
            interrupted[0] = True
        else:
            die_by(signum)

    handled = [0]

    def on_ending_signal(signum: int, frame: types.FrameType | None) -> None:
        # Without memlens, SIGTERM or SIGHUP kills the program on the spot. Keep that: record
        # the run, then die by the same signal (no unwinding, the same exit status).
        handled[0] += 1
        finish(None, False, signum=signum)
        die_by(signum)

    def before_exec(path: str, argv: Sequence[str], env: Mapping[str, str]) -> Exec:
        if finished or os.getpid() != pid or not os.access(path, os.X_OK):
            return Exec(path, argv, env)  # (execvp tries each folder of PATH in turn)
        replaced = on_exec(path, argv, env) if on_exec is not None else None
        if replaced is not None:
            return replaced
        flush_streams()
        finish(None, True)
        return Exec(path, argv, plain_env(env))

    _wrap_exec(before_exec)
    ending_handler = AsDefault(on_ending_signal)
    ours = [s for s in ENDING_SIGNALS if is_default(signal.getsignal(s))]
    for signum in ours:
        signal.signal(signum, ending_handler)
    if ours:
        # The run is all there is: no limit (a child's last checkpoint stands in for its run).
        watch_signals(ending_handler, lambda: handled[0], None)
    guard_forks()

    # Python puts the script's folder (or, with -m, the working directory) first on sys.path,
    # unless -P, -I or PYTHONSAFEPATH says not to (then memlens's own sys.path[0], the folder
    # of the `memlens` script, was not put there either).
    safe_path = getattr(sys.flags, "safe_path", False)  # Python 3.11+
    if target.script is not None:
        script = target.script
        sys.argv = [script, *target.args]
        if not safe_path:
            sys.path[0] = os.path.dirname(os.path.realpath(script))
    else:
        assert target.module is not None
        sys.argv = [target.module, *target.args]  # runpy sets argv[0] to the file
        if not safe_path:
            sys.path[0] = os.getcwd()

    code: int = 0
    complete = True
    started = True
    # Like the interpreter, run in a real __main__ module that stays alive after the program
    # ends, so what its globals hold counts as live at exit (runpy.run_path would drop them).
    main = type(sys)("__main__")  # a module object, without importing types
    main.__dict__["__builtins__"] = sys.modules["builtins"]  # a module, as python gives __main__
    sys.modules["__main__"] = main
    try:
        if target.script is not None:
            _run_script(target.script, main, start_program)
        else:
            # What `python -m` itself calls: runs the module in sys.modules["__main__"].
            import runpy

            start_program()
            runpy._run_module_as_main(target.module, alter_argv=True)  # type: ignore[attr-defined]
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt as exc:
        # Python prints the traceback, ends as usual (threads joined, atexit handlers run),
        # then dies by SIGINT so that its parent sees the interrupt: see _after_atexit.
        _print_exception(exc)
        interrupted[0] = True
        code = 128 + int(signal.SIGINT)
        complete = False
    except BaseException as exc:  # noqa: BLE001 - whatever the program raised: report, exit 1
        _print_exception(exc)
        code = 1
        # A program that does not compile never ran: there is nothing to record (a script's
        # compile error, whatever it is, comes before start_program; a module run with -m is
        # compiled by runpy after it).
        started = program_started[0] and not (
            isinstance(exc, SyntaxError) and not _program_frames(exc)
        )
    if os.getpid() != pid:
        _exit_forked_child(code, interrupted[0])
    # Like the interpreter: wait for the program's non-daemon threads before it ends (what
    # they allocate belongs to the run); its atexit handlers run after this, as usual.
    _join_threads()
    if on_end is not None and started:
        # (No contextlib here: importing it would be traced as the program's, on 3.12+.)
        try:  # noqa: SIM105 - contextlib.suppress: see above
            on_end()
        except KeyboardInterrupt:  # Ctrl-C: stop waiting, write the run
            pass
    finish(None if interrupted[0] else code, complete, started)
    for signum in ours:  # the program has ended: its signals are the process's again
        if signal.getsignal(signum) is ending_handler:
            signal.signal(signum, signal.SIG_DFL)
    _unwrap_exec()
    return 128 + int(signal.SIGINT) if interrupted[0] else code


class Exec:
    """What ``os.execve`` executes: ``path`` with ``argv`` and the environment ``env``."""

    __slots__ = ("argv", "env", "path")

    def __init__(self, path: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
        self.path = path
        self.argv = argv
        self.env = env


#: os.execv and os.execve as they were before :func:`_wrap_exec` (None: not wrapped).
_real_exec: tuple[Any, Any] | None = None


def _wrap_exec(before: Callable[[str, Sequence[str], Mapping[str, str]], Exec]) -> None:
    """Make ``os.execv`` and ``os.execve`` (through which the other ``os.exec*`` functions
    go) call ``before(path, argv, env)`` first and execute what it returns."""
    global _real_exec
    real_execv, real_execve = os.execv, os.execve
    if _real_exec is None:
        _real_exec = (real_execv, real_execve)

    from memlens import _tracer

    def execv(path: Any, argv: Any, /) -> None:
        paused = _tracer.set_thread_paused(True)  # what memlens does here is not the program's
        try:
            plan = before(os.fsdecode(path), list(argv), os.environ)
            if plan.env is os.environ:
                real_execv(plan.path, list(plan.argv))
            else:
                real_execve(plan.path, list(plan.argv), plan.env)
        finally:
            _tracer.set_thread_paused(paused)  # (the exec failed: the program goes on)

    def execve(path: Any, argv: Any, env: Any, /) -> None:
        if isinstance(path, int):  # a file descriptor (fexecve): another program, as asked
            real_execve(path, argv, env)
            return
        paused = _tracer.set_thread_paused(True)
        try:
            plan = before(os.fsdecode(path), list(argv), env)
            real_execve(plan.path, list(plan.argv), plan.env)
        finally:
            _tracer.set_thread_paused(paused)

    os.execv = execv  # type: ignore[assignment]
    os.execve = execve  # type: ignore[assignment]


def _unwrap_exec() -> None:
    global _real_exec
    if _real_exec is not None:
        if getattr(os.execv, "__module__", None) == __name__:  # (unless the program's)
            os.execv, os.execve = _real_exec
        _real_exec = None


class AsDefault(int):
    """A handler of memlens's for a signal the program leaves to its default action, which the
    program takes for that default action.

    memlens handles SIGTERM and SIGHUP where the program does not, to write the run before the
    process dies by the signal. A program that asks for the handler in place
    (``signal.getsignal``, or what ``signal.signal`` returns) must get ``SIG_DFL``, as under
    python: one that chains to the previous handler (``if callable(prev): prev(signum,
    frame)``) would otherwise call memlens's and die instead of finishing its own shutdown. So
    the handler is an int equal to ``SIG_DFL`` (the ``signal`` module gives it back as
    ``Handlers.SIG_DFL``) that is callable: CPython takes only an exact int for SIG_DFL, so it
    installs and calls it as a handler (3.10 to 3.15).
    """

    handler: Callable[[int, types.FrameType | None], None]

    def __new__(cls, handler: Callable[[int, types.FrameType | None], None]) -> AsDefault:  # noqa: PYI034
        self = super().__new__(cls, int(signal.SIG_DFL))
        self.handler = handler
        return self

    def __call__(self, signum: int, frame: types.FrameType | None) -> None:
        self.handler(signum, frame)


def is_default(handler: object) -> bool:
    """Whether ``handler`` (as ``_signal.getsignal`` gives it) is the default action itself."""
    return type(handler) is int and handler == signal.SIG_DFL


_forks_guarded = False


def guard_forks() -> None:
    """Keep SIGTERM and SIGHUP blocked across os.fork in the forking thread.

    A child forked while memlens's Python-level handlers are installed inherits them, and
    Python drops the signals that reach a child before its own start-up after fork has run
    (it clears pending signals there): a SIGTERM sent that early (a multiprocessing pool
    ending a worker that has not started yet) would be lost, and the child, which plain
    Python would have ended, would live on. Blocked, the signal waits in the child until its
    start-up is done (memlens.tracing.child has then installed its handlers), then it is delivered.
    """
    global _forks_guarded
    if _forks_guarded or not hasattr(os, "register_at_fork"):
        return
    _forks_guarded = True
    import _thread

    held: dict[int, Any] = {}  # the forking thread's mask before, by thread

    def block() -> None:
        held[_thread.get_ident()] = signal.pthread_sigmask(signal.SIG_BLOCK, ENDING_SIGNALS)

    def restore() -> None:
        mask = held.pop(_thread.get_ident(), None)
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    os.register_at_fork(before=block, after_in_parent=restore, after_in_child=restore)


#: This process's signal pipe (read end, write end): Python's wakeup file descriptor.
_wakeup: tuple[int, int] | None = None


def watch_signals(handler: object, handled: Callable[[], int], limit_s: float | None) -> None:
    """Make sure a SIGTERM or SIGHUP reaches ``handler`` (memlens's, installed for it).

    Python runs a handler when the main thread next looks, and a process-directed signal may
    be taken by any thread that does not block it (one of the program's: a multiprocessing
    pool's); a main thread waiting in a blocking C call (a sleep, a queue's lock) is then never
    interrupted, and the program, which plain Python would have ended at once, waits on. So a
    thread of ours learns of each signal from Python's wakeup file descriptor (unless the
    program set one) and, until ``handled()`` says the handler ran, interrupts the main
    thread's wait by sending it the signal again. After ``limit_s`` seconds without it (the
    main thread busy in a long C call) the process ends by the signal's default action;
    with None, it keeps asking.
    """
    global _wakeup
    import _thread

    previous = _wakeup
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        replaced = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        replaced = -2
    if replaced not in (-1, previous[1] if previous is not None else -1):
        if replaced != -2:
            signal.set_wakeup_fd(replaced)  # the program's own: it stays
        os.close(read_end)
        os.close(write_end)
        return
    if previous is not None:  # a copy of the parent's (forked): its thread is not here
        for fd in previous:
            try:  # noqa: SIM105 - contextlib is not imported at start-up
                os.close(fd)
            except OSError:
                pass
    _wakeup = (read_end, write_end)
    ready = _thread.allocate_lock()
    ready.acquire()  # released by the thread once it is paused and named
    _thread.start_new_thread(
        _resend_signals,
        (ready, read_end, _thread.get_ident(), os.getpid(), handler, handled, limit_s),
    )
    # Its start-up allocations count against sampling's shared countdown: done while this
    # thread waits, they always fall at the same point, so a seeded run repeats exactly. And
    # a fork from now on sees it named as memlens's (not one of the program's threads).
    ready.acquire()


def _resend_signals(
    ready: Any,
    read_end: int,
    main_thread: int,
    pid: int,
    handler: object,
    handled: Callable[[], int],
    limit_s: float | None,
) -> None:
    from memlens import _tracer

    _tracer.set_thread_paused(True)
    _tracer.name_thread("memlens-signals")
    import time

    from memlens.tracing import tracer  # (loaded already: tracing has started)

    tracer.block_signals()

    ready.release()
    ending = set(ENDING_SIGNALS)
    while True:
        try:
            data = os.read(read_end, 64)
        except OSError:
            return
        if not data or os.getpid() != pid:
            return
        for signum in set(data) & ending:
            seen = handled()
            deadline = None if limit_s is None else time.monotonic() + limit_s
            pause = 0.05
            time.sleep(pause)
            while handled() == seen and signal.getsignal(signum) is handler:
                if deadline is not None and time.monotonic() >= deadline:
                    # Stuck where no handler runs (a long C call): it dies as plain Python
                    # would have at once; its last checkpoint counts (listed incomplete).
                    _tracer.die_by_signal(signum)
                signal.pthread_kill(main_thread, signum)  # its blocking call returns: EINTR
                time.sleep(pause)
                if deadline is None:
                    pause = min(pause * 2, 1.0)  # a long C call is asked less and less often


def _join_threads() -> None:
    threading = sys.modules.get("threading")
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:
        return
    import _thread

    main = getattr(threading, "main_thread", None)
    if main is None or main().ident != _thread.get_ident():
        # threading was first imported in another thread, which it then takes for the main
        # one: its _shutdown would wait for that thread. Leave the joining to the interpreter.
        return
    import contextlib

    # Ctrl-C while waiting for threads: Python then ends without waiting any longer.
    with contextlib.suppress(KeyboardInterrupt):
        shutdown()  # what the interpreter calls at exit; calling it again later is a no-op


#: What the runner's own handlers look like to hold_signals (not the program's).
_DEFAULTS = (signal.SIG_DFL, signal.default_int_handler)


def hold_signals(ending: Ending) -> dict[int, Any]:
    """Hold SIGINT, SIGTERM and SIGHUP (those not ignored) until :func:`restore_signals`.

    Python-level handlers, not a signal mask: a mask is per thread, and the program's other
    threads would still take the signal (and Python would still raise KeyboardInterrupt in
    the main thread). Returns the handlers to restore.
    """
    previous: dict[int, Any] = {}
    for signum in (signal.SIGINT, *ENDING_SIGNALS):
        handler = signal.getsignal(signum)
        if handler == signal.SIG_IGN or handler is None:
            continue  # ignored (or set outside Python): nothing to hold
        previous[signum] = handler
        signal.signal(signum, ending._hold)
    return previous


def restore_signals(previous: dict[int, Any]) -> set[int]:
    """Put the handlers back; returns the signals whose handler is the program's own."""
    programs = set()
    for signum, handler in previous.items():
        signal.signal(signum, handler)
        if handler not in _DEFAULTS and getattr(handler, "__module__", None) != __name__:
            programs.add(signum)
    return programs


def _after_atexit(interrupted: list[bool]) -> None:
    if interrupted[0]:
        die_by(signal.SIGINT)


def _exit_forked_child(code: int, interrupted: bool) -> None:
    """End a child process the program forked (os.fork) and that left the program normally.

    It ends as Python would -- threads joined, atexit handlers, streams flushed -- but skips
    the C-level exit handlers: the tracer's state copied from the traced parent must not be
    torn down in the child. A followed child (memlens.tracing.child) writes its own run on the way
    out (an atexit handler, or in os._exit); otherwise it was never traced and writes none.
    """
    _join_threads()
    atexit._run_exitfuncs()  # the program's handlers, then _after_atexit
    flush_streams()
    os._exit(code)


def _run_script(path: str, main: types.ModuleType, start_program: Callable[[], None]) -> None:
    if os.path.isdir(path) or (not path.endswith((".py", ".pyw")) and _is_zip(path)):
        import runpy

        start_program()
        runpy.run_path(path, run_name="__main__")  # a directory or zip with __main__.py
        return
    # _io, not io: Python 3.14 no longer loads io at start-up (the C core is always loaded).
    import _io

    # The loader class python gives __main__, from the import system's frozen core (already
    # loaded): importing importlib.machinery would load warnings and importlib too.
    from _frozen_importlib_external import SourceFileLoader

    absolute = os.path.abspath(path)
    main.__file__ = absolute
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = SourceFileLoader("__main__", absolute)
    with _io.open_code(absolute) as fh:
        source = fh.read()
    code = _compile(source, absolute)
    start_program()
    exec(code, main.__dict__)  # noqa: S102 - running the user's program is the point


def _compile(source: bytes, path: str) -> types.CodeType:
    """The script's code, compiled as python compiles a script it runs: the source's coding
    cookie or BOM decides how it reads, memlens's own ``__future__`` imports do not apply, and
    a NUL byte is the interpreter's SyntaxError. Not builtins.compile: it creates the ast
    module's classes first (10-13 M instructions per run, which plain python does not spend)."""
    from memlens import _tracer

    code = _tracer.compile_file(source, path)
    if code is not None:
        return code
    # A NUL byte. Before 3.11.4 the interpreter read it as the end of its line (and compile
    # refuses it: as before, memlens gives compile's error there).
    error = _nul_byte_error(source, path) if sys.version_info >= (3, 11, 4) else None
    if error is None:
        return compile(source, path, "exec", dont_inherit=True)
    raise error


def _nul_byte_error(source: bytes, path: str) -> SyntaxError | None:
    """The SyntaxError python gives for a script with a NUL byte: the line (universal newlines,
    after the source's encoding) where it is and the text before it; None where the part
    before it does not decode (python's error is then about the encoding)."""
    from memlens.source import script_text

    before = script_text(source[: source.index(b"\x00")])
    if before is None:
        return None
    lines = before.split("\n")
    line = len(lines)
    return SyntaxError("source code cannot contain null bytes", (path, line, 0, lines[-1], line, 0))


def _is_zip(path: str) -> bool:
    import zipfile

    return zipfile.is_zipfile(path)


def _exit_code(value: object) -> int:
    """What the interpreter does with ``sys.exit(value)``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF  # what the OS keeps of exit(n)
    try:
        print(value, file=sys.stderr)
    except Exception:  # noqa: BLE001 - a broken __str__: Python prints nothing either
        return 1
    return 1


def _print_exception(exc: BaseException) -> None:
    """Print the traceback as the interpreter would, without memlens's own frames."""
    tb = exc.__traceback__
    while tb is not None and _is_own(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    exc = exc.with_traceback(tb)
    flush_streams()
    sys.excepthook(type(exc), exc, tb)


def _program_frames(exc: BaseException) -> bool:
    """Whether the traceback of ``exc`` has a frame of the program's own code (not memlens's,
    runpy's or the import system's)."""
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not _is_own(name) and not name.startswith("<frozen importlib"):
            return True
        tb = tb.tb_next
    return False


def _is_own(filename: str) -> bool:
    real = os.path.realpath(filename)
    return (
        real.startswith(_OWN_DIR + os.sep)
        or os.path.basename(real) == "runpy.py"
        or filename.startswith("<frozen runpy")
    )


def flush_streams() -> None:
    """Flush stdout and stderr, ignoring closed or broken streams."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            continue


def die_by(signum: int) -> None:
    flush_streams()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    # Not reached unless the signal is blocked: exit as a shell reports death by signal.
    os._exit(128 + int(signum))
