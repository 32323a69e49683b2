"""The half of ``memlens attach`` that runs inside the attached process (see docs/attach.md).

:mod:`memlens.tracing.bootstrap` loads memlens here and calls :func:`begin` on the program's
main thread, at the safe point where ``sys.remote_exec`` ran it. ``begin`` starts the tracer
(marked ``attached``: what the program allocated before is not in the figures), answers the
attaching process in the attachment's folder, and returns at once: the program goes on.

The attachment's folder is the only channel, and it holds:

- ``lifeline``: a FIFO the attaching process holds open for writing. A thread of ours
  (``memlens-attach``, untraced, every signal blocked) waits on it: ``stop`` asks it to
  detach and write the run; the end of the file (the attaching process closed it, or died)
  detaches without a run and removes the folder.
- ``started`` or ``error``: written by ``begin`` (``error``: one line, why it did not start).
- ``run.mlrun``: the checkpoints, then the final run, written here; the attaching process
  copies it into its store.
- ``done``: written last, once the run is written and memlens has left the process.

Detaching stops the tracer (hooks, numpy's handler, the C-library interposition and the
``sys.monitoring`` tool go back as they were), unregisters this module's ``atexit`` handler and
the tracer's, closes the lifeline, and takes the ``memlens`` modules it loaded out of
``sys.modules``. A program that exits while attached writes its run from ``atexit``; one that
forks keeps the parent's attachment out of the child.
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import os
import sys

from memlens import _tracer
from memlens.errors import MemlensError, one_line
from memlens.tracing import tracer

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from typing import Any

#: The files of the attachment's folder (see the module's docstring).
RUN_FILE = "run.mlrun"
MODULES_PREFIX = "memlens."


def begin(config: dict[str, Any], lifeline: int, loaded_before: set[str]) -> str | None:
    """Start tracing this process for the attaching process of ``config`` (on the main
    thread, from the bootstrap); None once started, or why it cannot (nothing is left)."""
    if tracer.is_tracing() or _tracer.is_active():
        return (
            "memlens is already tracing this process (memlens run, memlens.profile or "
            "another memlens attach)"
        )
    agent = _Agent(config, lifeline, loaded_before)
    # memlens's own work on this thread is not the program's: paused until begin returns.
    paused = _tracer.set_thread_paused(True)
    try:
        return agent.start()
    finally:
        _tracer.set_thread_paused(paused)


class _Agent:
    def __init__(self, config: dict[str, Any], lifeline: int, loaded_before: set[str]) -> None:
        self.folder: str = config["folder"]
        self.config = config
        self.lifeline = lifeline
        self.loaded_before = loaded_before
        self.pid = os.getpid()
        self.command = list(getattr(sys, "orig_argv", None) or sys.argv)
        self.lock = _thread.allocate_lock()
        self.detached = False

    def start(self) -> str | None:
        config = self.config
        checkpoints = float(config["checkpoint_interval_s"])
        try:
            tracer.start(
                **tracer.handed_on(config),
                checkpoint=self.path(RUN_FILE) if checkpoints > 0 else None,
                checkpoint_interval_s=checkpoints or 5.0,
                command=self.command,
                workspace_root=config["workspace_root"],
                hidden=[self.path("attach.py")],
                attached=True,
            )
        except MemlensError as exc:
            return str(exc)
        atexit.register(self.at_exit)
        try:
            _thread.start_new_thread(self.watch, ())
        except RuntimeError as exc:
            atexit.unregister(self.at_exit)
            tracer.abandon()
            return f"cannot start memlens's thread: {exc}"
        native = _tracer.traces_native() or not config["native"]
        why = "" if native else _tracer.native_problem() or "not supported here"
        self.say("started", f"pid={self.pid}\npython={sys.version.split()[0]}\nnative={why}\n")
        return None

    def path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def say(self, name: str, text: str) -> None:
        """The file ``name`` of the folder, written whole (renamed into place)."""
        temporary = self.path(f".{name}")
        try:
            with open(temporary, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(temporary, self.path(name))
        except OSError:
            pass  # the attaching process sees this process end, or gives up waiting

    def watch(self) -> None:
        """The ``memlens-attach`` thread: waits on the lifeline, then detaches."""
        _tracer.set_thread_paused(True)
        _tracer.name_thread("memlens-attach")
        tracer.block_signals()
        try:
            said = os.read(self.lifeline, 64)
        except OSError:
            said = b""
        with contextlib.suppress(OSError):
            os.close(self.lifeline)  # only this thread reads it: its number is free again now
        self.detach("stop" if said.startswith(b"stop") else "gone")

    def at_exit(self) -> None:
        """The program exits while attached: its run is written all the same."""
        self.detach("exit")

    def detach(self, why: str) -> None:
        """Stop tracing; write the run unless the attaching process is gone; leave."""
        with self.lock:
            if self.detached or os.getpid() != self.pid:
                return  # done already, or a forked child's copy of the attachment
            self.detached = True
            # What memlens does from here on is not the program's (at exit, on its main thread).
            _tracer.set_thread_paused(True)
            problem = ""
            try:
                if why == "gone":
                    tracer.abandon()
                else:
                    self.write_run()
            except Exception as exc:  # noqa: BLE001 - said in `done`; the program goes on
                problem = one_line(exc)
            atexit.unregister(self.at_exit)
            atexit.unregister(tracer._stop_at_exit)  # (registered as it was imported)
            leftovers = _tracer.leftovers()
            if why != "exit":
                self.unload()
            if why == "gone":
                self.clear()
                return
            lines = [f"why={why}", f"problem={problem}"]
            lines += [f"left={what}" for what in leftovers]
            self.say("done", "\n".join(lines) + "\n")

    def write_run(self) -> None:
        run = tracer.stop(command=self.command, exit_code=None, complete=True)
        from memlens.runfile import writer  # noqa: PLC0415 - after the tracer stopped

        writer.write_final(run, self.path(RUN_FILE))

    def unload(self) -> None:
        """The memlens modules the bootstrap loaded leave ``sys.modules`` (the standard
        library's that run building used stay: the program may have imported them since)."""
        for name in [n for n in sys.modules if n == "memlens" or n.startswith(MODULES_PREFIX)]:
            if name not in self.loaded_before:
                sys.modules.pop(name, None)

    def clear(self) -> None:
        try:
            for name in os.listdir(self.folder):
                os.unlink(self.path(name))
            os.rmdir(self.folder)
        except OSError:
            pass
