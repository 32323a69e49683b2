from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

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
