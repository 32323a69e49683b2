"""Where the editor puts a test's error (memlens_lsp.features.pytest_results), and the
label of a parametrized test function."""

from __future__ import annotations

from memlens.annotate import label_for_tests
from memlens.model import TestStats
from memlens_lsp.features.pytest_results import _name_span

LINES = [
    "@pytest.mark.memlens(peak='5 MiB')",  # 0
    "@pytest.mark.parametrize('n', [1, 2])",  # 1
    "async def test_big(n):",  # 2
    "    pass",  # 3
    "class TestX:",  # 4
    "    def test_big_enough(self):",  # 5
    "        pass",  # 6
    "x = 1",  # 7
]


def test_the_name_on_the_def_line_below_the_decorators() -> None:
    assert _name_span(LINES, 0, "test_big") == (2, 10, 18)
    assert _name_span(LINES, 5, "TestX.test_big_enough") == (5, 8, 23)
    # Not test_big_enough for test_big: the whole name only.
    assert _name_span(LINES, 4, "TestX.test_big") == (4, 0, 12)


def test_the_first_line_when_the_def_is_not_found() -> None:
    assert _name_span(LINES, 7, "test_gone") == (7, 0, 5)
    assert _name_span(["    @decorated"], 0, "test_gone") == (0, 4, 14)


def test_parametrized_functions_show_their_highest_figures() -> None:
    cases = [
        TestStats("t.py::test_a[1]", "passed", peak_bytes=1024, leaked_bytes=0),
        TestStats("t.py::test_a[2]", "passed", peak_bytes=3 * 1024 * 1024, leaked_bytes=512),
    ]
    assert label_for_tests(cases) == "2 tests: peak up to 3.0 MiB · leaked up to 512 B"
    assert label_for_tests(cases[:1]) == "test peak 1.0 KiB · leaked 0 B"
