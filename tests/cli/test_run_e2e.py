"""`memlens run` end to end: real scripts in a subprocess, as a user runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlens import fileformat
from memlens.store import Store
from tests.cli.memlens_cmd import memlens

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"


def latest_run(cwd: Path) -> fileformat.Run:  # type: ignore[name-defined]
    path = Store(cwd).latest()
    assert path is not None
    return fileformat.read(path)


def test_argv_name_file_path0_and_report(tmp_path: Path) -> None:
    script = SCRIPTS / "allocs.py"
    proc = memlens("run", str(script), "a", "--flag", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[:5] == [
        "argv ['a', '--flag']",
        "name __main__",
        f"file {script}",
        f"path0 {script.parent}",
        "done",
    ]
    # The report follows the program's output; its first row is the 50 MiB line.
    header = next(i for i, line in enumerate(out) if line.lstrip().startswith("#  line"))
    first = out[header + 1].split()
    assert first[0] == "1"
    assert first[1].endswith("allocs.py:7")
    assert " ".join(first[2:4]) == "50.0 MiB"
    assert "memlens: run written to" in proc.stderr
    run = latest_run(tmp_path)
    assert run.info.complete
    assert run.info.exit_code == 0
    assert run.info.command == ("python", str(script), "a", "--flag")
    line7 = run.files[str(script)].lines[7]
    assert 50 * 1024 * 1024 <= line7.live_bytes < 50 * 1024 * 1024 + 4096


def test_stdout_is_byte_identical_with_no_report(tmp_path: Path) -> None:
    script = SCRIPTS / "allocs.py"
    plain = subprocess.run(
        [sys.executable, str(script), "x"], cwd=tmp_path, capture_output=True, check=True
    )
    proc = subprocess.run(
        [sys.executable, "-m", "memlens", "run", "--no-report", str(script), "x"],
        cwd=tmp_path,
        capture_output=True,
        check=True,
    )
    assert proc.stdout == plain.stdout


def test_stdin_passes_through(tmp_path: Path) -> None:
    proc = memlens("run", "--no-report", str(SCRIPTS / "stdin_echo.py"), cwd=tmp_path, stdin="hi\n")
    assert proc.returncode == 0
    assert proc.stdout == "HI\n"


@pytest.mark.parametrize(
    ("how", "code", "stderr_has"),
    [
        ("code", 3, None),
        ("none", 0, None),
        ("msg", 1, "fatal: bad things"),
        ("raise", 1, "ValueError: boom"),
    ],
)
def test_exit_codes_and_tracebacks(tmp_path: Path, how: str, code: int, stderr_has: str) -> None:
    script = SCRIPTS / "exits.py"
    plain = subprocess.run(
        [sys.executable, str(script), how], capture_output=True, text=True, check=False
    )
    proc = memlens("run", "--no-report", str(script), how, cwd=tmp_path)
    assert proc.returncode == plain.returncode == code
    assert proc.stdout == plain.stdout
    if stderr_has:
        assert stderr_has in proc.stderr
    if how == "raise":
        # The same traceback as plain Python: no memlens or runpy frames.
        tb = [ln for ln in proc.stderr.splitlines() if not ln.startswith("memlens:")]
        assert tb == plain.stderr.splitlines()
    run = latest_run(tmp_path)
    assert run.info.exit_code == code
    assert run.info.complete


def test_module_mode(tmp_path: Path) -> None:
    import shutil

    shutil.copytree(SCRIPTS / "pkgmod", tmp_path / "pkgmod")
    proc = memlens("run", "--no-report", "-m", "pkgmod.tool", "p", "--q", cwd=tmp_path)
    assert proc.returncode == 5
    assert proc.stdout == "module __main__ ['p', '--q'] 10000\n"
    run = latest_run(tmp_path)
    assert str(tmp_path / "pkgmod" / "tool.py") in run.files
    assert run.info.command == ("python", "-m", "pkgmod.tool", "p", "--q")


def _start_sleeper(tmp_path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlens", "run", "--no-report", str(SCRIPTS / "sleeper.py")],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    return proc


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signals_still_write_an_incomplete_run(tmp_path: Path, signum: int) -> None:
    proc = _start_sleeper(tmp_path)
    time.sleep(0.2)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signum  # died by the signal, as plain Python does
    if signum == signal.SIGINT:
        assert "KeyboardInterrupt" in err
    run = latest_run(tmp_path)
    assert run.info.complete is False
    assert run.info.exit_code is None
    sleeper = run.files[str(SCRIPTS / "sleeper.py")]
    assert sleeper.lines[3].live_bytes >= 5 * 1024 * 1024


def test_output_option_and_sampling_mode(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "my.mlrun"
    proc = memlens(
        "run",
        "--no-report",
        "--sample",
        "64KiB",
        "-o",
        str(out),
        str(SCRIPTS / "allocs.py"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    run = fileformat.read(out)
    assert run.info.mode == "sampling"
    assert run.info.sample_interval_bytes == 64 * 1024
    assert not (tmp_path / ".memlens").exists()


def test_show_annotate_and_flow_on_a_saved_run(tmp_path: Path) -> None:
    assert memlens("run", "--no-report", str(SCRIPTS / "allocs.py"), cwd=tmp_path).returncode == 0
    show = memlens("show", "--top", "1", cwd=tmp_path)
    assert show.returncode == 0
    rows = [ln.split() for ln in show.stdout.splitlines() if ln.strip().startswith("1 ")]
    assert rows[0][1].endswith("allocs.py:7")
    ann = memlens("annotate", str(SCRIPTS / "allocs.py"), cwd=tmp_path)
    assert ann.returncode == 0
    line7 = ann.stdout.splitlines()[6]
    assert line7.startswith("7  big = bytearray(50 * 1024 * 1024)")
    assert line7.endswith("# 50.0 MiB at peak · 2 allocs")
    dot = tmp_path / "g.dot"
    flow = memlens("flow", "--dot", str(dot), cwd=tmp_path)
    assert flow.returncode == 0
    text = dot.read_text()
    assert text.startswith("digraph memlens {")
    assert "allocs.py:7" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("run", "no_such_script.py"),
            "memlens: can't open file 'no_such_script.py': no such file",
        ),
        (("run", "-m", "no_such_module_xyz"), "memlens: no module named 'no_such_module_xyz'"),
        (("show", "missing.mlrun"), "memlens: cannot read missing.mlrun: no such file"),
        (("show",), "memlens: no runs yet in"),
    ],
)
def test_errors_are_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    proc = memlens(*args, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(message)


def test_bad_option_exits_2(tmp_path: Path) -> None:
    proc = memlens("run", "--sample", "lots", str(SCRIPTS / "allocs.py"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "memlens: --sample: not a size: 'lots'"
    proc = memlens("run", "--no-such-option", cwd=tmp_path)
    assert proc.returncode == 2


def test_unreadable_run_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlrun"
    bad.write_bytes(b"not a run at all")
    proc = memlens("show", str(bad), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"memlens: cannot read {bad}: not a memlens run file\n"


def test_python_dash_m_memlens_equals_console_script(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("memlens")
    if not exe.exists():
        pytest.skip("console script not installed next to this interpreter")
    proc = subprocess.run(
        [str(exe), "--version"], capture_output=True, text=True, check=False, env=os.environ
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("memlens ")


def test_memlens_set_up_is_not_traced_so_small_programs_get_their_peak(tmp_path: Path) -> None:
    # memlens's own start-up (reading and compiling the program) must not be the "peak".
    script = tmp_path / "tiny.py"
    script.write_text("data = [bytes(1000) for i in range(20)]\n")
    proc = memlens("run", "--no-report", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = latest_run(tmp_path)
    line1 = run.files[str(script)].lines[1]
    assert line1.peak_bytes >= 20 * 1000
    assert line1.peak_bytes <= run.info.peak_traced_bytes < line1.peak_bytes + 64 * 1024
