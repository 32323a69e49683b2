"""Profile a script, swap two of its functions, profile again: the diff follows both."""

from __future__ import annotations

import json
import re
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


def test_table_says_moved_where_the_json_says_moved(tmp_path: Path) -> None:
    # The list is freed in the first version and kept in the second, which also has a
    # header comment: the line moved, and its live figure went from nothing to ~100 KiB.
    script = tmp_path / "app.py"
    script.write_text("kept = [bytes(1000) for _ in range(100)]\ndel kept\n")
    assert _memlens("run", "--no-report", "app.py", cwd=tmp_path).returncode == 0
    assert _memlens("baseline", "set", "latest", cwd=tmp_path).returncode == 0
    script.write_text("# header\nkept = [bytes(1000) for _ in range(100)]\n")
    assert _memlens("run", "--no-report", "app.py", cwd=tmp_path).returncode == 0
    doc = json.loads(_memlens("diff", "--json", "--by", "live", cwd=tmp_path).stdout)
    first = doc["lines"][0]
    assert (first["line_a"], first["line_b"], first["status"]) == (1, 2, "moved")
    assert first["figures"]["live_bytes"]["a"] == 0
    assert first["figures"]["live_bytes"]["ratio"] is None
    table = _memlens("diff", "--by", "live", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    row = table.stdout.splitlines()[2]
    assert row.split()[:4] == ["app.py:2", "(moved", "from", "1)"]
    assert row.endswith("  from 0")
    assert "new" not in row


def test_flow_compare_follows_the_swapped_functions(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(FIRST.format(table=2000, names=1000))
    assert _memlens("run", "--no-report", "-o", "a.mlrun", "app.py", cwd=tmp_path).returncode == 0
    script.write_text(SECOND.format(table=4000, names=1000))
    assert _memlens("run", "--no-report", "-o", "b.mlrun", "app.py", cwd=tmp_path).returncode == 0
    proc = _memlens("flow", "--compare", "a.mlrun", "b.mlrun", "--dot", "g.dot", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    labels = {
        label.split("\\n")[0]: label.split("\\n")[1:]
        for label in re.findall(r'label="([^"]*)", fillcolor', (tmp_path / "g.dot").read_text())
    }
    # build_table's list: line 2, then line 10; both runs' figures are in one box.
    a_table, b_table = labels["app.py:10 (moved from 2)"]
    assert a_table.startswith("a: ")
    assert b_table.startswith("b: ")
    assert not a_table.startswith("a: 0 B / ")
    # build_names' list (7 -> 5), and no box mixes the two lists by line number.
    assert "app.py:5 (moved from 7)" in labels
    assert "app.py:2" not in labels
    assert "app.py:7" not in labels
