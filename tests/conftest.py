from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

#: The tests whose outcome depends on the interpreter (its version's frame and code layouts,
#: free lists, start-up modules; how it is linked, for native memory): the tracer, `memlens
#: run`, followed children, other tracers beside memlens, seeded sampling and the pytest
#: plugin's sessions (not its option handling while idle). They get the `interpreter` marker,
#: and `./dev versions` runs them again on every Python of the matrix; the rest of the suite
#: (run files, the CLI's other commands, the language and MCP servers) runs once. Paths are
#: relative to tests/; folders end in "/". A test of theirs marked `any_interpreter` (a usage
#: error, a check made before anything runs) runs once.
INTERPRETER_DEPENDENT = (
    "native/",
    "pytest_plugin/test_session_e2e.py",
    "pytest_plugin/test_limits_e2e.py",
    "pytest_plugin/test_increase_e2e.py",
    "cli/test_run_every_figure.py",
    "cli/test_run_like_python.py",
    "cli/test_run_results.py",
    "cli/test_run_lifecycle.py",
    "cli/test_run_startup.py",
    "cli/test_follow_e2e.py",
    "cli/test_holders_e2e.py",
    "cli/test_other_tracers.py",
    "cli/test_sampling_seed.py",
    "cli/test_attach_e2e.py",
    "notebooks/",
    "cli/test_gpu_live.py",
    "pytest_plugin/test_gpu_limits_e2e.py",
)
_TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("any_interpreter"):
            continue
        where = item.path.relative_to(_TESTS).as_posix()
        if any(
            where.startswith(p) if p.endswith("/") else where == p for p in INTERPRETER_DEPENDENT
        ):
            item.add_marker(pytest.mark.interpreter)


#: The pytest plugins of this suite's own tools, left out of the pytest sessions the tests start
#: (the memlens plugin's sessions, `memlens run -m pytest`, an installed wheel's pytest): none
#: of those sessions uses them, and importing them (hypothesis, lsprotocol through pytest-lsp,
#: pytest-asyncio) costs a session about 3 s of CPU here, while memlens's plugin still loads
#: from its entry point as in a user's session.
INNER_SESSIONS_WITHOUT = ("hypothesispytest", "pytest-lsp", "asyncio", "anyio")
_GIVEN_ADDOPTS = os.environ.get("PYTEST_ADDOPTS")


def own_files_env(**extra: str) -> dict[str, str]:
    """The environment for a pytest session of this suite's own files (they use its plugins):
    this process's, PYTEST_ADDOPTS as this session was given it, and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    if _GIVEN_ADDOPTS is not None:
        env["PYTEST_ADDOPTS"] = _GIVEN_ADDOPTS
    return {**env, **extra}


@pytest.fixture(autouse=True, scope="session")
def _inner_sessions_without_our_plugins() -> Iterator[None]:
    # Set once the session runs, in the process running tests: pytest-xdist's workers, which
    # read PYTEST_ADDOPTS as they start, are already running then.
    given = (_GIVEN_ADDOPTS or "").split()
    opts = [f"-pno:{name}" for name in INNER_SESSIONS_WITHOUT]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_ADDOPTS", " ".join(given + [o for o in opts if o not in given]))
        yield


# Programs the tests start must get the signals they are sent. A suite started in the
# background of a script (SIGINT ignored) or under nohup (SIGHUP ignored) would hand the
# ignored disposition down to every child, and signal tests would measure that instead.
for _signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
    if signal.getsignal(_signum) == signal.SIG_IGN:
        signal.signal(
            _signum, signal.default_int_handler if _signum == signal.SIGINT else signal.SIG_DFL
        )


def _hooks_installed() -> bool:
    from memlens import _tracer  # noqa: PLC0415 - only tests that trace load the native module

    return bool(_tracer.hooks_installed())


@pytest.fixture
def allocator_hooks_restored() -> Iterator[None]:
    """The test starts and ends with CPython's own allocators in place. Used by every test
    that runs the tracer in this process (autouse in tests/native); tests that do not load
    the native module need not import it for this."""
    assert not _hooks_installed(), "memlens allocator hooks were installed before the test"
    yield
    assert not _hooks_installed(), "the test left memlens allocator hooks installed"
