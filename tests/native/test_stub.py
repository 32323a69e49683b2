"""The type stub of the native module lists exactly what the module exports."""

from __future__ import annotations

import ast
from pathlib import Path

from memlens import _tracer

STUB = Path(__file__).resolve().parents[2] / "server" / "memlens" / "_tracer.pyi"


def test_stub_matches_module() -> None:
    tree = ast.parse(STUB.read_text())
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    exported = {n for n in dir(_tracer) if not n.startswith("__") and callable(getattr(_tracer, n))}
    assert stubbed == exported
