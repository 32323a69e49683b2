"""A line's figures (:class:`LineStats`), and a file's stored by column: :class:`LineTable`, a
mapping of line number to :class:`LineStats` whose values are made on access.

A run with a million line rows held as one ``LineStats`` object per line takes close to a
gigabyte before anything is shown; stored as typed arrays it takes 120 bytes a line, and
rankings read one figure's column without making any object (:func:`line_values`). The run
file reader makes these; everything else may hand any mapping to the model (hand-made runs,
importers, merges use dicts).
"""

from __future__ import annotations

import math
from _collections_abc import ItemsView, Mapping, ValuesView  # (collections.abc, cheaper)
from array import array
from bisect import bisect_left

from memlens.model.figures import ERRORS, FIGURES, NATIVE
from memlens.model.value import Value, _set

TYPE_CHECKING = False  # see memlens/__init__.py: typing is not imported at run time
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence


class LineStats(Value):
    """Figures recorded for one source line (self and inclusive of callees), with the native
    part of the self figures."""

    __slots__ = (*FIGURES, *NATIVE, *ERRORS)
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
        alloc_var, live_var, peak_var = (math.sqrt(max(v, 0.0)) for v in variances)
        return cls(
            own[0], own[1], own[2], own[3], own[4], incl[0], incl[2], incl[4],
            native[0], native[2], native[4], alloc_var, live_var, peak_var,
        )  # fmt: skip

    def figure(self, name: str) -> int:
        """Return one figure by its name in :data:`FIGURES`."""
        if name not in FIGURES:
            raise KeyError(name)
        value: int = getattr(self, name)
        return value

    def is_empty(self) -> bool:
        return not any(self._values())


#: The integer figures of a line, in :class:`LineStats` order; the error estimates follow.
INTS: tuple[str, ...] = (*FIGURES, *NATIVE)
_WIDTH = len(INTS)
_INT_AT = {name: i for i, name in enumerate(INTS)}
_ERR_AT = {name: i for i, name in enumerate(ERRORS)}


class LineTable(Mapping[int, LineStats]):
    """Line figures of one file by column: line numbers in increasing order, their integer
    figures (:data:`INTS`, row after row) and error estimates (:data:`ERRORS`, row after row;
    None when all are 0, as in exact mode). Made by :class:`LineTableBuilder` (which checks
    the order) or :meth:`of`."""

    __slots__ = ("_errs", "_ints", "_lines")

    def __init__(self, lines: array[int], ints: array[int], errs: array[float] | None) -> None:
        if len(ints) != _WIDTH * len(lines) or (
            errs is not None and len(errs) != len(ERRORS) * len(lines)
        ):
            raise ValueError("line table columns differ in length")
        self._lines = lines
        self._ints = ints
        self._errs = errs

    @classmethod
    def of(cls, lines: Mapping[int, LineStats]) -> LineTable:
        """The table of any mapping of line figures."""
        if isinstance(lines, LineTable):
            return lines
        builder = LineTableBuilder()
        for line in sorted(lines):
            st = lines[line]
            builder.add(line, [getattr(st, f) for f in INTS], tuple(getattr(st, e) for e in ERRORS))
        return builder.table()

    def __len__(self) -> int:
        return len(self._lines)

    def __iter__(self) -> Iterator[int]:
        return iter(self._lines)

    def _index(self, line: object) -> int:
        if type(line) is not int:
            return -1
        i = bisect_left(self._lines, line)
        return i if i < len(self._lines) and self._lines[i] == line else -1

    def __contains__(self, line: object) -> bool:
        return self._index(line) >= 0

    def __getitem__(self, line: int) -> LineStats:
        i = self._index(line)
        if i < 0:
            raise KeyError(line)
        return self._stats(i)

    def _stats(self, i: int) -> LineStats:
        ints = self._ints[i * _WIDTH : (i + 1) * _WIDTH]
        if self._errs is None:
            return LineStats(*ints)
        return LineStats(*ints, *self._errs[i * 3 : i * 3 + 3])

    def rows(self) -> Iterator[tuple[int, array[int], array[float] | None]]:
        """(line, its :data:`INTS`, its :data:`ERRORS` or None when all are 0) per line, in
        order, without making :class:`LineStats` objects (for writers of every line)."""
        ints, errs = self._ints, self._errs
        for i, line in enumerate(self._lines):
            yield (
                line,
                ints[i * _WIDTH : (i + 1) * _WIDTH],
                None if errs is None else errs[i * 3 : i * 3 + 3],
            )

    def items(self) -> _Items:
        return _Items(self)

    def values(self) -> _Values:
        return _Values(self)

    def column(self, name: str) -> Iterable[int | float]:
        """One figure of every line, in line order (no objects made)."""
        at = _INT_AT.get(name)
        if at is not None:
            return self._ints[at::_WIDTH]
        at = _ERR_AT.get(name)
        if at is None:
            raise KeyError(name)
        return self._errs[at :: len(ERRORS)] if self._errs is not None else [0.0] * len(self)


class _Items(ItemsView[int, LineStats]):
    _mapping: LineTable

    def __iter__(self) -> Iterator[tuple[int, LineStats]]:  # in order, without bisecting
        table = self._mapping
        for i, line in enumerate(table._lines):
            yield line, table._stats(i)


class _Values(ValuesView[LineStats]):
    _mapping: LineTable

    def __iter__(self) -> Iterator[LineStats]:
        table = self._mapping
        for i in range(len(table)):
            yield table._stats(i)


class LineTableBuilder:
    """Makes a :class:`LineTable` from rows in increasing line order."""

    __slots__ = ("_errs", "_ints", "_lines", "_nonzero")

    def __init__(self) -> None:
        self._lines = array("q")
        self._ints = array("q")
        self._errs = array("d")
        self._nonzero = False

    def add(self, line: int, ints: Iterable[int], errs: tuple[float, ...]) -> None:
        """One line's figures: :data:`INTS` and :data:`ERRORS` (3) in order. ValueError when
        ``line`` does not come after the previous one."""
        lines = self._lines
        if lines and line <= lines[-1]:
            raise ValueError(f"line {line} comes after line {lines[-1]}")
        lines.append(line)
        self._ints.extend(ints)
        self._errs.extend(errs)
        if not self._nonzero and (errs[0] or errs[1] or errs[2]):
            self._nonzero = True

    def table(self) -> LineTable:
        return LineTable(self._lines, self._ints, self._errs if self._nonzero else None)


def line_values(lines: Mapping[int, LineStats], name: str) -> Iterable[tuple[int, int]]:
    """(line, figure ``name``) for every line of ``lines``, in order for a :class:`LineTable`
    (whose column is read without making objects), in the mapping's order otherwise."""
    if isinstance(lines, LineTable):
        return zip(lines._lines, lines.column(name), strict=True)  # type: ignore[arg-type]
    return ((line, getattr(st, name)) for line, st in lines.items())
