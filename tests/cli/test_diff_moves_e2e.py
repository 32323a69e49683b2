"""Profile a script, swap two of its functions, profile again: the diff follows both."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.memlens_cmd import memlens as _memlens

FIRST = """\
def build_table(n):
    table = [bytes(1000) for _ in range(n)]
    return table


def build_names(n):
    names = [str(i) * 50 for i in range(n)]
    return names


t = build_table({table})
m = build_names({names})
"""

# The same functions in the other order (build_names now comes first), and a header comment.
SECOND = """\
# reordered


def build_names(n):
    names = [str(i) * 50 for i in range(n)]
    return names


def build_table(n):
    table = [bytes(1000) for _ in range(n)]
    return table


t = build_table({table})
m = build_names({names})
"""


def test_swapped_functions_are_compared_line_by_line(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(FIRST.format(table=2000, names=1000))
    first = _memlens("run", "app.py", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert _memlens("baseline", "set", "latest", cwd=tmp_path).returncode == 0
    script.write_text(SECOND.format(table=4000, names=1000))
    second = _memlens("run", "app.py", cwd=tmp_path)
    assert second.returncode == 0, second.stderr

    out = _memlens("diff", "--json", "--by", "alloc", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    path = str(script.resolve())
    assert doc["files"][path]["matched_by"] == "text"
    pairs = {(ld["line_a"], ld["line_b"]): ld for ld in doc["lines"] if ld["file"] == path}
    # build_table's list (line 2 before, line 10 now) and build_names' list (line 7 before,
    # line 5 now) are each compared with themselves; neither is "gone" or "new".
    assert (2, 10) in pairs
    assert (7, 5) in pairs
    assert pairs[(2, 10)]["status"] == "moved"
    assert pairs[(7, 5)]["status"] == "moved"
    # The only code that is not the same is the edited call "build_table(2000)" -> "(4000)".
    changed = {
        (ld["line_a"], ld["line_b"]) for ld in doc["lines"] if ld["status"] in ("new", "gone")
    }
    assert changed == {(11, None), (None, 14)}
    assert pairs[(12, 15)]["status"] == "moved"  # the names call moved with the header
    # Twice the rows: the table line allocates about 2 MB more; the names line about the same.
    table = pairs[(2, 10)]["figures"]["alloc_bytes"]
    assert table["b"] > table["a"] + 1_500_000
    names = pairs[(7, 5)]["figures"]["alloc_bytes"]
    assert abs(names["delta"]) < 0.2 * names["a"]
    # The biggest change by allocated bytes is the table line.
    assert (doc["lines"][0]["line_a"], doc["lines"][0]["line_b"]) == (2, 10)
