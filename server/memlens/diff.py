"""Diffs between two runs, per line and per function. Pure, stdlib only.

Files are matched by absolute path. Lines are matched through the source texts recorded in
each run (:func:`memlens.mapping.line_map`, the matcher the editor uses too), so a line that
moved between the runs is still compared with itself (also when it moved past other code),
and a line whose text changed is reported on each side separately (it is not the same code any more). When a run lacks the
text of a file, lines are matched by identity if both runs recorded the same SHA-256 (the
file did not change), else by line number; the latter is a guess, flagged as such
(:attr:`FileDiff.matched_by` ``"line-number"``).

Every figure's change is given both ways: absolute (B − A) and relative ((B − A) / A; ``None``
when A is 0 and B is not: "new"; 0.0 when both are 0).
"""

from __future__ import annotations

import json
import os
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from io import StringIO
from itertools import accumulate, chain, islice, repeat
from operator import attrgetter, eq, le, mul, neg, sub, truediv
from typing import Any, TextIO, overload

from memlens.export import write_rows
from memlens.mapping import line_map
from memlens.model import (
    FIGURES,
    FUNCTION_FIGURES,
    GPU_FIGURES,
    GPU_FUNCTION_FIGURES,
    FunctionStats,
    LineStats,
    LineTable,
    Run,
    RunInfo,
    SourceFile,
)
from memlens.model.collector import collector_paused
from memlens.runfile.jsontext import plain

try:
    from memlens._text import format_rows, locate, order, order_of_changes
except ImportError:  # (a free-threaded Python has no native modules: Python formats the rows)
    format_rows = locate = order = order_of_changes = None  # type: ignore[assignment]

#: How the lines of a file were matched between the two runs.
MATCHED_BY_TEXT = "text"  # through the recorded source texts (moved lines followed)
MATCHED_BY_SHA256 = "sha256"  # a text is missing, but the file did not change: identity
MATCHED_BY_LINE_NUMBER = "line-number"  # a text is missing and the file changed: a guess
ONLY_IN_A = "only-a"  # the file has figures in run A only
ONLY_IN_B = "only-b"  # the file has figures in run B only


@dataclass(frozen=True, slots=True)
class Change:
    """One figure in run A and run B."""

    a: int
    b: int

    @property
    def delta(self) -> int:
        """Absolute change, B − A."""
        return self.b - self.a

    @property
    def ratio(self) -> float | None:
        """Relative change (B − A) / A; None when A is 0 and B is not; 0.0 when both are 0."""
        if self.a == 0:
            return 0.0 if self.b == 0 else None
        return self.delta / self.a

    def as_dict(self) -> dict[str, int | float | None]:
        return {"a": self.a, "b": self.b, "delta": self.delta, "ratio": self.ratio}


@dataclass(frozen=True, slots=True)
class LineDiff:
    """One line in run A and/or run B.

    ``line_a``/``line_b`` are None when the line does not exist (as the same code) in that run;
    ``a``/``b`` are None when that run recorded no figures for it (figures count as 0).
    """

    file: str
    line_a: int | None
    line_b: int | None
    a: LineStats | None
    b: LineStats | None
    matched_by: str = MATCHED_BY_TEXT

    def figure(self, figure: str) -> Change:
        """Both sides of one figure of :data:`memlens.model.FIGURES` (or ``GPU_FIGURES``)."""
        return Change(
            self.a.figure(figure) if self.a else 0, self.b.figure(figure) if self.b else 0
        )

    def change(self, figure: str) -> int:
        """B minus A for one figure."""
        return self.figure(figure).delta

    def relative(self, figure: str) -> float | None:
        """Relative change of one figure (see :attr:`Change.ratio`)."""
        return self.figure(figure).ratio

    def changes(self) -> dict[str, Change]:
        """Every figure's change; the GPU figures too when either side has some."""
        gpu = any(st is not None and st.has_gpu() for st in (self.a, self.b))
        return {f: self.figure(f) for f in (*FIGURES, *(GPU_FIGURES if gpu else ()))}

    @property
    def status(self) -> str:
        """``moved``, ``same-line``, ``new`` (no such code in A) or ``gone`` (none in B)."""
        if self.line_a is None:
            return "new"
        if self.line_b is None:
            return "gone"
        return "same-line" if self.line_a == self.line_b else "moved"

    @property
    def line(self) -> int:
        """The line to show: in B when it exists there, else in A."""
        line = self.line_b if self.line_b is not None else self.line_a
        assert line is not None
        return line

    def is_unchanged(self) -> bool:
        return all(c.delta == 0 for c in self.changes().values())


@dataclass(frozen=True, slots=True)
class FunctionDiff:
    """One function (matched by file and qualified name) in run A and/or run B."""

    file: str
    qualname: str
    a: FunctionStats | None
    b: FunctionStats | None

    def figure(self, figure: str) -> Change:
        _function_figure(figure)
        return Change(
            int(getattr(self.a, figure)) if self.a else 0,
            int(getattr(self.b, figure)) if self.b else 0,
        )

    def change(self, figure: str) -> int:
        return self.figure(figure).delta

    def relative(self, figure: str) -> float | None:
        return self.figure(figure).ratio

    def changes(self) -> dict[str, Change]:
        """Every figure's change; the GPU figures too when either side has some."""
        gpu = any(
            fn is not None and any(getattr(fn, f) for f in GPU_FUNCTION_FIGURES)
            for fn in (self.a, self.b)
        )
        return {
            f: self.figure(f) for f in (*FUNCTION_FIGURES, *(GPU_FUNCTION_FIGURES if gpu else ()))
        }


@dataclass(frozen=True, slots=True)
class FileDiff:
    """How one file's lines were matched, its line pairs by column, and its function diffs.

    Pair ``k`` (in file order: by the line to show, then the line in A) is
    :meth:`line`\\(``k``): its line in A is ``line_a[k]`` when ``sides[k] & 1`` (else the code
    does not exist in A), in B ``line_b[k]`` when ``sides[k] & 2``; its figures are row
    ``row_a[k]`` of ``a`` and ``row_b[k]`` of ``b`` (-1: none recorded there). A million
    pairs take a few arrays, not a million objects; :meth:`values` reads one figure of them.
    """

    path: str
    matched_by: str
    a: LineTable
    b: LineTable
    line_a: array[int]
    line_b: array[int]
    row_a: array[int]
    row_b: array[int]
    sides: bytes
    functions: tuple[FunctionDiff, ...]

    def __len__(self) -> int:
        return len(self.sides)

    def line(self, k: int) -> LineDiff:
        """Pair ``k`` as a :class:`LineDiff`."""
        sides, ra, rb = self.sides[k], self.row_a[k], self.row_b[k]
        return LineDiff(
            self.path,
            self.line_a[k] if sides & 1 else None,
            self.line_b[k] if sides & 2 else None,
            self.a.at(ra) if ra >= 0 else None,
            self.b.at(rb) if rb >= 0 else None,
            self.matched_by,
        )

    @property
    def lines(self) -> list[LineDiff]:
        return [self.line(k) for k in range(len(self))]

    def values(
        self, figure: str, pairs: Sequence[int] | None = None
    ) -> tuple[list[int], list[int]]:
        """One integer figure (of :data:`FIGURES` or :data:`GPU_FIGURES`) in A and in B, of
        each of ``pairs`` (None: all, in order); 0 where a run recorded no figures."""
        return _Rows(self.a, self.row_a, pairs).values(figure), _Rows(
            self.b, self.row_b, pairs
        ).values(figure)


class _Rows:
    """Some pairs' rows in one run's table of a file, to read their figures by column: 0
    where that run recorded none (row -1)."""

    __slots__ = ("_present", "_rows", "_table")

    def __init__(self, table: LineTable, rows: array[int], pairs: Sequence[int] | None) -> None:
        self._table = table
        self._rows: Sequence[int] = rows if pairs is None else list(map(rows.__getitem__, pairs))
        present = list(map(_ZERO.__le__, self._rows))
        self._present = None if all(present) else present

    def values(self, figure: str) -> list[int]:
        rows = self._rows
        column = _column(self._table, figure)
        if column is None:
            return [0] * len(rows)
        got = map(column.__getitem__, rows)
        # Row -1 reads the last row, multiplied by False: no Python per pair.
        return list(got) if self._present is None else list(map(mul, got, self._present))


_ZERO = 0


class LineDiffs(Sequence[LineDiff]):
    """The line pairs of every file, in order, as :class:`LineDiff` objects made on access."""

    __slots__ = ("_files", "_starts")

    def __init__(self, files: Sequence[FileDiff]) -> None:
        self._files = files
        self._starts = list(accumulate((len(fd) for fd in files), initial=0))

    def __len__(self) -> int:
        return self._starts[-1]

    @overload
    def __getitem__(self, i: int) -> LineDiff: ...
    @overload
    def __getitem__(self, i: slice) -> list[LineDiff]: ...
    def __getitem__(self, i: int | slice) -> LineDiff | list[LineDiff]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        f = bisect_right(self._starts, i) - 1
        return self._files[f].line(i - self._starts[f])

    def __iter__(self) -> Iterator[LineDiff]:
        for fd in self._files:
            for k in range(len(fd)):
                yield fd.line(k)


@dataclass(frozen=True, slots=True)
class RunDiff:
    files: tuple[FileDiff, ...]
    functions: tuple[FunctionDiff, ...]
    #: Files whose lines were matched by number only (no recorded text on one side and
    #: different hashes): their line pairs are a guess.
    unmatched_sources: tuple[str, ...] = ()
    info_a: RunInfo | None = None
    info_b: RunInfo | None = None

    @property
    def lines(self) -> LineDiffs:
        """Every line pair, file by file (files by path)."""
        return LineDiffs(self.files)

    def totals(self) -> dict[str, Change]:
        """Run totals: peak traced bytes and peak RSS; the GPU peak when either run has one."""
        if self.info_a is None or self.info_b is None:
            return {}
        out = {
            "peak_traced_bytes": Change(
                self.info_a.peak_traced_bytes, self.info_b.peak_traced_bytes
            ),
            "peak_rss_bytes": Change(self.info_a.peak_rss_bytes, self.info_b.peak_rss_bytes),
        }
        if self.info_a.gpu_peak_bytes or self.info_b.gpu_peak_bytes:
            out["gpu_peak_bytes"] = Change(self.info_a.gpu_peak_bytes, self.info_b.gpu_peak_bytes)
        return out


def matching(a: SourceFile, b: SourceFile) -> tuple[dict[int, int], str]:
    """Map line numbers of ``a`` to those of ``b``, and say how (``MATCHED_BY_*``).

    With both recorded texts, only lines that are the same code are mapped (moved lines are
    followed; edited ones map to nothing). Without a text on one side: identity when both
    runs recorded the same SHA-256, else line numbers (a guess, flagged).
    """
    if a.text is not None and b.text is not None:
        return line_map(a.text, b.text), MATCHED_BY_TEXT
    numbers = set(a.lines) | set(b.lines)
    for sf in (a, b):
        if sf.text is not None:
            numbers |= set(range(1, len(sf.text.splitlines()) + 1))
    identity = {n: n for n in sorted(numbers)}
    if a.sha256 and a.sha256 == b.sha256:
        return identity, MATCHED_BY_SHA256
    return identity, MATCHED_BY_LINE_NUMBER


def match_lines(a_file: SourceFile, b_file: SourceFile) -> dict[int, int]:
    """Map line numbers of ``a_file`` to those of ``b_file`` for lines that are the same code."""
    return matching(a_file, b_file)[0]


def diff_files(path: str, fa: SourceFile | None, fb: SourceFile | None) -> FileDiff:
    """Diff one file present in run A and/or run B."""
    if fa is None or fb is None:
        only = fa or fb
        assert only is not None
        table = LineTable.of(only.lines)
        n = len(table)
        numbers, rows, none = array("q", table), array("q", range(n)), array("q", [-1]) * n
        fns = tuple(
            FunctionDiff(path, fn.qualname, fn if fa else None, fn if fb else None)
            for fn in only.functions
        )
        if fa is not None:
            return FileDiff(
                path, ONLY_IN_A, table, _EMPTY, numbers, numbers, rows, none, b"\1" * n, fns
            )
        return FileDiff(
            path, ONLY_IN_B, _EMPTY, table, numbers, numbers, none, rows, b"\2" * n, fns
        )
    ta, tb = LineTable.of(fa.lines), LineTable.of(fb.lines)
    mapping, how = matching(fa, fb)
    functions = _diff_functions(path, fa.functions, fb.functions)
    numbers = array("q", ta)
    if numbers == array("q", tb) and all(map(eq, map(mapping.get, numbers), numbers)):
        # The same lines have figures in both runs, each still the same code (the file did
        # not change, or not around them): row i pairs with row i.
        rows = array("q", range(len(numbers)))
        return FileDiff(
            path, how, ta, tb, numbers, numbers, rows, rows, b"\3" * len(rows), functions
        )
    row_of_b = {line: j for j, line in enumerate(tb)}
    # (line in A, line in B, row in A, row in B, sides) of each pair, in columns: first A's
    # lines (paired with their line in B, if any), then B's lines not paired yet.
    line_a, line_b, row_a, row_b, sides = [], [], [], [], []
    seen_b: set[int] = set()
    for i, n in enumerate(ta):
        m = mapping.get(n)
        line_a.append(n)
        row_a.append(i)
        if m is not None:
            seen_b.add(m)
            line_b.append(m)
            row_b.append(row_of_b.get(m, -1))
            sides.append(3)
        else:
            line_b.append(0)
            row_b.append(-1)
            sides.append(1)
    back = {v: k for k, v in mapping.items()}
    row_of_a: dict[int, int] | None = None
    for j, m in enumerate(tb):
        if m not in seen_b:
            origin = back.get(m)
            line_b.append(m)
            row_b.append(j)
            if origin is None:
                line_a.append(0)
                row_a.append(-1)
                sides.append(2)
            else:
                if row_of_a is None:
                    row_of_a = {line: i for i, line in enumerate(ta)}
                line_a.append(origin)
                row_a.append(row_of_a.get(origin, -1))
                sides.append(3)
    # In order of the line to show (in B when it exists there), then of the line in A.
    keys = [
        (lb if s & 2 else la, la if s & 1 else 0)
        for la, lb, s in zip(line_a, line_b, sides, strict=True)
    ]
    columns = [line_a, line_b, row_a, row_b, sides]
    if not all(map(le, keys, islice(keys, 1, None))):
        order = sorted(range(len(keys)), key=keys.__getitem__)
        columns = [list(map(c.__getitem__, order)) for c in columns]
    line_a, line_b, row_a, row_b, sides = columns
    return FileDiff(
        path,
        how,
        ta,
        tb,
        array("q", line_a),
        array("q", line_b),
        array("q", row_a),
        array("q", row_b),
        bytes(sides),
        functions,
    )


_EMPTY = LineTable.of({})


def _diff_functions(
    path: str, fns_a: tuple[FunctionStats, ...], fns_b: tuple[FunctionStats, ...]
) -> tuple[FunctionDiff, ...]:
    # Functions are matched by qualified name; several with one name (redefinitions, lambdas)
    # are paired in order of their first line.
    names_a = [fn.qualname for fn in fns_a]
    names_b = [fn.qualname for fn in fns_b]
    one_a = dict(zip(names_a, fns_a, strict=True))
    one_b = dict(zip(names_b, fns_b, strict=True))
    if len(one_a) == len(fns_a) and len(one_b) == len(fns_b):  # (each name once: most files)
        names = sorted(one_a.keys() | one_b.keys())
        return tuple(
            map(FunctionDiff, repeat(path), names, map(one_a.get, names), map(one_b.get, names))
        )
    return _paired_in_order(path, fns_a, fns_b)


def _paired_in_order(
    path: str, fns_a: tuple[FunctionStats, ...], fns_b: tuple[FunctionStats, ...]
) -> tuple[FunctionDiff, ...]:
    """:func:`_diff_functions` where a name is held by several functions: the i-th of a name
    in A (by first line) with the i-th in B."""
    by_name_a: dict[str, list[FunctionStats]] = {}
    by_name_b: dict[str, list[FunctionStats]] = {}
    for fn in sorted(fns_a, key=lambda f: f.first_line):
        by_name_a.setdefault(fn.qualname, []).append(fn)
    for fn in sorted(fns_b, key=lambda f: f.first_line):
        by_name_b.setdefault(fn.qualname, []).append(fn)
    out: list[FunctionDiff] = []
    for name in sorted(set(by_name_a) | set(by_name_b)):
        left, right = by_name_a.get(name, []), by_name_b.get(name, [])
        for i in range(max(len(left), len(right))):
            out.append(
                FunctionDiff(
                    path,
                    name,
                    left[i] if i < len(left) else None,
                    right[i] if i < len(right) else None,
                )
            )
    return tuple(out)


def diff_runs(a: Run, b: Run) -> RunDiff:
    """Compare run ``a`` (old, e.g. the baseline) with run ``b`` (new)."""
    with collector_paused():
        return _diff_runs(a, b)


def _diff_runs(a: Run, b: Run) -> RunDiff:
    files = tuple(
        diff_files(path, a.files.get(path), b.files.get(path))
        for path in sorted(set(a.files) | set(b.files))
    )
    return RunDiff(
        files=files,
        functions=tuple(fn for fd in files for fn in fd.functions),
        unmatched_sources=tuple(fd.path for fd in files if fd.matched_by == MATCHED_BY_LINE_NUMBER),
        info_a=a.info,
        info_b=b.info,
    )


def line_order(d: RunDiff, figure: str) -> Sequence[int]:
    """The line pairs (their positions in :attr:`RunDiff.lines`) by absolute change of
    ``figure``, biggest first, then in file and line order; read by column."""
    # (A stable sort: pairs of equal change stay in their order, by file and line. Natively
    # where it can, from the columns: a million pairs in ~0.1 s, not ~1 s.)
    if order_of_changes is not None:
        columns = [
            [_column(fd.a, figure) for fd in d.files],
            [_column(fd.b, figure) for fd in d.files],
        ]
        a = (columns[0], [fd.row_a for fd in d.files])
        b = (columns[1], [fd.row_b for fd in d.files])
        try:
            return order_of_changes(a, b, [len(fd) for fd in d.files])
        except OverflowError:  # a change beyond 64 bits: only Python's integers hold it
            pass
    keys: list[int] = []
    for fd in d.files:
        a_values, b_values = fd.values(figure)
        keys += map(neg, map(abs, map(sub, b_values, a_values)))
    return sorted(range(len(keys)), key=keys.__getitem__)


def _column(table: LineTable, figure: str) -> Sequence[int] | None:
    """One figure's column of ``table`` for the native formatter: None where every line's
    is 0 (an empty table, a GPU figure of a table without GPU figures)."""
    if not table or (figure in GPU_FIGURES and not table.has_gpu):
        return None
    return table.column(figure)


def ranked_lines(d: RunDiff, figure: str, top: int | None = None) -> list[LineDiff]:
    """Lines by absolute change of ``figure``, biggest first (then file and line); the first
    ``top`` (None: all)."""
    lines = d.lines
    return [lines[k] for k in line_order(d, figure)[:top]]


def _function_figure(figure: str) -> None:
    """KeyError unless ``figure`` is one functions have."""
    if figure not in FUNCTION_FIGURES and figure not in GPU_FUNCTION_FIGURES:
        raise KeyError(figure)


def ranked_functions(d: RunDiff, figure: str) -> list[FunctionDiff]:
    """Functions by absolute change of ``figure``, biggest first (then file and name)."""
    functions = d.functions
    _function_figure(figure)
    if order is not None:
        # (A diff's functions come by file and name: a stable sort of the changes alone
        # keeps that order among equal ones, natively.)
        get = attrgetter(figure)
        keys = [abs((get(fd.b) if fd.b else 0) - (get(fd.a) if fd.a else 0)) for fd in functions]
        names = list(map(attrgetter("file", "qualname"), functions))
        try:
            if all(map(le, names, islice(names, 1, None))):
                return list(map(functions.__getitem__, order(array("q", map(neg, keys)))))
        except OverflowError:  # a change beyond 64 bits
            pass
    return sorted(functions, key=lambda fd: (-abs(fd.change(figure)), fd.file, fd.qualname))


def write_json(
    d: RunDiff,
    out: TextIO,
    by: str | None = None,
    top: int | None = None,
    more: Mapping[str, Any] | None = None,
    raw: Callable[[bytes], object] | None = None,
) -> None:
    """Write the ``memlens diff --json`` document (documented in docs/file-format.md) to
    ``out``, piece by piece: one line of text per line pair, made by formatting its figures
    read by column (no object per pair), a few thousand at a time.

    With ``by`` (a figure both lines and functions have: ``alloc_bytes``, ``live_bytes``,
    ``peak_bytes``, and their ``gpu_`` counterparts), lines and functions are sorted by the
    absolute change of that figure and the first ``top`` of each are kept (None: all);
    without, every pair in file order. ``more``: keys written after the document's own.
    ``raw``: the binary stream under ``out`` (:func:`raw_writer`): the line pairs' text (a
    gigabyte for a million) goes there as the bytes it is made in, not through ``out``.
    """
    write = out.write
    totals = plain({k: c.as_dict() for k, c in d.totals().items()})
    files = plain({fd.path: {"matched_by": fd.matched_by} for fd in d.files})
    write(f'{{"format": "memlens-diff", "version": 1,\n "totals": {totals},\n')
    write(f' "files": {files},\n "lines": [')
    ranked = None if by is None else line_order(d, by)[:top]
    if raw is None:
        _write_line_rows(d.files, ranked, write)
    else:
        out.flush()  # (what `out` holds goes first)
        _write_line_rows(d.files, ranked, lambda text: raw(text.encode("ascii")), raw)
    write('\n ],\n "functions": [')
    functions: Sequence[FunctionDiff] = d.functions if by is None else ranked_functions(d, by)[:top]
    write_rows(out, _function_rows(functions), "\n  ")
    write("\n ]")
    tail: dict[str, Any] = {"by": by} if by is not None else {}
    for key, value in {**tail, **(more or {})}.items():
        write(f",\n {plain(key)}: {plain(value)}")
    write("\n}\n")


#: Every ASCII character: a text stream whose encoding writes them as themselves takes the
#: rows' text (JSON, ASCII only) as bytes.
_ASCII = "".join(map(chr, range(128)))


def raw_writer(out: TextIO) -> Callable[[bytes], object] | None:
    """The binary stream under ``out`` (a text stream of the system's, as ``sys.stdout``),
    for :func:`write_json`'s ``raw``: where lines end in a line feed and ``out``'s encoding
    writes ASCII as itself; None otherwise."""
    buffer = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    if buffer is None or os.linesep != "\n" or not isinstance(encoding, str):
        return None
    try:
        as_itself = _ASCII.encode(encoding) == _ASCII.encode("ascii")
    except (LookupError, UnicodeError):
        return None
    write: Callable[[bytes], object] = buffer.write
    return write if as_itself else None


def to_json_dict(d: RunDiff, by: str | None = None, top: int | None = None) -> dict[str, Any]:
    """The document of :func:`write_json` (same arguments), parsed."""
    text = StringIO()
    write_json(d, text, by, top)
    doc: dict[str, Any] = json.loads(text.getvalue())
    return doc


#: Line pairs formatted at a time by :func:`_line_rows`.
_BATCH = 8192


#: Ranked line pairs given to the native formatter at a time: it reads their figures in file
#: order, so the more there are, the closer together (it writes them a few thousand at a time).
_RANKED_BATCH = 131072


def _write_line_rows(
    files: Sequence[FileDiff],
    ranked: Sequence[int] | None,
    write: Callable[[str], object],
    raw: Callable[[bytes], object] | None = None,
) -> None:
    """Write the JSON of the line pairs in ``ranked`` (positions in :class:`LineDiffs`; None:
    all, in file order), each after a line break and an indent, with commas between them:
    formatted from the figures' columns a batch at a time, and written as they come (a
    batch's text is megabytes); with ``raw``, the native formatter's as bytes there."""
    sep = ",\n  "
    lead = ["\n  "]  # what comes before the next text: a line break first, then `sep`

    def put(of: Sequence[int], index: Sequence[int]) -> None:
        for text in _pair_rows(files, of, index, sep):
            write(lead[0])
            write(text)
            lead[0] = sep

    if ranked is None:
        for f, fd in enumerate(files):
            for lo in range(0, len(fd), _BATCH):
                pairs = range(lo, min(lo + _BATCH, len(fd)))
                put([f] * len(pairs), pairs)
        return
    for lo in range(0, len(ranked), _RANKED_BATCH):
        of, index = _locate(files, ranked[lo : lo + _RANKED_BATCH])
        if _native_write(files, of, index, write, lead[0], sep, raw):
            lead[0] = sep
        else:
            for k in range(0, len(of), _BATCH):
                put(of[k : k + _BATCH], index[k : k + _BATCH])


def _locate(
    files: Sequence[FileDiff], positions: Sequence[int]
) -> tuple[Sequence[int], Sequence[int]]:
    """The file (its position in ``files``) of each of the pairs at ``positions`` (positions
    in :class:`LineDiffs`), and the pair's position in that file."""
    counts = [len(fd) for fd in files]
    if locate is not None:
        return locate(positions if isinstance(positions, array) else array("q", positions), counts)
    starts = list(accumulate(counts, initial=0))
    of = list(map(sub, map(bisect_right, repeat(starts), positions), repeat(1)))
    return of, list(map(sub, positions, map(starts.__getitem__, of)))


def _pair_rows(
    files: Sequence[FileDiff], of: Sequence[int], index: Sequence[int], sep: str | None = None
) -> list[str]:
    """The JSON of the pairs ``index[i]`` of ``files[of[i]]`` (those with a GPU figure on
    either side carry the GPU figures too), or with ``sep`` one text of them joined by it: by
    the native formatter where there is one (the same text, several times as fast), else in
    Python. Files with GPU figures are Python's (their pairs take two forms)."""
    gpu = _gpu_files(files, of)
    if not gpu:
        native = _native_pair_rows(files, of, index, sep)
        if native is not None:
            return native
        rows = _python_rows(files, of, index)
    else:
        rows = [""] * len(of)
        mine = [k for k, f in enumerate(of) if f not in gpu]
        python = [k for k, f in enumerate(of) if f in gpu]
        native = _native_pair_rows(files, [of[k] for k in mine], [index[k] for k in mine], None)
        if native is None:
            python = list(range(len(of)))
        else:
            for k, text in zip(mine, native, strict=True):
                rows[k] = text
        made = _python_rows(files, [of[k] for k in python], [index[k] for k in python])
        for k, text in zip(python, made, strict=True):
            rows[k] = text
    return rows if sep is None else [sep.join(rows)]


def _gpu_files(files: Sequence[FileDiff], of: Sequence[int]) -> set[int]:
    """The files among ``of`` with GPU figures on either side (their pairs are Python's)."""
    return {f for f in set(of) if files[f].a.has_gpu or files[f].b.has_gpu}


def _python_rows(files: Sequence[FileDiff], of: Sequence[int], index: Sequence[int]) -> list[str]:
    """:func:`_pair_rows` in Python alone, as a list."""
    # The positions file by file, their rows made a file at a time, then each put back at
    # its position: no Python step per pair.
    by_file = sorted(range(len(of)), key=of.__getitem__)
    files_in_order = list(map(of.__getitem__, by_file))
    texts: list[str] = []
    k = 0
    while k < len(by_file):
        f = files_in_order[k]
        end = bisect_right(files_in_order, f, k)
        pairs = list(map(index.__getitem__, by_file[k:end]))
        texts += _python_pair_rows(files[f], pairs, _line_forms(files[f]))
        k = end
    return list(map(texts.__getitem__, sorted(range(len(by_file)), key=by_file.__getitem__)))


def _python_pair_rows(fd: FileDiff, pairs: list[int], forms: tuple[str, str]) -> list[str]:
    """The JSON of some of ``fd``'s pairs, in Python alone (see :func:`_pair_rows`)."""
    sides = list(map(fd.sides.__getitem__, pairs))
    line_a = list(map(fd.line_a.__getitem__, pairs))
    line_b = list(map(fd.line_b.__getitem__, pairs))
    head = (
        ["null" if not s & 1 else str(la) for s, la in zip(sides, line_a, strict=True)],
        ["null" if not s & 2 else str(lb) for s, lb in zip(sides, line_b, strict=True)],
        [
            _STATUS[s] if s != 3 else '"same-line"' if la == lb else '"moved"'
            for s, la, lb in zip(sides, line_a, line_b, strict=True)
        ],
    )

    rows_a, rows_b = _Rows(fd.a, fd.row_a, pairs), _Rows(fd.b, fd.row_b, pairs)

    def columns(figures: tuple[str, ...]) -> list[list[int] | list[str]]:
        both: list[list[int] | list[str]] = []
        deltas: list[list[int]] = []
        ratios: list[list[str]] = []
        for figure in figures:
            a, b = rows_a.values(figure), rows_b.values(figure)
            delta = list(map(sub, b, a))
            # Ratios as JSON writes them (a float's repr, null): by the C encoder, all at once.
            ratio: list[float | None] = (
                list(map(truediv, delta, a))
                if all(a)
                else [
                    d / x if x else None if y else 0.0 for x, y, d in zip(a, b, delta, strict=True)
                ]
            )
            text = plain(ratio)[1:-1].split(", ")
            both += (a, b, delta, text)
            deltas.append(delta)
            ratios.append(text)
        return [*head, *both, *deltas, *ratios]

    form, form_gpu = forms
    rows = list(map(form.__mod__, zip(*columns(FIGURES), strict=True)))
    if not (fd.a.has_gpu or fd.b.has_gpu):
        return rows
    with_gpu = columns((*FIGURES, *GPU_FIGURES))
    gpu = (v for f in GPU_FIGURES for v in (rows_a.values(f), rows_b.values(f)))
    has = map(any, zip(*gpu, strict=True))
    return [
        form_gpu % values if some else row
        for row, values, some in zip(rows, zip(*with_gpu, strict=True), has, strict=True)
    ]


_STATUS = {1: '"gone"', 2: '"new"'}


def _native_pair_rows(
    files: Sequence[FileDiff], of: Sequence[int], index: Sequence[int], sep: str | None
) -> list[str] | None:
    """:func:`_pair_rows` by ``memlens._text.format_rows``, one call for all the pairs
    (their files without GPU figures); None where it is not built (a free-threaded Python) or
    a figure is beyond what it formats as Python does (a change beyond 64 bits, a ratio of
    integers beyond 2**53)."""
    args = _native_args(files, of, index)
    if args is None:
        return None
    try:
        if sep is not None:
            return [format_rows(_NATIVE_PARTS, *args, len(of), sep)]
        return format_rows(_NATIVE_PARTS, *args, len(of))
    except OverflowError:
        return None


def _native_write(
    files: Sequence[FileDiff],
    of: Sequence[int],
    index: Sequence[int],
    write: Callable[[str], object],
    lead: str,
    sep: str,
    raw: Callable[[bytes], object] | None = None,
) -> bool:
    """Write ``lead`` and the pairs' JSON joined by ``sep`` by the native formatter (which
    gives write() a block of rows at a time; with ``raw``, raw() their bytes instead); False,
    having written nothing, where it cannot (see :func:`_native_pair_rows`) or a file has GPU
    figures."""
    if _gpu_files(files, of):
        return False
    args = _native_args(files, of, index)
    if args is None:
        return False
    try:
        if raw is None:
            format_rows(_NATIVE_PARTS, *args, len(of), sep, write, lead)
        else:
            format_rows(_NATIVE_PARTS, *args, len(of), sep, raw, lead, binary=True)
    except OverflowError:  # (raised before anything is written)
        return False
    return True


def _native_args(
    files: Sequence[FileDiff], of: Sequence[int], index: Sequence[int]
) -> tuple[list[Any], list[Any], tuple[Any, Any], int] | None:
    """The fields, sources, rows and number of tables ``format_rows`` takes for the pairs
    ``index[i]`` of ``files[of[i]]`` (only the files present are given); None without it."""
    if format_rows is None:
        return None
    present = sorted(set(of))
    if len(present) == len(files):  # (pairs from every file: ranked pairs, most often)
        tables = list(files)
        at = (array("q", of), array("q", index))
    else:
        tables = [files[f] for f in present]
        local = {f: t for t, f in enumerate(present)}
        at = (array("q", map(local.__getitem__, of)), array("q", index))
    sources = []
    for figure in FIGURES:
        sources.append(([_column(fd.a, figure) for fd in tables], [fd.row_a for fd in tables]))
        sources.append(([_column(fd.b, figure) for fd in tables], [fd.row_b for fd in tables]))
    sides = [fd.sides for fd in tables]
    lines_a = [fd.line_a for fd in tables]
    lines_b = [fd.line_b for fd in tables]
    fields: list[tuple[Any, ...]] = [
        ("f", [plain(fd.path) for fd in tables]),
        ("m", lines_a, sides, 1),
        ("m", lines_b, sides, 2),
        ("s", sides, lines_a, lines_b, [_STATUS[1], _STATUS[2], '"same-line"', '"moved"']),
        ("f", [plain(fd.matched_by) for fd in tables]),
        *_figure_fields(len(FIGURES)),
    ]
    return fields, sources, at, len(tables)


def _form_parts(form: str) -> list[str]:
    """The literal text of a %-form between its conversions (``%s``, ``%d``; ``%%`` is a
    ``%``): one part more than it has conversions."""
    parts = [""]
    for n, piece in enumerate(form.split("%%")):
        first, *rest = piece.replace("%d", "%s").split("%s")
        parts[-1] += ("%" if n else "") + first
        parts += rest
    return parts


def _line_forms(fd: FileDiff) -> tuple[str, str]:
    """A line pair's JSON of ``fd`` without and with the GPU figures, to be filled with its
    line in A and in B, its status (JSON), then the figures as :func:`_figures_form` has
    them (made once for a file: the Python formatter asks for them each batch)."""
    return _forms_of(fd.path, fd.matched_by)


@lru_cache(maxsize=256)
def _forms_of(path: str, matched_by: str) -> tuple[str, str]:
    path, how = (plain(v).replace("%", "%%") for v in (path, matched_by))
    head = f'{{"file": {path}, "line_a": %s, "line_b": %s, "status": %s, "matched_by": {how}, '
    return _figures_form(head, FIGURES), _figures_form(head, (*FIGURES, *GPU_FIGURES))


def _function_rows(functions: Sequence[FunctionDiff]) -> Iterator[str]:
    """The JSON of each function diff, no dict made (a run of a million lines has a hundred
    thousand functions): a batch at a time by the native formatter where it can, else each
    function's figures formatted into a form."""
    for lo in range(0, len(functions), _BATCH):
        batch = functions[lo : lo + _BATCH]
        native = _native_function_rows(batch)
        yield from _python_function_rows(batch) if native is None else native


def _native_function_rows(functions: Sequence[FunctionDiff]) -> list[str] | None:
    """:func:`_function_rows` by ``memlens._text.format_rows``; None where it is not built, a
    function has GPU figures (another form), or a figure is not one it formats as Python
    does (see :func:`_native_pair_rows`)."""
    if format_rows is None:
        return None
    gpu_figures = attrgetter(*GPU_FUNCTION_FIGURES)
    if any(any(gpu_figures(fn)) for fd in functions for fn in (fd.a, fd.b) if fn is not None):
        return None
    n = len(functions)
    rows = array("q", range(n))
    sources = []
    try:
        for figure in FUNCTION_FIGURES:
            get = attrgetter(figure)
            for side in (attrgetter("a"), attrgetter("b")):
                values = array("q", [get(fn) if fn else 0 for fn in map(side, functions)])
                sources.append(([values], [rows]))
    except (TypeError, OverflowError):  # not an integer of 64 bits
        return None
    files: dict[str, str] = {}
    fields: list[tuple[Any, ...]] = [
        (
            "t",
            [files.get(fd.file) or files.setdefault(fd.file, plain(fd.file)) for fd in functions],
        ),
        ("t", [plain(fd.qualname) for fd in functions]),
        *(
            ("t", [f"[{fn.first_line}, {fn.last_line}]" if fn else "null" for fn in sides])
            for sides in (map(attrgetter("a"), functions), map(attrgetter("b"), functions))
        ),
    ]
    fields += _figure_fields(len(FUNCTION_FIGURES))
    try:
        return format_rows(_FUNCTION_PARTS, fields, sources, (array("q", [0]) * n, rows), 1, n)
    except OverflowError:
        return None


def _figure_fields(figures: int) -> list[tuple[Any, ...]]:
    """The native formatter's fields of :func:`_figures_form`'s figures, from sources A, B of
    each figure in turn (0, 1 for the first): each one's A, B, change and ratio, then each
    change, then each ratio."""
    ends = range(0, 2 * figures, 2)
    fields: list[tuple[Any, ...]] = []
    for k in ends:
        fields += [("v", k), ("v", k + 1), ("c", k, k + 1), ("r", k, k + 1)]
    fields += [("c", k, k + 1) for k in ends]
    fields += [("r", k, k + 1) for k in ends]
    return fields


def _python_function_rows(functions: Iterable[FunctionDiff]) -> Iterator[str]:
    """The JSON of each function diff, in Python: its figures formatted into a form."""
    forms = {
        gpu: _figures_form(
            "{" + '"file": %s, "qualname": %s, "lines_a": %s, "lines_b": %s, ',
            (*FUNCTION_FIGURES, *(GPU_FUNCTION_FIGURES if gpu else ())),
        )
        for gpu in (False, True)
    }
    plain_figures = attrgetter(*FUNCTION_FIGURES)
    gpu_figures = attrgetter(*GPU_FUNCTION_FIGURES)
    zeros = (0,) * len(GPU_FUNCTION_FIGURES)
    files: dict[str, str] = {}
    for fd in functions:
        fa, fb = fd.a, fd.b
        gpu_a = gpu_figures(fa) if fa else zeros
        gpu_b = gpu_figures(fb) if fb else zeros
        gpu = any(gpu_a) or any(gpu_b)
        a = [*(plain_figures(fa) if fa else zeros), *(gpu_a if gpu else ())]
        b = [*(plain_figures(fb) if fb else zeros), *(gpu_b if gpu else ())]
        a, b = list(map(int, a)), list(map(int, b))
        delta = list(map(sub, b, a))
        ratio = _ratios(a, b, delta)
        file = files.get(fd.file) or files.setdefault(fd.file, plain(fd.file))
        yield forms[gpu] % (
            file,
            plain(fd.qualname),
            f"[{fa.first_line}, {fa.last_line}]" if fa else "null",
            f"[{fb.first_line}, {fb.last_line}]" if fb else "null",
            *chain.from_iterable(zip(a, b, delta, ratio, strict=True)),
            *delta,
            *ratio,
        )


def _ratios(a: list[int], b: list[int], delta: list[int]) -> list[str]:
    """Each ratio of ``delta`` to ``a`` (see :attr:`Change.ratio`) as JSON writes it (a
    float's repr, null): by the C encoder, all at once."""
    ratio: list[float | None] = (
        list(map(truediv, delta, a))
        if all(a)
        else [d / x if x else None if y else 0.0 for x, y, d in zip(a, b, delta, strict=True)]
    )
    return plain(ratio)[1:-1].split(", ")


def _figures_form(head: str, figures: tuple[str, ...]) -> str:
    """``head`` (a form: a JSON object's first keys, with its brace) followed by the
    ``figures``, ``change`` and ``relative`` of ``figures``: to be filled with, of each
    figure, A, B, the change and the ratio (JSON), then each change, then each ratio."""
    both = ", ".join(f'"{f}": {{"a": %d, "b": %d, "delta": %d, "ratio": %s}}' for f in figures)
    deltas = ", ".join(f'"{f}": %d' for f in figures)
    ratios = ", ".join(f'"{f}": %s' for f in figures)
    return f'{head}"figures": {{{both}}}, "change": {{{deltas}}}, "relative": {{{ratios}}}}}'


#: A line pair's JSON without GPU figures, as parts between the native formatter's fields: its
#: file, line in A, line in B, status, how its file was matched, then its figures.
_NATIVE_PARTS = _form_parts(
    _figures_form(
        '{"file": %s, "line_a": %s, "line_b": %s, "status": %s, "matched_by": %s, ', FIGURES
    )
)

#: A function diff's JSON without GPU figures, as parts between the native formatter's
#: fields: its file, name, lines in A and in B, then its figures.
_FUNCTION_PARTS = _form_parts(
    _figures_form('{"file": %s, "qualname": %s, "lines_a": %s, "lines_b": %s, ', FUNCTION_FIGURES)
)

__all__ = [
    "Change",
    "FileDiff",
    "FunctionDiff",
    "LineDiff",
    "LineDiffs",
    "RunDiff",
    "diff_files",
    "diff_runs",
    "line_order",
    "match_lines",
    "matching",
    "ranked_functions",
    "ranked_lines",
    "to_json_dict",
    "write_json",
]
