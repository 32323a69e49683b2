"""memlens: line-level Python memory profiler whose results live in your editor.

Public API::

    import memlens

    with memlens.profile() as p:      # exact mode; profile(mode="sampling") to sample
        work()
    run = p.run                       # a memlens.model.Run

    memlens.start(include=["myproj/*"])
    work()
    run = memlens.stop()
"""

from __future__ import annotations

from memlens._version import __version__

# Not `from typing import TYPE_CHECKING`: importing typing costs every profiled program
# milliseconds at start-up (mypy treats any TYPE_CHECKING constant the same way).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from memlens.model import Run
    from memlens.tracer import Profile

__all__ = ["__version__", "profile", "start", "stop"]


def profile(**options: Any) -> Profile:
    """Context manager that traces the block it wraps (options as :func:`start`)."""
    from memlens.tracer import Profile

    return Profile(**options)


def start(**options: Any) -> None:
    """Start tracing every thread of this process; see :func:`memlens.tracer.start`."""
    from memlens import tracer

    tracer.start(**options)


def stop(**options: Any) -> Run:
    """Stop tracing and return the :class:`memlens.model.Run` recorded since :func:`start`."""
    from memlens import tracer

    return tracer.stop(**options)
