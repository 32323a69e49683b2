"""A line's figures (:class:`LineStats`), and a file's stored by column: :class:`LineTable`, a
mapping of line number to :class:`LineStats` whose values are made on access.

A run with a million line rows held as one ``LineStats`` object per line takes close to a
gigabyte before anything is shown; stored as typed arrays it takes about 100 bytes a line, and
rankings read one figure's column without making any object (:func:`line_values`). The run
file reader makes these; everything else may hand any mapping to the model (hand-made runs,
importers, merges use dicts).
"""

from __future__ import annotations

import math
from _collections_abc import ItemsView, Mapping, ValuesView  # (collections.abc, cheaper)
from array import array
from bisect import bisect_left

from memlens.model.figures import ERRORS, FIGURES, GPU_FIGURES, NATIVE
from memlens.model.value import Value, _set

TYPE_CHECKING = False  # see memlens/__init__.py: typing is not imported at run time
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
        alloc_var, live_var, peak_var = (math.sqrt(max(v, 0.0)) for v in variances)
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
        return any(getattr(self, f) for f in GPU_FIGURES)


_LINE_FIGURES = frozenset((*FIGURES, *GPU_FIGURES))


#: The integer figures of a line that every run has, in :class:`LineStats` order: the error
#: estimates (:data:`ERRORS`) follow them, then the GPU figures (:data:`GPU_FIGURES`).
INTS: tuple[str, ...] = (*FIGURES, *NATIVE)
_WIDTH = len(INTS)
_ERRS = len(ERRORS)
_GPUS = len(GPU_FIGURES)
_INT_AT = {name: i for i, name in enumerate(INTS)}
_GPU_AT = {name: i for i, name in enumerate(GPU_FIGURES)}


class LineTable(Mapping[int, LineStats]):
    """Line figures of one file by column: line numbers in increasing order, and three parts
    of each line's figures, row after row: its :data:`INTS`, its error estimates
    (:data:`ERRORS`; None when all are 0, as in exact mode) and its GPU figures
    (:data:`GPU_FIGURES`; None when all are 0, as in runs without GPU memory). Made by
    :class:`LineTableBuilder` (which checks the order) or :meth:`of`."""

    __slots__ = ("_errs", "_gpu", "_ints", "_lines")

    def __init__(
        self,
        lines: array[int],
        ints: array[int],
        errs: array[float] | None = None,
        gpu: array[int] | None = None,
    ) -> None:
        n = len(lines)
        if (
            len(ints) != _WIDTH * n
            or (errs is not None and len(errs) != _ERRS * n)
            or (gpu is not None and len(gpu) != _GPUS * n)
        ):
            raise ValueError("line table columns differ in length")
        self._lines = lines
        self._ints = ints
        self._errs = errs
        self._gpu = gpu

    @classmethod
    def of(cls, lines: Mapping[int, LineStats]) -> LineTable:
        """The table of any mapping of line figures (OverflowError for a figure beyond 64
        bits, which no run file holds)."""
        if isinstance(lines, LineTable):
            return lines
        builder = LineTableBuilder()
        for line in sorted(lines):
            st = lines[line]
            builder.add(
                line,
                [getattr(st, f) for f in INTS],
                [getattr(st, e) for e in ERRORS],
                [getattr(st, g) for g in GPU_FIGURES],
            )
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
        errs, gpu = self._errs, self._gpu
        return LineStats(
            *self._ints[i * _WIDTH : (i + 1) * _WIDTH],
            *(_NO_ERRS if errs is None else errs[i * _ERRS : (i + 1) * _ERRS]),
            *(() if gpu is None else gpu[i * _GPUS : (i + 1) * _GPUS]),
        )

    @property
    def has_errors(self) -> bool:
        """Whether some line has an error estimate (sampling mode)."""
        return self._errs is not None

    @property
    def has_gpu(self) -> bool:
        """Whether some line has GPU figures."""
        return self._gpu is not None

    def rows(self) -> Iterator[tuple[int, array[int], array[float] | None, array[int] | None]]:
        """(line, its :data:`INTS`, its :data:`ERRORS` or None when no line has any, its
        :data:`GPU_FIGURES` or None when no line has any) per line, in order, without making
        :class:`LineStats` objects (for writers of every line)."""
        ints, errs, gpu = self._ints, self._errs, self._gpu
        for i, line in enumerate(self._lines):
            yield (
                line,
                ints[i * _WIDTH : (i + 1) * _WIDTH],
                None if errs is None else errs[i * _ERRS : (i + 1) * _ERRS],
                None if gpu is None else gpu[i * _GPUS : (i + 1) * _GPUS],
            )

    def items(self) -> _Items:
        return _Items(self)

    def values(self) -> _Values:
        return _Values(self)

    def column(self, name: str) -> Sequence[int]:
        """One integer figure (a name of :data:`INTS` or :data:`GPU_FIGURES`) of every line, in
        line order (no objects made)."""
        at = _INT_AT.get(name)
        if at is not None:
            return self._ints[at::_WIDTH]
        at = _GPU_AT[name]
        return [0] * len(self) if self._gpu is None else self._gpu[at::_GPUS]


_NO_ERRS = (0.0,) * _ERRS


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
    """Makes a :class:`LineTable` from rows in increasing line order. The error estimates and
    the GPU figures are kept only from the first line that has some on (the lines before
    have 0): a run without them costs nothing for them."""

    __slots__ = ("_errs", "_gpu", "_ints", "_lines")

    def __init__(self) -> None:
        self._lines = array("q")
        self._ints = array("q")
        self._errs: array[float] | None = None
        self._gpu: array[int] | None = None

    def add(
        self, line: int, ints: Sequence[int], errs: Sequence[float], gpu: Sequence[int] = ()
    ) -> None:
        """One line's figures: :data:`INTS`, :data:`ERRORS` and :data:`GPU_FIGURES` (empty:
        none, as all 0) in order. ValueError when ``line`` does not come after the previous
        one."""
        lines = self._lines
        if lines and line <= lines[-1]:
            raise ValueError(f"line {line} comes after line {lines[-1]}")
        if len(ints) != _WIDTH or len(errs) != _ERRS or len(gpu) not in (0, _GPUS):
            raise ValueError("a line's figures are not as many as the table's columns")
        if self._errs is not None:
            self._errs.extend(errs)
        elif any(errs):
            self._errs = array("d", bytes(8 * _ERRS * len(lines)))
            self._errs.extend(errs)
        if self._gpu is not None:
            self._gpu.extend(gpu or _NO_GPU)
        elif any(gpu):
            self._gpu = array("q", bytes(8 * _GPUS * len(lines)))
            self._gpu.extend(gpu)
        lines.append(line)
        self._ints.extend(ints)

    def table(self) -> LineTable:
        return LineTable(self._lines, self._ints, self._errs, self._gpu)


_NO_GPU = (0,) * _GPUS


def line_values(lines: Mapping[int, LineStats], name: str) -> Iterable[tuple[int, int]]:
    """(line, integer figure ``name``) for every line of ``lines``, in order for a :class:`LineTable`
    (whose column is read without making objects), in the mapping's order otherwise."""
    if isinstance(lines, LineTable):
        return zip(lines._lines, lines.column(name), strict=True)
    return ((line, getattr(st, name)) for line, st in lines.items())
