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
    from memlens import _tracer

    return bool(_tracer.hooks_installed())


@pytest.fixture(autouse=True)
def _allocator_hooks_are_never_left_installed() -> Iterator[None]:
    """Every test starts and ends with CPython's own allocators in place."""
    assert not _hooks_installed(), "memlens allocator hooks were installed before the test"
    yield
    assert not _hooks_installed(), "the test left memlens allocator hooks installed"
