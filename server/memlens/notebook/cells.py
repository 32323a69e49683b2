"""What the magics need to know about a cell, without IPython: where the profiled code sits in
the cell's text (so that a run's line numbers are the cell's own, as the editor shows them),
the names a cell bound, a cell's totals and the ``%memlens_kept`` table."""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from memlens.layout import printable
from memlens.model import Run
from memlens.units import fmt_bytes


@dataclass(frozen=True, slots=True)
class CellText:
    """A profiled cell: ``text`` is the cell as the editor holds it (what the run records);
    the profiled code starts on line ``first_line`` (1-based) of it."""

    text: str
    first_line: int


def cell_magic_text(raw: str | None, magic: str, line: str, body: str) -> CellText:
    """The cell of ``%%magic line`` + ``body``: the raw cell the front end sent when it holds
    that body below the magic line, else the cell written out again."""
    if raw is not None:
        lines = raw.splitlines(keepends=True)
        for i, text in enumerate(lines):
            if text.startswith("%%" + magic):
                if _same_code("".join(lines[i + 1 :]), body):
                    return CellText(raw, i + 2)
                break
            if text.strip():
                break  # IPython allows blank lines above a cell magic, nothing else
    head = f"%%{magic} {line}".rstrip()
    return CellText(f"{head}\n{body}", 2)


def line_magic_text(raw: str | None, magic: str, line: str, lineno: int) -> CellText:
    """The cell holding ``%magic line`` on line ``lineno`` (where the cell's code called the
    magic), else that line alone."""
    if raw is not None and lineno >= 1:
        lines = raw.splitlines()
        if lineno <= len(lines) and "%" + magic in lines[lineno - 1]:
            return CellText(raw, lineno)
    return CellText(f"%{magic} {line}", 1)


def _same_code(a: str, b: str) -> bool:
    return a.rstrip("\n").splitlines() == b.rstrip("\n").splitlines()


def numbered(code: str, first_line: int) -> str:
    """``code`` preceded by comment lines, so that its first line is line ``first_line``
    (comments, not blank lines: IPython drops leading blank lines when it transforms code)."""
    return "#\n" * (first_line - 1) + code


def with_header(text: str, code: str, first_line: int) -> str:
    """The cell's own lines above the profiled code, and ``code`` (numbered by
    :func:`numbered`) below: what tracebacks show for the cell."""
    above = text.splitlines(keepends=True)[: first_line - 1]
    below = code.splitlines(keepends=True)[first_line - 1 :]
    return "".join(line if line.endswith("\n") else line + "\n" for line in above) + "".join(below)


# -- the names a cell bound --------------------------------------------------------------------
#: IPython's own names in the user's namespace (the output history, the input history).
_HISTORY = re.compile(r"_{1,3}|_i{1,3}|_i?\d+|_(ih|oh|dh)|In|Out|exit|quit|get_ipython")


def is_users(name: str) -> bool:
    """Whether ``name`` is the user's, not one of IPython's history variables."""
    return _HISTORY.fullmatch(name) is None


class Binding:
    """A name a cell bound, and whether it still names the object the cell bound to it.

    Never a strong reference (object lifetimes must not change): a weak reference where the
    type has them, else the object's id and type name (an object made later at the same
    address with the same type would pass: a rare false "still bound")."""

    __slots__ = ("_id", "_ref", "_type", "name")

    def __init__(self, name: str, value: object) -> None:
        self.name = name
        self._id = id(value)
        self._type = type(value).__qualname__
        self._ref: Callable[[], object] | None
        try:
            self._ref = weakref.ref(value)
        except TypeError:
            self._ref = None

    def held(self, namespace: Mapping[str, object]) -> bool:
        if self.name not in namespace:
            return False
        value = namespace[self.name]
        if self._ref is not None:
            return self._ref() is value
        return id(value) == self._id and type(value).__qualname__ == self._type


def bound(before: Mapping[str, int], namespace: Mapping[str, object]) -> list[Binding]:
    """The user's names that ``namespace`` binds to other objects than ``before`` (name ->
    id, taken before the cell ran) did."""
    return [
        Binding(name, value)
        for name, value in list(namespace.items())
        if is_users(name) and before.get(name) != id(value)
    ]


def ids(namespace: Mapping[str, object]) -> dict[str, int]:
    return {name: id(value) for name, value in list(namespace.items()) if is_users(name)}


# -- %memlens_kept --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Profiled:
    """What ``%memlens_kept`` remembers of a profiled cell (not its run: a few numbers)."""

    label: str  #: ``In [5]``
    kept: int  #: bytes allocated in the cell and still alive when it ended
    peak: int
    allocated: int
    top_line: int  #: the cell's line that kept the most (0: none)
    top_code: str
    top_kept: int
    names: tuple[Binding, ...]
    run_id: str


def totals(run: Run, cell_file: str) -> tuple[int, int]:
    """(kept, allocated) by the cell ``cell_file`` of ``run``: its module code's figures,
    everything it called included (each stack counted once)."""
    cell = run.files.get(cell_file)
    module = [f for f in (cell.functions if cell else ()) if f.qualname == "<module>"]
    if module:
        return module[0].live_bytes, module[0].alloc_bytes
    lines = list(cell.lines.values()) if cell else []
    return sum(st.live_bytes for st in lines), sum(st.alloc_bytes for st in lines)


def profiled(run: Run, cell_file: str, names: Sequence[Binding], run_id: str) -> Profiled:
    """The summary of a cell's run (``cell_file``: the cell's key in ``run.files``)."""
    cell = run.files.get(cell_file)
    top_line, top_kept, top_code = 0, 0, ""
    if cell is not None and cell.lines:
        top_line, stats = max(cell.lines.items(), key=lambda kv: (kv[1].live_bytes, -kv[0]))
        top_kept = stats.live_bytes
        text = (cell.text or "").splitlines()
        top_code = text[top_line - 1].strip() if 0 < top_line <= len(text) else ""
    kept, allocated = totals(run, cell_file)
    return Profiled(
        label=cell_file,
        kept=kept,
        peak=run.info.peak_traced_bytes,
        allocated=allocated,
        top_line=top_line if top_kept > 0 else 0,
        top_code=top_code,
        top_kept=top_kept,
        names=tuple(names),
        run_id=run_id,
    )


NO_CELLS = "memlens: no cell profiled yet in this kernel (%%memlens CELL, or %memlens STATEMENT)"


def kept_table(cells: Sequence[Profiled], namespace: Mapping[str, object]) -> list[str]:
    """The ``%memlens_kept`` table: per profiled cell, in the order they ran, what it left
    alive when it ended, the line that kept the most, and the names it bound that still name
    what it bound (the others were deleted or rebound since)."""
    if not cells:
        return [NO_CELLS]
    header = ("cell", "kept", "peak", "allocated", "still bound", "gone since", "kept most")
    rows = [header]
    for c in cells:
        held = [b.name for b in c.names if b.held(namespace)]
        gone = [b.name for b in c.names if not b.held(namespace)]
        most = f"line {c.top_line} ({fmt_bytes(c.top_kept)}): {c.top_code}" if c.top_line else ""
        rows.append(
            (
                c.label,
                fmt_bytes(c.kept),
                fmt_bytes(c.peak),
                fmt_bytes(c.allocated),
                _names(held),
                _names(gone),
                most[:70],
            )
        )
    rows.append(("total", fmt_bytes(sum(c.kept for c in cells)), "", "", "", "", ""))
    right = {1, 2, 3}
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    out = ["memlens: what each profiled cell left alive when it ended (kept), cell by cell", ""]
    for r in rows:
        cells_text = [
            r[i].rjust(widths[i]) if i in right else r[i].ljust(widths[i])
            for i in range(len(widths))
        ]
        out.append(printable(("  " + "  ".join(cells_text) + "  " + r[-1]).rstrip()))
    return out


def _names(names: Sequence[str], most: int = 4) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" +{len(names) - most}" if len(names) > most else "") if names else "-"
