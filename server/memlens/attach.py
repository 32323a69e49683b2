"""Attaching to a running Python process (``memlens attach``): the attaching half.

Python 3.14's ``sys.remote_exec`` (PEP 768) makes the target's main thread run a script at its
next safe point. The script is :mod:`memlens.tracing.bootstrap`, written with the attachment's
settings into a folder of its own (the *attachment folder*, in the target's ``/tmp`` as the
target sees it); it loads this memlens in the target from this process's own files and starts
:mod:`memlens.tracing.agent`, which answers in the folder and waits on a FIFO this process holds
open (the *lifeline*: ``stop`` detaches and writes the run; its end, even when this process dies,
detaches without one). See docs/attach.md for what is promised and what is refused.

This module never loads the tracer: it checks the target (:func:`describe`, from ``/proc``),
words every refusal in one line, sends the script, waits, and copies the target's run into the
store (each checkpoint too, so that ``latest`` follows an attachment as it does a run).
Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from memlens._version import __version__
from memlens.errors import MemlensError
from memlens.layout import point_latest_at, replace_file

#: ``sys.remote_exec`` came with this version.
REMOTE_EXEC_VERSION = (3, 14)
#: How long the target has to run the bootstrap (its main thread must run Python code).
DEFAULT_START_TIMEOUT_S = 10.0
#: How often the attachment folder is looked at while waiting.
POLL_S = 0.02
#: How often a new checkpoint is looked for (and copied into the store).
CHECKPOINT_POLL_S = 0.5
#: The attachment folder's files (see memlens.tracing.agent).
BOOTSTRAP, LIFELINE, STARTED, ERROR, DONE, WITHDRAWN, RUN = (
    "attach.py",
    "lifeline",
    "started",
    "error",
    "done",
    "withdrawn",
    "run.mlrun",
)
_PACKAGE = Path(__file__).resolve().parent
_VERSION_IN_NAME = re.compile(r"(?:^|/)(?:lib)?python(\d+)\.(\d+)")


def _python(version: Sequence[int]) -> str:
    return f"{version[0]}.{version[1]}"


class Process(NamedTuple):
    """A process as ``/proc`` shows it, and whether memlens can attach to it."""

    pid: int
    command: tuple[str, ...]
    user: str
    #: The Python version it runs (major, minor), when that can be told from outside.
    python: tuple[int, int] | None
    #: Why it cannot be attached (one line), or None when nothing against it is known.
    problem: str | None

    def as_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "command": list(self.command),
            "user": self.user,
            "python": None if self.python is None else _python(self.python),
            "attachable": self.problem is None,
            "problem": self.problem,
        }


def _read(path: str, limit: int = 1 << 20) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _user(uid: int) -> str:
    try:
        import pwd  # noqa: PLC0415 - not on every platform

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _python_of(pid: int) -> tuple[int, int] | None:
    """The Python version a process runs, from its executable's name or the libpython it
    mapped (``python3.14``, ``libpython3.14.so``); None when neither says."""
    with contextlib.suppress(OSError):
        found = _VERSION_IN_NAME.search(os.readlink(f"/proc/{pid}/exe"))
        if found:
            return int(found[1]), int(found[2])
    maps = _read(f"/proc/{pid}/maps", 16 << 20)
    mapped = re.search(rb"/libpython(\d+)\.(\d+)", maps or b"")
    if mapped:
        return int(mapped[1]), int(mapped[2])
    return None


def _remote_debug_disabled(pid: int) -> str | None:
    """How the process turned remote debugging off, when its command line or environment
    says so."""
    cmdline = (_read(f"/proc/{pid}/cmdline") or b"").split(b"\0")
    for i, arg in enumerate(cmdline):
        if arg == b"-X" and i + 1 < len(cmdline):
            arg = b"-X" + cmdline[i + 1]
        if arg.startswith((b"-Xdisable-remote-debug", b"-Xdisable_remote_debug")):
            return "-X disable-remote-debug"
    environ = _read(f"/proc/{pid}/environ") or b""
    for entry in environ.split(b"\0"):
        if entry.startswith(b"PYTHON_DISABLE_REMOTE_DEBUG=") and entry.partition(b"=")[2]:
            return "PYTHON_DISABLE_REMOTE_DEBUG is set in its environment"
    return None


def _ptrace_scope() -> int | None:
    raw = _read("/proc/sys/kernel/yama/ptrace_scope")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _parent(pid: int) -> int:
    status = (_read(f"/proc/{pid}/status") or b"").decode("utf-8", "replace")
    found = re.search(r"^PPid:\s*(\d+)", status, re.MULTILINE)
    return int(found[1]) if found else 0


def _descends_from_us(pid: int) -> bool:
    me, seen = os.getpid(), 0
    while pid > 1 and seen < 1000:
        pid, seen = _parent(pid), seen + 1
        if pid == me:
            return True
    return False


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first, start time 20th)."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw[raw.rfind(b")") + 2 :].decode("ascii", "replace").split()
    return fields if len(fields) > 19 else None


def _uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def describe(pid: int) -> Process:
    """What ``/proc`` tells of process ``pid`` (a MemlensError when there is none)."""
    if not sys.platform.startswith("linux"):
        raise MemlensError("memlens attach works on Linux only for now (docs/attach.md)")
    uid = _uid(pid)
    if uid is None:
        raise MemlensError(f"no process with id {pid}")
    raw = _read(f"/proc/{pid}/cmdline") or b""
    command = tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)
    python = _python_of(pid)
    return Process(pid, command, _user(uid), python, _problem(pid, uid, python))


def _problem(pid: int, uid: int, python: tuple[int, int] | None) -> str | None:
    """Why process ``pid`` cannot be attached, as far as can be told without trying."""
    here = sys.version_info[:2]
    if pid == os.getpid():
        return "that is memlens itself"
    if python is not None and python < REMOTE_EXEC_VERSION:
        return f"attaching needs Python 3.14 or newer: process {pid} runs Python {_python(python)}"
    if here < REMOTE_EXEC_VERSION:
        return _needs_newer_memlens(python)
    if python is not None and python != here:
        return (
            f"process {pid} runs Python {_python(python)}: attach with memlens installed for "
            f"Python {_python(python)} (this one runs on {_python(here)})"
        )
    disabled = _remote_debug_disabled(pid)
    if disabled is not None:
        return f"process {pid} has remote debugging turned off ({disabled})"
    if uid != os.geteuid() and os.geteuid() != 0:
        return f"process {pid} belongs to {_user(uid)}: attaching needs the same user, or root"
    return None


def _needs_newer_memlens(python: tuple[int, int] | None) -> str:
    here = _python(sys.version_info[:2])
    target = _python(python) if python is not None else "3.14 or newer"
    return (
        f"attaching needs Python 3.14 or newer (sys.remote_exec): this memlens runs on "
        f"Python {here}; run memlens attach from a memlens installed for the process's "
        f"Python ({target})"
    )


def python_processes() -> list[Process]:
    """The Python processes this user can see, in process id order (not this one, nor the
    one that started it): the editor's list to attach to."""
    if not sys.platform.startswith("linux"):
        return []
    skip = {os.getpid(), os.getppid()}
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit() or int(name) in skip:
            continue
        pid = int(name)
        uid = _uid(pid)
        python = _python_of(pid)
        if uid is None or python is None:
            continue
        raw = _read(f"/proc/{pid}/cmdline") or b""
        command = tuple(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)
        if not command:
            continue  # a kernel thread, or a process that is ending
        found.append(Process(pid, command, _user(uid), python, _problem(pid, uid, python)))
    return sorted(found)


# -- the attachment ------------------------------------------------------------------------------


class Options(NamedTuple):
    """How the target is traced (as ``memlens run``'s options)."""

    mode: str = "exact"
    sample_interval: int | None = None
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    libraries: bool = False
    native: bool = True
    timeline_interval_ms: float = 10.0
    checkpoint_interval_s: float = 5.0
    workspace_root: str = ""


class Started(NamedTuple):
    """What the target said when tracing started."""

    pid: int
    python: str
    #: Why C libraries' own allocations are not traced there ("" when they are).
    native_problem: str


class Ended(NamedTuple):
    """How an attachment ended: ``why`` is ``stop`` (detached), ``exit`` (the program exited
    while attached) or ``vanished`` (it ended without a word: killed); ``left`` lists what of
    memlens stayed in the process (nothing, normally)."""

    why: str
    problem: str
    left: tuple[str, ...]


class Attachment:
    """``memlens attach`` of process ``pid``: :meth:`start`, then :meth:`wait` and/or
    :meth:`stop`, then :meth:`copy_run` into the store; :meth:`close` always (it leaves
    nothing behind)."""

    def __init__(self, pid: int, options: Options) -> None:
        self.pid = pid
        self.options = options
        self.process = describe(pid)
        stat = _stat(pid)
        self._start_time = stat[19] if stat is not None else ""
        # The attachment folder: open (its descriptor, and its parent's), so that it stays at
        # hand when the target ends (a path through /proc/PID/root would not), and its path as
        # the target sees it.
        self._dir: int | None = None
        self._parent: int | None = None
        self._name = ""
        self._folder_there = ""
        self._lifeline: int | None = None
        self._started_at = 0.0
        self._copied: tuple[int, int] | None = None
        self.ended: Ended | None = None

    # -- starting

    def start(
        self, timeout_s: float = DEFAULT_START_TIMEOUT_S, waiting: Callable[[], None] | None = None
    ) -> Started:
        """Run the bootstrap in the target and wait until it traced (a one-line MemlensError
        when it cannot, or did not within ``timeout_s``; nothing is left in the target then).
        ``waiting`` is called once when the target keeps us waiting over a second."""
        if self.process.problem is not None:
            raise MemlensError(f"cannot attach to process {self.pid}: {self.process.problem}")
        self._make_folder()
        remote_exec = getattr(sys, "remote_exec", None)
        if remote_exec is None:  # pragma: no cover - _problem says so first
            raise MemlensError(_needs_newer_memlens(self.process.python))
        try:
            remote_exec(self.pid, os.path.join(self._folder_there, BOOTSTRAP))
        except (OSError, RuntimeError) as exc:
            self.close()
            raise MemlensError(f"cannot attach to process {self.pid}: {self._why(exc)}") from None
        self._started_at = time.monotonic()
        told = False
        try:
            while True:
                started = self._read(STARTED)
                if started is not None:
                    return self._started(started)
                error = self._read(ERROR)
                if error is not None:
                    self.close()
                    raise MemlensError(f"cannot attach to process {self.pid}: {error.strip()}")
                if not self.alive():
                    self.close()
                    raise MemlensError(f"process {self.pid} ended before memlens started in it")
                waited = time.monotonic() - self._started_at
                if waited > timeout_s:
                    self._withdraw()
                    raise MemlensError(
                        f"process {self.pid} ran no Python code for {timeout_s:g} s (its main "
                        "thread is waiting in a call such as sleep, a lock or a socket read); "
                        "nothing was started in it: try again while it runs"
                    )
                if waiting is not None and not told and waited > 1.0:
                    told = True
                    waiting()
                time.sleep(POLL_S)
        except KeyboardInterrupt:
            if self._lifeline is not None and self._read(STARTED) is None:
                self._withdraw()
            raise

    def _make_folder(self) -> None:
        """The attachment folder, in the target's /tmp as the target sees it (its mount
        namespace may differ: a service with a private /tmp), with the bootstrap and the
        lifeline; owned by the target's user when we are root."""
        root = f"/proc/{self.pid}/root"
        base = os.path.join(root, "tmp") if os.path.isdir(os.path.join(root, "tmp")) else ""
        try:
            folder = tempfile.mkdtemp(prefix=f"memlens-attach-{self.pid}-", dir=base or None)
            self._parent = os.open(os.path.dirname(folder), os.O_RDONLY | os.O_DIRECTORY)
            self._dir = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            self.close()
            raise MemlensError(
                f"cannot attach to process {self.pid}: cannot make a folder in its /tmp: "
                f"{exc.strerror or exc}"
            ) from None
        self._name = os.path.basename(folder)
        self._folder_there = folder[len(root) :] if base else folder
        try:
            script = _bootstrap_script(self._config())
            fd = os.open(BOOTSTRAP, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=self._dir)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(script)
            os.mkfifo(LIFELINE, 0o600, dir_fd=self._dir)
            uid = _uid(self.pid)
            if os.geteuid() == 0 and uid is not None and uid != 0:
                gid = os.stat(f"/proc/{self.pid}").st_gid
                os.chown(self._dir, uid, gid)
                for name in (BOOTSTRAP, LIFELINE):
                    os.chown(name, uid, gid, dir_fd=self._dir)
            # Read and write: opening a FIFO for writing alone would wait for a reader.
            self._lifeline = os.open(LIFELINE, os.O_RDWR, dir_fd=self._dir)
        except OSError as exc:
            self.close()
            raise MemlensError(
                f"cannot attach to process {self.pid}: {exc.strerror or exc}"
            ) from None

    def _config(self) -> dict[str, Any]:
        spec = importlib.util.find_spec("memlens._tracer")
        if spec is None or not spec.origin:
            raise MemlensError("the native tracer is missing: reinstall memlens (docs/install.md)")
        o = self.options
        absolute = [os.path.abspath(p) if os.sep in p else p for p in (*o.include, *o.exclude)]
        return {
            "folder": self._folder_there,
            "package": str(_PACKAGE),
            "extension": os.path.realpath(spec.origin),
            "cache_tag": sys.implementation.cache_tag,
            "version": __version__,
            "mode": o.mode,
            "sample_interval": o.sample_interval,
            "include": absolute[: len(o.include)],
            "exclude": absolute[len(o.include) :],
            "libraries": o.libraries,
            "native": o.native,
            "timeline_interval_ms": o.timeline_interval_ms,
            "checkpoint_interval_s": o.checkpoint_interval_s,
            "workspace_root": o.workspace_root,
        }

    def _why(self, exc: OSError | RuntimeError) -> str:
        """CPython's refusal, in words that say what to do."""
        text = " ".join(str(exc).split())
        if (
            isinstance(exc, ProcessLookupError)
            or getattr(exc, "errno", None) == errno.ESRCH
            or not self.alive()
        ):
            return "the process ended"
        if isinstance(exc, PermissionError):
            return self._not_permitted()
        if "not enabled" in text:
            how = _remote_debug_disabled(self.pid)
            return (
                "remote debugging is turned off in it ("
                + (
                    how
                    or "PYTHON_DISABLE_REMOTE_DEBUG, -X disable-remote-debug, or a Python "
                    "built --without-remote-debug"
                )
                + ")"
            )
        if "PyRuntime" in text or "debug offsets" in text:
            if self.process.python is not None:
                return f"no Python runtime of 3.14 or newer found in it (Python {_python(self.process.python)})"
            return "it is not a Python process (no Python runtime found in it)"
        if "Can't send commands" in text:  # CPython: another version than this Python's
            here = _python(sys.version_info[:2])
            return (
                f"it runs another Python version than this memlens (Python {here}): attach "
                "with memlens installed for the process's Python"
            )
        return text

    def _not_permitted(self) -> str:
        uid = _uid(self.pid)
        scope = _ptrace_scope()
        if uid is not None and uid != os.geteuid() and os.geteuid() != 0:
            return (
                f"not permitted: the process belongs to {_user(uid)} (attaching needs the "
                "same user, or root)"
            )
        if scope == 3:
            return "not permitted: attaching is disabled on this machine (kernel.yama.ptrace_scope = 3)"
        if scope == 2 and os.geteuid() != 0:
            return "not permitted: attaching needs root here (kernel.yama.ptrace_scope = 2)"
        if scope == 1 and os.geteuid() != 0 and not _descends_from_us(self.pid):
            return (
                "not permitted: only processes started by memlens itself may be attached here "
                "(kernel.yama.ptrace_scope = 1): use sudo, or "
                "sudo sysctl kernel.yama.ptrace_scope=0"
            )
        return (
            "not permitted (ptrace: the process is not dumpable, or a container or security "
            "module forbids it)"
        )

    def _started(self, text: str) -> Started:
        fields = dict(line.partition("=")[::2] for line in text.splitlines())
        self._started_at = time.monotonic()
        try:
            pid = int(fields.get("pid", ""))
        except ValueError:
            pid = self.pid
        return Started(pid, fields.get("python", ""), fields.get("native", ""))

    def _withdraw(self) -> None:
        """Give up on a bootstrap that has not run: it will find ``withdrawn`` (or the
        lifeline closed) and leave at once, removing the folder."""
        if self._dir is not None:
            with contextlib.suppress(OSError):
                os.close(os.open(WITHDRAWN, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=self._dir))
        self._close_lifeline()
        self._forget_folder()  # the bootstrap still needs its file: the target removes it

    # -- while attached

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started_at

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        stat = _stat(self.pid)
        if stat is None:
            return True  # no /proc: kill(0) said it is there
        # A zombie (ended, not yet reaped by its parent) is no longer running; another start
        # time is another process that got the same id.
        return stat[0] != "Z" and stat[19] == self._start_time

    def wait(
        self, duration_s: float | None, on_checkpoint: Callable[[], None] | None = None
    ) -> Ended | None:
        """Wait ``duration_s`` seconds after tracing started (None: until the process ends);
        how the attachment ended if the process ended meanwhile, else None. A new checkpoint
        calls ``on_checkpoint``."""
        next_look = 0.0
        while duration_s is None or self.elapsed_s < duration_s:
            ended = self._ended()
            if ended is not None:
                return ended
            if on_checkpoint is not None and time.monotonic() >= next_look:
                next_look = time.monotonic() + CHECKPOINT_POLL_S
                if self._new_checkpoint():
                    on_checkpoint()
            time.sleep(POLL_S if duration_s is None else min(POLL_S, duration_s))
        return None

    def _ended(self) -> Ended | None:
        done = self._read(DONE)
        if done is not None:
            fields: dict[str, list[str]] = {}
            for line in done.splitlines():
                key, _, value = line.partition("=")
                fields.setdefault(key, []).append(value)
            self.ended = Ended(
                (fields.get("why") or ["stop"])[0],
                (fields.get("problem") or [""])[0],
                tuple(fields.get("left", ())),
            )
            return self.ended
        if not self.alive():
            done = self._read(DONE)  # written just before it ended
            if done is not None:
                return self._ended()
            self.ended = Ended("vanished", "", ())
            return self.ended
        return None

    def _new_checkpoint(self) -> bool:
        if self._dir is None:
            return False
        try:
            st = os.stat(RUN, dir_fd=self._dir)
        except OSError:
            return False
        return (st.st_mtime_ns, st.st_size) != self._copied

    def stop(self, waiting: Callable[[], None] | None = None) -> Ended:
        """Ask the target to detach and write its run; how it ended (``waiting`` is called
        once if that takes over two seconds: a big run takes a while to build)."""
        if self.ended is not None:
            return self.ended
        if self._lifeline is not None:
            with contextlib.suppress(OSError):
                os.write(self._lifeline, b"stop\n")
        asked = time.monotonic()
        told = False
        while True:
            ended = self._ended()
            if ended is not None:
                return ended
            if waiting is not None and not told and time.monotonic() - asked > 2.0:
                told = True
                waiting()
            time.sleep(POLL_S)

    # -- the run

    def copy_run(self, out_path: str) -> bool:
        """Copy the run (or the latest checkpoint) the target wrote into ``out_path``
        (replaced whole); False when there is none."""
        if self._dir is None:
            return False
        try:
            source = os.open(RUN, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self._dir)
        except OSError:
            return False
        with open(source, "rb") as src:
            st = os.fstat(src.fileno())

            def fill(tmp: str) -> None:
                with open(tmp, "wb") as dst:
                    shutil.copyfileobj(src, dst)

            replace_file(out_path, fill)
        self._copied = (st.st_mtime_ns, st.st_size)
        return True

    def checkpoint_into(self, out_path: str, in_store: bool) -> str | None:
        """Copy a new checkpoint into ``out_path`` (``latest`` names it when it is in the
        store); a one-line problem, or None."""
        try:
            copied = self.copy_run(out_path)
        except OSError as exc:
            return f"cannot write {out_path}: {exc.strerror or exc}"
        if copied and in_store:
            return point_latest_at(out_path)
        return None

    # -- leaving

    def close(self) -> None:
        """Leave nothing behind: the lifeline closed (a target still attached detaches
        without a run), the attachment folder removed (unless a withdrawn bootstrap still
        needs it)."""
        self._close_lifeline()
        if self._dir is not None and self._parent is not None:
            with contextlib.suppress(OSError):
                for name in os.listdir(self._dir):
                    os.unlink(name, dir_fd=self._dir)
                os.rmdir(self._name, dir_fd=self._parent)
        self._forget_folder()

    def _forget_folder(self) -> None:
        for fd in (self._dir, self._parent):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._dir = self._parent = None

    def _close_lifeline(self) -> None:
        if self._lifeline is not None:
            with contextlib.suppress(OSError):
                os.close(self._lifeline)
            self._lifeline = None

    def _read(self, name: str) -> str | None:
        if self._dir is None:
            return None
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=self._dir)
        except OSError:
            return None
        with open(fd, "rb") as fh:
            raw = fh.read(64 * 1024)
        return raw.decode("utf-8", "replace")


def _bootstrap_script(config: dict[str, Any]) -> str:
    """The script the target runs: :mod:`memlens.tracing.bootstrap`'s text and the call."""
    text = (_PACKAGE / "tracing" / "bootstrap.py").read_text(encoding="utf-8")
    return f"{text}\n\nbootstrap({config!r})\n"
