"""The leak rule (memlens.growth): a line's live bytes over time tell growth (a likely leak)
from memory allocated once and kept."""

from __future__ import annotations

from memlens.growth import GROWING, KEPT, LATE, UNKNOWN, judge, short

MB = 1_000_000


def test_growth_kept_late_and_unknown() -> None:
    grows = judge([(0.0, 0), (0.1, MB), (0.2, 2 * MB), (0.3, 3 * MB), (0.4, 4 * MB)])
    assert grows.kind == GROWING
    assert (grows.since, grows.level, grows.end, grows.grew) == (0.1, 2 * MB, 4 * MB, 2 * MB)
    assert short(grows) == "grew"
    kept = judge([(0.0, 0), (0.1, 5 * MB), (0.2, 5 * MB), (0.3, 5 * MB)])
    assert (kept.kind, kept.since, short(kept)) == (KEPT, 0.1, "kept")
    # Less than a tenth of the end added after the middle of the line's life: still kept.
    assert judge([(0.1, 10 * MB), (0.2, 10 * MB), (0.3, 10 * MB + MB // 2)]).kind == KEPT
    late = judge([(0.0, 0), (0.1, 0), (0.2, 0), (0.3, MB), (0.4, MB)])
    assert (late.kind, short(late)) == (LATE, "late")
    assert judge([]).kind == UNKNOWN
    assert short(judge([])) == ""


def test_the_middle_of_a_life_is_in_time_not_in_moments() -> None:
    """Moments thin out as a run grows: many early moments must not hide late growth."""
    early = [(i / 100, MB) for i in range(1, 20)]  # 19 moments in the first 0.2 s
    late = [(1.0, MB), (2.0, 2 * MB), (3.0, 3 * MB)]  # then a few, far apart
    verdict = judge([*early, *late])
    assert verdict.kind == GROWING
    assert verdict.middle is not None
    assert 1.4 < verdict.middle < 1.6
    assert verdict.level == MB
