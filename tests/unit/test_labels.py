"""Labels that fit VS Code's default inlay-hint width, comparisons that show change and not
noise, and lines edited since the baseline compared with the line they replaced."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from memlens import annotate
from memlens.annotate import HINT_WIDTH, NOISE, Noise, change_kind, fit, line_label
from memlens.mapping import changed_in_place
from memlens.model import NAMED_FIGURES, LineStats, replace
from memlens.moment import Moment
from memlens_lsp import views
from memlens_lsp.index import FolderState, RunData, canonical
from memlens_lsp.settings import Settings
from memlens_lsp.staleness import IDENTITY
from tests import runs
from tests.runs import new_run, source

KiB = 1024
MiB = 1024 * 1024
GiB = 1024 * MiB


# -- the width rule ------------------------------------------------------------------------------
def test_fit_shrinks_the_last_parts_first() -> None:
    parts = (
        ("31.1 MiB at peak", "31.1 MiB peak"),
        (", −21.3 MiB vs baseline (−41%)", " (−21.3 MiB)"),
    )
    assert fit(*parts, width=None) == "31.1 MiB at peak, −21.3 MiB vs baseline (−41%)"
    assert fit(*parts) == "31.1 MiB at peak (−21.3 MiB)"
    assert fit(*parts, width=20) == "31.1 MiB peak (−21.…"  # nothing shorter: cut
    assert fit(("a",), ("b", "")) == "ab"
    assert fit(("a",), ("bbbb", ""), width=2) == "a"


def _stats(value: int, err: float, count: int) -> LineStats:
    """Every figure ``value`` (the sampled error ``err`` of it), ``count`` allocations."""
    return LineStats(
        alloc_bytes=value,
        alloc_count=count,
        live_bytes=value,
        live_count=count,
        peak_bytes=value,
        incl_alloc_bytes=value,
        incl_live_bytes=value,
        incl_peak_bytes=value,
        alloc_err=value * err,
        live_err=value * err,
        peak_err=value * err,
    )


# The widest numbers memlens writes: 4 digits and a decimal, the widest unit, 3-digit errors.
SIZES = [0, 999, 1023 * KiB + 900, 1023 * MiB + 900 * KiB, 1023 * GiB]
ERRORS = [0.0, 0.08, 1.0]
COUNTS = [0, 1, 999_949]


@pytest.mark.parametrize("figure", list(NAMED_FIGURES))
def test_every_hint_fits_vs_code_default_width(figure: str) -> None:
    """Every label a hint can carry, in every mode, fits in 43 characters: the widest sizes,
    sampled errors, counts, with and without calls, compact or full, and every comparison."""
    olds: list[int | None] = [None, 0, 55, 1023 * GiB]
    longest = ""
    for value, err, count in itertools.product(SIZES, ERRORS, COUNTS):
        stats = _stats(value, err, count)
        for calls, compact in itertools.product((False, True), (False, True)):
            labels = [line_label(stats, figure, calls=calls, compact=compact, width=HINT_WIDTH)]
            for old, edited in itertools.product(olds, (False, True)):
                base = None if old is None else _stats(old, 0.0, 1)
                labels.append(
                    line_label(
                        stats,
                        figure,
                        base,
                        compare=True,
                        calls=calls,
                        compact=compact,
                        edited=edited,
                        width=HINT_WIDTH,
                    )
                )
            for label in labels:
                assert len(label) <= HINT_WIDTH, label
                assert not label.endswith("…"), label
                longest = max(longest, label, key=len)
    assert len(longest) > 30  # the rule was exercised


def test_the_terminal_keeps_the_long_forms() -> None:
    stats, base = _stats(48 * MiB, 0.0, 1200), _stats(60 * MiB, 0.0, 1)
    assert line_label(stats, "peak", base, compare=True) == (
        "48.0 MiB at peak, −12.0 MiB vs baseline (−20%)"
    )
    assert line_label(stats, "peak", base, compare=True, width=HINT_WIDTH) == (
        "48.0 MiB at peak, −12.0 MiB (−20%)"
    )
    assert line_label(stats, "peak", base, compare=True, compact=True) == (
        "48.0 MiB peak (−12.0 MiB)"
    )


# -- noise ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "old", "peak", "kind"),
    [
        (55 + 141 * KiB, 141 * KiB, 43 * MiB, "same"),  # `import random`: +55 B
        (int(31.1 * MiB) - 1229, int(31.1 * MiB), 43 * MiB, "same"),  # −1.2 KiB of 31 MiB
        (10 * MiB, int(31.3 * MiB), 43 * MiB, "less"),  # the real −21 MiB win
        (200 * KiB, 190 * KiB, 43 * MiB, "more"),  # +10 KiB: 5% of the line
        (100 * MiB + 8 * KiB, 100 * MiB, 200 * MiB, "same"),  # +8 KiB: under 1% of the line
        (8 * KiB, 4 * KiB, 80 * GiB, "same"),  # 4 KiB in an 80 GiB run
        (3 * KiB, None, 43 * MiB, "new"),
        (1, 0, 0, "more"),
    ],
)
def test_noise_reads_as_unchanged(value: int, old: int | None, peak: int, kind: str) -> None:
    noise = Noise(0, 0, 0) if (value, old) == (1, 0) else NOISE
    assert change_kind(value, old, noise, peak) == kind


def test_noise_thresholds_are_settings() -> None:
    settings = Settings(compare_min_bytes=0, compare_min_ratio=0, compare_min_share=0)
    assert settings.noise.real(56, 55)
    assert not Settings().noise.real(56, 55)
    stats, base = _stats(141 * KiB + 55, 0.0, 3), _stats(141 * KiB, 0.0, 3)
    label = line_label(stats, "peak", base, compare=True, run_peak=43 * MiB, width=HINT_WIDTH)
    assert label == "141.1 KiB at peak, same as baseline"


# -- the editor's views ----------------------------------------------------------------------------
def _folder(
    tmp_path: Path,
    text: str,
    lines: dict[int, LineStats],
    base_text: str,
    base_lines: dict[int, LineStats],
    *,
    peak: int = 64 * MiB,
    checkpoint: bool = False,
) -> FolderState:
    path = str(tmp_path / "m.py")
    info = runs.info(peak_traced_bytes=peak, peak_rss_bytes=peak, cwd="", checkpoint=checkpoint)
    run = RunData(tmp_path / "r.mlrun", new_run([source(path, text, lines)], run_info=info))
    base = new_run([source(path, base_text, base_lines)], run_info=replace(info, checkpoint=False))
    return FolderState(tmp_path, tmp_path.as_uri(), run, RunData(tmp_path / "b.mlrun", base))


def _peak(n: int) -> LineStats:
    return LineStats(alloc_bytes=n, alloc_count=10, peak_bytes=n, incl_peak_bytes=n)


BASE = """\
import json
def load(path):
    data = [bytearray(1024) for _ in range(35 * 1024)]
    return data
rows = load("x")
"""
#: The hot line edited in place: half the memory.
EDITED = BASE.replace("range(35 * 1024)", "range(17 * 1024 + 512)")


def test_an_edited_line_keeps_its_comparison(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        EDITED,
        {1: _peak(150 * KiB), 3: _peak(int(17.5 * MiB)), 5: _peak(64)},
        BASE,
        {1: _peak(150 * KiB + 55), 3: _peak(35 * MiB), 5: _peak(64)},
    )
    view = folder.view(canonical(tmp_path / "m.py"))
    assert view is not None
    settings = Settings(compare_with_baseline=True, import_min_bytes=0)
    items = views.hint_items(view, IDENTITY, settings, 0, 5, has_baseline=True)
    assert [(i.line, i.label) for i in items] == [
        (0, "150.0 KiB at peak, same as baseline"),  # +55 B: noise
        (2, "17.5 MiB at peak, was 35.0 MiB (−50%)"),
    ]
    # Not "gone": it is compared on the line that replaced it.
    assert views.gone_lines(view, IDENTITY, settings, 5) == []
    changes = views.line_changes(view, IDENTITY, settings, 5)
    assert [(c.line, c.kind, c.delta, c.level) for c in changes] == [
        (2, "less", int(17.5 * MiB) - 35 * MiB, 3)
    ]
    hover = views.hover_markdown(view, 3, settings, stale=False, has_baseline=True)
    assert hover is not None
    assert (
        "Edited since the baseline: there, line 3 `data = [bytearray(1024) for _ in range(35 * "
        "1024)]` held 35.0 MiB at peak and allocated 35.0 MiB."
    ) in hover.splitlines()
    assert "vs baseline: peak −17.5 MiB (−50%) · allocated −17.5 MiB (−50%) · live ±0 B (±0%)" in (
        hover.splitlines()
    )
    noisy = views.hover_markdown(view, 1, settings, stale=False, has_baseline=True)
    assert noisy is not None
    assert "is within the noise" in noisy


def test_changed_in_place_pairs_lines_of_a_stretch() -> None:
    old = ["a", "x = f(1)", "y = g(1)", "b", "c = old()", "d"]
    new = ["a", "x = f(2)", "y = g(2)", "b", "d", "e = brand_new()"]
    matched = {1: 1, 4: 4, 6: 5}
    # Same-length stretch: line by line; c = old() has no counterpart before d.
    assert changed_in_place(old, new, matched) == {2: 2, 3: 3}
    # A stretch of unequal length pairs only alike lines.
    old2 = ["a", "total = sum(values)", "b"]
    new2 = ["a", "log('summing')", "total = sum(values, 0)", "b"]
    assert changed_in_place(old2, new2, {1: 1, 3: 4}) == {2: 3}


def test_checkpoints_are_never_compared(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path, BASE, {3: _peak(10 * MiB)}, BASE, {3: _peak(35 * MiB)}, checkpoint=True
    )
    view = folder.view(canonical(tmp_path / "m.py"))
    assert view is not None
    settings = Settings(compare_with_baseline=True)
    items = views.hint_items(view, IDENTITY, settings, 0, 5, has_baseline=True)
    assert [(i.line, i.label) for i in items] == [(2, "10.0 MiB at peak · 10 allocs")]
    assert views.line_changes(view, IDENTITY, settings, 5) == []
    hover = views.hover_markdown(view, 3, settings, stale=False, has_baseline=True)
    assert hover is not None
    assert "This run is a checkpoint" in hover
    assert "vs baseline:" not in hover


def test_no_hints_on_decorators_and_quieter_imports(tmp_path: Path) -> None:
    text = "import numpy\nimport json\n@cache\ndef f():\n    return 1\n"
    figures = {1: _peak(30 * MiB), 2: _peak(500 * KiB), 3: _peak(2 * MiB)}
    folder = _folder(tmp_path, text, figures, text, figures)
    view = folder.view(canonical(tmp_path / "m.py"))
    assert view is not None
    items = views.hint_items(view, IDENTITY, Settings(), 0, 5, has_baseline=False)
    assert [(i.line, i.label) for i in items] == [(0, "30.0 MiB at peak · 10 allocs")]
    loud = views.hint_items(view, IDENTITY, Settings(import_min_bytes=0), 0, 5, has_baseline=False)
    assert [i.line for i in loud] == [0, 1]


def test_a_word_when_the_file_held_nothing_at_the_peak(tmp_path: Path) -> None:
    text = "import json\nx = json.dumps(list(range(10**5)))\n"
    figures = {2: LineStats(alloc_bytes=3 * MiB, alloc_count=9)}
    folder = _folder(tmp_path, text, figures, text, figures, peak=40 * MiB)
    view = folder.view(canonical(tmp_path / "m.py"))
    assert view is not None
    lens = views.peak_elsewhere_lens(view, Settings())
    assert lens is not None
    assert (lens.line, lens.title) == (
        0,
        (
            "memlens: no line here held much at the run's peak (40.0 MiB): it came while other "
            "code ran (imports, or before or after these lines) · 3.0 MiB allocated here "
            "(inlayHints.figure alloc shows where)"
        ),
    )
    assert views.peak_elsewhere_lens(view, Settings(figure="alloc")) is None


def test_count_parts_kept_for_reuse_stay_bounded_and_right(monkeypatch: pytest.MonkeyPatch) -> None:
    """The allocation-count parts of labels are kept for reuse (a file's lines share few
    counts), at most ``_ALLOCS_KEPT`` of them: past that they are made again, the same."""
    monkeypatch.setattr(annotate, "_ALLOCS", {})
    monkeypatch.setattr(annotate, "_ALLOCS_KEPT", 10)
    for count in [*range(1, 40), *range(1, 40)]:
        label = line_label(LineStats(peak_bytes=2048, alloc_count=count))
        noun = "alloc" if count == 1 else "allocs"
        assert label == f"2.0 KiB at peak · {count} {noun}"
        assert len(annotate._ALLOCS) <= 10


def test_a_moments_hints_fit_vs_code_default_width() -> None:
    """A line's hint at a moment of the run (``30.0 MiB live at 0.25 s``) fits in 43
    characters too, for the widest sizes, errors, counts and times, with and without calls."""
    moments = [Moment("time", 3, t, 1023 * GiB) for t in (0.25, 1234.56, 99_999.99)]
    moments += [Moment("peak", 0, 1.0, 1023 * GiB), Moment("end", -1, None, 1023 * GiB)]
    settings = [Settings(), Settings(hint_style="compact"), Settings(call_hints=False)]
    seen = []
    for value, err, count in itertools.product(SIZES, ERRORS, COUNTS):
        for moment, setting in itertools.product(moments, settings):
            label = views.moment_hint_label(_stats(value, err, count), moment, setting)
            if label is not None:
                assert len(label) <= HINT_WIDTH, label
                assert not label.endswith("…"), label
                assert moment.words in label, label
                seen.append(label)
    assert max(map(len, seen)) > 35  # the long forms were there to shorten
