"""``memlens import pymemtrace``: a cPyMemTrace Profile/Trace log as a run.

The log records, per event, the executing file, line and function, the RSS and its change
since the previous event (dRSS). Per line, the run's *allocated* figure is the RSS growth seen
at that line (the sum of positive dRSS of its events, count = number of such events), *live* is
the net RSS change at that line (never below 0), and *peak* is the growth seen there up to the
moment RSS was at its highest. The log has no call stacks, so inclusive figures equal self
figures. PREV rows repeat an earlier event and are not counted again.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone

from memlens.errors import MemlensError
from memlens.imports._build import RunBuilder
from memlens.model import Run, TimelinePoint

_EVENT_ROWS = ("FRST:", "NEXT:", "LAST:")
_NAME = re.compile(r"(\d{8})_(\d{6})_\d+_(\d+)_[OPT]_\d+_PY([0-9][0-9A-Za-z.+]*)\.log$")


def import_log(path: str) -> Run:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise MemlensError(f"cannot read {path}: no such file") from None
    except OSError as exc:
        raise MemlensError(f"cannot read {path}: {exc.strerror or exc}") from None
    if "SOF" not in (ln.strip() for ln in lines[:50]):
        raise MemlensError(f"cannot read {path}: not a pymemtrace log (no SOF line)")
    events: list[tuple[float, str, int, str, int, int]] = []
    for number, raw in enumerate(lines, start=1):
        row = raw.split()
        if not row or row[0] not in _EVENT_ROWS:
            continue
        try:
            clock = float(row[3])
            line, func, rss, drss = int(row[-4]), row[-3], int(row[-2]), int(row[-1])
            file = " ".join(row[5:-4])
        except (IndexError, ValueError):
            raise MemlensError(f"cannot read {path}: bad event on line {number}") from None
        if not file:
            raise MemlensError(f"cannot read {path}: bad event on line {number}")
        events.append((clock, file, line, func, rss, drss))
    if not events:
        raise MemlensError(f"cannot read {path}: the log has no events")
    base = os.path.dirname(os.path.abspath(path))
    peak_at = max(range(len(events)), key=lambda i: events[i][4])
    builder = RunBuilder()
    for i, (_clock, file, line, func, _rss, drss) in enumerate(events):
        if i == 0:
            continue  # the first event's dRSS is the whole RSS at start, not growth
        grow = max(drss, 0)
        builder.add(
            [(file, line, func)],
            alloc=grow,
            count=1 if grow else 0,
            live=drss,
            peak=grow if i <= peak_at else 0,
        )
    t0 = events[0][0]
    timeline = [TimelinePoint(c - t0, 0, rss) for c, *_rest, rss, _d in events]
    run = builder.build(
        command=("pymemtrace", os.path.abspath(path)),
        source="pymemtrace",
        python=_python_of(path),
        started=_started_of(path),
        duration_s=events[-1][0] - t0,
        peak_traced_bytes=max(e[4] for e in events) - events[0][4],
        peak_rss_bytes=max(e[4] for e in events),
        timeline=_bounded(timeline),
        base_dir=base,
    )
    return _clamp_live(run)


def _clamp_live(run: Run) -> Run:
    from dataclasses import replace

    files = {
        p: replace(
            sf,
            lines={
                n: replace(
                    st, live_bytes=max(st.live_bytes, 0), incl_live_bytes=max(st.incl_live_bytes, 0)
                )
                for n, st in sf.lines.items()
            },
        )
        for p, sf in run.files.items()
    }
    return replace(run, files=files)


def _bounded(points: list[TimelinePoint], cap: int = 4096) -> list[TimelinePoint]:
    step = max(1, -(-len(points) // cap))
    return points[::step]


def _python_of(path: str) -> str:
    m = _NAME.search(os.path.basename(path))
    return m.group(4) if m else ""


def _started_of(path: str) -> datetime | None:
    m = _NAME.search(os.path.basename(path))
    if not m:
        return None
    try:
        return datetime.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S").replace(
            tzinfo=timezone.utc
        )
    except ValueError:
        return None
