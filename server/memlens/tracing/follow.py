"""Following child processes, the root's half: ``memlens run`` traces the processes its program
starts (what each of them does is :mod:`memlens.tracing.child`).

Before the program starts, :func:`follow` puts what its children inherit into the
environment; when it has ended, :func:`end_children` ends multiprocessing's children as Python
would at exit, and :func:`collect` waits a bounded time for the children that still hold
their claim, reads every run of the processes folder and merges them into the program's own
(:mod:`memlens.merge`).

Imported by ``memlens run`` before the program starts: it imports only ``os`` and ``sys`` and
the child's half at its top; the rest is imported when the program has ended.
"""

from __future__ import annotations

import os
import sys

from memlens.tracing import child
from memlens.tracing.child import STARTUP_DIR, say

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Sequence

    from memlens.model import ProcessInfo, Run


#: Set by a program replacing itself with a Python program (os.execv): the run file that the
#: `memlens run` it becomes goes on with.
CONTINUE_ENV = "MEMLENS_CONTINUE"

#: Seconds the children are waited for when a signal ended the program (SIGTERM, SIGHUP),
#: which plain python dies of at once: a signal sent to the whole process group ends them as
#: fast (their runs are written by then); one sent to the program alone leaves them running,
#: counted with their last checkpoint.
SIGNALLED_WAIT_S = 0.25


def follow(
    run_path: str,
    command: Sequence[str],
    mode: str,
    sample_interval: int | None,
    seed: int | None,
    include: Sequence[str],
    exclude: Sequence[str],
    libraries: bool,
    native: bool,
    gpu: bool,
    timeline_interval_ms: float,
    checkpoint_interval_s: float,
    holders: bool = True,
) -> bool:
    """Follow this process's children into the processes folder of ``run_path``, with these
    options (as :func:`memlens.tracing.tracer.start` takes them). False, after a one-line message,
    when that folder cannot be used. Call it before the program starts."""
    from memlens._version import __version__
    from memlens.layout import clear_processes, processes_folder

    folder = processes_folder(run_path)
    # A program that replaced itself (os.execv) and goes on with its run under a new `memlens
    # run` keeps what its first part and its children left there (keep_part).
    continued = os.environ.pop(CONTINUE_ENV, None) == run_path
    problem = None if continued else clear_processes(folder)
    if problem is not None:
        say(f"memlens: child processes are not followed: {problem}")
        return False
    config = {
        "memlens": __version__,
        "hexversion": sys.hexversion,
        "prefix": sys.prefix,
        "folder": folder,
        "parent": os.getpid(),
        "mode": mode,
        "sample_interval": sample_interval,
        "seed": seed,
        # Relative globs are the root's working directory's: children may be elsewhere.
        "include": [os.path.abspath(p) if os.sep in p else p for p in include],
        "exclude": [os.path.abspath(p) if os.sep in p else p for p in exclude],
        "libraries": libraries,
        "native": native,
        "gpu": gpu,
        "holders": holders,
        "timeline_interval_ms": float(timeline_interval_ms),
        "checkpoint_interval_s": float(checkpoint_interval_s),
    }
    child.enable(config, traced=True, command=tuple(command))
    paths = os.environ.get("PYTHONPATH", "")
    if paths.split(os.pathsep)[0] != STARTUP_DIR:
        os.environ["PYTHONPATH"] = STARTUP_DIR + (os.pathsep + paths if paths else "")
    return True


def keep_part(run: Run, run_path: str) -> None:
    """The program is about to replace itself with another program that goes on with the run
    ``run_path`` (os.execv): ``run``, its part so far, is kept in the processes folder as one
    process of the run (the same id as the part that follows), to be merged at the end."""
    from memlens.layout import process_run_name, processes_folder
    from memlens.model import ProcessInfo, replace
    from memlens.runfile import writer

    folder = processes_folder(run_path)
    os.makedirs(folder, exist_ok=True)
    pid = os.getpid()
    me = ProcessInfo(pid, os.getppid(), child.command(), True, run.info.peak_traced_bytes)
    for n in range(2, 1000):
        name = os.path.join(folder, process_run_name(pid, n))
        if not os.path.lexists(name) and not os.path.lexists(name[: -len(".mlrun")] + ".lock"):
            writer.write(replace(run, info=replace(run.info, processes=(me,))), name)
            return


def end_children() -> None:
    """The program has ended: end multiprocessing's children as Python would at exit.

    multiprocessing terminates its daemonic children (pool workers) and joins the others in an
    atexit handler, which runs after the run is written: done now, their runs are written
    before the root merges them (instead of after the wait for them).
    """
    if child.following() is None:
        return
    util = sys.modules.get("multiprocessing.util")
    exit_function = getattr(util, "_exit_function", None)
    if exit_function is None:
        return
    from memlens import _tracer

    _tracer.set_thread_paused(True)  # multiprocessing's shutdown is not the program's
    exit_function()


def collect(run: Run, run_path: str, wait_s: float) -> Run:
    """``run``, the program's own, merged with the runs of the processes it started (as
    they are in its processes folder; written there when they ended). Children still running
    are waited for up to ``wait_s`` seconds, then counted with their last checkpoint and
    listed as incomplete. The program's own run is written into the folder too, so that every
    process has its run there. ``run`` itself when no child was followed."""
    config = child.stop_following()  # processes started from now on are not merged
    if config is None:
        return run
    folder = config["folder"]
    if not os.path.isdir(folder):
        return run
    return merge_folder(run, folder, child.command(), _wait(folder, wait_s))[0]


def merge_folder(
    run: Run, folder: str, command: Sequence[str], claims: set[str] | None = None
) -> tuple[Run, list[Run]]:
    """``run``, this process's own (its command ``command``), merged with the runs in the
    processes folder ``folder`` (the processes whose names are in ``claims`` did not end:
    incomplete), and the runs read from it. The own run is written into the folder too, so
    that every process has its run there. ``run`` itself when the folder holds no process.
    ``memlens run`` merges the children it followed so, and ``pytest --memlens`` its
    pytest-xdist workers."""
    from memlens.errors import RunFileError
    from memlens.layout import process_run_name
    from memlens.merge import merge
    from memlens.model import ProcessInfo, replace
    from memlens.runfile import reader, writer

    claims = claims or set()
    runs: list[Run] = []
    processes: list[ProcessInfo] = []
    for name in _run_names(folder, claims):
        path = os.path.join(folder, name + ".mlrun")
        process_run: Run | None = None
        try:
            process_run = reader.read(path)
        except RunFileError as exc:
            if os.path.exists(path):
                say(f"memlens: {exc}")
        entry = _entry(name, folder, process_run, name not in claims)
        processes.append(entry)
        if process_run is not None:
            runs.append(process_run)
    if not processes:
        return run, runs
    root = ProcessInfo(os.getpid(), os.getppid(), tuple(command), True, run.info.peak_traced_bytes)
    own = replace(run, info=replace(run.info, processes=(root,)))
    try:
        writer.write(own, os.path.join(folder, process_run_name(os.getpid())))
    except OSError as exc:
        say(f"memlens: cannot write the program's own run into {folder}: {exc}")
    return merge([run, *runs], [root, *processes]), runs


def _wait(folder: str, wait_s: float) -> set[str]:
    """Wait until no child of the folder holds its claim, or ``wait_s`` seconds passed.
    Returns the names whose claim is still there (incomplete: no final run)."""
    import time

    from memlens.layout import claim_held

    deadline = time.monotonic() + wait_s
    while True:
        claims = {n[: -len(".lock")] for n in os.listdir(folder) if n.endswith(".lock")}
        running = [n for n in claims if claim_held(os.path.join(folder, n + ".lock"))]
        if not running or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    # A claim still held, or left behind by a process that died (SIGKILL, a crash).
    return {n[: -len(".lock")] for n in os.listdir(folder) if n.endswith(".lock")}


def _run_names(folder: str, claims: set[str]) -> list[str]:
    """The processes of the folder, by name (``<pid>`` or ``<pid>-<n>``), in the order they
    wrote their final run (when they ended); those without one (killed, still running) last."""
    names = set(claims)
    for n in os.listdir(folder):
        if n.endswith(".mlrun") and not n.startswith("."):
            names.add(n[: -len(".mlrun")])
    names.discard(str(os.getpid()))

    def order(name: str) -> tuple[float, str]:
        try:
            return (os.stat(os.path.join(folder, name + ".mlrun")).st_ctime, name)
        except OSError:
            return (float("inf"), name)

    return sorted(names, key=order)


def _entry(name: str, folder: str, run: Run | None, complete: bool) -> ProcessInfo:
    """The process ``name`` of the folder as the merged run lists it."""
    from memlens.model import ProcessInfo, replace

    peak = run.info.peak_traced_bytes if run is not None else 0
    if complete and run is not None and len(run.info.processes) == 1:
        return replace(run.info.processes[0], complete=True, peak_traced_bytes=peak)
    # A claim without a final run: who it was is in the claim itself.
    pid, parent, command = _read_claim(os.path.join(folder, name + ".lock"), name)
    return ProcessInfo(pid, parent, command, False, peak)


def _read_claim(lock_path: str, name: str) -> tuple[int, int, tuple[str, ...]]:
    """(pid, parent pid, command) written into a claim when the process started."""
    from memlens.layout import open_regular

    pid = int(name.split("-")[0]) if name.split("-")[0].isdigit() else 0
    try:
        fd = open_regular(lock_path, follow_links=False)
        try:
            data = os.read(fd, 65536)
        finally:
            os.close(fd)
        head, _, rest = data.decode("utf-8", "surrogateescape").partition("\n")
        return pid, int(head), tuple(rest.split("\0")) if rest else ()
    except (OSError, ValueError):
        return pid, 0, ()
