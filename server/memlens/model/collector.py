"""Python's cyclic garbage collector, paused while a run is read or compared.

Reading a big run makes a few hundred thousand objects (a function's figures, a pair of
functions) that form no cycle; each allocation counts towards the collector's next pass, and
each pass of the oldest generation walks every object held so far: on a run of a million lines
the passes took about a tenth of a diff's time for nothing. Objects freed meanwhile are freed
as usual (reference counting); only cycles wait until the collector runs again.
"""

from __future__ import annotations

import gc

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from types import TracebackType


class collector_paused:
    """Pause the collector for the block (left off if something else had turned it off)."""

    __slots__ = ("_was",)

    def __enter__(self) -> None:
        self._was = gc.isenabled()
        gc.disable()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._was:
            gc.enable()
