"""A run's moments: each line's and function's live bytes at moments of the run, by column.

The tracer begins a moment about every 1/256 of the run (at first every millisecond; see
docs/how-it-works.md, "Moments"); a run keeps a few hundred, evenly spaced. Per moment it
records the lines (and functions) whose live bytes changed since the moment before, with their
new values: a line's row at moment ``k`` holds from ``k`` until its next row; before its first
row the line held nothing. The peak and the end of the run are not moments here: a line's
figures at those are its ``peak_bytes`` and ``live_bytes`` (exact).
"""

from __future__ import annotations

from memlens.model.value import Value, _set

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: The columns of a moments' line changes and function changes.
LINE_COLUMNS: tuple[str, ...] = ("moment", "file", "line", "live_bytes", "incl_live_bytes")
FUNCTION_COLUMNS: tuple[str, ...] = ("moment", "function", "live_bytes")

#: A function of a run, as its moments name it: (file, qualified name, first line, last line).
FunctionKey = tuple[str, str, int, int]


class Moments(Value):
    """Each line's live bytes (self and inclusive of calls) and each function's (inclusive) at
    moments of the run.

    ``t`` (seconds since the run started, increasing) and ``traced_bytes`` (the traced total
    then) describe the moments. ``lines`` holds the line changes by column
    (:data:`LINE_COLUMNS`: ``file`` indexes ``files``), ordered by moment; ``functions`` the
    function changes (:data:`FUNCTION_COLUMNS`: ``function`` indexes ``function_keys``). Columns
    are any sequences of numbers (lists, or the typed arrays the tracer and the reader make).
    """

    __slots__ = ("_index", "files", "function_keys", "functions", "lines", "t", "traced_bytes")
    _index: dict[str, object]
    t: Sequence[float]
    traced_bytes: Sequence[int]
    files: tuple[str, ...]
    lines: Mapping[str, Sequence[int]]
    function_keys: tuple[FunctionKey, ...]
    functions: Mapping[str, Sequence[int]]

    def __init__(
        self,
        t: Sequence[float] = (),
        traced_bytes: Sequence[int] = (),
        files: Sequence[str] = (),
        lines: Mapping[str, Sequence[int]] | None = None,
        function_keys: Sequence[FunctionKey] = (),
        functions: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        if len(t) != len(traced_bytes):
            raise ValueError("moments: times and traced totals differ in length")
        line_cols = {c: (lines or {}).get(c, ()) for c in LINE_COLUMNS}
        fn_cols = {c: (functions or {}).get(c, ()) for c in FUNCTION_COLUMNS}
        for cols in (line_cols, fn_cols):
            if len({len(v) for v in cols.values()}) > 1:
                raise ValueError("moments: columns differ in length")
        _set(self, "t", t)
        _set(self, "traced_bytes", traced_bytes)
        _set(self, "files", tuple(files))
        _set(self, "lines", line_cols)
        _set(self, "function_keys", tuple(function_keys))
        _set(self, "functions", fn_cols)
        _set(self, "_index", {})

    def __len__(self) -> int:
        """The number of moments."""
        return len(self.t)

    def __bool__(self) -> bool:
        return len(self.t) > 0

    def _values(self) -> tuple[object, ...]:
        # Compared by what they say, not how they are laid out (which files and functions the
        # name tables list, in which order).
        return (
            tuple(self.t),
            tuple(self.traced_bytes),
            {
                p: {n: tuple(c) for n, c in lines.items()}
                for p, lines in self.line_changes().items()
            },
            {k: tuple(c) for k, c in self.function_changes().items()},
        )

    def __hash__(self) -> int:
        return hash((tuple(self.t), tuple(self.traced_bytes)))

    def __repr__(self) -> str:
        return f"Moments({len(self)} moments, {len(self.lines['moment'])} line changes)"

    def line_changes(self) -> Mapping[str, Mapping[int, Sequence[tuple[int, int, int]]]]:
        """Per file and line, its changes in moment order: (moment, live, incl. live).
        Computed once per value."""
        found = self._index.get("lines")
        if found is None:
            out: dict[str, dict[int, list[tuple[int, int, int]]]] = {}
            c = self.lines
            files = self.files
            for k, f, line, live, incl in zip(
                c["moment"],
                c["file"],
                c["line"],
                c["live_bytes"],
                c["incl_live_bytes"],
                strict=True,
            ):
                out.setdefault(files[f], {}).setdefault(line, []).append((k, live, incl))
            found = self._index["lines"] = out
        return found  # type: ignore[return-value]

    def function_changes(self) -> Mapping[FunctionKey, Sequence[tuple[int, int]]]:
        """Per function, its changes in moment order: (moment, live incl. calls)."""
        found = self._index.get("functions")
        if found is None:
            out: dict[FunctionKey, list[tuple[int, int]]] = {}
            c = self.functions
            keys = self.function_keys
            for k, f, live in zip(c["moment"], c["function"], c["live_bytes"], strict=True):
                out.setdefault(keys[f], []).append((k, live))
            found = self._index["functions"] = out
        return found  # type: ignore[return-value]

    def values_at(self, k: int) -> Mapping[str, Mapping[int, tuple[int, int]]]:
        """Every line's (live, incl. live) at moment ``k`` (lines that held nothing left
        out)."""
        out: dict[str, dict[int, tuple[int, int]]] = {}
        for path, lines in self.line_changes().items():
            for line, changes in lines.items():
                value = value_at(changes, k)
                if value is not None and (value[1] or value[2]):
                    out.setdefault(path, {})[line] = (value[1], value[2])
        return out

    def function_values_at(self, k: int) -> Mapping[FunctionKey, int]:
        """Every function's live bytes (incl. calls) at moment ``k`` (0 left out)."""
        out: dict[FunctionKey, int] = {}
        for key, changes in self.function_changes().items():
            value = value_at(changes, k)
            if value is not None and value[1]:
                out[key] = value[1]
        return out


def value_at(changes: Sequence[tuple[int, ...]], k: int) -> tuple[int, ...] | None:
    """A line's or function's change that holds at moment ``k``: its last change at or before
    ``k`` (changes are in moment order; None: it held nothing yet)."""
    lo, hi = 0, len(changes)
    while lo < hi:
        mid = (lo + hi) // 2
        if changes[mid][0] <= k:
            lo = mid + 1
        else:
            hi = mid
    return changes[lo - 1] if lo else None
