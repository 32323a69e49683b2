"""Pure line re-mapping between two versions of a source text: the one line matcher. Stdlib only.

Used wherever figures recorded against one version of a file must be shown on another: the
language server (recorded source vs. the edited buffer, and the baseline's source vs. the
run's) and ``memlens diff`` / ``memlens flow --compare`` (source of run A vs. source of run B),
all through :func:`line_map`, so an editor and a diff follow the same lines. Only lines that
the matcher pairs as the same code are mapped; a line that was edited, inserted or deleted
maps to nothing, so its figures are hidden rather than shown on the wrong line.

The matcher has two stages. The first (:func:`in_order`) is a patience diff with a bounded
cost, because both texts may come from a workspace nobody vetted (a run file's recorded
source) or be very large (a 20,000-line buffer of repeated lines): difflib's longest-match
search is quadratic on such input (tens of seconds). Here, per range of still unmatched lines:

1. the common prefix and suffix are matched (one linear pass: a single edit in a file of
   identical lines costs no more than that);
2. small ranges (at most :data:`SMALL_RANGE` line pairs) are left to difflib, whose
   longest-block matching reads best there and costs little at that size;
3. otherwise lines that occur exactly once on each side are anchors; the longest chain of
   anchors in order on both sides (patience sorting, O(k log k)) is matched, and the ranges
   between anchors are handled the same way;
4. a range without any unique line (repeated lines only) gets a shortest-edit-script search
   (Myers, O((N + M) D)) that stops when the number of edits D gets too costly.

Its matches are in order on both sides, so of two blocks that swapped places only one is
followed. The second stage follows blocks that moved past other code: it matches the lines
left unmapped on both sides the same way, and takes each run of pairs that is contiguous on
both sides and has a distinctive line (a letter or digit, and exactly once among the unmapped
lines of each side: blank lines, ``else:`` or a repeated ``pass`` never pair on their own),
for up to :data:`MOVE_PASSES` passes (blocks that crossed each other).

Every step of both stages is charged to one work budget (a unit is about one line compared or
hashed) proportional to the input's size, :data:`WORK_PER_LINE` per line, at least
:data:`MIN_WORK` and at most :data:`MAX_WORK` (about a second of CPU); ranges left when it
runs out, and ranges that step 4 gives up on, stay unmatched: their lines show no figures (the
file is "stale" there) instead of costing unbounded time. Matches always pair identical lines,
and no line is matched twice.
"""

from __future__ import annotations

import difflib
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import pairwise

#: Ranges with at most this many line pairs (len(a) * len(b)) go to difflib.
SMALL_RANGE = 2_500
#: Work units allowed per input line (a unit is about one line compared or hashed).
WORK_PER_LINE = 40
#: Work units allowed whatever the size.
MIN_WORK = 200_000
#: Work units never exceeded whatever the size (about a second of CPU).
MAX_WORK = 4_000_000
#: Step 4 gives up on ranges that need more edits than this.
MAX_EDITS = 1_000
#: Passes over the left-over lines looking for moved blocks (each pass can follow blocks that
#: crossed each other).
MOVE_PASSES = 8


def line_map(old: str | Sequence[str], new: str | Sequence[str]) -> dict[int, int]:
    """Map 1-based line numbers of ``old`` to 1-based line numbers of ``new``: the one line
    matcher (in-order matching, then blocks that moved past other code).

    Lines that are the same code map to their new number; lines that changed are absent from
    the result. Identical texts give the identity map. The cost is bounded by about
    ``WORK_PER_LINE * (len(old) + len(new))`` line visits.
    """
    if old is new:  # (a diff of two runs shares their equal texts: one object)
        return _identity(len(_lines(old)))
    a, b = _lines(old), _lines(new)
    if a == b:
        return _identity(len(a))
    matcher = _Matcher(a, b)
    found = matcher.run()
    found.update(_moved_blocks(a, b, found, matcher.budget))
    return found


def _identity(n: int) -> dict[int, int]:
    lines = range(1, n + 1)
    return dict(zip(lines, lines, strict=True))


def in_order(old: str | Sequence[str], new: str | Sequence[str]) -> dict[int, int]:
    """The first stage of :func:`line_map` alone: matches in order on both sides (a block that
    moved past other code is not followed)."""
    a, b = _lines(old), _lines(new)
    if a == b:
        return _identity(len(a))
    return _Matcher(a, b).run()


#: Stretches of edited lines longer than this are not paired by :func:`changed_in_place`.
MAX_EDITED_STRETCH = 64
#: Line comparisons :func:`changed_in_place` may make in all (stretches of unequal length).
MAX_EDITED_WORK = 20_000
#: How alike (difflib's ratio) two lines of stretches of unequal length must be to pair.
EDITED_LIKENESS = 0.6


def changed_in_place(
    old: str | Sequence[str], new: str | Sequence[str], matched: Mapping[int, int]
) -> dict[int, int]:
    """Old line -> new line (1-based) for lines edited in place, given ``matched`` (what
    :func:`line_map` paired as the same code): the figures of ``data = load(path)`` before and
    after it became ``data = load(path, lazy=True)``.

    Between two matched lines that are in order on both sides, the old lines and the new
    lines left unmatched form a stretch each: two stretches of the same length pair line by
    line; otherwise each old line pairs with the next new line at least
    :data:`EDITED_LIKENESS` alike (in order). Stretches longer than
    :data:`MAX_EDITED_STRETCH` lines are not paired, and comparisons stop after
    :data:`MAX_EDITED_WORK` (both texts may be hostile): their lines stay unpaired.
    """
    a, b = _lines(old), _lines(new)
    taken = set(matched.values())
    anchors = [(0, 0)]
    for o, n in sorted(matched.items()):
        if n > anchors[-1][1]:  # in order on both sides (a moved block is no anchor)
            anchors.append((o, n))
    anchors.append((len(a) + 1, len(b) + 1))
    work = MAX_EDITED_WORK
    out: dict[int, int] = {}
    for (o1, n1), (o2, n2) in pairwise(anchors):
        if o2 - o1 - 1 > MAX_EDITED_STRETCH or n2 - n1 - 1 > MAX_EDITED_STRETCH:
            continue
        olds = [o for o in range(o1 + 1, o2) if o not in matched and a[o - 1].strip()]
        news = [n for n in range(n1 + 1, n2) if n not in taken and b[n - 1].strip()]
        if not olds or not news:
            continue
        if len(olds) == len(news):
            out.update(zip(olds, news, strict=True))
            continue
        start = 0
        for o in olds:
            text = a[o - 1].strip()[:200]  # a line of a hostile file may be huge
            for k in range(start, len(news)):
                work -= 1
                if work < 0:
                    return out
                other = b[news[k] - 1].strip()[:200]
                likeness = difflib.SequenceMatcher(None, text, other, autojunk=False)
                if (
                    likeness.quick_ratio() >= EDITED_LIKENESS
                    and likeness.ratio() >= EDITED_LIKENESS
                ):
                    out[o] = news[k]
                    start = k + 1
                    break
    return out


def _lines(text: str | Sequence[str]) -> list[str]:
    return text.splitlines() if isinstance(text, str) else list(text)


def _moved_blocks(
    old: list[str], new: list[str], mapping: Mapping[int, int], budget: int
) -> dict[int, int]:
    """Extra ``{old_line: new_line}`` pairs for blocks that moved past other code: contiguous
    runs of identical lines among the lines ``mapping`` left out on both sides, each with a
    distinctive line. ``budget``: the work left of the first stage."""
    extra: dict[int, int] = {}
    for _ in range(MOVE_PASSES):
        budget -= 4 * (len(old) + len(new))  # this pass's scans of both texts
        if budget < 0:
            break
        used_b = set(mapping.values()) | set(extra.values())
        rest_a = [i for i in range(1, len(old) + 1) if i not in mapping and i not in extra]
        rest_b = [j for j in range(1, len(new) + 1) if j not in used_b]
        if not rest_a or not rest_b:
            break
        seq_a = [old[i - 1] for i in rest_a]
        seq_b = [new[j - 1] for j in rest_b]
        count_a = Counter(t.strip() for t in seq_a)
        count_b = Counter(t.strip() for t in seq_b)
        if seq_a == seq_b:
            pairs = {i: i for i in range(1, len(seq_a) + 1)}
        else:
            matcher = _Matcher(seq_a, seq_b, budget)
            pairs = matcher.run()
            budget = matcher.budget
        found = False
        # Only runs contiguous in both sources are one moved block.
        run: list[tuple[int, int]] = []
        for i, j in [*sorted(pairs.items()), (0, 0)]:
            pair = (rest_a[i - 1], rest_b[j - 1]) if i else None
            if pair is not None and (
                not run or (pair[0] == run[-1][0] + 1 and pair[1] == run[-1][1] + 1)
            ):
                run.append(pair)
                continue
            if run and any(_distinctive(old[a - 1], count_a, count_b) for a, _ in run):
                extra.update(run)
                found = True
            run = [pair] if pair is not None else []
        if not found:
            break
    return extra


def _distinctive(text: str, count_a: Counter[str], count_b: Counter[str]) -> bool:
    t = text.strip()
    return count_a[t] == 1 and count_b[t] == 1 and any(c.isalnum() for c in t)


class _Matcher:
    def __init__(self, a: list[str], b: list[str], budget: int | None = None) -> None:
        self.a = a
        self.b = b
        if budget is None:
            budget = min(MAX_WORK, max(MIN_WORK, WORK_PER_LINE * (len(a) + len(b))))
        self.budget = budget
        self.pairs: list[tuple[int, int]] = []

    def run(self) -> dict[int, int]:
        a, b, pairs = self.a, self.b, self.pairs
        stack = [(0, len(a), 0, len(b))]
        while stack:
            alo, ahi, blo, bhi = stack.pop()
            # 1. Common prefix and suffix.
            while alo < ahi and blo < bhi and a[alo] == b[blo]:
                pairs.append((alo, blo))
                alo += 1
                blo += 1
            while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
                ahi -= 1
                bhi -= 1
                pairs.append((ahi, bhi))
            na, nb = ahi - alo, bhi - blo
            if na == 0 or nb == 0:
                continue
            # 2. Small ranges: difflib's longest blocks.
            if na * nb <= SMALL_RANGE:
                self.budget -= na * nb
                if self.budget < 0:
                    break
                matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
                for block in matcher.get_matching_blocks():
                    pairs.extend((alo + block.a + k, blo + block.b + k) for k in range(block.size))
                continue
            # 3. Unique lines as anchors, the longest in-order chain of them.
            self.budget -= 8 * (na + nb)
            if self.budget < 0:
                break
            anchors = _anchors(a, alo, ahi, b, blo, bhi)
            if not anchors:
                # 4. Repeated lines only: a few edits are found cheaply, many are given up.
                found = _myers(a, alo, ahi, b, blo, bhi, self)
                if found is not None:
                    pairs.extend(found)
                continue
            prev_a, prev_b = alo, blo
            for i, j in anchors:
                pairs.append((i, j))
                stack.append((prev_a, i, prev_b, j))
                prev_a, prev_b = i + 1, j + 1
            stack.append((prev_a, ahi, prev_b, bhi))
        return {i + 1: j + 1 for i, j in sorted(pairs)}


def _anchors(
    a: list[str], alo: int, ahi: int, b: list[str], blo: int, bhi: int
) -> list[tuple[int, int]]:
    """Lines unique on both sides of the ranges, longest chain increasing on both sides."""
    where_a: dict[str, int] = {}
    for i in range(alo, ahi):
        line = a[i]
        where_a[line] = -1 if line in where_a else i
    where_b: dict[str, int] = {}
    for j in range(blo, bhi):
        line = b[j]
        if line in where_a:
            where_b[line] = -1 if line in where_b else j
    candidates = sorted(
        (i, where_b[line]) for line, i in where_a.items() if i >= 0 and where_b.get(line, -1) >= 0
    )
    if not candidates:
        return []
    # Longest increasing subsequence of the b positions (patience sorting).
    tails: list[int] = []  # b position ending the best chain of each length
    tail_index: list[int] = []  # index into candidates of that chain's end
    back: list[int] = [-1] * len(candidates)
    for k, (_, j) in enumerate(candidates):
        pos = bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_index.append(k)
        else:
            tails[pos] = j
            tail_index[pos] = k
        back[k] = tail_index[pos - 1] if pos > 0 else -1
    chain: list[tuple[int, int]] = []
    k = tail_index[-1]
    while k >= 0:
        chain.append(candidates[k])
        k = back[k]
    chain.reverse()
    return chain


def _myers(
    a: list[str], alo: int, ahi: int, b: list[str], blo: int, bhi: int, matcher: _Matcher
) -> list[tuple[int, int]] | None:
    """The matched pairs of a shortest edit script between the ranges, or None when finding
    it would exceed the matcher's budget (Myers' greedy forward search, kept per edit count
    for the way back: memory O(D^2))."""
    n, m = ahi - alo, bhi - blo
    max_d = min(n + m, MAX_EDITS)
    if abs(n - m) > max_d:
        return None  # at least |n - m| edits
    v: dict[int, int] = {1: 0}
    trace: list[dict[int, int]] = []
    for d in range(max_d + 1):
        trace.append(dict(v))
        matcher.budget -= len(v)
        for k in range(-d, d + 1, 2):
            down = k == -d or (k != d and v[k - 1] < v[k + 1])
            x = v[k + 1] if down else v[k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[alo + x] == b[blo + y]:
                x += 1
                y += 1
            v[k] = x
            matcher.budget -= 1 + x - start
            if x >= n and y >= m:
                return _myers_path(trace, n, m, alo, blo)
        if matcher.budget < 0:
            return None
    return None


def _myers_path(
    trace: list[dict[int, int]], n: int, m: int, alo: int, blo: int
) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    x, y = n, m
    for d in range(len(trace) - 1, -1, -1):
        v = trace[d]
        k = x - y
        prev_k = k + 1 if (k == -d or (k != d and v[k - 1] < v[k + 1])) else k - 1
        prev_x = v[prev_k]
        prev_y = prev_x - prev_k
        while x > prev_x and y > prev_y and x > 0 and y > 0:
            x -= 1
            y -= 1
            pairs.append((alo + x, blo + y))
        x, y = prev_x, prev_y
    return pairs
