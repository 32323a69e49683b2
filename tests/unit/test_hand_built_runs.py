"""Every run a test builds by hand is made by tests/runs.py (``new_run``, ``info``,
``source``), so a change to how runs are made is made there once."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

#: Where ``Run(...)`` and ``RunInfo(...)`` may be called: the helpers, and the scripts that
#: wrote the golden files (frozen with them).
MAKERS = {
    "runs.py",
    "data/formats/make_v1.py",
    "data/formats/make_v2.py",
    "data/formats/make_v3.py",
}
#: The golden file's info is spelled out on purpose (a helper change cannot hide a reader one).
SPELLED_OUT = {("unit/test_runfile.py", "RunInfo")}


def test_runs_are_built_by_hand_only_in_tests_runs() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel in MAKERS:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue  # a program some test profiles, broken on purpose
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = (
                fn.id
                if isinstance(fn, ast.Name)
                else fn.attr
                if isinstance(fn, ast.Attribute)
                else ""
            )
            if name in {"Run", "RunInfo"} and (rel, name) not in SPELLED_OUT:
                found.append(f"{rel}:{node.lineno}: {name}(...)")
    assert found == []
