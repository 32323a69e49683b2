"""``memlens import pymemtrace``: a cPyMemTrace Profile/Trace log as a run.

The log (an ASCII file) is, in order: an optional opening message (any lines), ``SOF``, one
``HEDR:`` row naming the columns ``Event dEvent Clock What File Line Function RSS dRSS``, then
event rows ``FRST:`` (once), ``NEXT:``, ``PREV:``, ``MSG:`` and ``LAST:`` (once), and ``EOF``.
An event row carries the event number, ``+``dEvent, the process clock in seconds, the event
type, the executing file (which may contain spaces, e.g. ``<frozen posixpath>``), line,
function, RSS and dRSS (the RSS change since the previous logged event). ``PREV:`` repeats an
event already seen (or only its number and clock) and is not counted again; ``MSG:`` rows and
their continuation lines are user messages.

Per line, *allocated* is the RSS growth seen at that line: the sum of its positive dRSS, the
count being the number of such events. *live* is the net RSS change at that line (never below
0), *peak* the growth seen there up to the moment RSS was at its highest. The first event's
dRSS is the whole RSS at start, not growth, so it is not charged. The log has no call stacks,
so inclusive figures equal self figures and the call tree is flat. A log without ``EOF`` (the
traced program died) is imported as an incomplete run.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from memlens.errors import MemlensError, os_error_reason
from memlens.imports._build import RunBuilder, Sources, bounded, check_value
from memlens.layout import open_regular
from memlens.model import Run, TimelinePoint, replace

COLUMNS = ("Event", "dEvent", "Clock", "What", "File", "Line", "Function", "RSS", "dRSS")
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_EVENT = re.compile(
    r"^(FRST|NEXT|PREV|LAST):\s+(\d+)\s+\+(\d+)\s+(" + _NUMBER + r")\s+(\S+)\s+(.*?\S)\s+"
    r"(\d+)\s+(\S+)\s+(\d+)\s+(-?\d+)\s*$"
)
_SHORT_PREV = re.compile(r"^PREV:\s+(\d+)\s+\+(\d+)\s+(" + _NUMBER + r")\s*$")
_MSG = re.compile(r"^MSG:\s+(\d+)\s+\+(\d+)\s+(" + _NUMBER + r")(?:\s+#.*)?\s*$")
_NAME = re.compile(r"(\d{8})_(\d{6})_\d+_(\d+)_([OPT])_\d+_PY([0-9][0-9A-Za-z.+]*)\.log$")


class _Event:
    __slots__ = ("clock", "drss", "file", "function", "line", "rss")

    def __init__(
        self, clock: float, file: str, line: int, function: str, rss: int, drss: int
    ) -> None:
        self.clock, self.file, self.line = clock, file, line
        self.function, self.rss, self.drss = function, rss, drss


def import_log(path: str, search_dirs: Sequence[str] = ()) -> Run:
    """Parse a cPyMemTrace Profile/Trace log into a Run.

    Relative file names in the log are looked up in ``search_dirs`` (default, or none given: the
    current directory, then the log's directory). Raises :class:`MemlensError` (one line) on bad input.
    """
    try:
        # A regular file only: a FIFO or device given by mistake would block or never end.
        with open(open_regular(path), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        raise MemlensError(f"cannot read {path}: {os_error_reason(exc)}") from None
    events, complete = _parse(path, text.splitlines())
    try:
        return _build(path, events, complete, search_dirs)
    except ValueError as exc:  # figures that cannot be recorded (see _build.check_value)
        raise MemlensError(f"cannot read {path}: {exc}") from None


def _build(path: str, events: list[_Event], complete: bool, search_dirs: Sequence[str]) -> Run:
    if not search_dirs:
        search_dirs = (os.getcwd(), os.path.dirname(os.path.abspath(path)))
    builder = RunBuilder(Sources(search_dirs))
    peak_at = max(range(len(events)), key=lambda i: events[i].rss)
    # The log has no stacks, so each site is summed first and added once.
    sites: dict[tuple[str, int, str], list[int]] = {}
    for i, ev in enumerate(events):
        if i == 0:
            continue  # the first event's dRSS is the whole RSS at start, not growth
        grow = max(ev.drss, 0)
        acc = sites.get((ev.file, ev.line, ev.function))
        if acc is None:
            acc = sites[(ev.file, ev.line, ev.function)] = [0, 0, 0, 0]
        acc[0] += grow
        acc[1] += 1 if grow else 0
        acc[2] += ev.drss
        acc[3] += grow if i <= peak_at else 0
    for (file, line, function), (alloc, count, live, peak) in sites.items():
        builder.add([(file, line, function)], alloc=alloc, count=count, live=live, peak=peak)
    t0, rss0 = events[0].clock, events[0].rss
    timeline = [TimelinePoint(ev.clock - t0, max(ev.rss - rss0, 0), ev.rss) for ev in events]
    name = _NAME.search(os.path.basename(path))
    if not complete:
        print(
            f"memlens: warning: {path} has no EOF line (the traced program did not finish); "
            "importing it as an incomplete run",
            file=sys.stderr,
        )
    run = builder.build(
        command=("pymemtrace", os.path.abspath(path)),
        source="pymemtrace",
        python=name.group(5) if name else "",
        started=_started(name),
        duration_s=max(events[-1].clock - t0, 0.0),
        peak_traced_bytes=max(ev.rss for ev in events) - rss0,
        peak_rss_bytes=max(ev.rss for ev in events),
        timeline=bounded(timeline),
        complete=complete,
        pid=int(name.group(3)) if name else 0,
    )
    return _clamp_live(run)


def _parse(path: str, lines: list[str]) -> tuple[list[_Event], bool]:
    """The counted events (FRST, NEXT, LAST in order) and whether the log ended with EOF."""

    def bad(number: int, why: str) -> MemlensError:
        return MemlensError(f"cannot read {path}: line {number}: {why}")

    sof = next((i for i, ln in enumerate(lines) if ln.strip() == "SOF"), None)
    if sof is None:
        if any(ln.startswith(("HDR:", "NEW:", "DEL:")) for ln in lines[:50]):
            raise MemlensError(
                f"cannot read {path}: a cPyMemTrace reference-tracing log; only Profile/Trace "
                "logs (HEDR/FRST/NEXT rows) can be imported"
            )
        raise MemlensError(f"cannot read {path}: not a pymemtrace log (no SOF line)")
    events: list[_Event] = []
    header = False
    in_message = False
    seen_first = seen_last = ended = False
    for number in range(sof + 2, len(lines) + 1):
        raw = lines[number - 1]
        row = raw.strip()
        if ended:
            if row:
                raise bad(number, "text after EOF")
            continue
        if not row:
            continue
        kind = row.split(maxsplit=1)[0]
        if kind == "HDR:":
            raise MemlensError(
                f"cannot read {path}: a cPyMemTrace reference-tracing log; only Profile/Trace "
                "logs (HEDR/FRST/NEXT rows) can be imported"
            )
        if kind == "HEDR:":
            if header:
                raise bad(number, "a second HEDR row")
            columns = tuple(row.split()[1:])
            if columns != COLUMNS:
                raise bad(number, f"unsupported columns {' '.join(columns)!r}")
            header = True
            in_message = False
            continue
        if kind == "EOF":
            if row != "EOF":
                raise bad(number, "bad EOF row")
            ended = True
            continue
        if kind in ("FRST:", "NEXT:", "PREV:", "LAST:", "MSG:") and not header:
            raise bad(number, f"{kind[:-1]} row before the HEDR row")
        if kind == "MSG:":
            if not _MSG.match(row):
                raise bad(number, "bad MSG row")
            in_message = True
            continue
        if kind == "PREV:" and _SHORT_PREV.match(row):
            in_message = False
            continue
        if kind in ("FRST:", "NEXT:", "PREV:", "LAST:"):
            m = _EVENT.match(row)
            if m is None:
                raise bad(number, f"bad {kind[:-1]} row")
            in_message = False
            if kind == "PREV:":
                continue  # a reminder of an event already logged: not counted again
            if kind == "FRST:":
                if seen_first or events:
                    raise bad(number, "FRST row after other events")
                seen_first = True
            elif not seen_first:
                raise bad(number, f"{kind[:-1]} row before the FRST row")
            if seen_last:
                raise bad(number, f"{kind[:-1]} row after the LAST row")
            if kind == "LAST:":
                seen_last = True
            try:
                clock = float(m.group(4))
            except ValueError:  # pragma: no cover - the pattern admits only numbers
                raise bad(number, "bad clock") from None
            if not math.isfinite(clock):  # "1e999": run files hold finite numbers only
                raise bad(number, "bad clock")
            try:
                line, rss, drss = (
                    check_value(_number(m.group(i)), what)
                    for i, what in ((7, "line number"), (9, "RSS"), (10, "dRSS"))
                )
            except ValueError as exc:
                raise bad(number, str(exc)) from None
            events.append(_Event(clock, m.group(6), line, m.group(8), rss, drss))
            continue
        if in_message:
            continue  # a message keeps its newlines: its next lines are part of it
        raise bad(number, f"unrecognised row {row[:40]!r}")
    if not header:
        raise MemlensError(f"cannot read {path}: no HEDR row after SOF")
    if not events:
        raise MemlensError(f"cannot read {path}: the log has no events")
    return events, ended


def _number(digits: str) -> int:
    """A decimal integer of the log; a number too long to be real is out of range."""
    if len(digits.lstrip("-")) > 30:
        raise ValueError(f"number out of range ({digits[:30]}...)")
    return int(digits)


def _clamp_live(run: Run) -> Run:
    files = {
        p: replace(
            sf,
            lines={
                n: replace(
                    st,
                    live_bytes=max(st.live_bytes, 0),
                    incl_live_bytes=max(st.incl_live_bytes, 0),
                )
                for n, st in sf.lines.items()
            },
            functions=tuple(replace(fn, live_bytes=max(fn.live_bytes, 0)) for fn in sf.functions),
        )
        for p, sf in run.files.items()
    }
    tree = tuple(replace(n, live_bytes=max(n.live_bytes, 0)) for n in run.call_tree)
    return replace(run, files=files, call_tree=tree)


def _started(name: re.Match[str] | None) -> datetime | None:
    if name is None:
        return None
    try:
        # The name carries local time of the traced process; its zone is unknown.
        return datetime.strptime(name.group(1) + name.group(2), "%Y%m%d%H%M%S").replace(
            tzinfo=timezone.utc
        )
    except ValueError:
        return None
