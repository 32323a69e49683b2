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

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Sequence


def figure_value(stats: LineStats, figure: str) -> int:
    """The value of a user-facing figure name (``peak``, ``alloc``, ...) for a line."""
    value: int = getattr(stats, _LINE_ATTRIBUTE[figure])
    return value


#: Each user-facing figure's LineStats attribute (asked several times per hint of every line).
_LINE_ATTRIBUTE: dict[str, str] = {name: fig.line for name, fig in NAMED_FIGURES.items()}


def figure_error(stats: LineStats, figure: str) -> float:
    """One standard error of a line's sampled figure, in bytes (0.0: exact, or a figure that
    has none: the inclusive ones)."""
    err = NAMED_FIGURES[figure].err
    value: float = getattr(stats, err) if err else 0.0
    return value


#: VS Code's default ``editor.inlayHints.maximumLength``: an inlay hint longer than this is cut
#: (``−21.3 MiB vs bas…``). Every label the editor shows as a hint fits in it (:func:`fit`).
HINT_WIDTH = 43


def fit(*parts: Sequence[str], width: int | None = HINT_WIDTH) -> str:
    """The one label-width rule: ``parts`` joined, each given as its forms from the longest to
    the shortest (a form carries its own separator; ``""`` leaves the part out).

    Every part starts at its longest form; while the label is longer than ``width``, the last
    part that has a shorter form takes it (so the first parts, the figure, stay whole the
    longest). ``width`` None: no limit (the terminal). A label still too long is cut with
    ``…``, which no combination of figures memlens makes reaches (tests/unit/test_labels.py).
    Labels with more parts (a branch's new figure) add a part here, and fit the same way.
    """
    label = ""
    for forms in parts:  # (a loop: the cheapest join of a few parts, asked per line)
        if forms:
            label += forms[0]
    if width is None or len(label) <= width:
        return label
    chosen = [0] * len(parts)

    def text() -> str:
        return "".join(forms[i] for forms, i in zip(parts, chosen, strict=True) if forms)

    while len(label) > width:
        shorter = next(
            (i for i in reversed(range(len(parts))) if chosen[i] < len(parts[i]) - 1), None
        )
        if shorter is None:
            return label[: width - 1] + "\u2026"
        chosen[shorter] += 1
        label = text()
    return label


class Noise:
    """What counts as a change against the baseline, and not as noise: a change of at least
    ``min_bytes``, at least ``min_ratio`` of the line's figure (the larger of the two runs')
    and at least ``min_share`` of the run's peak. Imports and interpreter caches move by a few
    bytes from run to run; those changes read as unchanged and are not coloured."""

    __slots__ = ("min_bytes", "min_ratio", "min_share")

    def __init__(self, min_bytes: int = 4096, min_ratio: float = 0.01, min_share: float = 0.0001):
        self.min_bytes = min_bytes
        self.min_ratio = min_ratio
        self.min_share = min_share

    def real(self, value: int, old: int, run_peak: int = 0) -> bool:
        """Whether ``old`` -> ``value`` is a real change (any change with all thresholds 0)."""
        size = abs(value - old)
        return (
            size > 0
            and size >= self.min_bytes
            and size >= self.min_ratio * max(abs(value), abs(old))
            and size >= self.min_share * run_peak
        )


#: The default thresholds (the editor's ``memlens.compare.*`` settings).
NOISE = Noise()


def change_kind(value: int, old: int | None, noise: Noise = NOISE, run_peak: int = 0) -> str:
    """``new`` (no figure in the baseline), ``same`` (equal, or a change within the noise),
    ``more`` or ``less``."""
    if old is None:
        return "new"
    if not noise.real(value, old, run_peak):
        return "same"
    return "more" if value > old else "less"


def figure_text(stats: LineStats, figure: str) -> str:
    """A line's figure as labels and tables show it: ``48.2 MiB``, or sampled with its error,
    ``~12.0 MiB ±8%``."""
    return size_text(figure_value(stats, figure), figure_error(stats, figure))


def size_text(value: int, err: float) -> str:
    """A figure of ``value`` bytes with standard error ``err`` (0: exact) as labels show it:
    ``48.2 MiB``, ``~12.0 MiB ±8%`` (:func:`figure_text` of one line; the editor's hints of a
    whole file read the figures by column)."""
    if err > 0 and value > 0:
        return f"~{fmt_bytes(value)} ±{err / value * 100:.0f}%"
    return fmt_bytes(value)


def line_label(
    stats: LineStats,
    figure: str = "peak",
    baseline: LineStats | None = None,
    *,
    compare: bool = False,
    calls: bool = False,
    compact: bool = False,
    edited: bool = False,
    noise: Noise | None = None,
    run_peak: int = 0,
    width: int | None = None,
    gpu: bool = True,
    gpu_calls: bool | None = None,
    words: str | None = None,
) -> str:
    """A short label such as ``48.2 MiB at peak · 1.2k allocs``.

    ``calls`` labels the figure a call site holds through its callees (the inclusive
    counterpart of ``figure``): ``136.0 MiB at peak in calls``. With ``compare`` the change
    against the baseline follows: ``48.2 MiB at peak, −12.0 MiB vs baseline (−20%)``, ``…, same
    as baseline`` (equal, or within ``noise``: see :class:`Noise`), ``…, new since baseline``
    (no line in the baseline); ``edited``: the baseline's figure is that of the line this one
    replaced in place: ``17.5 MiB at peak, was 35.0 MiB (−50%)``. Sampled figures carry their
    error: ``~12.0 MiB ±8% at peak``. ``compact`` gives the short form for long lines:
    ``48.2 MiB peak``, ``136.0 MiB in calls``, ``48.2 MiB peak (−12.0 MiB)``. ``width``: the
    label fits in that many characters (:func:`fit`; the editor's hints use
    :data:`HINT_WIDTH`), shorter forms standing in for the long ones.

    A GPU figure (``gpu_peak``...) reads ``GPU 64.0 MiB at peak · 4 allocs``. A line that
    holds GPU memory too gets its GPU figure after the host one, when ``gpu``:
    ``12.0 KiB at peak · 5 allocs · GPU 64.0 MiB at peak`` (:func:`gpu_part`; ``gpu_calls``
    says whether that part is the call site's, by default as ``calls``). ``words`` replaces the
    figure's words, for a moment's figures (:attr:`memlens.moment.Moment.words`): ``30.0 MiB
    live at 0.25 s``, ``136.0 MiB live at 0.25 s in calls`` (no GPU part: moments are host
    memory).
    """
    fig = NAMED_FIGURES[figure]
    shown = calls_figure(figure) if calls else figure
    value = figure_value(stats, shown)
    size = figure_text(stats, shown)
    if fig.device:
        size = f"{fig.device} {size}"
    head = _head(size, figure, calls, compact, words)
    extra: tuple[str, ...] = ()
    if gpu and not fig.device and words is None:
        part = gpu_part(
            stats,
            figure,
            baseline,
            compare=compare,
            calls=calls if gpu_calls is None else gpu_calls,
            compact=compact,
            noise=noise,
            run_peak=run_peak,
        )
        if part and not (value or stats.alloc_bytes or (baseline is not None and compare)):
            return fit((part,), width=width)  # GPU memory only: "0 B at peak" would be noise
        # (one form: where the label must be short, the count and the change's words go first)
        extra = (f" · {part}",) if part else ()
    if compare:
        old = figure_value(baseline, shown) if baseline is not None else None
        tail = _change(value, old, edited, noise or NOISE, run_peak)
        if compact:
            tail = tuple(form for form in tail if form.startswith(" ("))
        return fit(head, tail, extra, width=width)
    count = stats.gpu_alloc_count if fig.device else stats.alloc_count
    return fit(head, _allocs(count, calls, compact), extra, width=width)


def size_label(
    size: str,
    figure: str,
    count: int,
    *,
    calls: bool = False,
    compact: bool = False,
    width: int | None = None,
) -> str:
    """:func:`line_label` of a host figure (not a GPU one) with no baseline and no GPU part,
    from its :func:`size_text` and the line's allocation count: the editor's hints of a whole
    file, made by column."""
    head, allocs = _head(size, figure, calls, compact, None), _allocs(count, calls, compact)
    label = head[0] + allocs[0] if allocs else head[0]  # (most labels fit: no search for them)
    return label if width is None or len(label) <= width else fit(head, allocs, width=width)


def _head(size: str, figure: str, calls: bool, compact: bool, words: str | None) -> tuple[str, ...]:
    """A label's first part, the figure (its forms, longest first): ``48.2 MiB at peak``,
    ``48.2 MiB peak``, ``136.0 MiB in calls``."""
    short = f"{size} in calls" if calls else f"{size} {words or _SHORT[figure]}"
    if compact:
        return (short,)
    full = f"{size} {words or _WORDS[figure]}" + (" in calls" if calls else "")
    return (full, short)


def _allocs(count: int, calls: bool, compact: bool) -> tuple[str, ...]:
    """A label's allocation count part (``· 1.2k allocs``), left out first when the label is
    too long; none for a call site or a compact label."""
    if not count or calls or compact:
        return ()
    forms = _ALLOCS.get(count)
    if forms is None:
        if len(_ALLOCS) >= _ALLOCS_KEPT:
            _ALLOCS.clear()
        forms = _ALLOCS[count] = (
            f" · {fmt_count(count)} {'alloc' if count == 1 else 'allocs'}",
            "",
        )
    return forms


#: The count parts made so far: a file's lines share few counts (1, 2, 100...), and a whole
#: file's labels are made at once (at most this many kept).
_ALLOCS: dict[int, tuple[str, str]] = {}
_ALLOCS_KEPT = 8192


#: Each figure's words in a label, in a compact label (asked per line of every hint).
_WORDS = {name: fig.words for name, fig in NAMED_FIGURES.items()}
_SHORT = {name: fig.short for name, fig in NAMED_FIGURES.items()}


def gpu_part(
    stats: LineStats,
    figure: str = "peak",
    baseline: LineStats | None = None,
    *,
    compare: bool = False,
    calls: bool = False,
    compact: bool = False,
    noise: Noise | None = None,
    run_peak: int = 0,
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
        forms = _change(value, old, False, noise or NOISE, run_peak)
        label += next(form for form in forms if form.startswith(" ("))
    return label


def gpu_shown(stats: LineStats, figure: str, *, calls: bool = False) -> str | None:
    """The GPU figure a label shows beside host figure ``figure`` (see :func:`gpu_part`)."""
    name = gpu_figure(calls_figure(figure) if calls else figure)
    if name is not None and not calls and figure_value(stats, name) <= 0 < stats.gpu_live_bytes:
        return "gpu_live"
    return name


def _change(
    value: int, old: int | None, edited: bool, noise: Noise, run_peak: int
) -> tuple[str, ...]:
    """The change against the baseline, as the forms of a label's last part (longest first;
    the compact style takes those in parentheses)."""
    kind = change_kind(value, old, noise, run_peak)
    if old is None:
        return (", new since baseline", " (new)")
    if kind == "same":
        return _SAME
    delta = fmt_delta_bytes(value - old)
    ratio = fmt_percent((value - old) / old if old else None)
    if edited:
        was = fmt_bytes(old)
        return (f", was {was} ({ratio})", f", was {was}", f" (was {was})", f" ({delta})")
    return (f", {delta} vs baseline ({ratio})", f", {delta} ({ratio})", f" ({delta})")


_SAME = (", same as baseline", " (same)")


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
