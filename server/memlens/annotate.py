"""Pure formatting of per-line figures into labels: the one place labels are built.

The terminal report, ``memlens annotate`` and the language server's inlay hints all call
:func:`line_label`, so a line reads the same everywhere. Stdlib only.
"""

from __future__ import annotations

from memlens.model import LineStats
from memlens.units import fmt_bytes, fmt_count, fmt_delta_bytes, fmt_percent

#: The figures a label can lead with (user-facing names -> LineStats attribute).
FIGURE_NAMES: dict[str, str] = {
    "peak": "peak_bytes",
    "alloc": "alloc_bytes",
    "live": "live_bytes",
    "incl_peak": "incl_peak_bytes",
    "incl_alloc": "incl_alloc_bytes",
    "incl_live": "incl_live_bytes",
}

_WORDS: dict[str, str] = {
    "peak": "peak",
    "alloc": "allocated",
    "live": "live at exit",
    "incl_peak": "peak incl. calls",
    "incl_alloc": "allocated incl. calls",
    "incl_live": "live incl. calls",
}

_ERR_OF: dict[str, str] = {
    "peak_bytes": "peak_err",
    "alloc_bytes": "alloc_err",
    "live_bytes": "live_err",
}


def figure_value(stats: LineStats, figure: str) -> int:
    """The value of a user-facing figure name (``peak``, ``alloc``, ...) for a line."""
    return stats.figure(FIGURE_NAMES[figure])


def relative_error(stats: LineStats, figure: str) -> float | None:
    """One standard error of a sampled figure as a fraction of it, or None when exact."""
    attr = FIGURE_NAMES[figure]
    err_attr = _ERR_OF.get(attr)
    value = stats.figure(attr)
    if err_attr is None or value <= 0:
        return None
    err: float = getattr(stats, err_attr)
    return err / value if err > 0 else None


def line_label(
    stats: LineStats,
    figure: str = "peak",
    baseline: LineStats | None = None,
    *,
    compare: bool = False,
) -> str:
    """A short label such as ``▲ 48.2 MiB peak · 1.2k allocs``.

    With ``compare`` (and a baseline or not), the change is shown instead:
    ``48.2 MiB (−12.0 MiB, −20%)``; a line absent from the baseline reads ``(new)``.
    Sampled figures carry their error: ``~12.0 MiB ±8% peak``.
    """
    value = figure_value(stats, figure)
    rel = relative_error(stats, figure)
    size = f"~{fmt_bytes(value)} ±{rel * 100:.0f}%" if rel is not None else fmt_bytes(value)
    if compare:
        if baseline is None:
            return f"{size} (new)"
        old = figure_value(baseline, figure)
        delta = value - old
        ratio = (delta / old) if old else None
        if old == 0 and delta == 0:
            ratio = 0.0
        return f"{size} ({fmt_delta_bytes(delta)}, {fmt_percent(ratio)})"
    label = f"▲ {size} {_WORDS[figure]}"
    if stats.alloc_count:
        noun = "alloc" if stats.alloc_count == 1 else "allocs"
        label += f" · {fmt_count(stats.alloc_count)} {noun}"
    return label
