"""A line's figures (:class:`LineStats`), and a file's stored by column: :class:`LineTable`, a
mapping of line number to :class:`LineStats` whose values are made on access.

A run with a million line rows held as one ``LineStats`` object per line takes close to a
gigabyte before anything is shown; stored as typed arrays it takes about 100 bytes a line, and
rankings read one figure's column without making any object (:func:`line_values`,
:func:`ranked_values`). The run
file reader makes these; everything else may hand any mapping to the model (hand-made runs,
importers, merges use dicts).
"""

from __future__ import annotations

import math
from _collections_abc import ItemsView, Mapping, ValuesView  # (collections.abc, cheaper)
from array import array
from bisect import bisect_left
from itertools import islice, repeat
from operator import attrgetter, lt, neg

from memlens.model.figures import ERRORS, FIGURES, GPU_FIGURES, NATIVE
from memlens.model.value import Value, _set

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence


class LineStats(Value):
    """Figures recorded for one source line (self and inclusive of callees), with the native
    part of the self figures, and the line's GPU memory (:data:`GPU_FIGURES`, all devices)."""

    __slots__ = (*FIGURES, *NATIVE, *ERRORS, *GPU_FIGURES)
    alloc_bytes: int
    alloc_count: int
    live_bytes: int
    live_count: int
    peak_bytes: int
    incl_alloc_bytes: int
    incl_live_bytes: int
    incl_peak_bytes: int
    native_alloc_bytes: int
    native_live_bytes: int
    native_peak_bytes: int
    alloc_err: float
    live_err: float
    peak_err: float
    gpu_alloc_bytes: int
    gpu_alloc_count: int
    gpu_live_bytes: int
    gpu_peak_bytes: int
    incl_gpu_alloc_bytes: int
    incl_gpu_live_bytes: int
    incl_gpu_peak_bytes: int

    def __init__(
        self,
        alloc_bytes: int = 0,
        alloc_count: int = 0,
        live_bytes: int = 0,
        live_count: int = 0,
        peak_bytes: int = 0,
        incl_alloc_bytes: int = 0,
        incl_live_bytes: int = 0,
        incl_peak_bytes: int = 0,
        native_alloc_bytes: int = 0,
        native_live_bytes: int = 0,
        native_peak_bytes: int = 0,
        alloc_err: float = 0.0,
        live_err: float = 0.0,
        peak_err: float = 0.0,
        gpu_alloc_bytes: int = 0,
        gpu_alloc_count: int = 0,
        gpu_live_bytes: int = 0,
        gpu_peak_bytes: int = 0,
        incl_gpu_alloc_bytes: int = 0,
        incl_gpu_live_bytes: int = 0,
        incl_gpu_peak_bytes: int = 0,
    ) -> None:
        _set(self, "alloc_bytes", alloc_bytes)
        _set(self, "alloc_count", alloc_count)
        _set(self, "live_bytes", live_bytes)
        _set(self, "live_count", live_count)
        _set(self, "peak_bytes", peak_bytes)
        _set(self, "incl_alloc_bytes", incl_alloc_bytes)
        _set(self, "incl_live_bytes", incl_live_bytes)
        _set(self, "incl_peak_bytes", incl_peak_bytes)
        _set(self, "native_alloc_bytes", native_alloc_bytes)
        _set(self, "native_live_bytes", native_live_bytes)
        _set(self, "native_peak_bytes", native_peak_bytes)
        _set(self, "alloc_err", alloc_err)
        _set(self, "live_err", live_err)
        _set(self, "peak_err", peak_err)
        _set(self, "gpu_alloc_bytes", gpu_alloc_bytes)
        _set(self, "gpu_alloc_count", gpu_alloc_count)
        _set(self, "gpu_live_bytes", gpu_live_bytes)
        _set(self, "gpu_peak_bytes", gpu_peak_bytes)
        _set(self, "incl_gpu_alloc_bytes", incl_gpu_alloc_bytes)
        _set(self, "incl_gpu_live_bytes", incl_gpu_live_bytes)
        _set(self, "incl_gpu_peak_bytes", incl_gpu_peak_bytes)

    @classmethod
    def from_sums(
        cls,
        own: Sequence[int],
        incl: Sequence[int],
        variances: Sequence[float] = (0.0, 0.0, 0.0),
        native: Sequence[int] = (0, 0, 0, 0, 0),
    ) -> LineStats:
        """From self, inclusive and native sums laid out as :data:`SUMS`, and the variances of
        the alloc, live and peak estimates (sampling mode; their square roots are the errors)."""
        alloc_var, live_var, peak_var = (math.sqrt(v) if v > 0.0 else 0.0 for v in variances)
        return cls(
            own[0], own[1], own[2], own[3], own[4], incl[0], incl[2], incl[4],
            native[0], native[2], native[4], alloc_var, live_var, peak_var,
        )  # fmt: skip

    def figure(self, name: str) -> int:
        """Return one figure by its name in :data:`FIGURES` or :data:`GPU_FIGURES`."""
        if name not in _LINE_FIGURES:
            raise KeyError(name)
        value: int = getattr(self, name)
        return value

    def is_empty(self) -> bool:
        return not any(self._values())

    def has_gpu(self) -> bool:
        """Whether the line has GPU figures."""
        return any(_gpu_figures(self))


_LINE_FIGURES = frozenset((*FIGURES, *GPU_FIGURES))
#: A line's GPU figures as a tuple (asked per line of every hint).
_gpu_figures = attrgetter(*GPU_FIGURES)


#: The integer figures of a line that every run has, in :class:`LineStats` order: the error
#: estimates (:data:`ERRORS`) follow them, then the GPU figures (:data:`GPU_FIGURES`).
INTS: tuple[str, ...] = (*FIGURES, *NATIVE)
_INT_AT = {name: i for i, name in enumerate(INTS)}
_GPU_AT = {name: i for i, name in enumerate(GPU_FIGURES)}


class LineTable(Mapping[int, LineStats]):
    """Line figures of one file by column, a typed array each: the line numbers in increasing
    order, each of :data:`INTS`, each error estimate (:data:`ERRORS`; none when all are 0, as
    in exact mode) and each GPU figure (:data:`GPU_FIGURES`; none when all are 0, as in runs
    without GPU memory). Made by :class:`LineTableBuilder` (which checks the order) or
    :meth:`of`."""

    __slots__ = ("_errs", "_gpu", "_ints", "_lines")

    def __init__(
        self,
        lines: array[int],
        ints: Sequence[array[int]],
        errs: Sequence[array[float]] = (),
        gpu: Sequence[array[int]] = (),
    ) -> None:
        n = len(lines)
        if (
            len(ints) != len(INTS)
            or len(errs) not in (0, len(ERRORS))
            or len(gpu) not in (0, len(GPU_FIGURES))
            or any(len(c) != n for part in (ints, errs, gpu) for c in part)
        ):
            raise ValueError("line table columns differ in number or length")
        self._lines = lines
        self._ints = tuple(ints)
        self._errs = tuple(errs)
        self._gpu = tuple(gpu)

    @classmethod
    def of(cls, lines: Mapping[int, LineStats]) -> LineTable:
        """The table of any mapping of line figures (OverflowError for a figure beyond 64
        bits, which no run file holds)."""
        if isinstance(lines, LineTable):
            return lines
        numbers = sorted(lines)
        stats = list(map(lines.__getitem__, numbers))  # (by column: no Python step per line)
        return cls.checked(
            array("q", numbers),
            [array("q", map(attrgetter(f), stats)) for f in INTS],
            [array("d", map(attrgetter(e), stats)) for e in ERRORS],
            [array("q", map(attrgetter(g), stats)) for g in GPU_FIGURES],
        )

    @classmethod
    def checked(
        cls,
        lines: array[int],
        ints: Sequence[array[int]],
        errs: Sequence[array[float]],
        gpu: Sequence[array[int]],
    ) -> LineTable:
        """The table of whole columns (every one of :data:`ERRORS` and :data:`GPU_FIGURES`, or
        none), kept only when some line has one. ValueError when a line does not come after
        the one before it, or the columns differ in number or length."""
        if not all(map(lt, lines, islice(lines, 1, None))):
            raise ValueError("lines are not in increasing order")
        return cls(
            lines,
            ints,
            errs if any(map(any, errs)) else (),
            gpu if any(map(any, gpu)) else (),
        )

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[int]:
        return iter(self._lines)

    @property
    def numbers(self) -> Sequence[int]:
        """The line numbers, in increasing order."""
        return self._lines

    def index(self, line: object) -> int:
        """Where ``line`` is in the table's order (for :meth:`at` and the columns), or -1."""
        if type(line) is not int:
            return -1
        i = bisect_left(self._lines, line)
        return i if i < len(self._lines) and self._lines[i] == line else -1

    def __contains__(self, line: object) -> bool:
        return self.index(line) >= 0

    def __getitem__(self, line: int) -> LineStats:
        i = self.index(line)
        if i < 0:
            raise KeyError(line)
        return self.at(i)

    def at(self, i: int) -> LineStats:
        """The figures of the table's ``i``-th line (in line order; made on each call)."""
        return LineStats(
            *[c[i] for c in self._ints],
            *([c[i] for c in self._errs] if self._errs else _NO_ERRS),
            *[c[i] for c in self._gpu],
        )

    @property
    def has_errors(self) -> bool:
        """Whether some line has an error estimate (sampling mode)."""
        return bool(self._errs)

    @property
    def has_gpu(self) -> bool:
        """Whether some line has GPU figures."""
        return bool(self._gpu)

    def rows(self, errors: bool, gpu: bool) -> Iterator[tuple[int | float, ...]]:
        """Per line, in order, without making :class:`LineStats` objects (for writers of
        every line): its number and its :data:`INTS`, then with ``errors`` its
        :data:`ERRORS`, with ``gpu`` its :data:`GPU_FIGURES` (0 where the table has none)."""
        columns: list[Iterable[int | float]] = [self._lines, *self._ints]
        if errors:
            columns += self._errs or [repeat(0.0)] * len(ERRORS)
        if gpu:
            columns += self._gpu or [repeat(0)] * len(GPU_FIGURES)
        return zip(*columns, strict=False)  # (repeat() has no end)

    def items(self) -> _Items:
        return _Items(self)

    def values(self) -> _Values:
        return _Values(self)

    def error_column(self, name: str) -> Sequence[float] | None:
        """One error estimate (a name of :data:`ERRORS`) of every line, in line order; None
        when the table has none (exact mode)."""
        return self._errs[ERRORS.index(name)] if self._errs else None

    def column(self, name: str) -> Sequence[int]:
        """One integer figure (a name of :data:`INTS` or :data:`GPU_FIGURES`) of every line, in
        line order (no objects made)."""
        at = _INT_AT.get(name)
        if at is not None:
            return self._ints[at]
        at = _GPU_AT[name]
        return self._gpu[at] if self._gpu else [0] * len(self)


_NO_ERRS = (0.0,) * len(ERRORS)


class _Items(ItemsView[int, LineStats]):
    _mapping: LineTable

    def __iter__(self) -> Iterator[tuple[int, LineStats]]:  # in order, without bisecting
        table = self._mapping
        for i, line in enumerate(table._lines):
            yield line, table.at(i)


class _Values(ValuesView[LineStats]):
    _mapping: LineTable

    def __iter__(self) -> Iterator[LineStats]:
        table = self._mapping
        for i in range(len(table)):
            yield table.at(i)


class LineTableBuilder:
    """Makes a :class:`LineTable` from rows in increasing line order: one at a time
    (:meth:`add`), or by column (:meth:`frombytes`: a reader of a million rows). The typed
    columns refuse what is not a number of their type (TypeError; OverflowError beyond 64
    bits). The table keeps the error estimates and the GPU figures only when some line has
    them."""

    __slots__ = ("_errs", "_gpu", "_ints", "_lines")

    def __init__(self) -> None:
        self._lines = array("q")
        self._ints = tuple(array("q") for _ in INTS)
        self._errs = tuple(array("d") for _ in ERRORS)
        self._gpu = tuple(array("q") for _ in GPU_FIGURES)

    def add(
        self, line: int, ints: Sequence[int], errs: Sequence[float], gpu: Sequence[int] = ()
    ) -> None:
        """One line's figures: :data:`INTS`, :data:`ERRORS` and :data:`GPU_FIGURES` (empty:
        all 0) in order."""

        def one(code: str, value: float) -> bytes:
            return array(code, [value]).tobytes()

        self.frombytes(
            one("q", line),
            [one("q", v) for v in ints],
            [one("d", v) for v in errs],
            [one("q", v) for v in gpu],
        )

    def frombytes(
        self, lines: bytes, ints: Sequence[bytes], errs: Sequence[bytes], gpu: Sequence[bytes] = ()
    ) -> None:
        """Lines by column, each column's values as machine values (``array.tobytes``): their
        numbers, then each of :data:`INTS`, :data:`ERRORS` and :data:`GPU_FIGURES` (none:
        all 0)."""
        if (
            len(ints) != len(INTS)
            or len(errs) != len(ERRORS)
            or len(gpu) not in (0, len(GPU_FIGURES))
        ):
            raise ValueError("a line's figures are not as many as the table's columns")
        if any(len(c) != len(lines) for part in (ints, errs, gpu) for c in part):
            raise ValueError("line columns differ in length")
        self._lines.frombytes(lines)
        for column, values in zip(self._ints, ints, strict=True):
            column.frombytes(values)
        for column_e, values_e in zip(self._errs, errs, strict=True):
            column_e.frombytes(values_e)
        for column, values in zip(
            self._gpu, gpu or [bytes(len(lines))] * len(GPU_FIGURES), strict=True
        ):
            column.frombytes(values)

    def table(self) -> LineTable:
        """The table of the lines added. ValueError when a line does not come after the one
        before it."""
        return LineTable.checked(self._lines, self._ints, self._errs, self._gpu)


def line_values(lines: Mapping[int, LineStats], name: str) -> Iterable[tuple[int, int]]:
    """(line, integer figure ``name``) for every line of ``lines``, in order for a :class:`LineTable`
    (whose column is read without making objects), in the mapping's order otherwise."""
    if isinstance(lines, LineTable):
        return zip(lines, lines.column(name), strict=True)
    return ((line, getattr(st, name)) for line, st in lines.items())


def ranked_values(lines: Mapping[int, LineStats], name: str) -> Iterable[tuple[int, int]]:
    """(minus integer figure ``name``, line) for every line of ``lines``: in ascending order,
    the largest figure first and equal figures by line. For a :class:`LineTable` the pairs are
    made without a Python step per line (a ranking's ``heapq.nsmallest`` reads them as made)."""
    if isinstance(lines, LineTable):
        return zip(map(neg, lines.column(name)), lines, strict=True)
    return ((-getattr(st, name), line) for line, st in lines.items())
