"""Diffs between two runs, per line and per function. Pure, stdlib only.

Files are matched by absolute path. Lines are matched through the source texts recorded in
each run (:func:`memlens.mapping.line_map`), so a line that moved between the runs is still
compared with itself; a line that changed is reported on each side separately.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlens.mapping import line_map
from memlens.model import FIGURES, FunctionStats, LineStats, Run, SourceFile


@dataclass(frozen=True, slots=True)
class LineDiff:
    """One line in run A and/or run B (``line_a``/``line_b`` None when absent there)."""

    file: str
    line_a: int | None
    line_b: int | None
    a: LineStats | None
    b: LineStats | None

    def change(self, figure: str) -> int:
        """B minus A for one figure of :data:`memlens.model.FIGURES`."""
        old = self.a.figure(figure) if self.a else 0
        new = self.b.figure(figure) if self.b else 0
        return new - old

    def relative(self, figure: str) -> float | None:
        """Relative change, None when A had nothing (a new figure)."""
        old = self.a.figure(figure) if self.a else 0
        return None if old == 0 else self.change(figure) / old


@dataclass(frozen=True, slots=True)
class FunctionDiff:
    file: str
    qualname: str
    a: FunctionStats | None
    b: FunctionStats | None

    def change(self, figure: str) -> int:
        old = getattr(self.a, figure) if self.a else 0
        new = getattr(self.b, figure) if self.b else 0
        return int(new - old)

    def relative(self, figure: str) -> float | None:
        old = getattr(self.a, figure) if self.a else 0
        return None if not old else self.change(figure) / old


@dataclass(frozen=True, slots=True)
class RunDiff:
    lines: tuple[LineDiff, ...]
    functions: tuple[FunctionDiff, ...]
    #: Files whose lines were matched by number only (no recorded text on one side).
    unmatched_sources: tuple[str, ...] = ()


def match_lines(a: SourceFile, b: SourceFile) -> dict[int, int]:
    """Map line numbers of ``a`` to those of ``b`` for lines that are the same code."""
    if a.text is not None and b.text is not None:
        return line_map(a.text, b.text)
    numbers = set(a.lines) | set(b.lines)
    return {n: n for n in numbers}


def diff_runs(a: Run, b: Run) -> RunDiff:
    lines: list[LineDiff] = []
    functions: list[FunctionDiff] = []
    by_number: list[str] = []
    for path in sorted(set(a.files) | set(b.files)):
        fa, fb = a.files.get(path), b.files.get(path)
        if fa is None or fb is None:
            only = fa or fb
            assert only is not None
            for n, st in sorted(only.lines.items()):
                lines.append(
                    LineDiff(
                        path,
                        n if fa else None,
                        n if fb else None,
                        st if fa else None,
                        st if fb else None,
                    )
                )
            for fn in only.functions:
                functions.append(
                    FunctionDiff(path, fn.qualname, fn if fa else None, fn if fb else None)
                )
            continue
        if fa.text is None or fb.text is None:
            by_number.append(path)
        mapping = match_lines(fa, fb)
        seen_b: set[int] = set()
        for n, st in sorted(fa.lines.items()):
            m = mapping.get(n)
            if m is not None:
                seen_b.add(m)
                lines.append(LineDiff(path, n, m, st, fb.lines.get(m)))
            else:
                lines.append(LineDiff(path, n, None, st, None))
        back = {v: k for k, v in mapping.items()}
        for m, st in sorted(fb.lines.items()):
            if m not in seen_b:
                origin = back.get(m)
                old = fa.lines.get(origin) if origin is not None else None
                lines.append(LineDiff(path, origin, m, old, st))
        fns_a = {fn.qualname: fn for fn in fa.functions}
        fns_b = {fn.qualname: fn for fn in fb.functions}
        for q in sorted(set(fns_a) | set(fns_b)):
            functions.append(FunctionDiff(path, q, fns_a.get(q), fns_b.get(q)))
    return RunDiff(tuple(lines), tuple(functions), tuple(by_number))


__all__ = ["FIGURES", "FunctionDiff", "LineDiff", "RunDiff", "diff_runs", "match_lines"]
