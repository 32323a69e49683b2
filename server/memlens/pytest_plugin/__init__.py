"""The pytest plugin (``pytest --memlens``): per-test memory figures, limits that fail tests.

Registered through the ``pytest11`` entry point, so pytest loads this module in every session:
it must cost nothing when ``--memlens`` is not given. At import it loads only pytest (already
loaded) and the standard library's ``os``; it adds its options and the ``memlens`` marker, and
nothing else happens. With ``--memlens``, :mod:`memlens.pytest_plugin.session` is imported: it
traces the whole session (the tracer starts as the initial conftests load), measures each
test, judges limits and writes one run into the store. See docs/pytest.md.
"""

from __future__ import annotations

import os

import pytest

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from typing import Any

#: Defaults of ``--memlens-fail-on-increase`` (percent) and ``--memlens-min-increase``.
DEFAULT_INCREASE_PERCENT = 10.0
DEFAULT_MIN_INCREASE = "256 KiB"
#: The oldest pytest ``--memlens`` works with (its session uses pluggy's new-style wrappers).
MIN_PYTEST = (8, 0)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memlens", "memory profiling with memlens (docs: docs/pytest.md)")
    group.addoption(
        "--memlens",
        action="store_true",
        default=False,
        help="profile the session with memlens: per-line figures of the code under test, "
        "per-test peak/allocated/leaked memory, memlens marker limits; one run in the store",
    )
    group.addoption(
        "--memlens-sample",
        metavar="BYTES",
        default=None,
        help="sampling mode: mean bytes between samples, e.g. 128KiB (default: exact)",
    )
    group.addoption(
        "--memlens-dir",
        metavar="DIR",
        default=".",
        help="store root: the run goes to DIR/.memlens/runs (default: .)",
    )
    group.addoption(
        "--memlens-fail-on-increase",
        metavar="PERCENT",
        nargs="?",
        const=str(DEFAULT_INCREASE_PERCENT),
        default=None,
        help="fail tests whose peak or leaked memory grew more than PERCENT over the same "
        f"test in the baseline run (default {DEFAULT_INCREASE_PERCENT:g}; give it as "
        "--memlens-fail-on-increase=PERCENT)",
    )
    group.addoption(
        "--memlens-min-increase",
        metavar="BYTES",
        default=DEFAULT_MIN_INCREASE,
        help="with --memlens-fail-on-increase: growth below this many bytes never fails a "
        f"test (default {DEFAULT_MIN_INCREASE})",
    )
    group.addoption(
        "--memlens-tolerance",
        metavar="PATTERN=PERCENT",
        action="append",
        default=[],
        help="with --memlens-fail-on-increase: tests whose node id matches PATTERN (a glob, "
        "a file or a folder) may grow by PERCENT (e.g. 'tests/test_x.py::test_threads=150%%'); "
        "may be given several times",
    )
    group.addoption(
        "--memlens-exempt",
        metavar="PATTERN",
        action="append",
        default=[],
        help="with --memlens-fail-on-increase: tests whose node id matches PATTERN are not "
        "compared with the baseline (their marker limits still hold); may be given several "
        "times",
    )
    group.addoption(
        "--memlens-baseline",
        metavar="RUN",
        default=None,
        help="the run to compare with (a run file, id, latest or baseline; default: the "
        "store's baseline)",
    )
    group.addoption(
        "--memlens-top",
        metavar="N",
        type=int,
        default=5,
        help="heaviest tests listed in the terminal summary (default 5; 0: none)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Start tracing before the initial conftest files are imported (they usually import the
    code under test). A pytest-xdist worker learns where its run goes later, from its
    controller (in :func:`pytest_configure`)."""
    options = early_config.known_args_namespace
    if getattr(options, "memlens", False):
        worker = bool(os.environ.get("PYTEST_XDIST_WORKER"))
        _session_module().start_tracing(options, early_config, path_later=worker)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "memlens(peak=None, leaks=None, gpu_peak=None, warmups=0, increase=None, compare=None): "
        "under pytest --memlens, fail the test when its peak, leaked or GPU peak memory "
        '(PyTorch CUDA) is over the size given (e.g. peak="5 MiB", leaks="1 MiB", '
        'gpu_peak="2 GiB"), measured on its last call after warmups more (warmups=1: what a '
        "call adds, not what a first call fills once); "
        'under --memlens-fail-on-increase, its own allowed growth (increase="50%", or False: '
        'not compared) and the figures compared (compare=("alloc", "leaks"))',
    )
    if not config.getoption("memlens"):
        return
    session = _session_module()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and session.WORKER_INPUT in workerinput:
        # A pytest-xdist worker: its tests are measured and judged here, its run goes into
        # the controller's processes folder.
        session.start_tracing(config.option, config, path_later=True)
        session.start_worker_checkpoints(workerinput[session.WORKER_INPUT])
        config.pluginmanager.register(session.MemlensSession(config, worker=True), NAME)
        return
    session.start_tracing(config.option, config)
    if _distributed(config):
        config.pluginmanager.register(session.DistributedSession(config), NAME)
    else:
        config.pluginmanager.register(session.MemlensSession(config), NAME)


#: The name the session's hooks are registered under.
NAME = "memlens-session"


def pytest_unconfigure(config: pytest.Config) -> None:
    # A session that ended before its run was written (a usage error, --help): no run, and
    # the allocator hooks are not left installed.
    import sys

    session = sys.modules.get("memlens.pytest_plugin.session")
    if session is not None:
        session.stop_tracing()


def _session_module() -> Any:
    """:mod:`memlens.pytest_plugin.session`, once pytest is known to be recent enough for it."""
    if pytest.version_tuple < MIN_PYTEST:
        raise pytest.UsageError(
            f"memlens: pytest --memlens needs pytest {'.'.join(map(str, MIN_PYTEST))} or "
            f"newer (this is pytest {pytest.__version__})"
        )
    from memlens.errors import MemlensError

    try:
        from memlens.tracing import tracer  # noqa: F401 - says in one line why a Python cannot trace
    except MemlensError as exc:
        raise pytest.UsageError(f"memlens: {exc}") from None
    from memlens.pytest_plugin import session

    return session


def _distributed(config: pytest.Config) -> bool:
    """Whether pytest-xdist distributes this session's tests to workers (this process is
    their controller): as pytest-xdist itself decides (its options are final by now)."""
    if not config.pluginmanager.has_plugin("xdist"):
        return False
    dist = getattr(config.option, "dist", "no")
    return dist != "no" and not config.getoption("collectonly")
