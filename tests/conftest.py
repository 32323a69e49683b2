from __future__ import annotations

from collections.abc import Iterator

import pytest


def _hooks_installed() -> bool:
    from memlens import _tracer

    return bool(_tracer.hooks_installed())


@pytest.fixture(autouse=True)
def _allocator_hooks_are_never_left_installed() -> Iterator[None]:
    """Every test starts and ends with CPython's own allocators in place."""
    assert not _hooks_installed(), "memlens allocator hooks were installed before the test"
    yield
    assert not _hooks_installed(), "the test left memlens allocator hooks installed"
