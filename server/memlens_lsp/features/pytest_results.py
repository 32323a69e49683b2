"""Test results of a ``pytest --memlens`` run in the editor (docs/pytest.md, "In the editor").

A code lens above each test function the run's ``tests`` name (``test peak 12.1 MiB ·
leaked 0 B``; a parametrized function's cases together), and an error on the function's name
for each test that failed on memory (a ``memlens`` marker's limit, or growth over the
baseline). The code lens and diagnostics features add these items to their own; positions
follow the document's edits like every figure (the run's line mapping).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from memlens.annotate import failure_text, label_for_tests
from memlens.layout import printable
from memlens.model import TEST_LINE_FIGURE, TEST_LINE_WORDS, TestStats
from memlens.units import fmt_bytes
from memlens_lsp import views
from memlens_lsp.index import FileView, RunData
from memlens_lsp.staleness import LineMapping

#: How far below a test function's first line (its decorators) its ``def`` is looked for.
_DEF_SEARCH_LINES = 50


def tests_by_line(run: RunData, key: str) -> dict[int, list[TestStats]]:
    """The run's tests of recorded file ``key``, by the first line of their function (the
    cases of a parametrized test share it), in the order they ran. Computed once per run."""
    by_file: dict[str, dict[int, list[TestStats]]] = run.memo.value(
        "tests_by_file", lambda: _by_file(run.run.info.tests)
    )
    return by_file.get(key, {})


def _by_file(tests: tuple[TestStats, ...]) -> dict[str, dict[int, list[TestStats]]]:
    out: dict[str, dict[int, list[TestStats]]] = {}
    for test in tests:
        if test.file and test.line > 0:
            out.setdefault(test.file, {}).setdefault(test.line, []).append(test)
    return out


def lens_items(view: FileView, mapping: LineMapping, buffer_size: int) -> list[views.LensItem]:
    """One lens per test function at its (re-mapped) first line."""
    out = []
    for first, tests in tests_by_line(view.run, view.key).items():
        line = mapping.buffer_line(first)
        if line is not None and 1 <= line <= buffer_size:
            out.append(views.LensItem(line - 1, label_for_tests(tests)))
    return out


def diagnostic_items(
    view: FileView, mapping: LineMapping, lines: Sequence[str], *, related: bool = True
) -> list[views.DiagnosticItem]:
    """An error on the name of each test function whose test (or case) failed on memory, with
    the lines responsible as related information (links; for a client that cannot show
    related information, the heaviest one is named in the message)."""
    out = []
    for first, tests in tests_by_line(view.run, view.key).items():
        failed = [t for t in tests if t.failures]
        line = mapping.buffer_line(first)
        if not failed or line is None or not 1 <= line <= len(lines):
            continue
        row, start, end = _name_span(lines, line - 1, failed[0].function)
        for test in failed:
            reasons = "; ".join(failure_text(f) for f in test.failures)
            places = _responsible(view, test)
            if places and not related:
                path, line, what = places[0]
                reasons += f"; most: {os.path.basename(path)}:{line + 1} ({what})"
            message = printable(f"{test.nodeid}: {reasons}")
            out.append(
                views.DiagnosticItem(
                    row, start, end, message, code="test", related=places if related else ()
                )
            )
    return out


def _responsible(view: FileView, test: TestStats) -> tuple[tuple[str, int, str], ...]:
    """The lines responsible for a test's failures, as related information: (local path,
    0-based line, ``10.0 MiB still held after the test: HELD.append(...)``)."""
    run = view.run
    out: list[tuple[str, int, str]] = []
    seen = set()
    for failure in test.failures:
        did = TEST_LINE_WORDS[TEST_LINE_FIGURE[failure.figure]]
        for file, line, size in failure.lines:
            if (file, line) in seen:
                continue
            seen.add((file, line))
            sf = run.run.files.get(file)
            path = run.local_path(file) if sf is not None else file
            text = sf.text.splitlines() if sf is not None and sf.text is not None else []
            code = text[line - 1].strip()[:80] if 0 < line <= len(text) else ""
            message = f"{fmt_bytes(size)} {did}" + (f": {code}" if code else "")
            out.append((path, line - 1, printable(message)))
    return tuple(out)


def _name_span(lines: Sequence[str], first: int, qualname: str) -> tuple[int, int, int]:
    """(0-based line, start, end) of the function's name on its ``def`` line, looked for from
    its first line (decorators come first); the first line's text when not found."""
    name = qualname.rsplit(".", 1)[-1]
    pattern = re.compile(rf"\s*(?:async\s+)?def\s+({re.escape(name)})\b")
    for row in range(first, min(len(lines), first + _DEF_SEARCH_LINES)):
        found = pattern.match(lines[row])
        if found is not None:
            return row, found.start(1), found.end(1)
    text = lines[first]
    return first, len(text) - len(text.lstrip()), len(text)
