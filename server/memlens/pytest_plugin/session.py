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

import os
import sys

import pytest
from _pytest.runner import runtestprotocol

from memlens import _tracer
from memlens.annotate import failure_text
from memlens.errors import MemlensError, RunFileError
from memlens.layout import (
    RUNS_DIR,
    STORE_DIR,
    display_path,
    new_run_path,
    point_latest_at,
    printable,
)
from memlens.model import (
    TEST_FIGURES,
    TEST_LINE_FIGURE,
    TEST_LINES_TITLE,
    TEST_MARKER_LIMITS,
    TestFailure,
    TestStats,
    replace,
)
from memlens.runfile import reader, writer
from memlens.store import Store
from memlens.tracing import runner, tracer
from memlens.units import fmt_bytes, parse_size

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal
    import types
    from collections.abc import Callable, Generator
    from typing import Any

    from memlens.model import Run, RunInfo
else:
    import _signal as signal  # the C core, as memlens.tracing.runner uses it

#: Figures compared with the baseline run (allocation volume is churn, not memory held).
COMPARED = ("peak_bytes", "leaked_bytes")
#: Lines named in a failure message, per figure.
TOP_LINES = 5


# -- tracing ---------------------------------------------------------------------------------

#: Where the run of this session goes, and its command (set when tracing starts).
_run_path: str | None = None
_run_command: tuple[str, ...] = ()
#: The session whose tests the run records (set when it is registered).
_current: MemlensSession | None = None
#: The handler of SIGTERM and SIGHUP while tracing (:func:`_on_ending_signal`), if installed.
_ending_handler: runner.AsDefault | None = None


def start_tracing(options: Any, config: pytest.Config) -> None:
    """Start the tracer for this session (once), writing checkpoints to the run's file."""
    global _run_path, _run_command
    command = _command(config)

    if _run_path is not None and tracer.is_tracing():
        return
    interval = None
    if options.memlens_sample is not None:
        try:
            interval = parse_size(options.memlens_sample)
        except ValueError as exc:
            raise pytest.UsageError(f"memlens: --memlens-sample: {exc}") from None
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

    try:
        tracer.start(
            mode="sampling" if interval else "exact",
            sample_interval=interval,
            checkpoint=path,
            command=command,
            on_checkpoint=first_checkpoint,
            workspace_root=root,
            amend=_with_tests,  # checkpoints hold the per-test figures so far
        )
    except MemlensError as exc:
        raise pytest.UsageError(f"memlens: {exc}") from None
    _run_path, _run_command = path, command
    _watch_ending_signals()
    # A test that forks: no SIGTERM lost to the child's start-up, and Python's warning that
    # the process is multi-threaded only when the tests' own threads make it so (3.12+).
    runner.guard_forks()


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
    session ended by itself) over its last checkpoint, and point ``latest`` at it. Returns
    the path, or None when tracing had stopped."""
    path = _run_path
    run = stop_tracing()
    if run is None or path is None:
        return None
    info = replace(run.info, exit_code=status, complete=complete, tests=tuple(tests))
    writer.write_final(replace(run, info=info), path, seal=seal)
    _point_latest_at(path)
    return path


def stop_tracing() -> Run | None:
    """Stop the tracer if this plugin started it; the run, or None."""
    global _run_path

    _unwatch_ending_signals()
    if _run_path is None or not tracer.is_tracing():
        _run_path = None
        return None
    _run_path = None
    return tracer.stop(command=_run_command)


def _command(config: pytest.Config) -> tuple[str, ...]:
    """The command as the user would type it: ``pytest ARGS``."""
    return ("pytest", *config.invocation_params.args)


def _point_latest_at(run_path: str) -> None:
    problem = point_latest_at(run_path)
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
        "interrupted",
        "judged",
        "opened",
        "outer",
        "outer_alloc",
        "reports",
        "setup_held",
        "snapshot",
        "stats",
    )

    def __init__(self, judged: bool) -> None:
        self.judged = judged
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

    def open(self) -> None:
        """Start the window (as the test's setup starts)."""
        self.opened = True
        self.current0, _, self.alloc0 = _tracer.window(True)
        self.take_snapshot()

    def take_snapshot(self) -> None:
        """The snapshot the lines responsible are found from (judged tests only)."""
        if self.judged:
            self.snapshot = None  # free the old one first
            self.snapshot = _tracer.snapshot()

    def wider_fixture(self, held: int, allocated: int) -> None:
        """A fixture of a wider scope was set up inside the window, holding ``held`` bytes."""
        self.outer += held
        self.outer_alloc += allocated
        if not self.function_seen:
            # The test starts after the wider fixtures it needs: its peak is measured from
            # here (their memory taken out), and so are the lines responsible.
            self.setup_held += held
            _tracer.window(True)
            self.take_snapshot()

    def close(self) -> dict[str, int]:
        if self.stats is None:
            current, peak, allocated = _tracer.window(False)
            base = self.current0 + self.setup_held
            self.stats = {
                "peak_bytes": max(0, peak - base) if self.opened else 0,
                "alloc_bytes": max(0, allocated - self.alloc0 - self.outer_alloc)
                if self.opened
                else 0,
                "leaked_bytes": max(0, current - self.current0 - self.outer) if self.opened else 0,
            }
        return self.stats


class _Paused:
    """While it lives, this thread's allocations are not traced (frees are)."""

    __slots__ = ("_previous",)

    def __enter__(self) -> None:
        self._previous = _tracer.set_thread_paused(True)

    def __exit__(self, *exc: object) -> None:
        _tracer.set_thread_paused(self._previous)


class MemlensSession:
    """The hooks of a ``pytest --memlens`` session (registered by
    :func:`memlens.pytest_plugin.pytest_configure`)."""

    def __init__(self, config: pytest.Config) -> None:
        global _current
        self.config = config
        self.tests: list[TestStats] = []
        _current = self  # checkpoints and a SIGTERM write its tests' figures
        self.limits: dict[str, dict[str, int]] = {}  # node id -> figure -> bytes
        self._window: _Window | None = None
        self._held: dict[object, int] = {}  # wider fixture definition -> what it holds
        self.run_path: str | None = None
        self.problem: str | None = None  # why no run was written
        self.increase = _increase_options(config)
        self.baseline: dict[str, TestStats] | None = None
        self.baseline_name: str | None = None
        self.baseline_problem: str | None = None
        if self.increase is not None:
            self._load_baseline()

    def _load_baseline(self) -> None:
        spec = self.config.getoption("memlens_baseline")
        store = Store(self.config.getoption("memlens_dir"), on_problem=lambda path, why: None)
        try:
            path = store.resolve(spec, default="baseline")
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

    # -- collection: the limits of memlens markers --------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("memlens")
            if marker is not None:
                self.limits[item.nodeid] = _marker_limits(item.nodeid, marker)

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
        judged = item.nodeid in self.limits or item.nodeid in (self.baseline or ())
        self._window = window = _Window(judged)
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
            finally:
                self._window = None
                window.snapshot = None
                _tracer.set_thread_paused(paused)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, None, None]:
        window = self._window
        if window is not None and not window.opened:
            window.open()
        return (yield from self._traced())

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        if self._window is not None:
            self._window.function_seen = True
        return (yield from self._traced())

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, None, None]:
        return (yield from self._traced())

    def _traced(self) -> Generator[None, None, None]:
        """The body of a test phase is traced; pytest's machinery around it is not."""
        if self._window is None:
            return (yield)
        _tracer.set_thread_paused(False)
        try:
            return (yield)
        finally:
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

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        window = self._window
        if window is not None:
            window.reports.append(report)

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
        if base is not None and self.increase is not None:
            percent, floor = self.increase
            for figure in COMPARED:
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
        message = _failure_message(window)
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
        path = _run_path
        _current = None
        _unwatch_ending_signals()  # pytest ends as it would have without memlens from here
        status = int(exitstatus)
        if status == int(pytest.ExitCode.USAGE_ERROR):
            # Nothing ran: no run (and no checkpoint of this session left behind).
            try:
                stopped = stop_tracing()
            except MemlensError:
                stopped = None
            self.problem = (
                "no run written (usage error)" if stopped is not None
                else "no run written: tracing had stopped"
            )  # fmt: skip
            if stopped is not None and path is not None and os.path.isfile(path):
                os.unlink(path)
            return
        try:
            written = _write_run(self.tests, status, status != int(pytest.ExitCode.INTERRUPTED))
        except MemlensError as exc:  # e.g. a forked child that ends the session
            self.problem = f"no run written: {exc}"
            return
        except (OSError, ValueError) as exc:
            self.problem = f"cannot write {path}: {getattr(exc, 'strerror', None) or exc}"
            return
        if written is None:
            self.problem = "no run written: tracing had stopped"
            return
        self.run_path = written

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
                f"({_plural(len(self.tests), 'test')}; memlens show, or open the folder in "
                "your editor)"
            )
        else:
            write(f"memlens: {self.problem or 'no run written'}", red=True)

    def _comparison(self) -> str:
        if self.baseline is None:
            return f"no test compared: {self.baseline_problem}"
        compared = [t for t in self.tests if t.nodeid in self.baseline]
        grown = [t for t in compared if any(f.kind == "increase" for f in t.failures)]
        percent, floor = self.increase or (0.0, 0)

        return (
            f"{_plural(len(compared), 'test')} compared with {self.baseline_name} "
            f"(allowed growth +{percent:g}%, at least {fmt_bytes(floor)}): "
            f"{len(grown)} grew beyond it, {len(self.tests) - len(compared)} new"
        )


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


def _marker_limits(nodeid: str, marker: pytest.Mark) -> dict[str, int]:
    """The limits of a ``memlens`` marker in bytes; a UsageError naming the test if bad."""

    def bad(why: str) -> pytest.UsageError:
        return pytest.UsageError(f"memlens: {nodeid}: @pytest.mark.memlens: {why}")

    if marker.args:
        raise bad('limits are keywords: peak="5 MiB", leaks="1 MiB"')
    limits = {}
    for key, value in marker.kwargs.items():
        figure = TEST_MARKER_LIMITS.get(key)
        if figure is None:
            raise bad(f"unknown limit {key!r} (use peak= and leaks=)")
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
    return limits


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
    )


def _failure_message(window: _Window) -> str:
    """Why the test failed: each figure against its limit, then the lines responsible."""
    out = [f"memlens: {failure_text(f)} ({f.value:,} bytes)" for f in window.failures]
    wanted = []
    for f in window.failures:
        if TEST_LINE_FIGURE[f.figure] not in wanted:
            wanted.append(TEST_LINE_FIGURE[f.figure])
    for figure, rows in _responsible_lines(window.snapshot, wanted).items():
        out.append(f"{TEST_LINES_TITLE[figure]}:")
        out.extend(rows or ["  (none of them in code memlens charges: see the run)"])
    return "\n".join(out)


def _responsible_lines(start: Any, figures: list[str]) -> dict[str, list[str]]:
    """Per line figure, the lines whose figure grew most since the ``start`` snapshot, as
    rows ``  10.0 MiB  tests/test_x.py:12  code``."""
    session = tracer._session
    if start is None or session is None:
        return {}
    before = tracer._build_run(start, session, None, None, False)
    after = tracer._build_run(_tracer.snapshot(), session, None, None, False)
    out: dict[str, list[str]] = {}
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
            rows.append(
                f"  {fmt_bytes(delta):>10}  {display_path(path)}:{line}  {printable(source[:80])}"
            )
        out[figure] = rows
    return out


def _heaviest(tests: list[TestStats], top: int) -> list[str]:
    """The terminal summary's table of the tests with the highest peaks."""
    ranked = sorted(tests, key=lambda t: (-t.peak_bytes, t.nodeid))[: max(0, top)]
    if not ranked:
        return []
    rows = ["heaviest tests (peak during the test, above what was live when it started):"]
    rows.append(f"  {'peak':>10}  {'allocated':>10}  {'leaked':>10}  {'time':>7}  test")
    for t in ranked:
        rows.append(
            f"  {fmt_bytes(t.peak_bytes):>10}  {fmt_bytes(t.alloc_bytes):>10}  "
            f"{fmt_bytes(t.leaked_bytes):>10}  {t.duration_s:>6.2f}s  {printable(t.nodeid)}"
        )
    return rows
