"""The layer rule and the import rules (docs/ARCHITECTURE.md, "Layers"), enforced on the source.

Every import counts: at a module's top, inside functions, under ``TYPE_CHECKING``, and
``importlib.import_module("name")`` with the name written out. An import stands for the module
it names (``from memlens import runfile`` names ``memlens.runfile``; ``from memlens.model import
Run`` names ``memlens.model``); the package ``__init__`` that Python runs first is not counted.
A module that imports by a name it computes is a registry: the names are the values of one dict
it writes out (:data:`REGISTRIES`).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "server"

#: The parts of the house, each a set of packages or modules (a name and everything under it).
CORE = "core"
TRACING = "tracing"
PUBLIC_API = "public API"
NOTEBOOK = "notebook magics"
PYTEST_PLUGIN = "pytest plugin"
DASK_PLUGIN = "Dask worker plugin"
LANGUAGE_SERVER = "language server"
MCP_SERVER = "MCP server"
CLI = "CLI"

#: The layer rule: what each part may import besides itself. The core is everything of
#: ``memlens`` that is not named in :func:`part`.
MAY_IMPORT = {
    CORE: set(),
    TRACING: {CORE},
    # memlens.profile/start/stop, and load_ipython_extension (%load_ext memlens).
    PUBLIC_API: {TRACING, NOTEBOOK, CORE},
    NOTEBOOK: {TRACING, CORE},
    PYTEST_PLUGIN: {TRACING, CORE},
    # memlens.dask: profiles a running cluster's workers through the public API.
    DASK_PLUGIN: {PUBLIC_API, TRACING, CORE},
    LANGUAGE_SERVER: {CORE},
    MCP_SERVER: {CORE},
    CLI: {TRACING, PUBLIC_API, NOTEBOOK, PYTEST_PLUGIN, LANGUAGE_SERVER, MCP_SERVER, CORE},
}

#: Modules of the CLI that another part may import: the notebook magics take `memlens run`'s
#: options (its option table, and the options several commands share).
SHARED_CLI_MODULES = {NOTEBOOK: {"memlens.cli.run", "memlens.cli.options"}}


def part(module: str) -> str:
    if module in ("memlens.cli", "memlens.__main__") or module.startswith("memlens.cli."):
        return CLI
    if _is(module, "memlens_lsp"):
        return LANGUAGE_SERVER
    if _is(module, "memlens_mcp"):
        return MCP_SERVER
    if _is(module, "memlens.pytest_plugin"):
        return PYTEST_PLUGIN
    if module == "memlens":  # profile, start, stop; load_ipython_extension
        return PUBLIC_API
    if module == "memlens.dask":
        return DASK_PLUGIN
    if module == "memlens._tracer" or _is(module, "memlens.tracing"):
        return TRACING
    # The magics (IPython's side); memlens.notebook.cells is pure (the core).
    if module == "memlens.notebook.magic":
        return NOTEBOOK
    assert _is(module, "memlens"), module
    return CORE


#: Core modules that may import a library outside the standard library (rich: the terminal).
CORE_LIBRARIES = {"memlens.report": {"rich"}}

#: The MCP SDK and what it brings: only the MCP server's SDK module imports them (``memlens
#: mcp`` loads it when it starts; every other command, and ``memlens run``, never does).
MCP_SDK = ("mcp", "mcp_types", "anyio", "uvicorn", "starlette", "pydantic")
MCP_SDK_MODULE = "memlens_mcp.server"

#: The language server's modules that may import the LSP libraries: lsprotocol's types only
#: where LSP objects are built or taken apart (the conversion, the state, the features), pygls
#: there and in the connection. The wiring (server.py), the views, the index and the rest are
#: plain data in, plain data out.
LSPROTOCOL_MODULES = ("memlens_lsp.convert", "memlens_lsp.state", "memlens_lsp.features")
PYGLS_MODULES = (*LSPROTOCOL_MODULES, "memlens_lsp.transport")


#: Modules that import by computed names, and the dict literal of those names (a value is
#: the module's name, or a tuple that starts with it).
REGISTRIES = {"memlens.cli": "COMMANDS"}


def _is(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted([*SERVER.rglob("*.py"), *SERVER.rglob("*.pyi")]):
        parts = list(path.relative_to(SERVER).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.setdefault(".".join(parts), path)
    return out


MODULES = _modules()


def _imports(path: Path, registry: str | None = None) -> set[str]:
    """Every name ``path`` imports: a module of the house, or a library's module (with
    ``registry``, the values of the dict of that name too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            registry is not None
            and isinstance(node, ast.AnnAssign | ast.Assign)
            and registry in {getattr(t, "id", None) for t in _targets(node)}
        ):
            assert isinstance(node.value, ast.Dict), registry
            for value in ast.literal_eval(node.value).values():
                names.add(value[0] if isinstance(value, tuple) else value)  # (module, help)
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            assert node.module
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                names.add(sub if sub in MODULES else node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
        ):
            arg = node.args[0] if node.args else None
            if registry is not None and not isinstance(arg, ast.Constant):
                continue  # one of the registry's names
            assert isinstance(arg, ast.Constant), (
                f"{path}:{node.lineno}: import_module with a name that is not written out "
                "(the rules could not see it)"
            )
            names.add(arg.value)
    return names - {"__future__"}


def _targets(node: ast.AnnAssign | ast.Assign) -> list[ast.expr]:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


def _own(names: set[str]) -> set[str]:
    """The names that are modules of the house."""
    return {n for n in names if n in MODULES}


GRAPH = {
    m: _own(_imports(p, REGISTRIES.get(m))) - {m} for m, p in MODULES.items() if p.suffix == ".py"
}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_layer_rule(module: str) -> None:
    mine = part(module)
    bad = {
        f"{i} ({part(i)})"
        for i in GRAPH[module]
        if part(i) != mine
        and part(i) not in MAY_IMPORT[mine]
        and i not in SHARED_CLI_MODULES.get(mine, set())
    }
    assert not bad, f"{module} ({mine}) may import only {sorted(MAY_IMPORT[mine])}: {bad}"


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_library_rules(module: str) -> None:
    imports = _imports(MODULES[module], REGISTRIES.get(module))
    libraries = {i for i in imports - set(MODULES) if i.split(".")[0] not in ("memlens",)}
    if part(module) == CORE:
        allowed = set(sys.stdlib_module_names) | CORE_LIBRARIES.get(module, set())
        bad = {i for i in libraries if i.split(".")[0] not in allowed}
        assert not bad, f"{module} must use the standard library only: {bad}"
    if module != MCP_SDK_MODULE:
        bad = {i for i in libraries if any(_is(i, p) for p in MCP_SDK)}
        assert not bad, f"{module} must not import the MCP SDK (only {MCP_SDK_MODULE}): {bad}"
    # %load_ext memlens registers the magics on the shell that loads them: IPython is no
    # dependency of memlens.
    bad = {i for i in libraries if _is(i, "IPython") or _is(i, "ipykernel")}
    assert not bad, f"{module} must not import IPython: {bad}"
    for library, allowed_in in (("lsprotocol", LSPROTOCOL_MODULES), ("pygls", PYGLS_MODULES)):
        bad = {i for i in libraries if _is(i, library)}
        if not any(_is(module, a) for a in allowed_in):
            assert not bad, f"{module} must not import {library} (only {allowed_in}): {bad}"


def test_the_command_line_entry_is_imported_by_nothing_else() -> None:
    """``memlens.cli`` (the registry and ``main``) loads the commands; they take what they share
    from ``memlens.cli.options``, so that no command imports the module that loads it."""
    importers = {m for m, names in GRAPH.items() if "memlens.cli" in names}
    assert importers == {"memlens.__main__"}


def test_the_language_server_features_never_import_the_wiring() -> None:
    """Features depend on the state module; only ``server.py`` wires them."""
    for name in ("memlens_lsp.state", *(m for m in GRAPH if _is(m, "memlens_lsp.features"))):
        assert "memlens_lsp.server" not in GRAPH[name], f"{name} imports the wiring module"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (as the path that closes it), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> list[str] | None:
        state[m] = 1
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return [*path, m, n]
            if n not in state and (found := visit(n, [*path, m])) is not None:
                return found
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m, [])) is not None:
            return found
    return None


def test_no_import_cycle() -> None:
    cycle = _cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_rules_see_every_part_and_every_way_to_import(tmp_path: Path) -> None:
    assert {part(m) for m in GRAPH} == set(MAY_IMPORT)
    assert {"memlens.model", "memlens_lsp.server", MCP_SDK_MODULE, "memlens.cli.lsp"} <= set(GRAPH)
    assert {m for m in GRAPH if m.startswith("memlens_lsp.features.")}
    # An import inside a function, and one by name through importlib, are both seen.
    assert "memlens_lsp.server" in GRAPH["memlens.cli.lsp"]
    assert "memlens.cli.mcp" in GRAPH["memlens.cli"]  # through the registry
    source = "def f():\n    import importlib\n    importlib.import_module('memlens.model')\n"
    (tmp_path / "probe.py").write_text(source)
    assert "memlens.model" in _imports(tmp_path / "probe.py")
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
