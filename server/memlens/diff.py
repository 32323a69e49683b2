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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memlens.mapping import line_map
from memlens.model import (
    FIGURES,
    FUNCTION_FIGURES,
    GPU_FIGURES,
    GPU_FUNCTION_FIGURES,
    FunctionStats,
    LineStats,
    Run,
    RunInfo,
    SourceFile,
)

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
        if figure not in FUNCTION_FIGURES and figure not in GPU_FUNCTION_FIGURES:
            raise KeyError(figure)
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
    """How one file's lines were matched, and its line and function diffs."""

    path: str
    matched_by: str
    lines: tuple[LineDiff, ...]
    functions: tuple[FunctionDiff, ...]


@dataclass(frozen=True, slots=True)
class RunDiff:
    lines: tuple[LineDiff, ...]
    functions: tuple[FunctionDiff, ...]
    #: Files whose lines were matched by number only (no recorded text on one side and
    #: different hashes): their line pairs are a guess.
    unmatched_sources: tuple[str, ...] = ()
    files: tuple[FileDiff, ...] = ()
    info_a: RunInfo | None = None
    info_b: RunInfo | None = None

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
        how = ONLY_IN_A if fa is not None else ONLY_IN_B
        lines = tuple(
            LineDiff(
                path,
                n if fa else None,
                n if fb else None,
                st if fa else None,
                st if fb else None,
                how,
            )
            for n, st in sorted(only.lines.items())
        )
        fns = tuple(
            FunctionDiff(path, fn.qualname, fn if fa else None, fn if fb else None)
            for fn in only.functions
        )
        return FileDiff(path, how, lines, fns)
    mapping, how = matching(fa, fb)
    out: list[LineDiff] = []
    seen_b: set[int] = set()
    for n, st in sorted(fa.lines.items()):
        m = mapping.get(n)
        if m is not None:
            seen_b.add(m)
            out.append(LineDiff(path, n, m, st, fb.lines.get(m), how))
        else:
            out.append(LineDiff(path, n, None, st, None, how))
    back = {v: k for k, v in mapping.items()}
    for m, st in sorted(fb.lines.items()):
        if m not in seen_b:
            origin = back.get(m)
            old = fa.lines.get(origin) if origin is not None else None
            out.append(LineDiff(path, origin, m, old, st, how))
    out.sort(key=lambda ld: (ld.line, ld.line_a or 0))
    return FileDiff(path, how, tuple(out), _diff_functions(path, fa.functions, fb.functions))


def _diff_functions(
    path: str, fns_a: tuple[FunctionStats, ...], fns_b: tuple[FunctionStats, ...]
) -> tuple[FunctionDiff, ...]:
    # Functions are matched by qualified name; several with one name (redefinitions, lambdas)
    # are paired in order of their first line.
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
    files = tuple(
        diff_files(path, a.files.get(path), b.files.get(path))
        for path in sorted(set(a.files) | set(b.files))
    )
    return RunDiff(
        lines=tuple(ld for fd in files for ld in fd.lines),
        functions=tuple(fn for fd in files for fn in fd.functions),
        unmatched_sources=tuple(fd.path for fd in files if fd.matched_by == MATCHED_BY_LINE_NUMBER),
        files=files,
        info_a=a.info,
        info_b=b.info,
    )


def ranked_lines(d: RunDiff, figure: str) -> list[LineDiff]:
    """Lines by absolute change of ``figure``, biggest first (then file and line)."""
    return sorted(d.lines, key=lambda ld: (-abs(ld.change(figure)), ld.file, ld.line))


def ranked_functions(d: RunDiff, figure: str) -> list[FunctionDiff]:
    """Functions by absolute change of ``figure``, biggest first (then file and name)."""
    return sorted(d.functions, key=lambda fd: (-abs(fd.change(figure)), fd.file, fd.qualname))


def to_json_dict(d: RunDiff, by: str | None = None, top: int | None = None) -> dict[str, Any]:
    """The ``memlens diff --json`` document (documented in docs/file-format.md).

    With ``by`` (a figure both lines and functions have: ``alloc_bytes``, ``live_bytes``,
    ``peak_bytes``, and their ``gpu_`` counterparts), lines and functions are sorted by the absolute change of that figure and
    the first ``top`` of each are kept (None: all); without, every pair in file order.
    """
    lines: Sequence[LineDiff] = d.lines
    functions: Sequence[FunctionDiff] = d.functions
    if by is not None:
        lines = ranked_lines(d, by)[:top]
        functions = ranked_functions(d, by)[:top]
    doc: dict[str, Any] = {
        "format": "memlens-diff",
        "version": 1,
        "totals": {k: c.as_dict() for k, c in d.totals().items()},
        "files": {fd.path: {"matched_by": fd.matched_by} for fd in d.files},
        "lines": [
            {
                "file": ld.file,
                "line_a": ld.line_a,
                "line_b": ld.line_b,
                "status": ld.status,
                "matched_by": ld.matched_by,
                "figures": {f: c.as_dict() for f, c in ld.changes().items()},
                # Kept for readers of the first diff JSON: deltas and ratios only.
                "change": {f: c.delta for f, c in ld.changes().items()},
                "relative": {f: c.ratio for f, c in ld.changes().items()},
            }
            for ld in lines
        ],
        "functions": [
            {
                "file": fd.file,
                "qualname": fd.qualname,
                "lines_a": [fd.a.first_line, fd.a.last_line] if fd.a else None,
                "lines_b": [fd.b.first_line, fd.b.last_line] if fd.b else None,
                "figures": {f: c.as_dict() for f, c in fd.changes().items()},
                "change": {f: c.delta for f, c in fd.changes().items()},
                "relative": {f: c.ratio for f, c in fd.changes().items()},
            }
            for fd in functions
        ],
    }
    if by is not None:
        doc["by"] = by
    return doc


__all__ = [
    "Change",
    "FileDiff",
    "FunctionDiff",
    "LineDiff",
    "RunDiff",
    "diff_files",
    "diff_runs",
    "match_lines",
    "matching",
    "ranked_functions",
    "ranked_lines",
    "to_json_dict",
]
