"""Memory over time: terminal, SVG and HTML drawings of a run's timeline."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from memlens import timeline
from memlens.model import LineStats, Run, TimelinePoint, replace
from tests.runs import MIB, sample_run, source


def _run() -> Run:
    base = sample_run()
    text = "a = load()\nb = build()\nc = '<script>'\n"
    path = "/w/<evil>&\x1b[31m.py"
    lines = {
        1: LineStats(peak_bytes=30 * MIB),
        2: LineStats(peak_bytes=10 * MIB),
        3: LineStats(peak_bytes=MIB),
    }
    files = {path: source(path, text, lines, sha256="ab" * 32)}
    points = tuple(
        TimelinePoint(t / 10, min(t, 6) * 7 * MIB - (t > 6) * (t - 6) * 5 * MIB, 60 * MIB)
        for t in range(11)
    )
    return replace(base, files=files, timeline=points)


def test_peak_and_the_lines_held_most_at_the_peak() -> None:
    run = _run()
    peak = timeline.peak_point(run)
    assert peak is not None
    assert (peak.t, peak.traced_bytes) == (0.6, 42 * MIB)
    assert [(r.line, r.peak_bytes) for r in timeline.top_at_peak(run)] == [
        (1, 30 * MIB),
        (2, 10 * MIB),
        (3, MIB),
    ]


def test_terminal_drawing_marks_the_peak() -> None:
    out = timeline.terminal(_run(), width=40, height=6)
    lines = out.splitlines()
    assert lines[0].startswith("42.0 MiB ┤")
    marker = next(line for line in lines if "▲ peak" in line)
    # The peak is at 0.6 s of 1.0 s: column 24 of 40.
    assert marker.index("▲") == len("42.0 MiB") + 2 + 24
    assert "\x1b" not in out
    assert "peak" in lines[-4]
    assert "30.0 MiB" in lines[-3]
    assert "a = load()" in lines[-3]
    assert timeline.terminal(replace(_run(), timeline=())).startswith("memlens: this run has no")


def test_terminal_drawing_escapes_reordering_marks() -> None:
    """A hostile run's source line cannot reorder what the terminal shows: bidi controls and
    zero-width marks are printed as escapes, as everywhere memlens prints a run's text."""
    run = _run()
    path = next(iter(run.files))
    text = "a = load()  # \u202eevil\u202c\u200b\nb = build()\nc = '<script>'\n"
    files = {path: source(path, text, dict(run.files[path].lines), sha256="ab" * 32)}
    out = timeline.terminal(replace(run, files=files), width=40, height=6)
    assert not any(c in out for c in "\u202e\u202c\u200b\x1b")
    assert "\\u202eevil\\u202c" in out


def test_svg_is_well_formed_and_escapes_the_run() -> None:
    svg = timeline.svg(_run())
    root = ET.fromstring(svg)
    texts = [t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert any(t.startswith("peak ") and t.endswith(" at 0.60 s") for t in texts)
    assert any("<evil>&" in t for t in texts)  # escaped in the XML, shown as text
    assert "<script>" not in svg
    assert "\x1b" not in svg
    assert len(list(root.iter("{http://www.w3.org/2000/svg}polyline"))) == 2
    page = timeline.html_page(_run())
    assert page.startswith("<!DOCTYPE html>")
    assert "default-src 'none'" in page


def test_svg_without_the_list_beside_it() -> None:
    svg = timeline.svg(_run(), beside=False)
    root = ET.fromstring(svg)
    assert root.get("width") == "500"
    assert "held most at the peak" not in svg
    assert "a = load()" not in svg
