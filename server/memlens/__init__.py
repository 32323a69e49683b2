"""memlens: line-level Python memory profiler whose results live in your editor.

Public API::

    import memlens

    with memlens.profile() as p:      # exact mode; profile("sampling", seed=7) to sample
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
    from collections.abc import Iterable, Sequence

    from memlens.model import Run
    from memlens.tracer import Profile

__all__ = ["__version__", "profile", "start", "stop"]

# The defaults below are memlens.tracer.start's (tests/unit/test_api.py keeps them equal); they
# are written out so that help(memlens.profile) shows them without loading the native tracer.


def profile(
    mode: str = "exact",
    sample_interval: int | None = None,
    *,
    seed: int | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    libraries: bool = False,
    timeline_interval_ms: float = 10.0,
) -> Profile:
    """Context manager that traces the block it wraps; ``p.run`` is the result.

    ``mode`` is ``"exact"`` (every allocation) or ``"sampling"`` (about one sample every
    ``sample_interval`` bytes, default 128 KiB; ``seed`` makes it repeatable). ``include`` /
    ``exclude`` are globs of the files figures are charged to; standard library and installed
    packages are charged to your calling line unless ``libraries``. The memory timeline is
    sampled every ``timeline_interval_ms``. See :func:`memlens.tracer.start`.
    """
    from memlens.tracer import Profile

    return Profile(
        mode=mode,
        sample_interval=sample_interval,
        seed=seed,
        include=include,
        exclude=exclude,
        libraries=libraries,
        timeline_interval_ms=timeline_interval_ms,
    )


def start(
    mode: str = "exact",
    sample_interval: int | None = None,
    *,
    seed: int | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    libraries: bool = False,
    timeline_interval_ms: float = 10.0,
) -> None:
    """Start tracing every thread of this process (options as :func:`profile`)."""
    from memlens import tracer

    tracer.start(
        mode=mode,
        sample_interval=sample_interval,
        seed=seed,
        include=include,
        exclude=exclude,
        libraries=libraries,
        timeline_interval_ms=timeline_interval_ms,
    )


def stop(
    command: Sequence[str] | None = None, exit_code: int | None = 0, complete: bool = True
) -> Run:
    """Stop tracing and return the :class:`memlens.model.Run` recorded since :func:`start`.

    ``command``, ``exit_code`` and ``complete`` are recorded in the run's header (default: this
    process's ``sys.argv``, 0, True).
    """
    from memlens import tracer

    return tracer.stop(command=command, exit_code=exit_code, complete=complete)
