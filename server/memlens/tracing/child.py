"""A followed process: what every process of a followed run does (``memlens run`` follows the
processes its program starts; the root's half is :mod:`memlens.tracing.follow`).

What is followed: children forked with ``os.fork`` (bare, and multiprocessing's fork and
forkserver start methods), and Python programs started with the same interpreter
(``subprocess``, multiprocessing's spawn start method); children of children too.

Every followed process inherits two things through its environment: :data:`ENV` (where the
runs go and the run's options, for this memlens and this interpreter only) and, first on
``PYTHONPATH``, :data:`STARTUP_DIR`, whose ``sitecustomize.py`` a new interpreter imports while
it starts: it calls :func:`start_child`, then imports the user's own ``sitecustomize``, if
any. An ``os.register_at_fork`` handler starts a fresh run in every child forked by a traced
process (the native tracer drops the parent's figures in the child first).

Each traced child writes its own run, ``<pid>.mlrun``, into the run's processes folder
(:func:`memlens.layout.processes_folder`): checkpoints while it runs, and its final run when
it ends -- at interpreter exit (an atexit handler), in ``os._exit`` (multiprocessing's fork
workers leave that way: it is wrapped in followed children), or on SIGTERM or SIGHUP, which
it then dies by. When a child starts it claims ``<pid>.lock`` and holds a POSIX lock on it
(released by the kernel when the process ends, however it ends) until its final run is
written: the root knows a child is done, or died, without signals.

This module is imported by ``memlens run`` before the program starts and by every followed
child as it starts: it imports only ``os`` and ``sys`` (and ``marshal``, built in and always
loaded) at its top; the rest is imported when a child starts or its program has ended.
"""

from __future__ import annotations

import marshal
import os
import sys

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import signal
    import types
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from memlens.tracing.runner import Ending, Exec
else:
    import _signal as signal  # the C core: `import signal` loads enum & co. (memlens.tracing.runner)

#: The environment variable that tells a new interpreter to follow (an opaque value).
ENV = "MEMLENS_FOLLOW"
#: The folder of the start-up hook: put first on ``PYTHONPATH`` while following.
STARTUP_DIR = os.path.join(os.path.dirname(os.path.realpath(__file__)), "_startup")

#: multiprocessing's helper processes: started like children, but they serve the program's
#: whole life and end only after it, so they are not traced (their own allocations are
#: multiprocessing's); the fork server's own children are followed. loky (joblib's process
#: pool, standalone or vendored) starts a resource tracker of its own the same way.
_FORKSERVER = "from multiprocessing.forkserver import main"
_RESOURCE_TRACKERS = (
    "from multiprocessing.resource_tracker import main",
    "from joblib.externals.loky.backend.resource_tracker import main",
    "from loky.backend.resource_tracker import main",
)

#: The options of the run a child inherits, with their types (the value of :data:`ENV`).
_FIELDS: dict[str, tuple[type, ...]] = {
    "memlens": (str,),
    "hexversion": (int,),
    "prefix": (str,),
    "folder": (str,),
    "parent": (int,),
    "mode": (str,),
    "sample_interval": (int, type(None)),
    "seed": (int, type(None)),
    "include": (list,),
    "exclude": (list,),
    "libraries": (bool,),
    "native": (bool,),
    "gpu": (bool,),
    "holders": (bool,),
    "timeline_interval_ms": (int, float),
    "checkpoint_interval_s": (int, float),
}

#: What this process follows: the run's options (None: children are not followed).
_config: dict[str, Any] | None = None
#: Whether this process's own allocations are traced (the root, a traced child).
_traced = False
#: The command line recorded for this process (forked children inherit it).
_command: tuple[str, ...] = ()
#: A traced child's own run (None in the root and in untraced processes).
_own: _Own | None = None
_hooks_installed = False
#: ``os._exit`` itself (followed children get a wrapper that writes their run first).
_real_exit = os._exit


class _Own:
    """A traced child's claim in the processes folder: its run file and its lock."""

    __slots__ = ("command", "fd", "lock_path", "parent", "pid", "run_path")

    def __init__(
        self,
        pid: int,
        parent: int,
        command: tuple[str, ...],
        stem: str,
        fd: int,
    ) -> None:
        self.pid = pid
        self.parent = parent
        self.command = command
        # The run file, and the lock that claims it (held through ``fd``), beside it.
        self.run_path = stem + ".mlrun"
        self.lock_path = stem + ".lock"
        self.fd = fd

    def release(self) -> None:
        """The run is final: the claim goes (the lock with it)."""
        _quietly(os.unlink, self.lock_path)
        self.forget()

    def forget(self) -> None:
        _quietly(os.close, self.fd)


# -- how a process starts and stops being followed ----------------------------------------------


def leave() -> None:
    """This process stops being a followed child: a ``memlens run`` started as a child of
    another one profiles its program itself. Its run so far is dropped, and what follows the
    outer run is taken out of the environment (``follow`` puts in its own, if it follows)."""
    global _own, _config, _traced
    own, _own = _own, None
    if own is not None and own.pid == os.getpid():
        from memlens.tracing import tracer

        tracer.abandon()
        own.release()
        _quietly(os.unlink, own.run_path)
    _config = None
    _traced = False
    kept = without_following(os.environ)
    for name in (ENV, "PYTHONPATH"):
        if name in kept:
            os.environ[name] = kept[name]
        else:
            os.environ.pop(name, None)


def without_following(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of the environment ``env`` that makes no process follow: without :data:`ENV`,
    and without :data:`STARTUP_DIR` first on ``PYTHONPATH``."""
    out = {k: v for k, v in env.items() if k != ENV}
    paths = out.get("PYTHONPATH", "").split(os.pathsep)
    if paths[0] == STARTUP_DIR:
        rest = os.pathsep.join(paths[1:])
        if rest:
            out["PYTHONPATH"] = rest
        else:
            del out["PYTHONPATH"]
    return out


def following() -> dict[str, Any] | None:
    """The options this process's children are followed with (None: they are not)."""
    return _config


def stop_following() -> dict[str, Any] | None:
    """Processes started from now on are not followed; the options they were followed with."""
    global _config
    config, _config = _config, None
    os.environ.pop(ENV, None)
    return config


def command() -> tuple[str, ...]:
    """The command line recorded for this process."""
    return _command


def say(message: str) -> None:
    """A memlens message on file descriptor 2 (the program's streams are its own)."""
    _quietly(os.write, 2, (message + "\n").encode("utf-8", "replace"))


# -- children ---------------------------------------------------------------------------------


def start_child() -> None:
    """At a new interpreter's start-up (the start-up hook): trace this process when a
    followed run started it with this interpreter and this memlens. Never raises."""
    try:
        config = _decode(os.environ.get(ENV, ""))
        if config is None or not _same_interpreter(config):
            return
        code = _command_code().removeprefix("import sys; ")  # (3.14's fork server command)
        if code.startswith(_RESOURCE_TRACKERS):
            return
        argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
        command = ("python", *argv[1:])
        if _is_fork_server(code):
            enable(config, traced=False, command=command)  # its children are followed
            return
        _begin(config, config["parent"], command)
    except Exception as exc:  # noqa: BLE001 - the program must run whatever happens here
        say(f"memlens: this process is not followed: {exc}")


def _is_fork_server(code: str) -> bool:
    """Whether ``code`` (a ``-c`` argument) starts multiprocessing's fork server."""
    return code.removeprefix("import sys; ").startswith(_FORKSERVER)  # (3.14's has the import)


#: The signals that end a child: held while it starts being followed.
_ENDING = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _begin(config: dict[str, Any], parent: int, command: tuple[str, ...]) -> None:
    """Trace this process as a child of ``parent``: claim its run, start the tracer.

    SIGTERM, SIGHUP and SIGINT wait meanwhile (blocked in this thread, and so in memlens's
    threads started here: a process-directed signal then has no thread to go to): sent to a
    child that is still starting (a pool terminating a worker), one is delivered once the
    child has claimed its run, its handlers are in place and what writing the run needs is
    imported, so the child writes its run and dies by the signal. Handled earlier, it would
    write the run from the middle of an import (a "partially initialized module" error and no
    run), and die with a signal that is blocked (exit status 128 + N, not the signal).
    """
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING)
    try:
        _begin_held(config, parent, command)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _begin_held(config: dict[str, Any], parent: int, command: tuple[str, ...]) -> None:
    global _own, _finishing
    from memlens.errors import MemlensError
    from memlens.tracing import tracer

    _finishing = False  # a copy of a parent's that was writing its run as it forked
    own = _claim(config["folder"], parent, command)
    if own is None:
        return
    interval = config["checkpoint_interval_s"]
    try:
        tracer.start(
            **tracer.handed_on(config),
            checkpoint=own.run_path if interval > 0 else None,
            checkpoint_interval_s=interval,
            command=command,
        )
    except MemlensError as exc:
        own.release()
        say(f"memlens: this process is not followed: {exc}")
        return
    from memlens import _tracer

    paused = _tracer.set_thread_paused(True)  # what follows is memlens's work
    try:
        _own = own
        enable(config, traced=True, command=command)
        _watch_exits()
        # The run may have to be written from a signal handler, which can run while the
        # program is importing a module: what writing needs is imported now, whole.
        _import_writer()
    finally:
        _tracer.set_thread_paused(paused)


def _import_writer() -> None:
    """Imports what writing a run needs (a module half-imported at that moment, by this
    thread or by another one a fork left behind, would fail the write), with the ending
    signals held meanwhile: their handler writes the run, which these very imports would
    otherwise be in the middle of (a pool terminating a worker that is still starting)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING)
    try:
        import array  # noqa: F401
        import datetime  # noqa: F401
        import errno  # noqa: F401
        import fnmatch  # noqa: F401
        import re  # noqa: F401
        import site  # noqa: F401
        import stat  # noqa: F401
        import time  # noqa: F401

        from memlens import layout, model, source  # noqa: F401 - source: memlens.sha256 too
        from memlens.runfile import writer  # noqa: F401
        from memlens.tracing import runner  # noqa: F401
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def enable(config: dict[str, Any], traced: bool, command: tuple[str, ...]) -> None:
    """Follow this process's children from now on; they name this process (when traced) as
    their parent."""
    global _config, _traced, _command, _hooks_installed
    _config = config
    _traced = traced
    _command = command
    if traced:
        os.environ[ENV] = _encode({**config, "parent": os.getpid()})
    if not _hooks_installed:
        import atexit

        from memlens.tracing import tracer  # noqa: F401 - its atexit handler must run after ours

        os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)
        atexit.register(_at_exit)
        _hooks_installed = True


def _before_fork() -> None:
    """Before a fork: what a child needs to write its run is imported, whole. A module another
    thread is still importing when the process forks stays half-made in the child for good
    (that thread does not exist there); importing here waits for such an import to end."""
    if _config is None:
        return
    from memlens import _tracer

    paused = _tracer.set_thread_paused(True)  # memlens's work, not the program's
    try:
        _import_writer()
    except Exception:  # noqa: BLE001, S110 - the fork must happen whatever happens here
        pass
    finally:
        _tracer.set_thread_paused(paused)


def _after_fork_in_child() -> None:
    """In every child forked by a followed process: its own run starts (os.fork handler)."""
    global _own
    config = _config
    own, _own = _own, None
    if own is not None:
        own.forget()  # the parent's claim (POSIX locks are not inherited: only the descriptor)
    if config is None or _will_exec():
        return
    try:
        parent = os.getppid() if _traced else config["parent"]
        _begin(config, parent, own.command if own is not None else _command)
    except Exception as exc:  # noqa: BLE001 - the child must run whatever happens here
        say(f"memlens: this process is not followed: {exc}")


def _will_exec() -> bool:
    """Whether this fork is subprocess's, running ``preexec_fn`` before it runs another
    program (which, if it is Python, is followed as it starts)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_execute_child" and code.co_filename.endswith("subprocess.py"):
            return True
        frame = frame.f_back
    return False


def _claim(folder: str, parent: int, command: tuple[str, ...]) -> _Own | None:
    """Claim this process's run in ``folder``: ``<pid>.lock``, locked (POSIX lock) and holding
    the parent's id and the command, and the run file name beside it."""
    import fcntl

    from memlens.layout import process_run_name

    pid = os.getpid()
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    except OSError as exc:
        say(f"memlens: this process is not followed: cannot create {folder}: {exc.strerror}")
        return None
    # Locked under a temporary name, then linked to its name: the root never sees a claim
    # that is not locked yet.
    temporary = os.path.join(folder, f".{pid}.{os.urandom(6).hex()}.claim")
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temporary, flags, 0o666)
    except OSError as exc:
        say(f"memlens: this process is not followed: cannot write in {folder}: {exc.strerror}")
        return None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX)
        os.write(fd, f"{parent}\n{chr(0).join(command)}".encode("utf-8", "surrogateescape"))
        for n in range(1, 1000):
            name = process_run_name(pid, n)[: -len(".mlrun")]
            own = _Own(pid, parent, command, os.path.join(folder, name), fd)
            if os.path.lexists(own.run_path):
                continue  # an earlier process of this run had the same id
            try:
                os.link(temporary, own.lock_path)
            except FileExistsError:
                continue
            return own
    except OSError as exc:
        say(f"memlens: this process is not followed: {exc}")
    finally:
        _quietly(os.unlink, temporary)
    os.close(fd)
    return None


# -- a child's end ----------------------------------------------------------------------------


def _watch_exits() -> None:
    """Make every way this child can end write its run first: ``os._exit`` (wrapped) and
    SIGTERM / SIGHUP when their action is the default one (or memlens run's own handler,
    inherited from the root); interpreter exit is the atexit handler's."""
    from memlens.tracing import runner

    global _ending_handler
    os._exit = _exit_writing_run  # type: ignore[assignment]
    # The program sees the default action (runner.AsDefault): a handler of its own that
    # chains to the previous one behaves as under python.
    _ending_handler = runner.AsDefault(_on_ending_signal)
    runner._wrap_exec(_before_exec)
    watched = False
    for signum in runner.ENDING_SIGNALS:
        handler = signal.getsignal(signum)
        # The default action, or a memlens handler (this process's or, forked, its parent's).
        if runner.is_default(handler) or isinstance(handler, runner.AsDefault):
            try:
                signal.signal(signum, _ending_handler)
            except ValueError:  # not the main thread: the default action stays
                return
            watched = True
    if watched:
        _watch_signals()
        runner.guard_forks()  # its children's start-up must not lose these signals either


#: The handler of SIGTERM and SIGHUP while this child is traced (:func:`_on_ending_signal`).
_ending_handler: object = None

#: Seconds a followed child's main thread has to take a SIGTERM or SIGHUP (and write its
#: run) before it is ended by the signal's default action without its final run.
KICK_LIMIT_S = 2.0
#: How many times :func:`_on_ending_signal` was called (the watcher thread reads it).
_handled = 0


def _watch_signals() -> None:
    """Make sure a SIGTERM or SIGHUP reaches :func:`_on_ending_signal` (see
    :func:`memlens.tracing.runner.watch_signals`); a main thread that still has not taken it
    after :data:`KICK_LIMIT_S` seconds (busy in a long C call, which plain Python would not
    have waited for) is ended by the signal's default action."""
    _watch()
    if any(_is_fork_server(part) for part in _command):
        # A fork server's child: the wakeup descriptor is still the server's now (so no
        # thread of ours was started), and the child drops it (signal.set_wakeup_fd(-1))
        # before it runs the program's code. Watched again once it has: multiprocessing runs
        # its after-fork callbacks in the child after that. Without it, a pool terminating
        # this worker as it blocked on the pool's queue lock could send its SIGTERM just
        # before the wait began: the handler waited for a main thread that never woke, and
        # the pool for the worker (about 1 run in 200 under load).
        util = sys.modules.get("multiprocessing.util")
        if util is not None:
            _SERVED.pid = os.getpid()
            util.register_after_fork(_SERVED, _watch_served)


class _Served:
    """What a fork server's child registers its after-fork callback with (held here: the
    registry keeps its objects weakly), and the process that registered it."""

    __slots__ = ("__weakref__", "pid")

    def __init__(self) -> None:
        self.pid = 0


_SERVED = _Served()


def _watch_served(served: _Served) -> None:
    """In a fork server's child, once it has dropped the server's wakeup descriptor: watched
    again (not in its own children, which multiprocessing also runs this in: their start
    watched them)."""
    if served.pid == os.getpid() and _own is not None:
        _watch()


def _watch() -> None:
    from memlens.tracing import runner

    runner.watch_signals(_ending_handler, lambda: _handled, KICK_LIMIT_S)


def _before_exec(path: str, argv: Sequence[str], env: Mapping[str, str]) -> Exec:
    """``os.exec*`` in a followed child: its run is written first (it ends there); the
    program it becomes is followed as a new child, if it is Python."""
    from memlens.tracing.runner import Exec

    if os.access(path, os.X_OK):  # (execvp tries each folder of PATH in turn)
        _finish(None, True)
    return Exec(path, argv, env)


def _exit_writing_run(status: int, /) -> None:
    """``os._exit`` in a followed child: its run is written first."""
    try:
        _finish(status & 0xFF, True)
    finally:
        _real_exit(status)  # whatever happened while the run was written


def _on_ending_signal(signum: int, frame: types.FrameType | None) -> None:
    global _handled
    _handled += 1
    if _finishing:
        return  # the run is being written as the process ends: it ends as it was about to
    _finish(None, False)
    from memlens.tracing.runner import die_by

    die_by(signum)


def _at_exit() -> None:
    try:
        _finish(None, True)
    except BaseException:  # noqa: BLE001 - e.g. Ctrl-C: the process ends as it was about to
        return


#: Whether this child is writing its final run (set before anything else is done).
_finishing = False


def _finish(exit_code: int | None, complete: bool) -> None:
    """Write this child's final run (once; nothing in other processes).

    SIGINT, SIGTERM and SIGHUP are held meanwhile and then dropped: the process was ending
    anyway (a multiprocessing pool terminates a worker that is still writing its run as it
    leaves: without memlens it would have been gone already). The caller ends the process.
    """
    global _own, _finishing
    own = _own
    if own is None or own.pid != os.getpid() or _finishing:
        return
    _finishing = True  # from here, our handler holds SIGTERM and SIGHUP (see above)
    from memlens import _tracer

    _tracer.set_thread_paused(True)  # writing the run is memlens's work, not the program's
    from memlens.tracing import runner

    ending = runner.Ending(exit_code, complete, True)
    try:
        held = runner.hold_signals(ending)
    except ValueError:  # not the main thread: signals cannot be held here
        held = {}
    _own = None
    written = False
    try:
        written = _write(own, ending)
    except Exception as exc:  # noqa: BLE001 - the process must end as it would have
        say(f"memlens: cannot write {own.run_path}: {exc}")
    finally:
        runner.restore_signals(held)
        for signum, handler in held.items():
            if handler is _ending_handler:  # the run is written: they act as without memlens
                signal.signal(signum, signal.SIG_DFL)
        # Without a final run the claim stays: the root lists this process as incomplete.
        if written:
            own.release()
        else:
            own.forget()


def _write(own: _Own, ending: Ending) -> bool:
    """Stop tracing and write this child's final run; False when it could not be written."""
    from memlens.errors import MemlensError
    from memlens.model import ProcessInfo, replace
    from memlens.runfile import writer
    from memlens.tracing import tracer

    try:
        run = tracer.stop(command=own.command, exit_code=ending.exit_code, complete=ending.complete)
    except MemlensError:
        return False
    me = ProcessInfo(own.pid, own.parent, own.command, True, run.info.peak_traced_bytes)
    run = replace(run, info=replace(run.info, processes=(me,)))
    try:
        writer.write_final(run, own.run_path)
    except OSError as exc:
        say(f"memlens: cannot write {own.run_path}: {exc.strerror or exc}")
        return False
    return True


# -- helpers ----------------------------------------------------------------------------------


def _encode(config: dict[str, Any]) -> str:
    return marshal.dumps(config).hex()


def _decode(value: str) -> dict[str, Any] | None:
    """The options in :data:`ENV`, or None when it holds none of ours."""
    if not value:
        return None
    try:
        config: object = marshal.loads(bytes.fromhex(value))
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(config, dict) or config.keys() != _FIELDS.keys():
        return None
    checked: dict[str, Any] = config
    for key, types_ in _FIELDS.items():
        value_ = checked[key]
        if isinstance(value_, bool) and bool not in types_:
            return None
        if not isinstance(value_, types_):
            return None
    if not all(isinstance(p, str) for p in (*checked["include"], *checked["exclude"])):
        return None
    return checked


def _same_interpreter(config: dict[str, Any]) -> bool:
    from memlens._version import __version__

    return bool(
        config["memlens"] == __version__
        and config["hexversion"] == sys.hexversion
        and config["prefix"] == sys.prefix
    )


def _command_code() -> str:
    """The code of ``python -c CODE``; "" for other command lines."""
    argv = list(getattr(sys, "orig_argv", ()))
    if "-c" in argv:
        i = argv.index("-c")
        return argv[i + 1] if i + 1 < len(argv) else ""
    return ""


def _quietly(call: Callable[..., object], *args: object) -> None:
    """``call(*args)``, whose OSError does not matter (contextlib costs start-up time)."""
    try:
        call(*args)
    except OSError:
        return
