"""The server's custom LSP method and command names, on the three sides that spell them: the
server (memlens_lsp/protocol.py), the VS Code client (vscode-extension/src/common/protocol.ts,
which the rest of the client uses) and docs/lsp.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

from memlens_lsp import protocol
from memlens_lsp.features import commands

ROOT = Path(__file__).resolve().parents[2]
TS_SRC = ROOT / "vscode-extension" / "src"
TS_PROTOCOL = TS_SRC / "common" / "protocol.ts"
LSP_DOC = (ROOT / "docs" / "lsp.md").read_text(encoding="utf-8")

#: Names the server provides that the VS Code client does not use (for other editors), each
#: with the reason. Empty today: the client uses every command and notification.
SERVER_ONLY: dict[str, str] = {}

_NAME = re.compile(r"memlens[./][A-Za-z]\w*")


def _server_names() -> dict[str, str]:
    """Constant -> name for every custom method and command name protocol.py defines."""
    return {
        k: v
        for k, v in vars(protocol).items()
        if k.isupper() and isinstance(v, str) and _NAME.fullmatch(v)
    }


def _client_names() -> dict[str, str]:
    text = TS_PROTOCOL.read_text(encoding="utf-8")
    return dict(re.findall(r"^export const (\w+) = '([^']*)';$", text, re.MULTILINE))


def _client_sources() -> list[Path]:
    return [p for p in sorted(TS_SRC.rglob("*.ts")) if "test" not in p.relative_to(TS_SRC).parts]


def test_server_and_client_define_the_same_names() -> None:
    server = _server_names()
    assert server, "no names found in protocol.py"
    assert _client_names() == server
    # Commands are the dotted names, all registered; the notification is the slashed one.
    assert set(protocol.COMMANDS) == {v for v in server.values() if v.startswith("memlens.")}
    assert set(commands.HANDLERS) == set(protocol.COMMANDS)
    assert len(protocol.COMMANDS) == len(set(protocol.COMMANDS))


def test_client_uses_the_constants_and_every_name() -> None:
    names = _client_names()
    others = [p for p in _client_sources() if p != TS_PROTOCOL]
    text = {p: p.read_text(encoding="utf-8") for p in others}
    for const, name in names.items():
        literal = re.compile(rf"""['"`]{re.escape(name)}['"`]""")
        spelled = [p.name for p, t in text.items() if literal.search(t)]
        assert not spelled, f"{name} is written out in {spelled}: use {const} of protocol.ts"
        used = any(re.search(rf"\b{const}\b", t) for t in text.values())
        assert used or name in SERVER_ONLY, f"the client never uses {name} ({const})"
    assert set(SERVER_ONLY) <= set(names.values())


def test_docs_document_exactly_the_names() -> None:
    server = set(_server_names().values())
    documented_commands = set(re.findall(r"^\| `(memlens\.\w+)` \| `?\{", LSP_DOC, re.MULTILINE))
    assert documented_commands == set(protocol.COMMANDS)
    documented_methods = set(re.findall(r"(?<![\w./])(memlens/[A-Za-z]\w*)", LSP_DOC))
    assert documented_methods == {n for n in server if n.startswith("memlens/")}
    for name in server:
        assert f"`{name}`" in LSP_DOC, name


def test_client_commands_are_not_server_commands() -> None:
    """vscode-languageclient registers each server command as a VS Code command: a client
    command of the same name makes the client fail to start ("command already exists")."""
    package = json.loads((ROOT / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
    declared = {c["command"] for c in package["contributes"]["commands"]}
    registered = set()
    for path in _client_sources():
        registered.update(
            re.findall(r"registerCommand\(\s*'([^']+)'", path.read_text(encoding="utf-8"))
        )
    assert declared <= registered
    assert not (registered & set(protocol.COMMANDS))
