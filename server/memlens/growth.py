"""The leak rule: did a line's memory still held at exit grow during the run, or was it
allocated once and kept? One pure function over a line's live bytes over time (:func:`judge`),
which the editor's warnings, ``memlens show`` and the pytest plugin's ``leaked`` all use.
Stdlib only.

Memory that a program allocates once and keeps on purpose (a library's first-use buffer such
as OpenBLAS's on the first matrix product, module state imported lazily, a memo filled on the
first call) is live at exit like a leak, but it stops growing: by the middle of the line's life
it holds what it holds at the end. A leak keeps growing (from call to call of the code that
leaks), so what the line holds at exit is well above what it held by the middle of its life.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memlens.model import Run
from memlens.moment import seconds, series
from memlens.units import fmt_bytes, fmt_count

#: Grew during the run: a likely leak.
GROWING = "growing"
#: Reached its size early and kept it: allocated once and kept (information, not a leak).
KEPT = "kept"
#: Held memory only in the last moments of the run: too late to tell the two apart.
LATE = "late"
#: The run has no moments (an older run, an import): nothing to tell growth by.
UNKNOWN = "unknown"

#: A line grew when it added more than this share of what it holds at the end after the middle
#: of its life.
GROWTH_SHARE = 0.10
#: A line's life must span this many points (moments and the end) to be judged.
MIN_POINTS = 3


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`judge` found: ``kind`` (:data:`GROWING`, :data:`KEPT`, :data:`LATE`,
    :data:`UNKNOWN`); ``end``, the bytes held at the end; ``since``, when the line first held
    memory (seconds; None when unknown); ``level``, the most it held in the first half of its
    life (from ``since`` to the end), and ``middle``, when that half ended."""

    kind: str
    end: int
    since: float | None = None
    level: int = 0
    middle: float | None = None

    @property
    def grew(self) -> int:
        """Bytes added after the middle of the line's life."""
        return max(0, self.end - self.level)


def judge(points: Sequence[tuple[float, int]]) -> Verdict:
    """The verdict on a line from its live bytes over time: ``(t, bytes)`` in time order, the
    last point being what it holds at the end (of the run, or of a test). No points: the run
    cannot tell (:data:`UNKNOWN`)."""
    if not points:
        return Verdict(UNKNOWN, 0)
    end = points[-1][1]
    first = next((i for i, (_, v) in enumerate(points) if v > 0), None)
    if first is None:
        return Verdict(KEPT, end)
    since = points[first][0]
    life = points[first:]
    if len(life) < MIN_POINTS:
        return Verdict(LATE, end, since)
    middle = since + (points[-1][0] - since) / 2
    level = max(v for t, v in life if t <= middle)
    kind = GROWING if end - level > end * GROWTH_SHARE else KEPT
    return Verdict(kind, end, since, level, middle)


def line_verdict(run: Run, path: str, line: int) -> Verdict:
    """The verdict on line ``line`` of file ``path`` of ``run``, from the run's moments."""
    points = series(run, path, line)
    if not points:
        sf = run.files.get(path)
        st = sf.lines.get(line) if sf is not None else None
        return Verdict(UNKNOWN, st.live_bytes if st is not None else 0)
    return judge(points)


def message(verdict: Verdict, live_count: int, allocated: int) -> str:
    """What the editor says of a line live at exit (its diagnostic), in the verdict's words."""
    objects = f" in {fmt_count(live_count)} objects" if live_count else ""
    held = f"{fmt_bytes(verdict.end)} allocated here{objects}"
    if verdict.kind == GROWING:
        middle = seconds(verdict.middle or 0.0)
        return (
            f"{held} is still live at exit, and grew during the run: {fmt_bytes(verdict.level)} "
            f"by {middle}, {fmt_bytes(verdict.end)} at exit (likely leak; "
            f"{fmt_bytes(allocated)} allocated in total)"
        )
    if verdict.kind == KEPT:
        return (
            f"{held} is kept to the end: held since {seconds(verdict.since or 0.0)} and not grown "
            "since (allocated once and kept, like a first-use buffer, a cache filled once or "
            "state loaded lazily: not a leak)"
        )
    if verdict.kind == LATE:
        return (
            f"{held} is still live at exit; it was allocated in the last moments of the run, too "
            "late to tell growth from memory kept on purpose"
        )
    return f"{held} is still live at exit (likely leak; {fmt_bytes(allocated)} allocated in total)"


#: The verdicts in a table's cell (``memlens show``'s live tables).
SHORT = {GROWING: "grew", KEPT: "kept", LATE: "late", UNKNOWN: ""}


def short(verdict: Verdict) -> str:
    """The verdict in a table's cell: ``grew`` (a likely leak), ``kept`` (allocated once and
    kept), ``late``; "" when the run cannot tell."""
    return SHORT[verdict.kind]
