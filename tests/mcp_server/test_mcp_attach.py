"""`memlens mcp --allow-run`'s attach_process, end to end: a real server process attaches to a
real Python process (on 3.14+), or says in one line why it cannot (before 3.14)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlens.runfile import reader
from memlens.store import Store
from tests.mcp_server.test_mcp_e2e import connect, error, ok

#: Allocates 100 kB every 10 ms, keeping the last 50, until killed.
TARGET = """
import time
kept = []
print("ready", flush=True)
while True:
    kept.append(bytearray(100_000))  # @alloc
    del kept[:-50]
    time.sleep(0.01)
"""


@pytest.fixture
def target(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    (tmp_path / "target.py").write_text(textwrap.dedent(TARGET))
    proc = subprocess.Popen(
        [sys.executable, "target.py"], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        yield proc
    finally:
        proc.kill()
        proc.wait()


async def test_attach_process_attaches_for_some_seconds(
    tmp_path: Path, target: subprocess.Popen[str]
) -> None:
    async with connect(tmp_path, "--allow-run") as client:
        if sys.version_info < (3, 14):
            message = await error(client, "attach_process", pid=target.pid, duration_s=1)
            assert message == (
                f"memlens: cannot attach to process {target.pid}: attaching needs Python "
                f"3.14 or newer: process {target.pid} runs Python "
                f"{sys.version_info[0]}.{sys.version_info[1]}"
            )
            assert Store(tmp_path).latest() is None
            return
        began = time.monotonic()
        done = await ok(client, "attach_process", pid=target.pid, duration_s=1)
        assert time.monotonic() - began < 60
    assert done["run"]["attached"] is True
    assert done["run"]["pid"] == target.pid
    assert f"memlens: detached from process {target.pid}" in done["messages"]
    assert done["top_lines"][0]["path"] == str(tmp_path / "target.py")
    latest = Store(tmp_path).latest()
    assert latest is not None
    assert str(latest) == done["run"]["path"]
    assert reader.read(latest).info.attached
    assert target.poll() is None  # the process goes on
