"""``pytest --memlens``'s session: the tracer, each test's figures and limits, the run.

Imported by :mod:`memlens.pytest_plugin` only when ``--memlens`` is given. The hooks are those
of :class:`MemlensSession`, registered for the session (its state is on that object).

How a test's window works (the figures are the native tracer's running totals,
``_tracer.window``):

* The window opens as the test's setup phase starts. Fixtures of a wider scope (module, class,
  session) belong to no single test: what they hold when set up in the window (and what they
  free when torn down in it) is left out of the leak, and the peak is measured from after
  those the setup creates before the test's own fixtures; one set up later (by
  ``request.getfixturevalue``) still counts in the peak.
* Only the bodies of the setup, call and teardown phases are traced on the test's thread:
  pytest's machinery between them (reports, captured output, logging, terminal) is paused, so
  what pytest keeps about a test is not the test's leak; so is the making of test items at
  collection, so that what pytest frees of an item when its test ends is no test's either.
* The window closes after the whole protocol, when pytest has dropped the test's fixture
  values. Peak: the most traced memory during the window above what was live at its start;
  allocated: bytes allocated in it; leaked: live at its end less live at its start, plus what
  wider fixtures torn down in it held, never below 0.
* A test judged on memory (a ``memlens`` marker with limits, or ``--memlens-fail-on-increase``)
  is run by this plugin's own protocol: reports are logged after the window closed, so that a
  test over a limit is reported as failed (not as an error of its teardown). A snapshot taken
  when its window opens, compared with one taken when it fails, names the lines responsible.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import time

import pytest
from _pytest.runner import runtestprotocol

from memlens import _tracer, gpu
from memlens.annotate import failure_text
from memlens.errors import MemlensError, RunFileError
from memlens.layout import (
    RUNS_DIR,
    STORE_DIR,
    clear_processes,
    display_path,
    new_run_path,
    point_latest_at,
    printable,
    process_run_name,
    processes_folder,
)
from memlens.model import (
    TEST_FIGURE_KEYWORDS,
    TEST_FIGURES,
    TEST_LINE_FIGURE,
    TEST_LINES_TITLE,
    TEST_MARKER_LIMITS,
    ProcessInfo,
    TestFailure,
    TestStats,
    replace,
)
from memlens.runfile import reader, writer
from memlens.store import Store
from memlens.tracing import cuda, runner, tracer
from memlens.tracing.follow import merge_folder
from memlens.units import fmt_bytes, parse_size, sample_option

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    import signal
    import types
    from collections.abc import Callable, Generator, Sequence
    from typing import Any

    from memlens.model import Run, RunInfo
else:
    import _signal as signal  # the C core, as memlens.tracing.runner uses it

#: Figures compared with the baseline run (allocation volume is churn, not memory held); the
#: GPU peak of a test whose baseline used GPU memory too.
COMPARED = ("peak_bytes", "leaked_bytes")
GPU_COMPARED = "gpu_peak_bytes"
#: Lines named in a failure message, per figure.
TOP_LINES = 5


# -- tracing ---------------------------------------------------------------------------------

#: Where the run of this session goes, and its command (set when tracing starts).
_run_path: str | None = None
_run_command: tuple[str, ...] = ()
#: Whether this plugin started the tracer (a pytest-xdist worker starts it before it knows
#: where its run goes: ``_run_path`` is None until then).
_started = False
#: The session whose tests the run records (set when it is registered).
_current: _SessionRun | None = None
#: The handler of SIGTERM and SIGHUP while tracing (:func:`_on_ending_signal`), if installed.
_ending_handler: runner.AsDefault | None = None


def start_tracing(options: Any, config: pytest.Config, path_later: bool = False) -> None:
    """Start the tracer for this session (once), writing checkpoints to the run's file in the
    store. With ``path_later`` (a pytest-xdist worker, told where its run goes by its
    controller: :func:`start_worker_checkpoints`), no run file is chosen yet."""
    global _run_path, _run_command, _started
    command = _command(config)

    if _started and tracer.is_tracing():
        if _run_path is None and not path_later:
            # Started as a worker would be, but this session is not one (a pytest started by
            # a worker's test inherits its environment): its run goes into the store.
            _run_path, pointing = _store_run(options)
            tracer.start_checkpoints(_run_path, command=command, on_checkpoint=pointing)
        return
    try:
        interval = sample_option(options.memlens_sample, "--memlens-sample")
    except MemlensError as exc:
        raise pytest.UsageError(f"memlens: {exc}") from None
    path: str | None = None
    first_checkpoint: Callable[[], None] | None = None
    if not path_later:
        path, first_checkpoint = _store_run(options)
    try:
        tracer.start(
            mode="sampling" if interval else "exact",
            sample_interval=interval,
            checkpoint=path,
            command=command,
            on_checkpoint=first_checkpoint,
            workspace_root=os.path.realpath(options.memlens_dir),
            amend=_with_tests,  # checkpoints hold the per-test figures so far
        )
    except MemlensError as exc:
        raise pytest.UsageError(f"memlens: {exc}") from None
    _run_path, _run_command, _started = path, command, True
    _watch_ending_signals()
    runner.guard_forks()  # a test that forks: no SIGTERM lost to the child's start-up


def _store_run(options: Any) -> tuple[str, Callable[[], None]]:
    """A new run file in the store, and what its first checkpoint does: point ``latest`` at
    it (so that a session killed from then on leaves the run that ``latest`` names)."""
    # The store's root is the workspace the run belongs to: editors map the run's absolute
    # paths onto a copy of that folder (as for memlens run; checkpoints carry it too).
    root = os.path.realpath(options.memlens_dir)
    runs_dir = os.path.join(root, STORE_DIR, RUNS_DIR)
    try:
        os.makedirs(runs_dir, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"memlens: cannot write {runs_dir}: {exc.strerror}") from None
    path = new_run_path(runs_dir)
    pointed = [False]

    def first_checkpoint() -> None:
        if not pointed[0]:
            pointed[0] = True
            _point_latest_at(path)

    return path, first_checkpoint


def start_worker_checkpoints(folder: str) -> str:
    """In a pytest-xdist worker: its run goes into its controller's processes ``folder`` (named
    by this process's id, as a followed child's): checkpoints from now on. Returns the path."""
    global _run_path
    path = os.path.join(folder, process_run_name(os.getpid()))
    if _run_path is None and tracer.is_tracing():
        tracer.start_checkpoints(path, command=_run_command)
        _run_path = path
    return path


def _with_tests(info: RunInfo) -> RunInfo:
    """A checkpoint's header with the figures of the tests that ran so far."""
    session = _current
    return info if session is None else replace(info, tests=tuple(session.tests))


def _watch_ending_signals() -> None:
    """SIGTERM and SIGHUP (a CI job's timeout, a closed terminal) write the run so far, with
    the figures of the tests that ran, before pytest dies of them as it would without memlens.
    Only where they have their default action, which the tests still see
    (:class:`memlens.tracing.runner.AsDefault`)."""
    global _ending_handler
    handler = runner.AsDefault(_on_ending_signal)
    for signum in runner.ENDING_SIGNALS:
        if runner.is_default(signal.getsignal(signum)):
            try:
                signal.signal(signum, handler)
            except ValueError:  # pytest runs in another thread than the main one
                return
            _ending_handler = handler


def _unwatch_ending_signals() -> None:
    global _ending_handler
    handler, _ending_handler = _ending_handler, None
    for signum in runner.ENDING_SIGNALS:
        if handler is not None and signal.getsignal(signum) is handler:
            signal.signal(signum, signal.SIG_DFL)


def _on_ending_signal(signum: int, frame: types.FrameType | None) -> None:
    _tracer.set_thread_paused(True)  # writing the run is memlens's work
    ending = runner.Ending(None, False, True, signum)
    held = runner.hold_signals(ending)  # a second SIGTERM must not cut the write short
    try:
        session = _current
        _write_run(session.tests if session is not None else [], None, False, ending.seal)
    except (MemlensError, OSError, ValueError):
        pass  # the last checkpoint stays
    finally:
        runner.restore_signals(held)
    runner.die_by(signum)


def _write_run(
    tests: list[TestStats],
    status: int | None,
    complete: bool,
    seal: Callable[[RunInfo], RunInfo] | None = None,
) -> str | None:
    """Stop tracing and write the session's run (its tests, pytest's exit status, whether the
    session ended by itself) over its last checkpoint, and point ``latest`` at it (not in a
    pytest-xdist worker: its run is one process of its controller's). Returns the path, or
    None when tracing had stopped. (A SIGTERM's way; a session that ends writes its run
    through :meth:`_SessionRun._write`.)"""
    path = _run_path
    run = stop_tracing()
    if run is None or path is None:
        return None
    info = replace(run.info, exit_code=status, complete=complete, tests=tuple(tests))
    writer.write_final(replace(run, info=info), path, seal=seal)
    if not getattr(_current, "worker", False):
        _point_latest_at(path)
    return path


def stop_tracing() -> Run | None:
    """Stop the tracer if this plugin started it; the run, or None."""
    global _run_path, _started

    _unwatch_ending_signals()
    started, _started, _run_path = _started, False, None
    if not started or not tracer.is_tracing():
        return None
    return tracer.stop(command=_run_command)


def _command(config: pytest.Config) -> tuple[str, ...]:
    """The command as the user would type it: ``pytest ARGS``."""
    return ("pytest", *config.invocation_params.args)


def _point_latest_at(run_path: str) -> None:
    problem = point_latest_at(run_path, "tests")
    if problem is not None:
        print(f"memlens: {problem}", file=sys.stderr)


# -- the session -----------------------------------------------------------------------------


class _Window:
    """The figures of the test whose protocol runs (see the module's docstring)."""

    __slots__ = (
        "alloc0",
        "current0",
        "failures",
        "function_seen",
        "gpu_peak",
        "gpu_wanted",
        "interrupted",
        "judged",
        "opened",
        "outer",
        "outer_alloc",
        "reports",
        "setup_held",
        "snapshot",
        "stats",
        "t0",
        "t1",
        "warmups",
    )

    def __init__(self, judged: bool, gpu_wanted: bool = False) -> None:
        self.judged = judged
        #: The test's GPU peak is judged: measured when the window closes (else at the end).
        self.gpu_wanted = gpu_wanted
        self.gpu_peak: int | None = None
        self.t0 = self.t1 = 0  # the window in microseconds since the epoch (GPU events' clock)
        self.interrupted = False
        self.opened = False
        self.function_seen = False  # a function-scoped fixture or the call has started
        self.outer = 0  # memory held by wider fixtures set up (+) or released (-) inside
        self.outer_alloc = 0  # bytes those set-ups allocated
        self.setup_held = 0  # memory held by the wider fixtures set up before the test's own
        self.snapshot: Any = None
        self.stats: dict[str, int] | None = None  # once closed
        self.reports: list[pytest.TestReport] = []
        self.failures: tuple[TestFailure, ...] = ()
        self.current0 = 0
        self.alloc0 = 0
        self.warmups = 0  # the test's warm-up calls (the marker's warmups=), once run

    def open(self) -> None:
        """Start the window (as the test's setup starts)."""
        self.opened = True
        self.current0, _, self.alloc0 = _tracer.window(True)
        self.t0 = time.time_ns() // 1000
        self.take_snapshot()

    def take_snapshot(self) -> None:
        """The snapshot the lines responsible are found from (judged tests only)."""
        if self.judged:
            self.snapshot = None  # free the old one first
            self.snapshot = _tracer.snapshot()

    def wider_fixture(self, held: int, allocated: int) -> None:
        """A fixture of a wider scope was set up inside the window, holding ``held`` bytes.
        The test starts after the wider fixtures it needs: when none of its own has started,
        its peak and the lines responsible are measured from here."""
        self._leave_out(held, allocated, restart=not self.function_seen)

    def _leave_out(self, held: int, allocated: int, restart: bool) -> None:
        """``held`` bytes held and ``allocated`` bytes allocated inside the window that are not
        the test's; with ``restart``, its peak (their memory taken out) and the lines
        responsible are measured from here."""
        self.outer += held
        self.outer_alloc += allocated
        if restart:
            self.setup_held += held
            _tracer.window(True)
            self.take_snapshot()

    def warmed_up(self, calls: int, held: int, allocated: int) -> None:
        """The test's ``calls`` warm-up calls (the marker's ``warmups=``) are over, holding
        ``held`` bytes: what they keep (a library's first-use buffer, a memo filled on the
        first call) and what they allocated are left out as a wider fixture's are, and the
        peak, the GPU peak and the lines responsible are measured from here: the test's
        figures are those of its last call, so that ``leaked`` is what a call adds."""
        self.warmups = calls
        self._leave_out(held, allocated, restart=True)
        self.t0 = time.time_ns() // 1000

    def close(self) -> dict[str, int]:
        if self.stats is None:
            current, peak, allocated = _tracer.window(False)
            self.t1 = time.time_ns() // 1000
            if self.gpu_wanted and self.opened:
                history = cuda.peek()  # PyTorch's history so far (None: no CUDA recorded)
                if history is not None:
                    self.gpu_peak = gpu.window_peaks(history, [(self.t0, self.t1)])[0]
            base = self.current0 + self.setup_held
            self.stats = {
                "peak_bytes": max(0, peak - base) if self.opened else 0,
                "alloc_bytes": max(0, allocated - self.alloc0 - self.outer_alloc)
                if self.opened
                else 0,
                "leaked_bytes": max(0, current - self.current0 - self.outer) if self.opened else 0,
                "gpu_peak_bytes": self.gpu_peak or 0,
            }
        return self.stats


class _Paused:
    """While it lives, this thread's allocations are not traced (frees are)."""

    __slots__ = ("_previous",)

    def __enter__(self) -> None:
        self._previous = _tracer.set_thread_paused(True)

    def __exit__(self, *exc: object) -> None:
        _tracer.set_thread_paused(self._previous)


class _SessionRun:
    """What every ``pytest --memlens`` session has: the baseline it compares with, the run it
    writes, the summary it prints (:class:`MemlensSession` runs tests,
    :class:`DistributedSession` is pytest-xdist's controller)."""

    def __init__(self, config: pytest.Config) -> None:
        global _current
        self.config = config
        self.tests: list[TestStats] = []
        _current = self  # checkpoints and a SIGTERM write its tests' figures
        self.run_path: str | None = None
        self.problem: str | None = None  # why no run was written
        self.increase = _increase_options(config)
        self.tolerances = _tolerance_options(config)
        self.exempt: list[str] = config.getoption("memlens_exempt") or []
        self.gates: dict[str, Gate] = {}  # node id -> how it is compared with the baseline
        self.baseline: dict[str, TestStats] | None = None
        self.baseline_name: str | None = None
        self.baseline_problem: str | None = None
        if self.increase is not None:
            self._load_baseline()

    def command_line_gate(self, nodeid: str) -> Gate:
        """How the command line compares the test ``nodeid`` with the baseline: exempt
        (``--memlens-exempt``), its own percentage (the last ``--memlens-tolerance`` that
        matches) or the session's."""
        if any(_matches(nodeid, pattern) for pattern in self.exempt):
            return Gate(exempt=True)
        for pattern, percent in reversed(self.tolerances):
            if _matches(nodeid, pattern):
                return Gate(percent=percent)
        return Gate()

    def _load_baseline(self) -> None:
        spec = self.config.getoption("memlens_baseline")
        store = Store(self.config.getoption("memlens_dir"), on_problem=lambda path, why: None)
        try:
            path = store.resolve(spec, default="baseline-tests")
            info = reader.read_info(path)
        except (MemlensError, RunFileError) as exc:
            if spec is not None:  # asked for by name: it must be there
                raise pytest.UsageError(f"memlens: --memlens-baseline: {exc}") from None
            self.baseline_problem = str(exc)
            return
        self.baseline_name = display_path(str(path))
        if not info.tests:
            self.baseline_problem = (
                f"the baseline {self.baseline_name} has no per-test figures (not a run of "
                "pytest --memlens)"
            )
            return
        self.baseline = {t.nodeid: t for t in info.tests}

    def _stop(self, exitstatus: int) -> tuple[Run, str] | None:
        """Stop tracing: this session's run (exit code and completeness set) and its path, or
        None (and why: :attr:`problem`) when no run is to be written."""
        path = _run_path

        try:
            run = stop_tracing()
        except MemlensError as exc:  # e.g. a forked child that ends the session
            self.problem = f"no run written: {exc}"
            return None
        if run is None or path is None:
            self.problem = "no run written: tracing had stopped"
            return None
        status = int(exitstatus)
        if status == int(pytest.ExitCode.USAGE_ERROR):
            # Nothing ran: no run (and no checkpoint of this session left behind).
            self.problem = "no run written (usage error)"
            if os.path.isfile(path):
                os.unlink(path)
            return None
        info = replace(
            run.info, exit_code=status, complete=status != int(pytest.ExitCode.INTERRUPTED)
        )
        return replace(run, info=info), path

    def _write(self, run: Run, path: str, point_latest: bool = True) -> None:
        try:
            writer.write_final(run, path)
        except (OSError, ValueError) as exc:
            self.problem = f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}"
            return
        if point_latest:
            _point_latest_at(path)
        self.run_path = path

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "memlens")
        for line in _heaviest(self.tests, self.config.getoption("memlens_top")):
            write(line)
        if self.increase is not None:
            write(f"memlens: {self._comparison()}")
        if self.run_path is not None:
            write(
                f"memlens: run written to {display_path(self.run_path)} "
                f"({self._counted()}; memlens show, or open the folder in "
                "your editor)"
            )
        else:
            write(f"memlens: {self.problem or 'no run written'}", red=True)

    def _counted(self) -> str:
        return _plural(len(self.tests), "test")

    def _comparison(self) -> str:
        if self.baseline is None:
            return f"no test compared: {self.baseline_problem}"
        known = [t for t in self.tests if t.nodeid in self.baseline]
        exempt = [t for t in known if self._gate(t.nodeid).exempt]
        own = [t for t in known if not self._gate(t.nodeid).default and t not in exempt]
        grown = [t for t in known if any(f.kind == "increase" for f in t.failures)]
        percent, floor = self.increase or (0.0, 0)
        special = [f"{len(own)} with a tolerance of its own"] if own else []
        special += [f"{len(exempt)} left out"] if exempt else []
        return (
            f"{_plural(len(known) - len(exempt), 'test')} compared with {self.baseline_name} "
            f"(allowed growth +{percent:g}%, at least {fmt_bytes(floor)}"
            f"{''.join('; ' + s for s in special)}): "
            f"{len(grown)} grew beyond it, {len(self.tests) - len(known)} new"
        )

    def _gate(self, nodeid: str) -> Gate:
        return self.gates.get(nodeid) or self.command_line_gate(nodeid)


class MemlensSession(_SessionRun):
    """The hooks of a ``pytest --memlens`` session that runs tests (registered by
    :func:`memlens.pytest_plugin.pytest_configure`): without pytest-xdist, or in one of its
    workers (``worker``), whose run goes into its controller's processes folder."""

    def __init__(self, config: pytest.Config, worker: bool = False) -> None:
        super().__init__(config)
        self.worker = worker
        self.limits: dict[str, dict[str, int]] = {}  # node id -> figure -> bytes
        self.warmups: dict[str, int] = {}  # node id -> warm-up calls before the measured one
        self._window: _Window | None = None
        self._held: dict[object, int] = {}  # wider fixture definition -> what it holds
        self.bad_markers: dict[str, str] = {}  # node id -> why its marker is wrong (workers)
        #: (index in tests, window start, end) of tests whose GPU peak is found at the end.
        self._gpu_windows: list[tuple[int, int, int]] = []
        self._in_body = False  # a test phase's body runs (traced)

    # -- collection: the limits of memlens markers --------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("memlens")
            self.gates[item.nodeid] = self.command_line_gate(item.nodeid)
            if marker is None:
                continue
            try:
                limits, gate, warmups = _marker_options(item.nodeid, marker)
                if limits:
                    self.limits[item.nodeid] = limits
                if warmups:
                    self.warmups[item.nodeid] = warmups
                self.gates[item.nodeid] = _merge_gates(gate, self.gates[item.nodeid])
            except pytest.UsageError as exc:
                if not self.worker:
                    raise
                # A pytest-xdist worker cannot end the session with a usage error (its
                # controller would take it for a crash): the test errors instead.
                self.bad_markers[item.nodeid] = str(exc)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_pycollect_makeitem(self) -> Generator[None, object, object]:
        """Test items are made untraced: what pytest frees of them when a test ends (its
        fixture request, its funcargs) is no allocation of any test's window."""
        with _Paused():
            return (yield)

    # -- a test's window -----------------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        paused = _tracer.set_thread_paused(True)
        gate = self.gates.get(item.nodeid)
        compared = item.nodeid in (self.baseline or ()) and not (gate and gate.exempt)
        judged = item.nodeid in self.limits or compared
        base = (self.baseline or {}).get(item.nodeid)
        gpu_wanted = GPU_COMPARED in self.limits.get(item.nodeid, {}) or bool(
            self.increase is not None and compared and base is not None and base.gpu_peak_bytes
        )
        self._window = window = _Window(judged, gpu_wanted)
        try:
            return (yield)
        except BaseException:
            window.interrupted = True  # Ctrl-C, or pytest's own exit (pytest.exit, -x)
            raise
        finally:
            _tracer.set_thread_paused(True)
            try:
                window.close()
                self.tests.append(_test_stats(item, window, self.limits.get(item.nodeid, {})))
                if window.gpu_peak is None and window.opened:
                    # Measured at the end, from the whole history (cheaper than each time).
                    self._gpu_windows.append((len(self.tests) - 1, window.t0, window.t1))
            finally:
                self._window = None
                window.snapshot = None
                _tracer.set_thread_paused(paused)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        window = self._window
        if window is not None and not window.opened:
            window.open()
        if item.nodeid in self.bad_markers:
            pytest.fail(self.bad_markers[item.nodeid], pytrace=False)
        return (yield from self._traced())

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        window = self._window
        if window is not None:
            window.function_seen = True
        warmups = self.warmups.get(item.nodeid, 0)
        if window is None or not warmups:
            return (yield from self._traced())

        def warm_up() -> None:
            # The test's call, run warmups times first (an exception fails the test).
            before, _, allocated_before = _tracer.window(False)
            for _ in range(warmups):
                item.runtest()
            with _Paused():
                after, _, allocated_after = _tracer.window(False)
                window.warmed_up(warmups, after - before, allocated_after - allocated_before)

        return (yield from self._traced(warm_up))

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, None]:
        return (yield from self._traced())

    def _traced(self, first: Callable[[], None] | None = None) -> Generator[None, None, None]:
        """The body of a test phase is traced; pytest's machinery around it is not.
        ``first`` runs traced before the body (the call's warm-ups)."""
        if self._window is None:
            return (yield)
        _tracer.set_thread_paused(False)
        self._in_body = True
        try:
            if first is not None:
                first()
            return (yield)
        finally:
            self._in_body = False
            _tracer.set_thread_paused(True)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        window = self._window
        if window is None or fixturedef.scope == "function":
            if window is not None:
                window.function_seen = True
            return (yield)
        before, _, allocated_before = _tracer.window(False)
        try:
            return (yield)
        finally:
            with _Paused():
                after, _, allocated_after = _tracer.window(False)
                self._held[fixturedef] = after - before
                window.wider_fixture(after - before, allocated_after - allocated_before)

    def pytest_fixture_post_finalizer(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> None:
        held = self._held.pop(fixturedef, None)
        if held is not None and self._window is not None:
            self._window.outer -= held

    # -- reports made while a test's body runs: subtests ---------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A report made while a test's body runs is a subtest's (pytest's ``subtests``
        fixture, unittest's ``subTest``, pytest-subtests): pytest keeps it to the end of the
        session, so it is no allocation of the test's. Untraced from its making (the subtest
        copies the report it gets from this hook) until it is logged."""
        if self._in_body:
            _tracer.set_thread_paused(True)  # resumed when the report has been logged
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        window = self._window
        if window is None:
            return (yield)
        if not self._in_body:
            window.reports.append(report)  # the test's setup, call or teardown
            return (yield)
        # A subtest's report (not the test's own: its outcome and duration are the call's).
        _tracer.set_thread_paused(True)
        try:
            return (yield)
        finally:
            _tracer.set_thread_paused(False)  # back to the test's body

    # -- judging: this plugin runs the protocol of the tests it judges -------------------
    @pytest.hookimpl(specname="pytest_runtest_protocol", tryfirst=True)
    def pytest_runtest_protocol_judged(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        window = self._window
        if window is None or not window.judged:
            return None  # pytest's own protocol runs it
        # pytest's protocol without its logging (as pytest-rerunfailures does): the reports
        # are logged once the window has closed and the test has been judged.

        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        figures = window.close()
        call = next((r for r in reports if r.when == "call"), None)
        if call is not None and not call.skipped and not hasattr(call, "wasxfail"):
            # Only a test that ran (passed or failed by itself) is judged.
            window.failures = self._judge(item.nodeid, figures)
        if window.failures:
            reports = self._fail(item, reports, window)
        for report in reports:
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

    def _judge(self, nodeid: str, figures: dict[str, int]) -> tuple[TestFailure, ...]:
        failures = [
            TestFailure(figure, figures[figure], limit, "limit")
            for figure, limit in self.limits.get(nodeid, {}).items()
            if figures[figure] > limit
        ]
        base = (self.baseline or {}).get(nodeid)
        gate = self.gates.get(nodeid) or Gate()
        if base is not None and self.increase is not None and not gate.exempt:
            percent, floor = self.increase
            if gate.percent is not None:
                percent = gate.percent
            gpu_figures = (GPU_COMPARED,) if base.gpu_peak_bytes else ()
            for figure in gate.figures or (*COMPARED, *gpu_figures):
                old: int = getattr(base, figure)
                allowed = max(int(old * (1 + percent / 100)), old + floor)
                if figures[figure] > allowed:
                    failures.append(
                        TestFailure(figure, figures[figure], allowed, "increase", baseline=old)
                    )
        return tuple(failures)

    def _fail(
        self, item: pytest.Item, reports: list[pytest.TestReport], window: _Window
    ) -> list[pytest.TestReport]:
        """The reports with the test's call failed for its memory (a call that failed by
        itself keeps its failure, with memlens's message beside it)."""
        message = _failure_message(window, item.nodeid)
        out = []
        for report in reports:
            if report.when == "call" and report.passed:

                def over_limit() -> None:
                    pytest.fail(message, pytrace=False)

                # The report pytest makes of a failed call, made here (after the protocol,
                # not through the makereport hook: its implementations may expect the
                # test's fixtures, dropped by now).
                call = pytest.CallInfo.from_call(over_limit, when="call")
                failed = pytest.TestReport.from_item_and_call(item, call)
                failed.duration, failed.start, failed.stop = (
                    report.duration,
                    report.start,
                    report.stop,
                )
                failed.sections = report.sections
                failed.user_properties = report.user_properties
                report = failed
            elif report.when == "call" and report.failed:
                report.sections.append(("memlens", message))
            out.append(report)
        return out

    # -- the end: the run, the summary -----------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        global _current
        _current = None
        ended = self._stop(exitstatus)
        if ended is None:
            return
        run, path = ended
        self._gpu_peaks()
        info = replace(run.info, tests=tuple(self.tests))
        if self.worker:
            # A pytest-xdist worker's run is one process of its controller's: it says which.
            me = ProcessInfo(os.getpid(), os.getppid(), _command(self.config), True, 0)
            info = replace(info, processes=(replace(me, peak_traced_bytes=info.peak_traced_bytes),))
        self._write(replace(run, info=info), path, point_latest=not self.worker)
        if self.worker:  # the controller's summary counts what the markers said
            self.config.workeroutput[WORKER_GATES] = {  # type: ignore[attr-defined]
                nodeid: (g.exempt, g.percent, g.figures)
                for nodeid, g in self.gates.items()
                if not g.default
            }

    def _gpu_peaks(self) -> None:
        """The GPU peak of each test not measured as it ended, from PyTorch's history of the
        session (:func:`memlens.gpu.window_peaks`; none when no CUDA memory was recorded)."""
        history = cuda.last_history
        if history is None or not self._gpu_windows:
            return
        peaks = gpu.window_peaks(history, [(t0, t1) for _, t0, t1 in self._gpu_windows])
        for (index, _, _), peak in zip(self._gpu_windows, peaks, strict=True):
            if peak:
                self.tests[index] = replace(self.tests[index], gpu_peak_bytes=peak)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.worker:  # (a worker's terminal is not the user's: its controller's is)
            super().pytest_terminal_summary(terminalreporter)


#: The key of pytest-xdist's ``workerinput`` that tells a worker where its run goes.
WORKER_INPUT = "memlens_processes"
#: The key of a worker's ``workeroutput`` that tells its controller how its markers compare
#: tests with the baseline.
WORKER_GATES = "memlens_gates"


class DistributedSession(_SessionRun):
    """The hooks of a ``pytest --memlens`` session that pytest-xdist distributes, in its
    controller (which runs no test). Each worker traces its own session and judges its tests
    as without pytest-xdist (:class:`MemlensSession`), writing its run into this session's
    processes folder (as ``memlens run``'s followed children do); at the end, the controller's
    own run is merged with theirs (:func:`memlens.tracing.follow.merge_folder`: sums per line,
    function and call path) and their tests' figures are put together."""

    def __init__(self, config: pytest.Config) -> None:
        super().__init__(config)
        self.order: dict[str, int] = {}  # node id -> when its first report reached us
        self.workers = 0
        self.folder = processes_folder(_run_path or "")
        problem = clear_processes(self.folder)
        if problem is None:
            try:
                os.makedirs(self.folder, exist_ok=True)
            except OSError as exc:
                problem = f"{self.folder}: {exc.strerror or exc}"
        if problem is not None:
            raise pytest.UsageError(f"memlens: cannot write the workers' runs: {problem}")

    def _counted(self) -> str:
        return f"{_plural(len(self.tests), 'test')} from {_plural(self.workers, 'pytest-xdist worker')}"

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_INPUT] = self.folder

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.order.setdefault(report.nodeid, len(self.order))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        gates = getattr(node, "workeroutput", {}).get(WORKER_GATES) or {}
        for nodeid, (exempt, percent, figures) in gates.items():
            self.gates[nodeid] = Gate(exempt, percent, tuple(figures))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        ended = self._stop(exitstatus)
        if ended is None:
            return
        run, path = ended
        merged, workers = merge_folder(run, self.folder, _run_command)
        self.workers = len(workers)
        self.tests = merge_tests([w.info.tests for w in workers], self.order)
        self._write(replace(merged, info=replace(merged.info, tests=tuple(self.tests))), path)


#: Outcomes from the worst: a test run by several workers (``--dist each``) is recorded once,
#: with its worst outcome.
_OUTCOME_ORDER = ("interrupted", "failed", "error", "xpassed", "passed", "xfailed", "skipped")


def merge_tests(
    per_worker: Sequence[Sequence[TestStats]], order: dict[str, int]
) -> list[TestStats]:
    """The tests of every worker as one session's, in ``order`` (node id -> rank; the others
    after them, as the workers ran them). A test several workers ran is one entry: the
    largest of each figure and duration, the worst outcome, every failure."""
    merged: dict[str, TestStats] = {}
    for tests in per_worker:
        for t in tests:
            seen = merged.get(t.nodeid)
            if seen is None:
                merged[t.nodeid] = t
                continue
            worst = min(
                (seen.outcome, t.outcome),
                key=lambda o: _OUTCOME_ORDER.index(o) if o in _OUTCOME_ORDER else 99,
            )
            merged[t.nodeid] = replace(
                seen,
                outcome=worst,
                duration_s=max(seen.duration_s, t.duration_s),
                failures=seen.failures + t.failures,
                **{f: max(getattr(seen, f), getattr(t, f)) for f in TEST_FIGURES},
            )
    ranked = sorted(
        enumerate(merged.values()), key=lambda e: (order.get(e[1].nodeid, len(order)), e[0])
    )
    return [t for _, t in ranked]


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _increase_options(config: pytest.Config) -> tuple[float, int] | None:
    """(percent, floor in bytes) of ``--memlens-fail-on-increase``, or None when off."""
    text = config.getoption("memlens_fail_on_increase")
    if text is None:
        return None
    try:
        percent = float(text)
    except ValueError:
        percent = -1.0
    if not 0 <= percent < float("inf"):
        raise pytest.UsageError(
            f"memlens: --memlens-fail-on-increase: {text!r} is not a percentage (write "
            "--memlens-fail-on-increase=PERCENT, with the =)"
        )

    try:
        floor = parse_size(config.getoption("memlens_min_increase"), zero=True)
    except ValueError as exc:
        raise pytest.UsageError(f"memlens: --memlens-min-increase: {exc}") from None
    return percent, floor


class Gate:
    """How one test is compared with the baseline under ``--memlens-fail-on-increase``:
    left out (``exempt``), with its own allowed growth in percent (``percent``; None: the
    session's), on its own figures (``figures``, test figure names; empty: :data:`COMPARED`)."""

    __slots__ = ("exempt", "figures", "percent")

    def __init__(
        self, exempt: bool = False, percent: float | None = None, figures: tuple[str, ...] = ()
    ) -> None:
        self.exempt = exempt
        self.percent = percent
        self.figures = figures

    @property
    def default(self) -> bool:
        return not self.exempt and self.percent is None and not self.figures


#: The names the ``compare=`` keyword of a ``memlens`` marker takes: test figures.
COMPARABLE = TEST_FIGURE_KEYWORDS


def _marker_options(nodeid: str, marker: pytest.Mark) -> tuple[dict[str, int], Gate, int]:
    """The limits of a ``memlens`` marker in bytes, how it compares the test with the
    baseline (``increase=``, ``compare=``) and its warm-up calls (``warmups=``); a UsageError
    naming the test if bad."""

    def bad(why: str) -> pytest.UsageError:
        return pytest.UsageError(f"memlens: {nodeid}: @pytest.mark.memlens: {why}")

    if marker.args:
        raise bad('limits are keywords: peak="5 MiB", leaks="1 MiB"')
    limits = {}
    gate = Gate()
    warmups = 0
    for key, value in marker.kwargs.items():
        if key == "warmups":
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 100:
                raise bad(f"warmups={value!r}: a number of calls, from 0 to 100")
            warmups = value
            continue
        if key == "increase":
            if value is False:
                gate.exempt = True
            elif value is not None:
                try:
                    gate.percent = _percent(value)
                except ValueError as exc:
                    raise bad(f"increase: {exc}") from None
            continue
        if key == "compare":
            names = (value,) if isinstance(value, str) else value
            if not isinstance(names, (tuple, list)) or not names:
                raise bad(f'compare={value!r}: name the figures, e.g. compare=("alloc", "leaks")')
            unknown = [n for n in names if n not in COMPARABLE]
            if unknown:
                raise bad(f"compare: unknown figure {unknown[0]!r} (use {', '.join(COMPARABLE)})")
            gate.figures = tuple(COMPARABLE[n] for n in names)
            continue
        figure = TEST_MARKER_LIMITS.get(key)
        if figure is None:
            raise bad(
                f"unknown keyword {key!r} (use peak=, leaks=, gpu_peak=, warmups=, increase= "
                "and compare=)"
            )
        if value is None:
            continue
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
            limits[figure] = value
            continue
        if not isinstance(value, str):
            raise bad(f'{key}={value!r} is not a size (write it as {key}="5 MiB")')
        try:
            limits[figure] = parse_size(value, zero=True)
        except ValueError as exc:
            raise bad(f"{key}: {exc}") from None
    return limits, gate, warmups


def _merge_gates(marker: Gate, command_line: Gate) -> Gate:
    """The marker's say, then the command line's where the marker says nothing (it is the
    test's own statement; the command line's exemption holds all the same)."""
    return Gate(
        exempt=marker.exempt or command_line.exempt,
        percent=marker.percent if marker.percent is not None else command_line.percent,
        figures=marker.figures or command_line.figures,
    )


def _percent(value: object) -> float:
    """A percentage: ``"50%"``, ``"50"`` or a number (50); ValueError if not one."""
    why = f'{value!r} is not a percentage (write it as "50%")'
    if isinstance(value, str):
        value = value.strip().removesuffix("%").strip()
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        value = ""  # (refused below)
    try:
        percent = float(value)
    except ValueError:
        raise ValueError(why) from None
    if not 0 <= percent < float("inf"):
        raise ValueError(why)
    return percent


def _tolerance_options(config: pytest.Config) -> list[tuple[str, float]]:
    """``--memlens-tolerance PATTERN=PERCENT`` options, as (pattern, percent)."""
    out = []
    for text in config.getoption("memlens_tolerance") or []:
        pattern, sep, percent = text.rpartition("=")
        try:
            if not sep or not pattern:
                raise ValueError("")
            out.append((pattern, _percent(percent)))
        except ValueError:
            raise pytest.UsageError(
                f"memlens: --memlens-tolerance: {text!r} is not PATTERN=PERCENT (e.g. "
                "'tests/test_x.py::test_threads=150%')"
            ) from None
    return out


def _matches(nodeid: str, pattern: str) -> bool:
    """A node id matches a pattern of the command line: the same, or its glob (``*``, ``?``,
    ``[...]``), or a file or folder of tests it is in."""
    return (
        nodeid == pattern
        or fnmatch.fnmatchcase(nodeid, pattern)
        or nodeid.startswith(pattern.rstrip("/") + ("::" if pattern.endswith(".py") else "/"))
    )


def _widening_hints(nodeid: str, grown: list[TestFailure]) -> list[str]:
    """How to let a test that grew past the baseline pass, or leave it out (docs/pytest.md):
    empty when it did not grow."""
    if not grown:
        return []
    needed = max(100 * (f.value - (f.baseline or 0)) / max(f.baseline or 0, 1) for f in grown)
    wider = min(int(needed // 10) * 10 + 20, 10**6)
    out = [
        (
            f'to allow it more: @pytest.mark.memlens(increase="{wider}%") on the test, or '
            f"--memlens-tolerance='{nodeid}={wider}%'"
        ),
        (
            "to leave it out of the comparison: @pytest.mark.memlens(increase=False), or "
            f"--memlens-exempt='{nodeid}'"
        ),
    ]
    if any(f.figure == "peak_bytes" for f in grown):
        out.append(
            'a peak that changes with how its threads overlap: compare=("alloc", "leaks") '
            '(docs/pytest.md: "What varies between unchanged runs")'
        )
    return [printable(line) for line in out]


def _location(item: pytest.Item) -> tuple[str, int, str]:
    """(absolute file, first line, qualified name) of a test's function, as its code says;
    from pytest's location for other items."""
    obj: Any = getattr(item, "obj", None)
    seen = 0
    while hasattr(obj, "__wrapped__") and seen < 100:  # decorated with functools.wraps
        obj = obj.__wrapped__
        seen += 1
    code = getattr(obj, "__code__", None)
    if code is not None:
        return os.path.realpath(code.co_filename), code.co_firstlineno, obj.__qualname__
    relpath, line0, domain = item.location
    path = os.path.realpath(os.path.join(str(item.config.rootpath), relpath))
    return path, (line0 + 1 if line0 is not None else 0), domain


def _outcome(reports: list[pytest.TestReport], interrupted: bool = False) -> str:
    """passed, failed, error (setup or teardown failed), skipped, xfailed, xpassed, or
    interrupted (the session stopped during the test)."""
    if interrupted:
        return "interrupted"
    by_phase = {r.when: r for r in reports}
    call = by_phase.get("call")
    if call is not None and call.failed:
        return "failed"
    if any(r.failed for r in reports):
        return "error"
    for r in reports:
        if r.skipped:
            return "xfailed" if hasattr(r, "wasxfail") else "skipped"
    if call is not None and hasattr(call, "wasxfail"):
        return "xpassed"
    return "passed" if call is not None else "skipped"


def _test_stats(item: pytest.Item, window: _Window, limits: dict[str, int]) -> TestStats:
    figures = window.close()
    file, line, function = _location(item)
    return TestStats(
        item.nodeid,
        _outcome(window.reports, window.interrupted),
        figures["peak_bytes"],
        figures["alloc_bytes"],
        figures["leaked_bytes"],
        duration_s=float(sum(r.duration for r in window.reports)),
        file=file,
        line=line,
        function=function,
        limits=tuple((f, limits[f]) for f in TEST_FIGURES if f in limits),
        failures=window.failures,
        gpu_peak_bytes=figures["gpu_peak_bytes"],
    )


def _failure_message(window: _Window, nodeid: str) -> str:
    """Why the test failed: each figure against its limit, how to widen or exempt a test that
    grew, then the lines responsible (which the window's failures keep, for the editor)."""
    wanted = []
    for f in window.failures:
        if TEST_LINE_FIGURE[f.figure] not in wanted:
            wanted.append(TEST_LINE_FIGURE[f.figure])
    grown = _responsible_lines(window.snapshot, [f for f in wanted if not f.startswith("gpu_")])
    if any(f.startswith("gpu_") for f in wanted):
        grown["gpu_alloc_bytes"] = _gpu_responsible_lines(window)
    window.failures = tuple(
        replace(f, lines=tuple(row[:3] for row in grown.get(TEST_LINE_FIGURE[f.figure], ())))
        for f in window.failures
    )
    after = f", after {_plural(window.warmups, 'warm-up call')}" if window.warmups else ""
    out = [f"memlens: {failure_text(f)} ({f.value:,} bytes{after})" for f in window.failures]
    out.extend(_widening_hints(nodeid, [f for f in window.failures if f.kind == "increase"]))
    for figure in wanted:
        rows = grown.get(figure, [])
        out.append(f"{TEST_LINES_TITLE[figure]}:")
        out.extend(
            f"  {fmt_bytes(delta):>10}  {display_path(path)}:{line}  {printable(source[:80])}"
            for path, line, delta, source in rows
        )
        if not rows:
            out.append("  (none of them in code memlens charges: see the run)")
    return "\n".join(out)


def _gpu_responsible_lines(window: _Window) -> list[tuple[str, int, int, str]]:
    """The lines that allocated the most GPU memory during the test's window: (file, line,
    bytes, the line's code)."""
    history = cuda.peek()
    if history is None:
        return []
    try:
        figures = gpu.build(gpu.window(history, window.t0, window.t1), tracer.gpu_charge())
    except (MemlensError, ValueError):
        return []
    allocated: dict[tuple[str, int], tuple[int, str]] = {}
    for _summary, built in figures.devices:
        for path, sf in built.files.items():
            lines = (sf.text or "").splitlines()
            for line, stats in sf.lines.items():
                old = allocated.get((path, line), (0, ""))[0]
                source = lines[line - 1].strip() if 0 < line <= len(lines) else ""
                allocated[(path, line)] = (old + stats.alloc_bytes, source)
    ranked = sorted((-v[0], k, v[1]) for k, v in allocated.items() if v[0] > 0)
    return [(path, line, -size, source) for size, (path, line), source in ranked[:TOP_LINES]]


def _responsible_lines(
    start: Any, figures: list[str]
) -> dict[str, list[tuple[str, int, int, str]]]:
    """Per line figure, the lines whose figure grew most since the ``start`` snapshot:
    (file, line, bytes grown, the line's code)."""
    session = tracer._session
    if start is None or session is None:
        return {}
    before = tracer._build_run(start, session, None, None, False)
    after = tracer._build_run(_tracer.snapshot(), session, None, None, False)
    out: dict[str, list[tuple[str, int, int, str]]] = {}
    for figure in figures:
        grown = []
        for path, sf in after.files.items():
            old = before.files.get(path)
            old_lines = old.lines if old is not None else {}
            for line, stats in sf.lines.items():
                was = old_lines.get(line)
                delta = getattr(stats, figure) - (getattr(was, figure) if was is not None else 0)
                if delta > 0:
                    grown.append((delta, path, line))
        grown.sort(key=lambda g: (-g[0], g[1], g[2]))
        rows = []
        for delta, path, line in grown[:TOP_LINES]:
            text = after.files[path].text or ""
            source = text.splitlines()[line - 1].strip() if 0 < line <= text.count("\n") + 1 else ""
            rows.append((after.files[path].path, line, delta, source))
        out[figure] = rows
    return out


def _heaviest(tests: list[TestStats], top: int) -> list[str]:
    """The terminal summary's table of the tests with the highest peaks."""
    ranked = sorted(tests, key=lambda t: (-t.peak_bytes, t.nodeid))[: max(0, top)]
    if not ranked:
        return []
    rows = ["heaviest tests (peak during the test, above what was live when it started):"]
    gpu_used = any(t.gpu_peak_bytes for t in tests)
    gpu_head = f"  {'GPU peak':>10}" if gpu_used else ""
    rows.append(f"  {'peak':>10}  {'allocated':>10}  {'leaked':>10}{gpu_head}  {'time':>7}  test")
    for t in ranked:
        gpu_cell = f"  {fmt_bytes(t.gpu_peak_bytes):>10}" if gpu_used else ""
        rows.append(
            f"  {fmt_bytes(t.peak_bytes):>10}  {fmt_bytes(t.alloc_bytes):>10}  "
            f"{fmt_bytes(t.leaked_bytes):>10}{gpu_cell}  {t.duration_s:>6.2f}s  "
            f"{printable(t.nodeid)}"
        )
    return rows
