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
    gpu_figure,
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


def line_label(
    stats: LineStats,
    figure: str = "peak",
    baseline: LineStats | None = None,
    *,
    compare: bool = False,
    calls: bool = False,
    compact: bool = False,
    gpu: bool = True,
    gpu_calls: bool | None = None,
) -> str:
    """A short label such as ``48.2 MiB at peak · 1.2k allocs``.

    ``calls`` labels the figure a call site holds through its callees (the inclusive
    counterpart of ``figure``): ``136.0 MiB at peak in calls``. With ``compare`` the change
    against the baseline follows: ``48.2 MiB at peak, −12.0 MiB vs baseline (−20%)``, ``…, same
    as baseline``, ``…, new since baseline`` (no line in the baseline). Sampled figures carry
    their error: ``~12.0 MiB ±8% at peak``. ``compact`` gives the short form for long lines:
    ``48.2 MiB peak``, ``136.0 MiB in calls``, ``48.2 MiB (−12.0 MiB)``.

    A GPU figure (``gpu_peak``...) reads ``GPU 64.0 MiB at peak · 4 allocs``. A line that
    holds GPU memory too gets its GPU figure after the host one, when ``gpu``:
    ``12.0 KiB at peak · 5 allocs · GPU 64.0 MiB at peak`` (:func:`gpu_part`; ``gpu_calls``
    says whether that part is the call site's, by default as ``calls``).
    """
    fig = NAMED_FIGURES[figure]
    shown = calls_figure(figure) if calls else figure
    value = figure_value(stats, shown)
    rel = relative_error(stats, shown)
    size = f"~{fmt_bytes(value)} ±{rel * 100:.0f}%" if rel is not None else fmt_bytes(value)
    if fig.device:
        size = f"{fig.device} {size}"
    if compact:
        label = f"{size} in calls" if calls else f"{size} {NAMED_FIGURES[shown].short}"
    else:
        label = f"{size} {fig.words}" + (" in calls" if calls else "")
    extra = ""
    if gpu and not fig.device:
        part = gpu_part(
            stats,
            figure,
            baseline,
            compare=compare,
            calls=calls if gpu_calls is None else gpu_calls,
            compact=compact,
        )
        extra = f" · {part}" if part else ""
        if part and not (value or stats.alloc_bytes or (baseline is not None and compare)):
            return part  # the line holds GPU memory only: "0 B at peak" would be noise
    if compare:
        change = _change(value, figure_value(baseline, shown) if baseline is not None else None)
        if compact:
            return f"{label} ({change[0]}){extra}"
        return f"{label}, {change[1]}{extra}"
    count = stats.gpu_alloc_count if fig.device else stats.alloc_count
    if count and not calls and not compact:
        noun = "alloc" if count == 1 else "allocs"
        label += f" · {fmt_count(count)} {noun}"
    return label + extra


def gpu_part(
    stats: LineStats,
    figure: str = "peak",
    baseline: LineStats | None = None,
    *,
    compare: bool = False,
    calls: bool = False,
    compact: bool = False,
) -> str | None:
    """The GPU memory of a line as a label goes with host figure ``figure``: its GPU
    counterpart (``GPU 64.0 MiB at peak``; ``GPU 136.0 MiB in calls`` for a call site), or,
    when that is 0 but the line still holds GPU memory at the end, that (``GPU 16.0 MiB
    live``); with ``compare`` the change since the baseline follows in parentheses. None when
    the line has no GPU figure to show."""
    name = gpu_shown(stats, figure, calls=calls)
    if name is None:
        return None
    value = figure_value(stats, name)
    old = figure_value(baseline, name) if baseline is not None else None
    if value <= 0 and not (compare and old):
        return None
    fig = NAMED_FIGURES[name]
    if calls:
        label = f"GPU {fmt_bytes(value)} in calls"
    else:
        label = f"GPU {fmt_bytes(value)} {fig.short if compact else fig.words}"
    if compare:
        label += f" ({_change(value, old)[0]})"
    return label


def gpu_shown(stats: LineStats, figure: str, *, calls: bool = False) -> str | None:
    """The GPU figure a label shows beside host figure ``figure`` (see :func:`gpu_part`)."""
    name = gpu_figure(calls_figure(figure) if calls else figure)
    if name is not None and not calls and figure_value(stats, name) <= 0 < stats.gpu_live_bytes:
        return "gpu_live"
    return name


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
    """A test's figures in one short label: ``test peak 12.1 MiB · leaked 0 B`` (`` · GPU peak
    64.0 MiB`` after it for a test that used GPU memory)."""
    gpu = f" · GPU peak {fmt_bytes(test.gpu_peak_bytes)}" if test.gpu_peak_bytes else ""
    return f"test peak {fmt_bytes(test.peak_bytes)} · leaked {fmt_bytes(test.leaked_bytes)}{gpu}"


def label_for_tests(tests: Sequence[TestStats]) -> str:
    """The label of one test function: :func:`label_for_test`, or for a parametrized one the
    highest figures of its cases: ``3 tests: peak up to 12.1 MiB · leaked up to 0 B``."""
    if len(tests) == 1:
        return label_for_test(tests[0])
    peak = max(t.peak_bytes for t in tests)
    leaked = max(t.leaked_bytes for t in tests)
    gpu_peak = max(t.gpu_peak_bytes for t in tests)
    gpu = f" · GPU peak up to {fmt_bytes(gpu_peak)}" if gpu_peak else ""
    return (
        f"{len(tests)} tests: peak up to {fmt_bytes(peak)} · leaked up to {fmt_bytes(leaked)}{gpu}"
    )


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
