"""The settings table (memlens_lsp.settings.TABLE) against everything else that lists the
settings: the Settings fields, the extension's package.json and settings.ts, and the docs."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from memlens_lsp.settings import TABLE, Setting, Settings, parse

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = json.loads((ROOT / "vscode-extension" / "package.json").read_text(encoding="utf-8"))
PROPERTIES: dict[str, dict[str, Any]] = PACKAGE["contributes"]["configuration"]["properties"]


def _doc_rows(doc: str) -> dict[str, list[str]]:
    """The rows of the settings table of a doc (its "Settings" section): key (without
    ``memlens.``) -> other cells."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    section = re.search(r"^## Settings.*?(?=^## )", text, re.MULTILINE | re.DOTALL)
    assert section is not None, doc
    rows = {}
    for line in section.group(0).splitlines():
        m = re.match(r"\| `memlens\.([\w.]+)` \|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in re.split(r"(?<!\\)\|", m.group(2))]
    return rows


def _literal(cell: str) -> Any:
    """A default as the docs write it: `true`, `1024`, `"peak"`."""
    m = re.fullmatch(r"`(.*)`", cell)
    assert m, cell
    return json.loads(m.group(1))


def test_settings_fields_are_the_table() -> None:
    assert [f.name for f in dataclasses.fields(Settings)] == [s.field for s in TABLE]
    assert Settings() == Settings(**{s.field: s.default for s in TABLE})
    assert len({s.key for s in TABLE}) == len(TABLE)
    for s in TABLE:
        assert s.check(s.default) == s.default, s.key


@pytest.mark.parametrize("setting", TABLE, ids=lambda s: s.key)
def test_server_parses_every_key_with_its_validator(setting: Setting) -> None:
    bad = "nonsense" if setting.check.json_type != "string" or setting.check.choices else 5
    got, problems = parse({setting.key: bad})
    assert getattr(got, setting.field) == setting.default
    assert problems
    assert problems[0].startswith(f"memlens.{setting.key}: expected")
    nested: dict[str, Any] = {}
    *parents, last = setting.key.split(".")
    level = nested
    for part in parents:
        level = level.setdefault(part, {})
    level[last] = setting.default
    assert parse(nested) == (Settings(), [])


def test_package_json_declares_the_table() -> None:
    assert set(PROPERTIES) == {f"memlens.{s.key}" for s in TABLE}
    for s in TABLE:
        declared = PROPERTIES[f"memlens.{s.key}"]
        check = s.check
        assert declared["type"] == check.json_type, s.key
        assert declared["default"] == s.default, s.key
        assert tuple(declared.get("enum", ())) == (check.choices or ()), s.key
        assert declared.get("minimum") == check.minimum, s.key
        assert declared.get("maximum") == check.maximum, s.key
        if "enumDescriptions" in declared:
            assert len(declared["enumDescriptions"]) == len(declared["enum"]), s.key


def test_extension_reads_the_table_defaults() -> None:
    """settings.ts builds what the server receives: its fallbacks are the table's defaults."""
    source = (ROOT / "vscode-extension" / "src" / "common" / "settings.ts").read_text("utf-8")
    fallbacks = {
        key: json.loads(value.replace("'", '"'))
        for key, value in re.findall(r"get<\w+>\('([\w.]+)', ([^)]+)\)", source)
    }
    server_side = {s.key: s.default for s in TABLE if s.key != "interpreter"}
    assert fallbacks == server_side
    figures = re.search(r"export const FIGURES = \[([^\]]*)\]", source)
    assert figures is not None
    figure = next(s for s in TABLE if s.key == "inlayHints.figure")
    assert tuple(re.findall(r"'(\w+)'", figures.group(1))) == figure.check.choices


@pytest.mark.parametrize("doc", ["lsp.md", "vscode.md"])
def test_docs_list_the_table(doc: str) -> None:
    rows = _doc_rows(doc)
    assert list(rows) == [s.key for s in TABLE]
    default_column = 1 if doc == "lsp.md" else 0  # lsp.md: Key | Type | Default | Meaning
    for s in TABLE:
        cells = rows[s.key]
        assert _literal(cells[default_column]) == s.default, (doc, s.key)
        if doc == "lsp.md":
            kind = cells[0]
            if s.check.choices:
                assert re.findall(r'`"(\w+)"`', kind) == list(s.check.choices), s.key
            else:
                assert kind.startswith(s.check.json_type), (s.key, kind)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("inlayHints.minShare", float("nan")),
        ("inlayHints.minShare", 1.5),
        ("inlayHints.minBytes", -1),
        ("inlayHints.minBytes", 2.5),
        ("inlayHints.enabled", 1),
        ("inlayHints.minBytes", True),
    ],
)
def test_validators_refuse_what_package_json_refuses(key: str, value: object) -> None:
    got, problems = parse({key: value})
    assert got == Settings()
    assert len(problems) == 1
