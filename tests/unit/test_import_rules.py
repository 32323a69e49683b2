"""Architecture invariants (docs/ARCHITECTURE.md, "Code map"), enforced on the source tree."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "server"

#: Modules of the core that must import only the standard library (and each other).
STDLIB_ONLY = {
    "memlens.model",
    "memlens.fileformat",
    "memlens.units",
    "memlens.errors",
    "memlens.diff",
    "memlens.annotate",
    "memlens.store",
    "memlens.export",
    "memlens.mapping",
    "memlens.layout",
    "memlens.calltree",
    "memlens.query",
    "memlens.timeline",
    "memlens.source",
}

#: The MCP SDK and what it brings: only the MCP server module imports them (``memlens mcp``
#: loads it when it starts; every other command, and ``memlens run``, never does).
MCP_SDK = ("mcp", "mcp_types", "anyio", "uvicorn", "starlette", "pydantic")
MCP_MODULE = "memlens.mcp_server"

#: The language server's modules that may import the LSP libraries: lsprotocol's types only
#: where LSP objects are built or taken apart (the conversion, the state, the features), pygls
#: there and in the connection. The wiring (server.py), the views, the index and the rest are
#: plain data in, plain data out.
LSPROTOCOL_MODULES = ("memlens_server.convert", "memlens_server.state", "memlens_server.features")
PYGLS_MODULES = (*LSPROTOCOL_MODULES, "memlens_server.transport")


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SERVER.rglob("*.py")):
        rel = path.relative_to(SERVER).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append((".".join(parts), path))
    return out


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _is(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize(("module", "path"), _modules(), ids=lambda v: str(v))
def test_import_rules(module: str, path: Path) -> None:
    imports = _imports(path)
    if _is(module, "memlens"):
        bad = {
            i for i in imports if any(_is(i, p) for p in ("memlens_server", "pygls", "lsprotocol"))
        }
        assert not bad, f"{module} must not import the language server or LSP libraries: {bad}"
    if module != MCP_MODULE:
        bad = {i for i in imports if any(_is(i, p) for p in MCP_SDK)}
        assert not bad, f"{module} must not import the MCP SDK (only {MCP_MODULE} does): {bad}"
    if _is(module, "memlens_server"):
        bad = {i for i in imports if _is(i, "memlens._tracer") or _is(i, "memlens.tracer")}
        assert not bad, f"{module} must not import the tracer (run files are the contract): {bad}"
    if _is(module, "memlens_server"):
        for library, allowed in (("lsprotocol", LSPROTOCOL_MODULES), ("pygls", PYGLS_MODULES)):
            bad = {i for i in imports if _is(i, library)}
            if not any(_is(module, a) for a in allowed):
                assert not bad, f"{module} must not import {library} (only {allowed}): {bad}"
    if module in STDLIB_ONLY:
        import sys

        allowed_roots = set(sys.stdlib_module_names) | {"memlens"}
        bad = {i for i in imports if i.split(".")[0] not in allowed_roots and i != "__future__"}
        bad |= {i for i in imports if _is(i, "memlens._tracer") or _is(i, "memlens.tracer")}
        bad |= {i for i in imports if _is(i, "memlens.cli")}
        assert not bad, f"{module} must use the standard library only: {bad}"


def test_rules_see_every_package() -> None:
    names = {m for m, _ in _modules()}
    assert "memlens.model" in names
    assert "memlens_server" in names
    assert MCP_MODULE in names
    assert "memlens_server.server" in names
    assert {m for m in names if m.startswith("memlens_server.features.")}


def test_language_server_modules_form_no_import_cycle() -> None:
    """Features depend on the state module; only ``server.py`` wires them (issue 16, item 13).

    Every import counts, also those inside functions: a deferred import is still a cycle."""
    modules = {m: p for m, p in _modules() if _is(m, "memlens_server")}
    graph = {m: {i for i in _imports(p) if i in modules and i != m} for m, p in modules.items()}
    for name in ("memlens_server.state", *(m for m in modules if ".features." in m)):
        assert "memlens_server.server" not in graph[name], f"{name} imports the wiring module"
    seen: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        seen[m] = 1
        for n in sorted(graph[m]):
            assert seen.get(n) != 1, "import cycle: " + " -> ".join([*path, m, n])
            if n not in seen:
                visit(n, [*path, m])
        seen[m] = 2

    for m in sorted(graph):
        if m not in seen:
            visit(m, [])
