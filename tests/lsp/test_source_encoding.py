"""A source saved in a declared encoding (PEP 263) is recognised in the editor: the server
digests the buffer the way the run's file was read (memlens.source), so a run that kept only
the file's digest still shows its figures on the buffer's lines, at exact positions."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsp_workspace import MiB, info, write_run
from raw_client import RawClient
from tests.runs import new_run, source

from memlens.annotate import line_label
from memlens.model import LineStats

TEXT = '# -*- coding: latin-1 -*-\ns = "café" * 10\ndata = [s] * 1_000_000\n'


@pytest.fixture
def client() -> Iterator[RawClient]:
    c = RawClient()
    yield c
    assert c.close() == 0


def _hints(c: RawClient, uri: str) -> list[tuple[int, int, str]]:
    result: list[dict[str, Any]] = c.call(
        "textDocument/inlayHint",
        {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 0}, "end": {"line": 3, "character": 0}},
        },
    )["result"]
    return [(h["position"]["line"], h["position"]["character"], h["label"]) for h in result]


def test_a_latin_1_source_known_by_its_digest_shows_its_hints(
    tmp_path: Path, client: RawClient
) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    path = folder / "app.py"
    data = TEXT.encode("latin-1")
    path.write_bytes(data)
    line3 = LineStats(alloc_bytes=8 * MiB, alloc_count=1, peak_bytes=8 * MiB)
    # The recorded file without its text (as a run from a size-limited or older writer): only
    # the digest of its bytes on disk says the buffer is the profiled file.
    sf = source(str(path), None, {3: line3}, sha256=hashlib.sha256(data).hexdigest())
    write_run(folder, new_run([sf], run_info=info(8 * MiB)), "20261122-100000-1")
    client.initialize([folder.as_uri()])
    client.wait_notification(lambda m: m["method"] == "memlens/runLoaded", 30)
    uri = path.as_uri()
    # What an editor holds: the text decoded from latin-1 (UTF-8 would give other bytes).
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": TEXT}},
    )
    last = TEXT.splitlines()[2]
    assert _hints(client, uri) == [(2, len(last), line_label(line3, "peak"))]
