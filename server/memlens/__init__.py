"""memlens: line-level Python memory profiler whose results live in your editor.

Public API::

    import memlens

    with memlens.profile() as p:      # exact mode; profile("sampling", seed=7) to sample
        work()
    run = p.run                       # a memlens.model.Run

    with memlens.profile(save=True):  # also into the store: memlens show, the editor
        work()

    memlens.start(include=["myproj/*"])
    work()
    run = memlens.stop()

In IPython and Jupyter, ``%load_ext memlens`` adds ``%%memlens`` (docs/notebooks.md).
PYTEST_DONT_REWRITE: ``memlens run -m pytest`` imports this package before pytest starts, so
pytest could not rewrite its asserts (it has none); this marker in its docstring keeps pytest
from warning about that, which ``filterwarnings = error`` would turn into a failed session.
"""

from __future__ import annotations

import sys

from memlens._version import __version__

# Not `from typing import TYPE_CHECKING`: importing typing costs every profiled program
# milliseconds at start-up (mypy treats any TYPE_CHECKING constant the same way).
TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, ParamSpec, TypeVar

    from memlens.model import Run
    from memlens.tracing.tracer import Profile

    _P = ParamSpec("_P")
    _R = TypeVar("_R")

__all__ = ["__version__", "profile", "start", "stop"]

# The defaults below are memlens.tracing.tracer.start's (tests/native/test_api.py keeps them equal); they
# are written out so that help(memlens.profile) shows them without loading the native tracer, and
# start() takes the same parameters (_parameters_of).


def profile(
    mode: str = "exact",
    sample_interval: int | None = None,
    *,
    seed: int | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    libraries: bool = False,
    timeline_interval_ms: float = 10.0,
    checkpoint: str | os.PathLike[str] | None = None,
    checkpoint_interval_s: float = 5.0,
    watch_exits: bool = True,
    native: bool = True,
    save: bool | str | os.PathLike[str] = False,
    gpu: bool = True,
    holders: bool = True,
    track_reuse: bool = True,
) -> Profile:
    """Context manager that traces the block it wraps; ``p.run`` is the result.

    ``mode`` is ``"exact"`` (every allocation) or ``"sampling"`` (about one sample every
    ``sample_interval`` bytes, default 128 KiB; ``seed`` makes it repeatable). ``include`` /
    ``exclude`` are globs of the files figures are charged to; standard library and installed
    packages are charged to your calling line unless ``libraries``. The memory timeline is
    sampled every ``timeline_interval_ms``. With ``checkpoint`` (a path), the run so far is
    written there every ``checkpoint_interval_s`` seconds, so that a process that is killed
    leaves a run. ``watch_exits=False`` turns off the frame-exit monitoring that keeps deep
    stacks cheap on Python 3.12+ (the figures are the same). ``native=False`` leaves out what C
    libraries allocate through the C allocator; ``gpu=False`` PyTorch's CUDA memory (recorded
    from when the program initialises CUDA). ``holders=False``: the run does not record what
    holds the lines still live at its end. ``track_reuse=False`` leaves objects CPython makes
    in reused blocks (its free lists) on the line that first allocated the block, as before
    Python 3.13 (for comparisons). With ``save=True`` the run is also written into the store
    of the working directory (``.memlens/runs/``, ``save="path"``: the store rooted there) when
    the block ends, and becomes ``latest``: ``memlens show`` and the editor show it; ``p.path``
    is its file. See :func:`memlens.tracing.tracer.start`.
    """
    options = dict(locals())  # the parameters, as keywords (a copy: locals() may change)
    from memlens.tracing.tracer import Profile

    return Profile(**options)


def _parameters_of(model: Callable[_P, object]) -> Callable[[Callable[..., _R]], Callable[_P, _R]]:
    """Gives the decorated function ``model``'s parameters: for type checkers, and for help()
    and inspect.signature, which follow its ``__wrapped__`` to a copy of ``model`` (never
    called) under the decorated function's name and return annotation. (Not an
    inspect.Signature: importing inspect costs every profiled program milliseconds at start-up;
    and functools.wraps would show ``model``'s return annotation.)"""

    def give(function: Callable[..., _R]) -> Callable[_P, _R]:
        source: Any = model
        shown = type(source)(source.__code__, source.__globals__, function.__name__)
        shown.__defaults__ = source.__defaults__
        shown.__kwdefaults__ = dict(source.__kwdefaults__ or {})
        returns = function.__annotations__["return"]
        shown.__annotations__ = {**source.__annotations__, "return": returns}
        function.__wrapped__ = shown  # type: ignore[attr-defined]
        return function

    return give


@_parameters_of(profile)
def start(*args: Any, **options: Any) -> None:
    """Start tracing every thread of this process (options as :func:`profile`)."""
    # What a profile() block does as it starts (its arguments checked as profile's are).
    profile(*args, **options).__enter__()


def stop(
    command: Sequence[str] | None = None,
    exit_code: int | None = 0,
    complete: bool = True,
    holders: bool | None = None,
) -> Run:
    """Stop tracing and return the :class:`memlens.model.Run` recorded since :func:`start`
    (started with ``save``: written into the store too, as ``latest``).

    ``command``, ``exit_code`` and ``complete`` are recorded in the run's header (default: this
    process's ``sys.argv``, 0, True). ``holders``: whether the run records what holds its live
    lines (default: as :func:`start` was told).
    """
    # Looked up rather than imported while tracing: an import statement allocates, and that
    # would be charged to the caller's line before tracer.stop() pauses this thread.
    tracer = sys.modules.get("memlens.tracing.tracer")
    if tracer is None:  # not tracing: its stop() says so
        from memlens.tracing import tracer as imported

        tracer = imported
    run: Run = tracer.stop(command=command, exit_code=exit_code, complete=complete, holders=holders)
    return run


def load_ipython_extension(ipython: object) -> None:
    """``%load_ext memlens``: the ``%%memlens`` cell magic, the ``%memlens`` line magic and
    ``%memlens_kept`` (docs/notebooks.md)."""
    from memlens.notebook import magic

    magic.load(ipython)


def unload_ipython_extension(ipython: object) -> None:
    """``%unload_ext memlens``: the magics are removed."""
    from memlens.notebook import magic

    magic.unload(ipython)
