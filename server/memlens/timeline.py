"""Memory over time: the run's timeline drawn for a terminal, as SVG and as an HTML page.
Stdlib only.

Every drawing marks the peak (the timeline point with the most traced memory) and lists,
beside it, the lines that held most at the peak (their ``peak_bytes``: what each line held
when the whole program hit its peak). ``memlens show --timeline`` prints :func:`terminal`
(``--svg FILE`` / ``--html FILE`` write the others); the language server sends :func:`svg` to
the VS Code timeline view. Text from the run (paths, source lines) is escaped for XML and
stripped of control characters.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from collections.abc import Sequence

from memlens.errors import MemlensError
from memlens.layout import printable
from memlens.model import Run, TimelinePoint
from memlens.units import fmt_bytes

_BLOCKS = " ▁▂▃▄▅▆▇█"


class AtPeak:
    """A line that held memory at the peak."""

    __slots__ = ("file", "line", "peak_bytes", "text")

    def __init__(self, file: str, line: int, peak_bytes: int, text: str) -> None:
        self.file = file
        self.line = line
        self.peak_bytes = peak_bytes
        self.text = text


def peak_point(run: Run) -> TimelinePoint | None:
    """The timeline point with the most traced memory (the first of equals)."""
    best: TimelinePoint | None = None
    for p in run.timeline:
        if best is None or p.traced_bytes > best.traced_bytes:
            best = p
    return best


def top_at_peak(run: Run, limit: int = 5) -> list[AtPeak]:
    """The lines that held most at the peak, heaviest first."""
    rows: list[AtPeak] = []
    for sf in run.files.values():
        text = sf.text.splitlines() if sf.text is not None else []
        for line, st in sf.lines.items():
            if st.peak_bytes > 0:
                src = text[line - 1].strip() if 0 < line <= len(text) else ""
                rows.append(AtPeak(sf.path, line, st.peak_bytes, src))
    rows.sort(key=lambda r: (-r.peak_bytes, r.file, r.line))
    return rows[:limit]


def sparkline(points: Sequence[tuple[float, int]], width: int = 24) -> str:
    """A value over time in ``width`` block characters (``▁▂▅▇▇▅▂▁``): per column of time, the
    most it held then (``points``: (t, value) in time order, each value holding until the next
    point); empty without points. The hover's picture of a line's live bytes over the run."""
    if not points:
        return ""
    end = points[-1][0] or 1.0
    cols = [-1] * width
    for i, (t, value) in enumerate(points):
        until = points[i + 1][0] if i + 1 < len(points) else end
        first = min(width - 1, max(0, int(t / end * width)))
        last = min(width - 1, max(first, int(until / end * width - 1e-9)))
        for c in range(first, last + 1):
            cols[c] = max(cols[c], value)
    for c in range(width):  # no point in a column: the value stayed what it was
        if cols[c] < 0:
            cols[c] = cols[c - 1] if c else 0
    top = max(cols) or 1
    return "".join(_BLOCKS[max(1, round(v / top * 8))] if v > 0 else _BLOCKS[1] for v in cols)


def _clean(text: str, limit: int = 80) -> str:
    text = printable(text)  # (escapes control and invisible reordering marks, as everywhere)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _columns(points: Sequence[TimelinePoint], width: int) -> list[int]:
    """The most traced memory per column of time."""
    end = points[-1].t if points[-1].t > 0 else 1.0
    cols = [0] * width
    for p in points:
        i = min(width - 1, max(0, int(p.t / end * width)))
        cols[i] = max(cols[i], p.traced_bytes)
    for i in range(1, width):  # no sample in a column: memory stayed where it was
        if cols[i] == 0:
            cols[i] = cols[i - 1]
    return cols


def terminal(run: Run, width: int = 72, height: int = 10) -> str:
    """The timeline as text: a bar per column of time, the peak marked, the top lines."""
    points = run.timeline
    if not points:
        return "memlens: this run has no timeline (recorded with --timeline-interval 0?)\n"
    peak = peak_point(run)
    assert peak is not None
    cols = _columns(points, width)
    top = max(cols) or 1
    rows = []
    for r in range(height, 0, -1):
        cells = []
        for c in cols:
            level = c / top * height - (r - 1)
            cells.append(_BLOCKS[max(0, min(8, round(level * 8)))])
        rows.append("".join(cells))
    end = points[-1].t
    peak_col = min(width - 1, int(peak.t / (end or 1.0) * width))
    marker = " " * peak_col + "▲ peak"
    label_w = max(len(fmt_bytes(top)), 4)
    out = [f"{fmt_bytes(top):>{label_w}} ┤{rows[0]}"]
    out.extend(f"{'':>{label_w}} │{row}" for row in rows[1:])
    out.append(f"{'0 B':>{label_w}} └{'─' * width}")
    out.append(f"{'':>{label_w}}  {marker}")
    out.append(f"{'':>{label_w}}  0 s{f'{end:.2f} s':>{width - 3}}")
    out.append("")
    out.append(
        f"peak {fmt_bytes(run.info.peak_traced_bytes)} traced at {peak.t:.2f} s "
        f"(timeline point: {fmt_bytes(peak.traced_bytes)}); held most at the peak:"
    )
    for row in top_at_peak(run):
        where = f"{os.path.basename(row.file)}:{row.line}"
        out.append(
            f"  {fmt_bytes(row.peak_bytes):>10}  {_clean(where, 30):<30} {_clean(row.text, 60)}"
        )
    return "\n".join(out) + "\n"


def svg(run: Run, width: int = 760, height: int = 260, *, beside: bool = True) -> str:
    """The timeline as a standalone SVG: traced memory (and RSS), the peak marked, and (with
    ``beside``) the lines that held most at the peak listed beside it."""
    e = html.escape
    if not beside:
        width -= 260
    pad_l, pad_r, pad_t, pad_b = 70, (300 if beside else 40), 20, 36
    plot_w, plot_h = width - pad_l - pad_r, height - pad_t - pad_b
    points = run.timeline
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" '
            'role="img" aria-label="memory over time">'
        ),
        f'<rect width="{width}" height="{height}" fill="#1e1e1e"/>',
    ]
    if not points:
        parts.append(
            f'<text x="{pad_l}" y="{height / 2}" fill="#ccc">no timeline in this run</text>'
        )
        parts.append("</svg>")
        return "\n".join(parts)
    peak = peak_point(run)
    assert peak is not None
    end = points[-1].t or 1.0
    top = max(max(p.traced_bytes for p in points), max(p.rss_bytes for p in points), 1)

    # Where time runs in the drawing, for a client that lets users click a moment.
    parts[0] = parts[0].replace(
        "aria-label=",
        f'data-x0="{pad_l}" data-x1="{pad_l + plot_w}" data-t1="{end}" aria-label=',
        1,
    )

    def xy(t: float, v: int) -> tuple[float, float]:
        return pad_l + t / end * plot_w, pad_t + plot_h - v / top * plot_h

    for frac in (0.0, 0.5, 1.0):  # axis ticks
        y = pad_t + plot_h - frac * plot_h
        parts.append(
            f'<line x1="{pad_l}" y1="{y:.1f}" x2="{pad_l + plot_w}" y2="{y:.1f}" stroke="#333"/>'
        )
        parts.append(
            f'<text x="{pad_l - 6}" y="{y + 4:.1f}" fill="#aaa" text-anchor="end">'
            f"{e(fmt_bytes(int(top * frac)))}</text>"
        )
    parts.append(f'<text x="{pad_l}" y="{height - 12}" fill="#aaa">0 s</text>')
    parts.append(
        f'<text x="{pad_l + plot_w}" y="{height - 12}" fill="#aaa" text-anchor="end">{end:.2f} s</text>'
    )
    if any(p.rss_bytes for p in points):
        rss = " ".join("{:.1f},{:.1f}".format(*xy(p.t, p.rss_bytes)) for p in points)
        parts.append(f'<polyline points="{rss}" fill="none" stroke="#888" stroke-dasharray="4 3"/>')
    traced = " ".join("{:.1f},{:.1f}".format(*xy(p.t, p.traced_bytes)) for p in points)
    parts.append(f'<polyline points="{traced}" fill="none" stroke="#4fc1ff" stroke-width="2"/>')
    px, py = xy(peak.t, peak.traced_bytes)
    parts.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="5" fill="#f14c4c"/>')
    anchor = "end" if px > pad_l + plot_w * 0.7 else "start"
    dx = -8 if anchor == "end" else 8
    parts.append(
        f'<text x="{px + dx:.1f}" y="{max(py - 8, 12):.1f}" fill="#f14c4c" text-anchor="{anchor}">'
        f"peak {e(fmt_bytes(run.info.peak_traced_bytes))} at {peak.t:.2f} s</text>"
    )
    lx = pad_l + plot_w + 24
    if beside:
        parts.append(
            f'<text x="{lx}" y="{pad_t + 4}" fill="#ddd" font-weight="bold">'
            "held most at the peak</text>"
        )
    for i, row in enumerate(top_at_peak(run) if beside else []):
        y = pad_t + 26 + i * 38
        where = f"{os.path.basename(row.file)}:{row.line}"
        parts.append(
            f'<text x="{lx}" y="{y}" fill="#ddd">{e(fmt_bytes(row.peak_bytes))}  {e(_clean(where, 28))}</text>'
        )
        parts.append(
            f'<text x="{lx}" y="{y + 15}" fill="#999" font-family="monospace">{e(_clean(row.text, 34))}</text>'
        )
    parts.append(
        f'<text x="{pad_l}" y="{pad_t - 6}" fill="#4fc1ff">traced</text>'
        f'<text x="{pad_l + 56}" y="{pad_t - 6}" fill="#888">RSS (dashed)</text>'
    )
    parts.append("</svg>")
    return "\n".join(parts)


def html_page(run: Run) -> str:
    """A standalone HTML page with the SVG (no scripts, nothing fetched)."""
    title = html.escape(_clean(" ".join(run.info.command), 120))
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>memlens timeline: {title}</title></head>"
        '<body style="background:#1e1e1e;color:#ddd;font-family:sans-serif">'
        f"<h3>memlens: memory over time of <code>{title}</code></h3>\n{svg(run)}\n</body></html>\n"
    )


# -- `memlens show --timeline` ------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeline", action="store_true", help="draw memory over time, the peak marked"
    )
    parser.add_argument(
        "--svg", metavar="FILE", help="write the timeline as SVG to FILE (implies --timeline)"
    )
    parser.add_argument(
        "--html", metavar="FILE", help="write the timeline as an HTML page (implies --timeline)"
    )


def show(run: Run, args: argparse.Namespace) -> int:
    """``memlens show --timeline``, ``--svg FILE``, ``--html FILE`` (either file instead of
    the terminal's drawing)."""
    for path, text in ((args.svg, svg(run)), (args.html, html_page(run))):
        if path:
            try:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:
                raise MemlensError(f"cannot write {path}: {exc.strerror or exc}") from None
            print(f"memlens: timeline written to {path}", file=sys.stderr)
    if not (args.svg or args.html):
        width = max(20, min(120, _terminal_width() - 14))
        sys.stdout.write(terminal(run, width=width))
    return 0


def _terminal_width() -> int:
    try:
        return int(os.environ.get("COLUMNS", "")) or os.get_terminal_size().columns
    except (ValueError, OSError):
        return 86
