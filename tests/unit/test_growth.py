"""The leak rule (memlens.growth): a line's live bytes over time tell growth (a likely leak)
from memory allocated once and kept; a test's window is judged the same way."""

from __future__ import annotations

from memlens.growth import GROWING, KEPT, LATE, UNKNOWN, judge, kept_in_window, short
from memlens.model import Moments

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


def window(t: list[float], memo: list[int], leak: list[int]) -> Moments:
    """Moments at ``t`` of two lines: line 1 (a memo) and line 2 (a leak) hold these then."""
    n = len(t)
    rows = [(k, 1, memo[k]) for k in range(n)] + [(k, 2, leak[k]) for k in range(n)]
    rows.sort()
    return Moments(
        t,
        [memo[k] + leak[k] for k in range(n)],
        ["/w/test_x.py"],
        {
            "moment": [r[0] for r in rows],
            "file": [0] * len(rows),
            "line": [r[1] for r in rows],
            "live_bytes": [r[2] for r in rows],
            "incl_live_bytes": [r[2] for r in rows],
        },
    )


def test_a_window_keeps_what_did_not_grow() -> None:
    t = [0.0, 0.5, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    # Before the window (opened at 0.5): the memo already held 1 MB, the leak 2 MB.
    memo = [MB, MB, 6 * MB, 6 * MB, 6 * MB, 6 * MB, 6 * MB, 6 * MB]
    leak = [2 * MB, 2 * MB, 3 * MB, 4 * MB, 5 * MB, 6 * MB, 7 * MB, 8 * MB]
    moments = window(t, memo, leak)
    # The memo gained 5 MB at once and kept it: kept. The leak grew: not kept.
    assert kept_in_window(moments, 1.0, 1.5) == 5 * MB
    assert kept_in_window(moments, 0.5, 1.5) == 5 * MB
    # Counted from the end of the moment before the window: what the moment that opened it
    # holds is the window's (memory allocated just after it opened).
    assert kept_in_window(window(t, [0, *memo[1:]], [0] * 8), 0.5, 1.5) == 6 * MB
    # What was there before the window is not the window's.
    assert kept_in_window(moments, 1.1, 1.5) == 0


def test_a_window_too_short_to_tell_keeps_nothing() -> None:
    t = [0.0, 0.1, 0.2, 0.3]
    moments = window(t, [0, 0, 0, 4 * MB], [0, 0, 0, 0])
    assert kept_in_window(moments, 0.1, 0.3) == 0  # late: counted as leaked
    assert kept_in_window(Moments(), 0.1, 0.3) == 0
    assert kept_in_window(moments, -1.0, 0.3) == 0  # opened before the run's first moment
