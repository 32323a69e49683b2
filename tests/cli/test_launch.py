"""How the servers run a profiled program (memlens.launch.ProfiledProgram): into a run file of its
own, in a process group of its own, stopped cleanly (the run is still written, and the processes
the program started end with it)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from memlens.launch import ProfiledProgram
from memlens.runfile import reader
from memlens.store import Store

SPAWNS = """\
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print("child", child.pid, flush=True)
data = [bytearray(1000) for _ in range(100)]
time.sleep(120)
"""


def test_a_program_writes_its_own_run_and_its_output_is_seen(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import sys\nprint('out')\nprint('err', file=sys.stderr)\n")
    lines: list[str] = []
    program = ProfiledProgram(tmp_path, "app.py", on_line=lines.append)
    assert program.run_path.parent == Store(tmp_path).runs_dir
    program.start()
    assert program.wait(120) == 0
    assert program.failure(0) is None
    assert reader.read(program.run_path).info.command == ("python", "app.py")
    assert Store(tmp_path).latest() == program.run_path
    assert program.stdout == "out\n"
    assert "err" in lines
    assert "out" in lines


def test_stop_writes_the_run_and_ends_what_the_program_started(tmp_path: Path) -> None:
    (tmp_path / "spawns.py").write_text(SPAWNS)
    lines: list[str] = []
    program = ProfiledProgram(tmp_path, "spawns.py", on_line=lines.append)
    program.start()
    deadline = time.monotonic() + 60
    while not any(line.startswith("child ") for line in lines):
        assert time.monotonic() < deadline, "the program did not start its child"
        assert program.wait(0.05) is None
    child = int(next(line for line in lines if line.startswith("child ")).split()[1])
    code = program.stop()
    assert code != 0
    run = reader.read(program.run_path)
    assert not run.info.complete
    deadline = time.monotonic() + 30
    while _alive(child):  # the child got the group's SIGTERM too
        assert time.monotonic() < deadline, "the program's child outlived it"
        time.sleep(0.05)


def test_a_program_that_cannot_run_says_why_in_one_line(tmp_path: Path) -> None:
    program = ProfiledProgram(tmp_path, "missing.py")
    program.start()
    code = program.wait(120)
    assert code == 2
    assert program.failure(code) == "can't open file 'missing.py': no such file"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (its parent, memlens run's program, is gone; init reaps it soon) counts as ended.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
