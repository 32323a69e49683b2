"""The `memlens` console script and `python -m memlens` start the language server with `lsp`, and
it answers initialize."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def _initialize(cmd: list[str]) -> dict[str, Any]:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}},
        }
    ).encode()
    exit_ = json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode()
    data = b"".join(b"Content-Length: %d\r\n\r\n" % len(m) + m for m in (body, exit_))
    proc = subprocess.run(cmd, input=data, capture_output=True, timeout=60, check=False)
    out = proc.stdout
    header, _, rest = out.partition(b"\r\n\r\n")
    length = next(
        int(h.split(b":")[1])
        for h in header.split(b"\r\n")
        if h.lower().startswith(b"content-length")
    )
    result: dict[str, Any] = json.loads(rest[:length])["result"]
    return result


@pytest.mark.parametrize(
    "cmd",
    [
        [str(Path(sys.executable).with_name("memlens")), "lsp"],
        [sys.executable, "-m", "memlens", "lsp"],
    ],
    ids=["console-script", "module"],
)
def test_entry_point_answers_initialize(cmd: list[str]) -> None:
    result = _initialize(cmd)
    assert result["serverInfo"]["name"] == "memlens"
    caps = result["capabilities"]
    assert caps["inlayHintProvider"] == {"resolveProvider": True}
    assert caps["codeLensProvider"] == {"resolveProvider": False}
    assert caps["hoverProvider"] is True
    assert caps["positionEncoding"] == "utf-16"
    assert sorted(caps["executeCommandProvider"]["commands"]) == [
        "memlens.chooseRun",
        "memlens.clearBaseline",
        "memlens.documentRun",
        "memlens.jumpToPeak",
        "memlens.lineChanges",
        "memlens.listRuns",
        "memlens.runFile",
        "memlens.setBaseline",
        "memlens.setMoment",
        "memlens.summary",
        "memlens.timeline",
    ]
