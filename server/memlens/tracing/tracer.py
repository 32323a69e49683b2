"""The tracer façade: start/stop the native tracer and turn its snapshot into a :class:`Run`.

The native module records a call tree whose nodes are (parent, code object, instruction
offset) with self figures. Here, once per run, we:

1. resolve each distinct (code, offset) to (file, line, function) with the code object's line
   table (never per allocation);
2. apply the include/exclude filters: a frame whose file does not pass is transparent, and an
   allocation is charged to the innermost frame that passes (so by default an allocation inside
   the standard library is charged to the library's line, and with ``--include 'myproj/*'`` to
   the project line that called it). memlens's own files never pass;
3. collapse the tree onto lines (filtered node = (filtered parent, file, line)) and compute
   inclusive figures per line and per function, counting each stack once per line even under
   recursion;
4. record each file's source text and hash, so figures can be re-mapped after edits.
"""

from __future__ import annotations

import atexit
import os
import sys
import time

from memlens.errors import MemlensError
from memlens.tracing import cuda


def _no_tracer(exc: ImportError) -> str:
    """The one line that says why this Python cannot run the native tracer, and what would."""
    import sysconfig

    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return (
            f"cannot trace a free-threaded Python ({version}t) yet: run the program with the "
            f"regular build (python{version}); memlens show, diff and the editor work here"
        )
    return f"the native tracer is missing or broken ({exc}): reinstall memlens (docs/install.md)"


try:
    from memlens import _tracer
except ImportError as _exc:
    raise MemlensError(_no_tracer(_exc)) from None

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import types
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    from memlens.model import HeldBy, Run, RunInfo, SourceFile

# Only what start() needs is imported at module level: `memlens run` imports this module
# before the profiled program starts, so every import here is start-up overhead. The rest
# (model, hashing, line tables) is imported by _build_run() after tracing stopped.

#: Default mean sampling interval (bytes) for sampling mode; see docs/how-it-works.md.
DEFAULT_SAMPLE_INTERVAL = 128 * 1024

#: The options of :func:`start` that a run hands on, as plain values, to the processes it
#: follows (:mod:`memlens.tracing.follow`) and to one it attaches to (:mod:`memlens.attach`).
HANDED_ON = (
    "mode",
    "sample_interval",
    "seed",
    "include",
    "exclude",
    "libraries",
    "native",
    "gpu",
    "holders",
    "timeline_interval_ms",
)


def handed_on(config: Mapping[str, Any]) -> dict[str, Any]:
    """The options of :data:`HANDED_ON` that ``config`` has (those it leaves out stay
    :func:`start`'s defaults), as keywords of :func:`start`."""
    return {name: config[name] for name in HANDED_ON if name in config}


#: memlens's own files (this package's parent): never charged.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
_RUNPY = os.path.realpath(getattr(sys.modules.get("runpy"), "__file__", "") or "runpy.py")


class _Session:
    __slots__ = (
        "argv",
        "attached",
        "exclude",
        "hidden",
        "holders",
        "include",
        "libraries",
        "mode",
        "pid",
        "sample_interval",
        "save_to",
        "seed",
        "sources",
        "started",
        "workspace_root",
    )

    def __init__(
        self,
        mode: str,
        sample_interval: int | None,
        include: tuple[str, ...],
        exclude: tuple[str, ...],
        libraries: bool,
        hidden: tuple[str, ...],
        seed: int | None = None,
        workspace_root: str = "",
        attached: bool = False,
        sources: Mapping[str, tuple[str, str]] | None = None,
        holders: bool = True,
    ) -> None:
        self.mode = mode
        self.attached = attached
        self.sources = dict(sources or {})
        self.holders = holders
        self.workspace_root = workspace_root
        self.save_to: str | None = None  # the run file in the store (start's ``save``)
        self.seed = seed
        self.libraries = libraries
        self.hidden = hidden
        self.sample_interval = sample_interval
        self.include = include
        self.exclude = exclude
        self.pid = os.getpid()
        self.started = time.time()  # seconds since the epoch (UTC)
        self.argv = list(sys.argv)


_session: _Session | None = None
_last_saved: str | None = None


def is_tracing() -> bool:
    """True while this process is being traced."""
    return _session is not None and bool(_tracer.is_active())


def start(
    mode: str = "exact",
    sample_interval: int | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    timeline_interval_ms: float = 10.0,
    seed: int | None = None,
    libraries: bool = False,
    hidden: Iterable[str] = (),
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_interval_s: float = 5.0,
    command: Sequence[str] | None = None,
    watch_exits: bool = True,
    native: bool = True,
    on_checkpoint: Callable[[], None] | None = None,
    workspace_root: str = "",
    attached: bool = False,
    sources: Mapping[str, tuple[str, str]] | None = None,
    save: bool | str | os.PathLike[str] = False,
    gpu: bool = True,
    holders: bool = True,
    track_reuse: bool = True,
    amend: Callable[[RunInfo], RunInfo] | None = None,
) -> None:
    """Install the allocator hooks and start recording every thread of this process.

    ``mode`` is ``"exact"`` (every allocation) or ``"sampling"`` (each byte sampled with
    probability 1/``sample_interval``; default :data:`DEFAULT_SAMPLE_INTERVAL`). A sampling
    run with the same ``seed`` (1 to :data:`MAX_SEED`) repeats its samples; without one, a
    seed is drawn; either is recorded as the run's ``seed``. ``include`` /
    ``exclude`` are glob patterns matched against absolute file names (as PEP 454's filters).
    Frames of the standard library and installed packages are transparent (their allocations
    are charged to the calling line of your code) unless ``libraries`` is true.

    With ``checkpoint``, a background thread writes the run so far to that path every
    ``checkpoint_interval_s`` seconds, the first ones sooner (after 1 s, then waits doubling up
    to the interval), and less often when writing one takes more than 2% of the time between
    them (atomically, marked incomplete), so that a program that
    is killed (SIGKILL) or crashes in native code still leaves a usable run. The thread's own
    allocations are not traced; ``on_checkpoint`` is called (in that thread) after each
    checkpoint written; ``amend``, when given, is called (in that thread too) with each
    checkpoint's header and returns the header to record (the pytest plugin adds the
    per-test figures so far). ``hidden`` names files (e.g. a launcher script) that are never charged,
    like memlens's own. ``native=False`` leaves out what C libraries allocate themselves
    (malloc & co. and anonymous mmap, charged to the Python line that made them do it).
    ``watch_exits=False`` turns off the frame-exit monitoring that keeps deep stacks cheap on
    Python 3.12+ (for comparisons; figures are the same either way). ``attached``: the
    process was already running (``memlens attach``), as its run's header says. ``sources``
    maps code file names that have no file to read (notebook cells: ``<ipython-input-5-...>``)
    to the name and text the run records for them; they are always charged, as the program's
    own. With ``save`` (True: the store of the working directory; a path: the store rooted
    there), :func:`stop` writes the run into the store (``.memlens/runs/``, named as ``memlens
    run`` names its runs, when tracing started) and points ``latest`` at it, where ``memlens
    show`` and the editor find it; the store's root is the run's workspace root.
    ``gpu=False`` leaves out PyTorch's CUDA memory (:mod:`memlens.tracing.cuda`), recorded by
    default from when the program initialises CUDA.
    ``track_reuse=False`` leaves objects that CPython makes in reused blocks (its free lists) on the line that first
    allocated the block, as before Python 3.13 (for comparisons). ``holders=False``: the run
    does not record what holds its live lines (see :func:`stop`).
    """
    global _session, _last_saved
    if mode not in ("exact", "sampling"):
        raise MemlensError(f"unknown mode {mode!r} (use 'exact' or 'sampling')")
    if checkpoint is not None:
        _check_checkpoint_interval(checkpoint_interval_s)
    interval = 0
    if mode == "sampling":
        interval = int(sample_interval or DEFAULT_SAMPLE_INTERVAL)
        if interval <= 0:
            raise MemlensError("the sampling interval must be a positive number of bytes")
        seed = sampling_seed(seed)
    else:
        seed = None  # exact mode draws nothing
    if _session is not None and _session.pid != os.getpid():
        # A child forked while its parent traced starts a run of its own: its copy of the
        # parent's session is dropped (the native tracer drops the parent's figures).
        _session = None
        _unwatch_imports()
    if _session is not None:
        raise MemlensError("memlens is already tracing this process")
    save_to = None
    if save is not False:
        root = os.path.realpath("." if save is True else os.fspath(save))
        save_to = _store_run_path(root)
        workspace_root = workspace_root or root
    session = _Session(
        mode=mode,
        sample_interval=interval or None,
        include=tuple(include),
        exclude=tuple(exclude),
        libraries=libraries,
        hidden=tuple(os.path.realpath(h) for h in hidden),
        seed=seed,
        workspace_root=workspace_root,
        attached=attached,
        sources=sources,
        holders=holders,
    )
    session.save_to = save_to
    _last_saved = save_to
    # What memlens does from here until it returns to the program is not the program's: this
    # thread is paused across it (on 3.12+, the objects of the calls that share sys.monitoring,
    # the checkpoint thread's start: 2-20 KB that were charged to the line that started tracing).
    paused = _tracer.set_thread_paused(True)
    try:
        try:
            _tracer.start(
                mode, interval, seed or 0, timeline_interval_ms, watch_exits, native, track_reuse
            )
        except RuntimeError as exc:
            raise MemlensError(str(exc)) from None
        _session = session
        cuda.enabled = gpu
        _watch_imports()
        _share_monitoring()
        if checkpoint is not None:
            _start_checkpoints(
                session, os.fspath(checkpoint), checkpoint_interval_s, command, on_checkpoint, amend
            )
    finally:
        _tracer.set_thread_paused(paused)


def start_checkpoints(
    path: str,
    interval_s: float = 5.0,
    command: Sequence[str] | None = None,
    on_checkpoint: Callable[[], None] | None = None,
) -> None:
    """From now on, write the run so far to ``path`` every ``interval_s`` seconds, as
    :func:`start`'s ``checkpoint`` does, in a trace started without one (a pytest-xdist worker
    learns where its run goes after its tracing started)."""
    if _session is None:
        raise MemlensError("memlens is not tracing")
    if _checkpointer is not None:
        raise MemlensError("memlens is writing checkpoints already")
    _check_checkpoint_interval(interval_s)
    _start_checkpoints(_session, path, interval_s, command, on_checkpoint)


def _check_checkpoint_interval(seconds: float) -> None:
    """A checkpoint interval must be a positive number of seconds: 0 would write checkpoints
    back to back, a negative one stop the thread that writes them (or block it for good)."""
    if not (isinstance(seconds, (int, float)) and 0 < seconds < float("inf")):
        raise MemlensError(
            f"the checkpoint interval must be a positive number of seconds, not {seconds!r}"
        )


#: Seeds are 1 to 2**64 - 1 (the native tracer reads 0 as "seed from the clock").
MAX_SEED = 2**64 - 1


def sampling_seed(seed: int | None) -> int:
    """The seed a sampling run uses: ``seed``, or one drawn now (recorded in the run, so the
    run can be repeated)."""
    if seed is None:
        return int.from_bytes(os.urandom(4), "little") or 1
    if isinstance(seed, bool) or not isinstance(seed, int) or not 1 <= seed <= MAX_SEED:
        raise MemlensError(f"the seed must be an integer from 1 to {MAX_SEED}")
    return seed


def stop(
    command: Sequence[str] | None = None,
    exit_code: int | None = 0,
    complete: bool = True,
    holders: bool | None = None,
) -> Run:
    """Stop recording and return the run. Raises MemlensError when not tracing.

    With ``holders`` (by default, as :func:`start` was told), the run records what holds the lines live at its end
    (:mod:`memlens.tracing.holders`): found now, while the program's objects are still alive
    and the tracer still knows which line each block belongs to (the snapshot is taken first,
    and this thread is paused: the search is not the program's).

    In a child process forked while tracing, the child was never traced (unless it started a
    run of its own): this raises too.
    """
    global _session
    session = _session
    if session is None:
        raise MemlensError("memlens is not tracing")
    # (Paused first: what memlens does from here is not the program's, as in start().)
    paused = _tracer.set_thread_paused(True)
    _session = None
    try:
        _stop_checkpoints()
    except BaseException:
        _tracer.set_thread_paused(paused)
        raise
    if session.pid != os.getpid() or _tracer.is_forked_child():
        try:
            _tracer.stop()
        finally:
            _tracer.set_thread_paused(paused)
        _unwatch_imports()
        _unshare_monitoring()
        raise MemlensError("this process was forked from a traced parent and was not traced")
    try:
        _tracer.finish()  # the run's time and timeline end with the program
        _tracer.freeze()  # what served to record more goes before the last snapshot
        snap = _tracer.snapshot()
        parts = _collapse(snap, session)
        wanted = session.holders if holders is None else holders
        held = _holders(parts, float(snap.info["duration_s"]), session.mode) if wanted else ()
    finally:
        try:
            _tracer.stop()
        finally:
            # (Given back whatever happens: a paused thread records nothing in a later run.)
            _tracer.set_thread_paused(paused)
    _unwatch_imports()
    _unshare_monitoring()
    gpu = cuda.take()  # PyTorch's CUDA memory, once the tracer has stopped (untraced)
    if _tracer.object_reuse() == "lost":
        print(
            "memlens: another tool (tracemalloc?) replaced memlens's reference tracer during the "
            "run: objects CPython reused from its free lists after that stay charged to the line "
            "that first allocated them",
            file=sys.stderr,
        )
    _tracer.reset()  # the snapshot holds what the run needs: free the tracer's tables first
    run = _make_run(parts, snap, session, command, exit_code, complete, held, gpu)
    if session.save_to is not None:
        _save(run, session.save_to)
    return run


def _holders(parts: _Parts, duration_s: float, mode: str) -> tuple[HeldBy, ...]:
    """What holds the run's live lines; nothing (and one line saying why) if the search fails:
    it never costs the run."""
    from memlens.tracing import holders

    try:
        return holders.find(parts.built, parts.paths, duration_s, sampling=mode == "sampling")
    except Exception as exc:  # noqa: BLE001 - the run is written whatever happens here
        print(f"memlens: what holds the live lines was not recorded: {exc}", file=sys.stderr)
        return ()


def _store_run_path(root: str) -> str:
    """A new run file in the store rooted at ``root`` (``start``'s ``save``)."""
    from memlens.layout import RUNS_DIR, STORE_DIR, new_run_path

    runs_dir = os.path.join(root, STORE_DIR, RUNS_DIR)
    try:
        os.makedirs(runs_dir, exist_ok=True)
    except OSError as exc:
        raise MemlensError(f"cannot write {runs_dir}: {exc.strerror or exc}") from None
    return new_run_path(runs_dir)


def _save(run: Run, path: str) -> None:
    """Write ``run`` into the store at ``path`` and point ``latest`` at it."""
    from memlens.layout import point_latest_at
    from memlens.runfile import writer

    try:
        writer.write_final(run, path)
    except (OSError, ValueError) as exc:
        raise MemlensError(
            f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    problem = point_latest_at(path)
    if problem is not None:
        print(f"memlens: {problem}", file=sys.stderr)


def abandon() -> None:
    """Stop recording and drop what was recorded, without making a run (no-op when not
    tracing)."""
    global _session
    if _session is None:
        return
    _session = None
    _stop_checkpoints()
    _tracer.stop()
    _unwatch_imports()
    _unshare_monitoring()
    cuda.take()  # recording off
    _tracer.reset()


# sys.monitoring (3.12+): the tracer holds a tool id (to learn of frame exits), which the
# program may ask for too.
#: sys.monitoring's functions whose first argument is a tool id.
_MONITORING_CALLS = (
    "use_tool_id",
    "free_tool_id",
    "clear_tool_id",
    "get_tool",
    "register_callback",
    "set_events",
    "get_events",
    "set_local_events",
    "get_local_events",
)
#: The functions of sys.monitoring replaced while tracing, by name: (original, replacement).
_monitoring_originals: dict[str, tuple[Any, Any]] = {}


def _share_monitoring() -> None:
    """Let the program use every sys.monitoring tool id, the one memlens holds included.

    Each function of sys.monitoring that takes a tool id is wrapped (``_tracer.monitoring_call``,
    a C function: the wrapper adds no event of its own to what the program monitors): given
    the id memlens holds, it first moves memlens to another free id (with none left, the
    tracer reads whole stacks from then on), then does what it does, as without memlens (the
    id is free by then: ``get_tool`` says None, ``use_tool_id`` takes it).
    """
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None or _monitoring_originals or _tracer.monitoring_tool() < 0:
        return
    if TYPE_CHECKING:
        from functools import partial
    else:
        from _functools import partial  # the C core: functools itself imports more

    for name in _MONITORING_CALLS:
        real = getattr(monitoring, name, None)
        if real is not None:
            ours = partial(_tracer.monitoring_call, real)
            _monitoring_originals[name] = (real, ours)
            setattr(monitoring, name, ours)
    if sys.version_info[:2] == (3, 13):
        # CPython 3.13 only: when a code object has local events of another tool (ours),
        # turning on opcode tracing in one of its frames (what pdb does at breakpoint()) misses
        # that frame's next instruction, and the debugger stops one line late. A debugging
        # session is no place for speed: from breakpoint() on, memlens stops watching.
        real = sys.breakpointhook
        ours = partial(_tracer.unwatched_call, real)
        _monitoring_originals["breakpointhook"] = (real, ours)
        sys.breakpointhook = ours


def _unshare_monitoring() -> None:
    monitoring = getattr(sys, "monitoring", None)
    for name, (real, ours) in _monitoring_originals.items():
        where = sys if name == "breakpointhook" else monitoring
        if getattr(where, name, None) is ours:  # (unless the program replaced it since)
            setattr(where, name, real)
    _monitoring_originals.clear()


# Checkpoints: a daemon thread, untraced, that snapshots while the program runs.
#: (stop lock, done lock, writing lock) of the running checkpoint thread, or None.
_checkpointer: Any = None
#: The wait after a checkpoint is at least this many times the CPU time writing it took.
_CHECKPOINT_COST_FACTOR = 50

#: The first checkpoint comes this many seconds after the start (or after the interval, if
#: shorter); each wait then doubles up to the interval. A program that the kernel's OOM killer
#: (or anyone) kills with SIGKILL a few seconds in, before a first checkpoint at the full
#: interval, would otherwise leave no run at all.
_FIRST_CHECKPOINT_S = 1.0

#: Before a first checkpoint has measured what one costs: the CPU time a checkpoint takes per
#: call-tree node (building and writing a run of 2^17 call paths, ~390,000 nodes, takes
#: ~0.3 s). A run that big is not checkpointed before the interval: at 1 s its checkpoint would
#: cost far more than 2% of the time.
_CHECKPOINT_S_PER_NODE = 1e-6


def _start_checkpoints(
    session: _Session,
    path: str,
    interval: float,
    command: Sequence[str] | None,
    on_checkpoint: Callable[[], None] | None = None,
    amend: Callable[[RunInfo], RunInfo] | None = None,
) -> None:
    # _thread rather than threading: no extra import in the profiled program at start-up.
    import _thread

    global _checkpointer
    stop_lock = _thread.allocate_lock()
    stop_lock.acquire()  # released by _stop_checkpoints()
    # Held while a checkpoint is written: a fork waits for it, so that no child starts with
    # SQLite's (or the allocator's) locks held by a thread that does not exist in the child.
    writing = _thread.allocate_lock()
    done_lock = _thread.allocate_lock()
    done_lock.acquire()  # released by the thread when it ends
    ready_lock = _thread.allocate_lock()
    ready_lock.acquire()  # released by the thread once it waits

    def loop() -> None:
        _tracer.set_thread_paused(True)
        _tracer.name_thread("memlens-checkpt")
        block_signals()
        ramp = wait = min(interval, _FIRST_CHECKPOINT_S)
        started = time.monotonic()
        measured = False
        ready_lock.release()
        try:
            while not stop_lock.acquire(timeout=wait):
                if not _tracer.is_active():
                    return
                ramp = min(interval, 2 * ramp)
                if not measured:
                    elapsed = time.monotonic() - started
                    guess = _CHECKPOINT_COST_FACTOR * _CHECKPOINT_S_PER_NODE * _tracer.node_count()
                    if elapsed < min(interval, guess):
                        wait = max(0.01, min(ramp, interval - elapsed))
                        continue
                began = time.thread_time()
                with writing:
                    written = write_checkpoint(session, path, command, amend)
                if written and on_checkpoint is not None:
                    on_checkpoint()
                # A big run takes a while to build and write, mostly holding the GIL: space
                # checkpoints so that they cost at most ~2% of the program's time.
                cost = time.thread_time() - began
                measured = True
                wait = max(ramp, _CHECKPOINT_COST_FACTOR * cost)
        finally:
            done_lock.release()

    _checkpointer = (stop_lock, done_lock, writing)
    _thread.start_new_thread(loop, ())
    # The thread's start-up allocations count against sampling's shared countdown: done while
    # this thread waits, they always fall at the same point, so a seeded run repeats exactly.
    ready_lock.acquire()


def block_signals() -> None:
    """The calling thread (one of memlens's own) never takes the program's signals: a signal
    sent to the process goes to a thread that does not block it, and Python runs handlers in
    the main thread only when that thread looks, which one waiting in a C call (a lock, a
    read) would not do: a SIGTERM that plain Python dies of would go unnoticed."""
    if TYPE_CHECKING:
        import signal
    else:
        import _signal as signal  # the C core: `import signal` loads enum & co.

    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())


def write_checkpoint(
    session: _Session,
    path: str,
    command: Sequence[str] | None,
    amend: Callable[[RunInfo], RunInfo] | None = None,
) -> bool:
    """Write the run so far to ``path`` (incomplete, marked a checkpoint), its header passed
    through ``amend``; False when it could not be written. The caller's thread must be
    paused."""
    from memlens.model import replace
    from memlens.runfile import writer

    snap = _tracer.snapshot()
    run = _build_run(snap, session, command, None, False)
    run = replace(run, info=replace(run.info, checkpoint=True))
    if amend is not None:
        run = replace(run, info=amend(run.info))
    try:
        writer.write(run, path)
    except OSError as exc:
        print(f"memlens: cannot write checkpoint {path}: {exc}", file=sys.stderr)
        return False
    return True


def _stop_checkpoints() -> None:
    global _checkpointer
    if _checkpointer is not None:
        stop_lock, done_lock, _writing = _checkpointer
        _checkpointer = None
        stop_lock.release()
        done_lock.acquire()  # the thread has finished any checkpoint it was writing


#: The writing lock held across a fork (os.register_at_fork handlers, in the forking thread).
_held_for_fork: Any = None


def _before_fork() -> None:
    global _held_for_fork
    if sys.version_info >= (3, 12):
        _fork_warning_as_without_memlens()
    if _checkpointer is not None:
        _held_for_fork = _checkpointer[2]
        _held_for_fork.acquire()


#: Python 3.12+ warns at os.fork when the process has more than one thread.
_FORK_WARNING = r"This process \(pid=\d+\) is multi-threaded, use of fork\(\) may lead to deadlocks"


def _fork_warning_as_without_memlens() -> None:
    """Before a fork (3.12+): Python's warning that the process is multi-threaded is given
    as without memlens. Its own threads (named ``memlens-...``) do not count: while the
    program's threads are fewer than two, a filter ignores the warning; otherwise it goes.
    Linux (elsewhere Python does not count threads the same way: nothing changes). Every
    process memlens traces, whoever started the tracer (``memlens run``, ``pytest --memlens``,
    ``memlens.profile()``), forks so."""
    paused = _tracer.set_thread_paused(True)  # memlens's work, in the program's thread
    try:
        program = _program_threads()
        if program is None:
            return
        import warnings

        ours = [f for f in warnings.filters if getattr(f[1], "pattern", None) == _FORK_WARNING]
        if program < 2 and not ours:
            warnings.filterwarnings("ignore", _FORK_WARNING, DeprecationWarning)
        elif program >= 2 and ours:
            for f in ours:
                warnings.filters.remove(f)  # type: ignore[attr-defined]
            warnings._filters_mutated()  # type: ignore[attr-defined]
    finally:
        _tracer.set_thread_paused(paused)


def _program_threads() -> int | None:
    """The process's threads less memlens's own (None when they cannot be listed)."""
    task = "/proc/self/task"
    try:
        tids = os.listdir(task)
    except OSError:
        return None
    count = 0
    for tid in tids:
        try:
            fd = os.open(f"{task}/{tid}/comm", os.O_RDONLY)
        except OSError:
            continue  # ended meanwhile
        try:
            name = os.read(fd, 64)
        finally:
            os.close(fd)
        count += not name.startswith(b"memlens-")
    return count


def _after_fork_in_parent() -> None:
    global _held_for_fork
    if _held_for_fork is not None:
        _held_for_fork.release()
        _held_for_fork = None


def _after_fork_in_child() -> None:
    # The checkpoint thread does not exist in the child: forget it (its locks are copies).
    global _checkpointer, _held_for_fork
    _checkpointer = None
    _held_for_fork = None


if hasattr(os, "register_at_fork"):
    # At import: these run before any other memlens handler in the child (memlens.tracing.child's
    # starts the child's own run, checkpoints included).
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )


# numpy allocates array data through its own handler, not PEP 445: the native module can
# chain a handler of ours onto numpy's (NEP 49). numpy is usually imported by the program
# after tracing started, so a meta-path finder attaches right after numpy's core loads (and
# arms PyTorch's CUDA memory recording right after torch.cuda loads).
_NUMPY_CORE = ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath")


def _attach_numpy(module: types.ModuleType) -> None:
    api = getattr(module, "_ARRAY_API", None)
    if api is None:
        return
    try:
        _tracer.numpy_attach(api)
    except RuntimeError as exc:
        print(f"memlens: numpy array data is not traced: {exc}", file=sys.stderr)


#: What memlens does once a module the program imports has run: numpy's core gets our data
#: handler; ``torch.cuda`` asks to record PyTorch's CUDA memory when CUDA is initialised
#: (:mod:`memlens.tracing.cuda`).
_ON_IMPORT: dict[str, Callable[[types.ModuleType], None]] = {
    **dict.fromkeys(_NUMPY_CORE, _attach_numpy),
    cuda.TORCH_CUDA: cuda.arm_when_initialised,
}


class _ActingLoader:
    """A module's loader, then memlens's action on the module."""

    def __init__(self, loader: Any, act: Callable[[types.ModuleType], None]) -> None:
        self._loader = loader
        self._act = act

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        self._act(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _ImportWatcher:
    """A meta-path finder that declines every import but those of :data:`_ON_IMPORT`, whose
    loader it wraps so that memlens acts once the module has run (one dict lookup per
    import)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        act = _ON_IMPORT.get(name)
        if act is None:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ActingLoader(spec.loader, act)
                return spec
        return None


_import_watcher = _ImportWatcher()


def _watch_imports() -> None:
    """Act on the watched modules the program imported already; watch for the others."""
    acted = set()  # numpy's two names for its core: one attach
    for name, act in _ON_IMPORT.items():
        module = sys.modules.get(name)
        if module is not None and act not in acted:
            act(module)
            acted.add(act)
    if _import_watcher not in sys.meta_path:
        sys.meta_path.insert(0, _import_watcher)


def _unwatch_imports() -> None:
    if _import_watcher in sys.meta_path:
        sys.meta_path.remove(_import_watcher)


def _stop_at_exit() -> None:
    if _session is not None and _session.pid == os.getpid():
        _tracer.stop()
        _tracer.reset()


atexit.register(_stop_at_exit)


class Profile:
    """``with memlens.profile() as p: ...`` traces the block; ``p.run`` is the result."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self.run: Run | None = None
        #: With ``save``, the run file in the store (named when the block starts).
        self.path: str | None = None

    def __enter__(self) -> Profile:  # noqa: PYI034 - typing.Self needs Python 3.11
        start(**self._options)
        if self._options.get("save", False) is not False:
            self.path = _last_saved
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self.run = stop(exit_code=None, complete=exc_type is None)


# ---------------------------------------------------------------------------------------
# Snapshot -> Run


def _library_dirs() -> tuple[str, ...]:
    """Directories of the standard library and installed packages.

    Not from sysconfig: on 3.12 it imports threading, and run building may happen in the
    checkpoint thread, where importing threading first would make that thread the program's
    "main thread" (threading.main_thread()) and hang the interpreter's exit.
    """
    import site

    dirs = {os.path.dirname(os.__file__)}  # the standard library (lib-dynload is below it)
    dirs.update(getattr(site, "getsitepackages", list)())
    user = getattr(site, "getusersitepackages", lambda: "")()
    dirs.add(user if isinstance(user, str) else "")
    return tuple(sorted(os.path.realpath(d) + os.sep for d in dirs if d))


class _Filter:
    """Which frames figures are charged to.

    Frames that do not pass are transparent: their allocations are charged to the innermost
    calling frame that passes. memlens's own files never pass. Unless ``libraries`` is set,
    the standard library and installed packages do not pass either, so an allocation inside
    numpy or json is charged to the user's line that called it (an explicit ``include``
    pattern that matches a library file overrides this).
    """

    def __init__(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        libraries: bool,
        hidden: Sequence[str] = (),
        sources: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self.hidden = frozenset(hidden)
        #: Code file name -> the name it is recorded under (files with a given text).
        self.given = {name: recorded for name, (recorded, _text) in (sources or {}).items()}
        self._real: dict[str, str] = {}
        self._passes: dict[str, bool] = {}
        self.include = [os.path.abspath(p) if os.sep in p else p for p in include]
        self.exclude = [os.path.abspath(p) if os.sep in p else p for p in exclude]
        self.library_dirs = () if libraries else _library_dirs()

    def realpath(self, filename: str) -> str:
        real = self._real.get(filename)
        if real is None:
            real = self.given.get(filename) or (os.path.realpath(filename) if filename else "")
            self._real[filename] = real
        return real

    def passes(self, filename: str) -> bool:
        known = self._passes.get(filename)
        if known is None:
            known = self._passes[filename] = self._decide(filename)
        return known

    def _decide(self, filename: str) -> bool:
        if filename in self.given:
            return True  # a notebook cell: the program itself
        if not filename or filename.startswith("<"):
            return False  # frozen modules, exec'd strings: no source to show
        real = self.realpath(filename)
        if real.startswith(_PACKAGE_DIR + os.sep) or real == _RUNPY or real in self.hidden:
            return False  # memlens itself and its launchers are never attributed
        if self.include:
            if not any(_match(real, p) for p in self.include):
                return False
        elif real.startswith(self.library_dirs):
            return False
        return not any(_match(real, p) for p in self.exclude)


def gpu_charge() -> Callable[[str], str | None]:
    """Where GPU memory is charged while tracing: the file a frame's file is charged to by
    this session's filters, or None when it is transparent (as for host memory)."""
    session = _session
    if session is None:
        raise MemlensError("memlens is not tracing")
    flt = _Filter(session.include, session.exclude, session.libraries, session.hidden)
    return lambda f: flt.realpath(f) if flt.passes(f) else None


def _match(path: str, pattern: str) -> bool:
    import fnmatch

    return fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(os.path.basename(path), pattern)


class _Parts:
    """A snapshot collapsed onto lines (:func:`_collapse`): the native build's columns, the
    charged files' paths (by file id) and the functions' ids."""

    __slots__ = ("built", "flt", "functions", "given", "paths")

    def __init__(
        self,
        built: dict[str, Any],
        paths: list[str],
        functions: dict[tuple[int, str, int, int], int],
        flt: _Filter,
        given: dict[str, str],
    ) -> None:
        self.built = built
        self.paths = paths
        self.functions = functions
        self.flt = flt  # which file each code object is charged to
        self.given = given  # recorded name -> text, for code without a file (notebook cells)


def _build_run(
    snap: Any,
    session: _Session,
    command: Sequence[str] | None,
    exit_code: int | None,
    complete: bool,
    gpu: object = None,
) -> Run:
    """The run of a native snapshot (without what holds its lines: see :func:`stop`)."""
    parts = _collapse(snap, session)
    return _make_run(parts, snap, session, command, exit_code, complete, (), gpu)


def _collapse(snap: Any, session: _Session) -> _Parts:
    """The filters decide, per code object, which file it is charged to; the native side
    collapses the call tree onto lines and sums the figures (time and memory linear in the
    tree's nodes)."""
    from array import array

    flt = _Filter(
        session.include, session.exclude, session.libraries, session.hidden, session.sources
    )
    given = dict(session.sources.values())  # recorded name -> text
    codes = snap.codes
    charged = [flt.realpath(c[0]) if flt.passes(c[0]) else None for c in codes]
    # File ids in path order, the order of run.files: the call tree's file column is then
    # written as it is (no pass over its nodes).
    files = {path: fid for fid, path in enumerate(sorted({p for p in charged if p is not None}))}
    functions: dict[tuple[int, str, int, int], int] = {}  # (file id, qualname, first, last)
    file_of = array("i")
    function_of = array("i")
    for (_filename, qualname, first, last), path in zip(codes, charged, strict=True):
        if path is None:
            file_of.append(-1)
            function_of.append(-1)
            continue
        fid = files[path]
        file_of.append(fid)
        function_of.append(functions.setdefault((fid, qualname, first, last), len(functions)))
    # The snapshot's nodes are freed once summed (a big call tree's peak memory is here);
    # only its info is read afterwards.
    built = snap.build(file_of.tobytes(), function_of.tobytes(), len(functions), release=True)
    return _Parts(built, list(files), functions, flt, given)


def _make_run(
    parts: _Parts,
    snap: Any,
    session: _Session,
    command: Sequence[str] | None,
    exit_code: int | None,
    complete: bool,
    holders: tuple[HeldBy, ...],
    gpu: object = None,
) -> Run:
    """The run of a collapsed snapshot: here only per-line, per-function and per-file objects
    are made. The call tree stays in typed columns. ``gpu``: PyTorch's snapshot of the GPU
    memory (:func:`memlens.tracing.cuda.take`), charged by the same filters."""
    from array import array
    from datetime import datetime, timedelta, timezone

    from memlens._version import __version__
    from memlens.layout import platform_name, python_version
    from memlens.model import (
        CALL_TREE_COLUMNS,
        SUMS,
        CallTree,
        FunctionStats,
        LineStats,
        Moments,
        Run,
        RunInfo,
        SourceFile,
        TimelinePoint,
    )
    from memlens.source import read_source, text_digest

    built, paths, functions = parts.built, parts.paths, parts.functions
    flt, given = parts.flt, parts.given
    sites, incl, native = built["sites"], built["sites_incl"], built["sites_native"]
    self_sums = [sites[k] for k in SUMS]
    incl_sums = [incl[k] for k in SUMS]
    native_sums = [native[k] for k in SUMS]
    variances = [sites[k] for k in ("alloc_var", "live_var", "peak_var") if k in sites]
    per_file_lines: dict[int, dict[int, LineStats]] = {}
    for i, (fid, line) in enumerate(zip(sites["file"], sites["line"], strict=True)):
        var = [v[i] for v in variances] if variances else (0.0, 0.0, 0.0)
        stats = LineStats.from_sums(
            [c[i] for c in self_sums],
            [c[i] for c in incl_sums],
            var,
            [c[i] for c in native_sums],
        )
        if not stats.is_empty():
            per_file_lines.setdefault(fid, {})[line] = stats
    fn_sums = [built["functions"][k] for k in SUMS]
    # A function whose figures end at 0 is kept when a moment holds live bytes of it (3.13+:
    # its blocks may have moved to other lines since, as CPython reused them).
    in_moments = set(built["moments"]["function"])
    per_file_funcs: dict[int, list[FunctionStats]] = {}
    for (fid, qualname, first, last), fn in sorted(functions.items()):
        sums = [c[fn] for c in fn_sums]
        if any(sums) or fn in in_moments:
            per_file_funcs.setdefault(fid, []).append(
                FunctionStats.from_sums(qualname, first, last, sums)
            )
    tree = built["tree"]
    run_files: dict[str, SourceFile] = {}
    for fid in range(len(paths)):  # (every charged file has nodes: it was on a stack)
        path = paths[fid]
        text: str | None
        if path in given:
            sha, text = text_digest(given[path]), given[path]
        else:
            sha, text = read_source(path) or ("", None)
        run_files[path] = SourceFile(
            path=path,
            sha256=sha,
            text=text,
            lines=dict(sorted(per_file_lines.get(fid, {}).items())),
            functions=tuple(per_file_funcs.get(fid, ())),
        )
    names = [q for (_fid, q, _first, _last) in functions]
    call_tree = CallTree(
        paths,
        names,
        {"id": range(len(tree["parent"])), **{k: tree[k] for k in CALL_TREE_COLUMNS[1:]}},
        canonical=True,  # (the collapse numbers a node after its parent: snapshot.cpp)
    )

    snap_info = snap.info
    duration = float(snap_info["duration_s"])
    started = datetime.fromtimestamp(session.started, timezone.utc)
    info = RunInfo(
        command=tuple(command if command is not None else session.argv),
        python=python_version(),
        platform=platform_name(),
        started=started.isoformat(),
        ended=(started + timedelta(seconds=duration)).isoformat(),
        duration_s=duration,
        pid=session.pid,
        exit_code=exit_code,
        mode=session.mode,
        sample_interval_bytes=session.sample_interval,
        peak_traced_bytes=int(snap_info["peak_traced_bytes"]),
        peak_rss_bytes=int(snap_info["peak_rss_bytes"]),
        complete=complete,
        cwd=os.getcwd(),
        memlens_version=__version__,
        workspace_root=session.workspace_root,
        max_depth=0,
        seed=session.seed,
        peak_at_s=snap_info["peak_t"],
        attached=session.attached,
    )
    timeline = tuple(
        TimelinePoint(float(t), int(tb), int(rss)) for t, tb, rss in snap_info["timeline"]
    )
    if snap_info["moments_dropped"]:
        print(
            "memlens: the run's moments were dropped (more than 64M changes between "
            "checkpoints); its other figures are complete",
            file=sys.stderr,
        )
    m = built["moments"]
    site_file, site_line = sites["file"], sites["line"]
    moments = Moments(
        m["t"],
        m["traced_bytes"],
        paths,
        {
            "moment": m["site_moment"],
            "file": array("i", [site_file[i] for i in m["site"]]),
            "line": array("i", [site_line[i] for i in m["site"]]),
            "live_bytes": m["site_live"],
            "incl_live_bytes": m["site_incl_live"],
        },
        [(paths[fid], q, first, last) for (fid, q, first, last) in functions],
        {
            "moment": m["function_moment"],
            "function": m["function"],
            "live_bytes": m["function_live"],
        },
    )
    run = Run(
        info=info,
        files=run_files,
        call_tree=call_tree,
        timeline=timeline,
        moments=moments,
        holders=holders,
    )
    if gpu is not None:
        run = cuda.attach(run, gpu, lambda f: flt.realpath(f) if flt.passes(f) else None)
    return run
