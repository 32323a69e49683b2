"""Running a script under ``memlens run`` in a subprocess: the one way the servers do it (the MCP
server's ``profile_script``, the language server's ``memlens.runFile``), and ``memlens attach``
to a running process the same way (:meth:`ProfiledProgram.attached`, the MCP server's
``attach_process``: SIGTERM detaches, and the run is written).

- *Its own run file*: named in the store before the program starts and given with ``-o``
  (``memlens run`` makes a run written into its store ``latest``), so the caller reads the run
  its program made, never one that another process put in the store meanwhile.
- *Its own process group* (a new session): stopping the program stops what it started too.
- *A clean stop*: SIGTERM to the group, so that ``memlens run`` writes what the program
  recorded (marked incomplete) and followed children write theirs; SIGKILL to the group only
  when it is still there after :data:`TERM_GRACE_S` seconds.

Standard library only; the output is read on threads, so a caller on an event loop waits for
the program on a thread of its own (:meth:`ProfiledProgram.wait` blocks).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from memlens.errors import MemlensError
from memlens.store import Store

#: After SIGTERM, how long the program has to write its run before SIGKILL.
TERM_GRACE_S = 10.0
#: Characters of each of the program's streams kept (the end): the tail a caller shows.
OUTPUT_TAIL = 4000
#: Once the program has ended, how long its output is still read: a process it started and left
#: running may hold the pipes open for good.
DRAIN_S = 5.0


class ProfiledProgram:
    """``memlens run`` of ``script`` (with ``args``) in the workspace ``root``, its run going to
    :attr:`run_path`, a new name in the workspace's store. ``sample_interval``: sampling mode
    with that mean interval in bytes (None: exact mode). ``report``: let ``memlens run`` print
    its report after the program's output. ``on_line`` is called with each line of output
    (stdout and stderr alike, without the newline), on a thread that reads the output."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        script: str,
        args: Sequence[str] = (),
        *,
        sample_interval: int | None = None,
        report: bool = False,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.root = Path(root)
        self.run_path = Store(self.root).new_run_path()
        self.command = [*self._memlens("run", sample_interval, report), script, *args]
        self._reset(on_line)

    @classmethod
    def attached(
        cls,
        root: str | os.PathLike[str],
        pid: int,
        duration_s: float,
        *,
        sample_interval: int | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> ProfiledProgram:
        """``memlens attach PID --duration S`` (Python 3.14+, docs/attach.md), its run going to
        :attr:`run_path` as a program's does; :meth:`stop` detaches early (the run is written)."""
        program = cls.__new__(cls)
        program.root = Path(root)
        program.run_path = Store(program.root).new_run_path(pid=pid)
        program.command = [
            *program._memlens("attach", sample_interval, report=False),
            "--duration",
            f"{duration_s:g}",
            str(pid),
        ]
        program._reset(on_line)
        return program

    def _memlens(self, command: str, sample_interval: int | None, report: bool) -> list[str]:
        out = [sys.executable, "-m", "memlens", command, "--dir", str(self.root)]
        out += ["-o", str(self.run_path)]
        if not report:
            out.append("--no-report")
        if sample_interval is not None:
            out += ["--sample", str(sample_interval)]
        return out

    def _reset(self, on_line: Callable[[str], None] | None) -> None:
        self.stopped = False
        self._on_line = on_line
        self._proc: subprocess.Popen[bytes] | None = None
        self._readers: list[threading.Thread] = []
        self._tails = {"stdout": "", "stderr": ""}

    def start(self) -> None:
        """Start the program (its input is empty); a MemlensError when it cannot start."""
        try:
            self._proc = subprocess.Popen(
                self.command,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=os.name == "posix",
            )
        except (OSError, ValueError) as exc:
            raise MemlensError(f"cannot start {self.command[0]}: {exc}") from None
        for name in self._tails:
            stream = getattr(self._proc, name)
            reader = threading.Thread(
                target=self._read, args=(name, stream), name=f"memlens-{name}", daemon=True
            )
            reader.start()
            self._readers.append(reader)

    def _read(self, name: str, stream: IO[bytes]) -> None:
        for raw in stream:
            text = raw.decode("utf-8", "replace")
            self._tails[name] = (self._tails[name] + text)[-OUTPUT_TAIL:]
            if self._on_line is not None:
                self._on_line(text.rstrip("\r\n"))
        stream.close()

    @property
    def pid(self) -> int:
        assert self._proc is not None, "not started"
        return self._proc.pid

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code (negative: ended by that signal) once the program has ended and its
        output is read; None when it is still running after ``timeout`` seconds."""
        assert self._proc is not None, "not started"
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        for reader in self._readers:
            reader.join(DRAIN_S)
        return code

    def stop(self) -> int:
        """Stop the program and what it started (SIGTERM, then SIGKILL after
        :data:`TERM_GRACE_S`); its exit code."""
        assert self._proc is not None, "not started"
        self.stopped = True
        self._signal(signal.SIGTERM)
        code = self.wait(TERM_GRACE_S)
        if code is None:
            self._signal(signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)
            code = self.wait()
        assert code is not None
        return code

    def kill(self) -> None:
        """End the program and what it started at once (SIGKILL), without waiting: no run is
        written. For a server that is shutting down."""
        if self._proc is not None and self._proc.returncode is None:
            self._signal(signal.SIGKILL if hasattr(signal, "SIGKILL") else signal.SIGTERM)

    def _signal(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        if os.name != "posix":  # pragma: no cover - no process groups
            self._proc.kill()
            return
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.killpg(self._proc.pid, sig)

    @property
    def stdout(self) -> str:
        """The end of what the program wrote on stdout (:data:`OUTPUT_TAIL` characters)."""
        return self._tails["stdout"]

    @property
    def stderr(self) -> str:
        """The end of what the program (and memlens run) wrote on stderr."""
        return self._tails["stderr"]

    def failure(self, code: int) -> str | None:
        """Why the program left no run, in one line (None when it left one): memlens run's own
        last message, or its exit code."""
        if self.run_path.is_file():
            return None
        said = [line for line in self.stderr.splitlines() if line.startswith("memlens: ")]
        if said:
            return said[-1].removeprefix("memlens: ")
        return f"exited with {code} and no run was written"
