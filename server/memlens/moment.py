"""A moment of a run, as users name it: ``peak``, ``end``, a time (``2.5s``, ``250ms``) or a
share of the run (``40%``). Parsing it, finding it in a run, and each line's and function's
live bytes then. Stdlib only.

At ``peak`` a line's figures are its ``peak_bytes`` (exact: what it held when the whole
program peaked); at ``end`` its ``live_bytes``; at a time, its live bytes at the latest of the
run's moments (:class:`memlens.model.Moments`) at or before that time. ``memlens show --at``,
``memlens diff --from/--to``, the language server's ``memlens.setMoment`` and the MCP tools all
go through :func:`resolve` and :func:`line_values`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memlens.errors import MemlensError
from memlens.model import FunctionKey, LineStats, Run, SourceFile, replace
from memlens.units import fmt_bytes

#: What a moment may be written as (one line, for errors and help texts).
SYNTAX = "peak, end, a time such as 2.5s or 250ms, or a share of the run such as 40%"
#: The same in an argparse help string (which is %-formatted: Python 3.14 checks it at once).
HELP_SYNTAX = SYNTAX.replace("%", "%%")

_TIME = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*(s|ms)$")
_SHARE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*%$")
#: Longest moment spec read (a spec comes from a command line, an editor or an agent).
_MAX_SPEC = 64


@dataclass(frozen=True, slots=True)
class Moment:
    """A moment of one run: ``kind`` is ``peak``, ``end`` or ``time`` (one of the run's
    moments, ``index``; -1 before the first, when nothing was held yet); ``t`` is when, in
    seconds since the run started (None: the run does not record when its peak was);
    ``traced_bytes`` what was traced then."""

    kind: str
    index: int
    t: float | None
    traced_bytes: int

    @property
    def name(self) -> str:
        """``peak``, ``end`` or ``0.25 s``: what the status bar and titles say."""
        if self.kind in ("peak", "end"):
            return self.kind
        return seconds(self.t or 0.0)

    @property
    def words(self) -> str:
        """What follows a size in a label: ``at peak``, ``live at exit``, ``live at 0.25 s``."""
        if self.kind == "peak":
            return "at peak"
        if self.kind == "end":
            return "live at exit"
        return f"live at {self.name}"

    @property
    def spec(self) -> str:
        """The spec that names this moment again (``peak``, ``end``, ``0.250000s``)."""
        return self.kind if self.kind in ("peak", "end") else f"{self.t or 0.0:.6f}s"

    def describe(self) -> str:
        """``peak (0.12 s, 30.0 MiB traced)``, ``0.25 s (20.0 MiB traced)``."""
        traced = f"{fmt_bytes(self.traced_bytes)} traced"
        if self.kind != "time" and self.t is not None:
            return f"{self.name} ({seconds(self.t)}, {traced})"
        return f"{self.name} ({traced})"

    def as_json(self) -> dict[str, object]:
        """The moment for editors and agents: kind, name, spec, t, traced_bytes."""
        return {
            "kind": self.kind,
            "name": self.name,
            "spec": self.spec,
            "t": self.t,
            "traced_bytes": self.traced_bytes,
        }


def seconds(t: float) -> str:
    """``0.25 s``, ``12.50 s``, ``3.1 ms``."""
    return f"{t * 1000:.1f} ms" if 0 < t < 0.01 else f"{t:.2f} s"


def parse(spec: str) -> tuple[str, float]:
    """``(kind, value)``: ``("peak", 0)``, ``("end", 0)``, ``("time", seconds)`` or
    ``("share", fraction)``; a one-line MemlensError for anything else."""
    text = spec.strip().lower() if isinstance(spec, str) else ""
    if len(text) > _MAX_SPEC or not text:
        raise MemlensError(f"not a moment: {_shown(spec)} (use {SYNTAX})")
    if text in ("peak", "end"):
        return text, 0.0
    m = _TIME.match(text)
    if m:
        value = float(m.group(1))
        return "time", value / 1000 if m.group(2) == "ms" else value
    m = _SHARE.match(text)
    if m:
        share = float(m.group(1))
        if share > 100:
            raise MemlensError(f"{_shown(spec)} is more than the whole run (100%)")
        return "share", share / 100
    raise MemlensError(f"not a moment: {_shown(spec)} (use {SYNTAX})")


def _shown(spec: object) -> str:
    return repr(spec[:_MAX_SPEC] if isinstance(spec, str) else spec)


def resolve(run: Run, spec: str) -> Moment:
    """The moment of ``run`` that ``spec`` names; a one-line MemlensError when the run cannot
    show it (a time in a run without moments, or after its end)."""
    kind, value = parse(spec)
    info = run.info
    if kind == "peak":
        return Moment("peak", -1, info.peak_at_s, info.peak_traced_bytes)
    if kind == "end":
        return Moment("end", -1, info.duration_s, end_traced(run))
    duration = info.duration_s
    t = value * duration if kind == "share" else value
    if kind == "share" and value >= 1.0:
        return resolve(run, "end")
    moments = run.moments
    if not moments:
        raise MemlensError(
            "this run has no moments (made by an older memlens, imported, or with the timeline "
            "off): only --at peak and --at end"
        )
    if t > duration:
        raise MemlensError(f"{spec.strip()} is after the end of the run ({seconds(duration)})")
    times = moments.t
    index = _last_at_or_before(times, t)
    if index < 0:
        return Moment("time", -1, t, 0)
    return Moment("time", index, times[index], moments.traced_bytes[index])


def _last_at_or_before(times: Sequence[float], t: float) -> int:
    lo, hi = 0, len(times)
    while lo < hi:
        mid = (lo + hi) // 2
        if times[mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def end_traced(run: Run) -> int:
    """What was traced when the run ended: the timeline's last point, else the lines' live
    bytes summed."""
    if run.timeline:
        return run.timeline[-1].traced_bytes
    return sum(st.live_bytes for sf in run.files.values() for st in sf.lines.values())


def line_values(run: Run, moment: Moment) -> Mapping[str, Mapping[int, tuple[int, int]]]:
    """Per file and line, its live bytes at ``moment``: (self, incl. calls); lines that held
    nothing are left out."""
    if moment.kind in ("peak", "end"):
        own, incl = (
            ("peak_bytes", "incl_peak_bytes")
            if moment.kind == "peak"
            else ("live_bytes", "incl_live_bytes")
        )
        out: dict[str, dict[int, tuple[int, int]]] = {}
        for path, sf in run.files.items():
            for line, st in sf.lines.items():
                a, b = getattr(st, own), getattr(st, incl)
                if a or b:
                    out.setdefault(path, {})[line] = (a, b)
        return out
    if moment.index < 0:
        return {}
    return run.moments.values_at(moment.index)


def function_values(run: Run, moment: Moment) -> Mapping[FunctionKey, int]:
    """Per function (file, qualified name, first and last line), its live bytes (incl.
    calls) at ``moment``; functions that held nothing are left out."""
    if moment.kind in ("peak", "end"):
        attr = "peak_bytes" if moment.kind == "peak" else "live_bytes"
        return {
            (path, fn.qualname, fn.first_line, fn.last_line): getattr(fn, attr)
            for path, sf in run.files.items()
            for fn in sf.functions
            if getattr(fn, attr)
        }
    if moment.index < 0:
        return {}
    return run.moments.function_values_at(moment.index)


def run_at(run: Run, moment: Moment) -> Run:
    """``run`` as it was at ``moment``: every line's and function's ``live_bytes`` (and the
    lines' ``incl_live_bytes``) are their live bytes then, their other figures 0; the header's
    peak is what was traced then. The reports and diffs of ``--at`` and ``--from/--to``."""
    lines = line_values(run, moment)
    functions = function_values(run, moment)
    files: dict[str, SourceFile] = {}
    for path, sf in run.files.items():
        held = lines.get(path, {})
        files[path] = replace(
            sf,
            lines={
                n: LineStats(live_bytes=v[0], incl_live_bytes=v[1]) for n, v in sorted(held.items())
            },
            functions=tuple(
                replace(
                    fn,
                    alloc_bytes=0,
                    alloc_count=0,
                    peak_bytes=0,
                    live_bytes=functions.get((path, fn.qualname, fn.first_line, fn.last_line), 0),
                )
                for fn in sf.functions
            ),
        )
    info = replace(run.info, peak_traced_bytes=moment.traced_bytes)
    return Run(info=info, files=files, call_tree=(), timeline=run.timeline)


def series(run: Run, path: str, line: int) -> list[tuple[float, int]]:
    """A line's live bytes over the run: (time, live bytes) at each of the run's moments, then
    at its end; empty for a run without moments."""
    moments = run.moments
    if not moments:
        return []
    changes = moments.line_changes().get(path, {}).get(line, ())
    out: list[tuple[float, int]] = []
    value, j = 0, 0
    for k, t in enumerate(moments.t):
        while j < len(changes) and changes[j][0] <= k:
            value = changes[j][1]
            j += 1
        out.append((float(t), value))
    st = run.files.get(path, SourceFile(path, "", None)).lines.get(line)
    out.append((run.info.duration_s, st.live_bytes if st is not None else 0))
    return out
