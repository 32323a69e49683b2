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

TYPE_CHECKING = False
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
    code under test), unless ``--memlens`` is off or pytest-xdist distributes the tests."""
    options = early_config.known_args_namespace
    if getattr(options, "memlens", False) and not _distributed(options):
        _session_module().start_tracing(options, early_config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "memlens(peak=None, leaks=None, gpu_peak=None): under pytest --memlens, fail the test "
        "when its peak, leaked or GPU peak memory (PyTorch CUDA) is over the size given (e.g. "
        'peak="5 MiB", leaks="1 MiB", gpu_peak="2 GiB")',
    )
    if not config.getoption("memlens"):
        return
    if _distributed(config.option):
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return  # (the controller refused already: a worker of an older memlens's session)
        # Refused, not ignored: a CI gate run with -n would pass tests over their limits.
        raise pytest.UsageError(DISTRIBUTED)
    session = _session_module()
    session.start_tracing(config.option, config)
    config.pluginmanager.register(session.MemlensSession(config), "memlens-session")


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


#: Why ``--memlens`` refuses a session that pytest-xdist distributes.
DISTRIBUTED = (
    "memlens: --memlens does not work with pytest-xdist yet (-n/--dist): run without -n "
    "(or with -n 0) to profile the tests"
)


def _distributed(options: Any) -> bool:
    """Whether pytest-xdist runs the tests (this process is a worker, or the controller of
    workers): not supported yet (docs/pytest.md)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return True
    processes = getattr(options, "numprocesses", None)
    dist = getattr(options, "dist", None)
    return bool(processes) or dist not in (None, "no")
