"""The one source reader (memlens.source): files decoded the way Python decodes them (PEP 263),
used by the tracer and the importers; and the one digest of a text, which the language server
compares with a recorded file's sha256."""

from __future__ import annotations

import ast
import hashlib
import os
from pathlib import Path

import pytest

from memlens.imports._build import Sources
from memlens.source import decode_source, read_source, text_digest

SERVER = Path(__file__).resolve().parents[2] / "server"

LATIN = b'# -*- coding: latin-1 -*-\r\ns = "caf\xe9"\rx = 1\n'
LATIN_TEXT = '# -*- coding: latin-1 -*-\ns = "café"\nx = 1\n'


def test_a_declared_encoding_is_decoded_with_universal_newlines(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(LATIN)
    assert read_source(str(path)) == (hashlib.sha256(LATIN).hexdigest(), LATIN_TEXT)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b's = "caf\xc3\xa9"\n', 's = "café"\n'),  # PEP 3120: UTF-8 when nothing is declared
        (b's = "caf\xe9"\n', 's = "caf\ufffd"\n'),  # undecodable bytes: U+FFFD, no error
        (b"# coding: klingon\nx = 1\n", "# coding: klingon\nx = 1\n"),  # unknown encoding
        (b'# coding: ascii\ns = "\xe9"\n', '# coding: ascii\ns = "\ufffd"\n'),  # wrong one
        (b"", ""),
    ],
)
def test_source_that_python_would_refuse_is_still_read(data: bytes, text: str) -> None:
    assert decode_source(data) == text


def test_unreadable_sources_are_none_without_blocking(tmp_path: Path) -> None:
    assert read_source(str(tmp_path / "missing.py")) is None
    assert read_source(str(tmp_path)) is None
    assert read_source("bad\0name.py") is None
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo.py"
        os.mkfifo(fifo)
        assert read_source(str(fifo)) is None  # no writer: opening it must not wait


@pytest.mark.parametrize(
    "data",
    [
        LATIN.replace(b"\r", b""),
        's = "café 😀"\n'.encode(),
        b"",
        b"# vim: set fileencoding=cp1252 :\nx = '\x80'\n",
    ],
)
def test_a_text_digests_as_the_bytes_it_was_read_from(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "a.py"
    path.write_bytes(data)
    found = read_source(str(path))
    assert found is not None
    sha, text = found
    assert text_digest(text) == sha


def test_a_buffer_with_lone_surrogates_has_a_digest() -> None:
    # JSON (and so an LSP client) can send them; the digest must not raise.
    assert text_digest("x = '\ud800'\n") == hashlib.sha256(b"x = '\xed\xa0\x80'\n").hexdigest()
    assert (
        text_digest("# coding: latin-1\nx = '\ud800'\n")
        == hashlib.sha256(
            "# coding: latin-1\nx = '\ud800'\n".encode("utf-8", "surrogatepass")
        ).hexdigest()
    )


def test_importers_read_sources_like_the_tracer(tmp_path: Path) -> None:
    (tmp_path / "latin.py").write_bytes(LATIN)
    key, sha, text = Sources([str(tmp_path)]).resolve("latin.py")
    assert key == str(tmp_path / "latin.py")
    assert (sha, text) == read_source(key)
    assert text == LATIN_TEXT
    os.mkfifo(tmp_path / "fifo.py")
    assert Sources([str(tmp_path)]).resolve("fifo.py") == ("fifo.py", "", None)


def test_sources_are_decoded_and_digested_in_one_module() -> None:
    """No other module of memlens or its server detects a source's encoding or digests text;
    SHA-256 itself comes from memlens.sha256 only (which keeps OpenSSL off small runs)."""
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        rel = path.relative_to(SERVER).as_posix()
        if rel == "memlens/source.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "tokenize"
            ):
                found.append(f"{rel}: tokenize.{node.attr}")
            names = (
                [a.name for a in node.names]
                if isinstance(node, (ast.Import, ast.ImportFrom))
                else []
            )
            if "hashlib" in names and rel != "memlens/sha256.py":
                found.append(f"{rel}: imports hashlib")
    assert found == []
