"""`memlens run`'s fixed cost: what it imports is overhead on every profiled program.

benchmarks/run.py measures the cost; this test keeps the modules that made up most of it
(measured: dataclasses + inspect ~14 ms CPU, pathlib ~4 ms, typing ~3 ms, shutil ~2 ms)
out of the run path: argument parsing, tracing, building and writing the run file. The MCP
SDK (`memlens mcp` only) never loads there either.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = (
    "dataclasses",
    "inspect",
    "typing",
    "pathlib",
    "platform",
    "shutil",
    "secrets",
    "rich",
    "mcp",
    "memlens.mcp_server",
)

CHECK = """
import atexit, sys
heavy = {heavy!r}
atexit.register(lambda: print("LOADED", *[m for m in heavy if m in sys.modules], file=sys.stderr))
from memlens.cli import main
raise SystemExit(main({argv!r}))
"""


@pytest.mark.parametrize("mode", [[], ["--sample", "128KiB"]], ids=["exact", "sampling"])
def test_run_path_avoids_costly_imports(tmp_path: Path, mode: list[str]) -> None:
    script = tmp_path / "app.py"
    script.write_text("data = [bytearray(1000) for _ in range(100)]\nprint(len(data))\n")
    out = tmp_path / "r.mlrun"
    argv = ["run", "--no-report", "-o", str(out), *mode, str(script)]
    proc = subprocess.run(
        [sys.executable, "-c", CHECK.format(heavy=HEAVY, argv=argv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "100\n"
    assert out.is_file()
    loaded = [line for line in proc.stderr.splitlines() if line.startswith("LOADED")]
    assert loaded == ["LOADED"], proc.stderr
