"""Pure formatting of per-line figures into labels: the one place labels are built.

The terminal report, ``memlens annotate`` and the language server's inlay hints all call
:func:`line_label`, so a line reads the same everywhere; the pytest plugin and the editor's
test lenses likewise :func:`label_for_test` and :func:`failure_text`. Stdlib only.
"""

from __future__ import annotations

from memlens.model import (
    NAMED_FIGURES,
    TEST_FIGURE_WORDS,
    LineStats,
    TestFailure,
    TestStats,
    calls_figure,
)
from memlens.units import fmt_bytes, fmt_count, fmt_delta_bytes, fmt_percent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def figure_value(stats: LineStats, figure: str) -> int:
    """The value of a user-facing figure name (``peak``, ``alloc``, ...) for a line."""
    return stats.figure(NAMED_FIGURES[figure].line)


def relative_error(stats: LineStats, figure: str) -> float | None:
    """One standard error of a sampled figure as a fraction of it, or None when exact."""
    fig = NAMED_FIGURES[figure]
    value = stats.figure(fig.line)
    if not fig.err or value <= 0:
        return None
    err: float = getattr(stats, fig.err)
    return err / value if err > 0 else None


def figure_text(stats: LineStats, figure: str) -> str:
    """A line's figure as labels and tables show it: ``48.2 MiB``, or sampled with its error,
    ``~12.0 MiB ±8%``."""
    value = figure_value(stats, figure)
    rel = relative_error(stats, figure)
    return f"~{fmt_bytes(value)} ±{rel * 100:.0f}%" if rel is not None else fmt_bytes(value)


def line_label(
    stats: LineStats,
    figure: str = "peak",
    baseline: LineStats | None = None,
    *,
    compare: bool = False,
    calls: bool = False,
    compact: bool = False,
) -> str:
    """A short label such as ``48.2 MiB at peak · 1.2k allocs``.

    ``calls`` labels the figure a call site holds through its callees (the inclusive
    counterpart of ``figure``): ``136.0 MiB at peak in calls``. With ``compare`` the change
    against the baseline follows: ``48.2 MiB at peak, −12.0 MiB vs baseline (−20%)``, ``…, same
    as baseline``, ``…, new since baseline`` (no line in the baseline). Sampled figures carry
    their error: ``~12.0 MiB ±8% at peak``. ``compact`` gives the short form for long lines:
    ``48.2 MiB peak``, ``136.0 MiB in calls``, ``48.2 MiB (−12.0 MiB)``.
    """
    shown = calls_figure(figure) if calls else figure
    value = figure_value(stats, shown)
    size = figure_text(stats, shown)
    if compact:
        label = f"{size} in calls" if calls else f"{size} {NAMED_FIGURES[shown].short}"
    else:
        label = f"{size} {NAMED_FIGURES[figure].words}" + (" in calls" if calls else "")
    if compare:
        change = _change(value, figure_value(baseline, shown) if baseline is not None else None)
        if compact:
            return f"{label} ({change[0]})"
        return f"{label}, {change[1]}"
    if stats.alloc_count and not calls and not compact:
        noun = "alloc" if stats.alloc_count == 1 else "allocs"
        label += f" · {fmt_count(stats.alloc_count)} {noun}"
    return label


def _change(value: int, old: int | None) -> tuple[str, str]:
    """The change against the baseline: (compact, full)."""
    if old is None:
        return "new", "new since baseline"
    delta = value - old
    if delta == 0:
        return "same", "same as baseline"
    ratio = (delta / old) if old else None
    return fmt_delta_bytes(delta), f"{fmt_delta_bytes(delta)} vs baseline ({fmt_percent(ratio)})"


# -- tests of a pytest session (pytest --memlens) ------------------------------------------------


def label_for_test(test: TestStats) -> str:
    """A test's figures in one short label: ``test peak 12.1 MiB · leaked 0 B``."""
    return f"test peak {fmt_bytes(test.peak_bytes)} · leaked {fmt_bytes(test.leaked_bytes)}"


def label_for_tests(tests: Sequence[TestStats]) -> str:
    """The label of one test function: :func:`label_for_test`, or for a parametrized one the
    highest figures of its cases: ``3 tests: peak up to 12.1 MiB · leaked up to 0 B``."""
    if len(tests) == 1:
        return label_for_test(tests[0])
    peak = max(t.peak_bytes for t in tests)
    leaked = max(t.leaked_bytes for t in tests)
    return f"{len(tests)} tests: peak up to {fmt_bytes(peak)} · leaked up to {fmt_bytes(leaked)}"


def failure_text(failure: TestFailure) -> str:
    """Why a test failed on memory, in one line: ``leaked 10.0 MiB, over its limit of 1.0 MiB``
    or ``peak 12.1 MiB, +35% over the baseline's 9.0 MiB (allowed: up to 9.9 MiB)``."""
    word = TEST_FIGURE_WORDS.get(failure.figure, failure.figure)
    value = fmt_bytes(failure.value)
    if failure.kind == "increase" and failure.baseline is not None:
        ratio = (failure.value - failure.baseline) / failure.baseline if failure.baseline else None
        return (
            f"{word} {value}, {fmt_percent(ratio)} over the baseline's "
            f"{fmt_bytes(failure.baseline)} (allowed: up to {fmt_bytes(failure.limit)})"
        )
    return f"{word} {value}, over its limit of {fmt_bytes(failure.limit)}"
