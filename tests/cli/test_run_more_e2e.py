"""More `memlens run` end to end: threads, fork, signal handlers, atexit, filters, --json,
flow --compare. Real scripts in a subprocess, each compared with plain Python where it matters.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memlens import fileformat
from memlens.model import Run
from memlens.store import Store
from tests.cli.memlens_cmd import memlens, plain

pytest.importorskip("memlens.tracer", reason="needs the native tracer (memlens.tracer)")

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"
MiB = 1024 * 1024


def latest_run(cwd: Path) -> Run:
    path = Store(cwd).latest()
    assert path is not None
    return fileformat.read(path)


def test_waits_for_non_daemon_threads_like_python(tmp_path: Path) -> None:
    script = SCRIPTS / "threads.py"
    proc = memlens("run", "--no-report", str(script), cwd=tmp_path)
    assert proc.returncode == plain(script, cwd=tmp_path).returncode == 0
    assert proc.stdout == "main done\nworker done\n"
    run = latest_run(tmp_path)
    assert run.info.complete
    # The worker allocated after the main thread had finished: still part of the run.
    assert 8 * MiB <= run.files[str(script)].lines[9].live_bytes < 8 * MiB + 4096


def test_forked_child_exits_normally_and_writes_no_run(tmp_path: Path) -> None:
    script = SCRIPTS / "forker.py"
    reference = plain(script, cwd=tmp_path)
    proc = memlens("run", "--no-report", str(script), cwd=tmp_path, timeout=60)
    assert proc.returncode == reference.returncode == 0
    assert sorted(proc.stdout.splitlines()) == sorted(reference.stdout.splitlines())
    assert "parent saw 4" in proc.stdout
    # Only the parent reports; the child (never traced) stays quiet.
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("memlens:")] == [
        ln for ln in proc.stderr.splitlines() if ln.startswith("memlens: run written to")
    ]
    assert len(Store(tmp_path).run_files()) == 1
    assert latest_run(tmp_path).info.exit_code == 0


def test_programs_own_sigterm_handler_is_left_alone(tmp_path: Path) -> None:
    script = SCRIPTS / "own_sigterm.py"
    reference = plain(script, cwd=tmp_path)
    proc = memlens("run", "--no-report", str(script), cwd=tmp_path)
    assert proc.returncode == reference.returncode == 7
    assert proc.stdout == reference.stdout == "own handler\n"
    run = latest_run(tmp_path)
    assert run.info.complete
    assert run.info.exit_code == 7
    assert run.files[str(script)].lines[13].live_bytes >= 3 * MiB


def test_uncaught_sigint_runs_atexit_then_dies_by_sigint(tmp_path: Path) -> None:
    script = SCRIPTS / "interrupt_atexit.py"
    reference = plain(script, cwd=tmp_path)
    proc = memlens("run", "--no-report", str(script), cwd=tmp_path)
    assert proc.returncode == reference.returncode == -2
    assert proc.stdout == reference.stdout == "atexit ran\n"
    tb = [ln for ln in proc.stderr.splitlines() if not ln.startswith("memlens:")]
    assert tb == reference.stderr.splitlines()
    assert tb[-1] == "KeyboardInterrupt"
    run = latest_run(tmp_path)
    assert not run.info.complete
    assert run.info.exit_code is None
    assert run.files[str(script)].lines[6].live_bytes >= 2 * MiB


def test_exit_code_is_truncated_like_the_os_does(tmp_path: Path) -> None:
    script = SCRIPTS / "uses_helper.py"
    proc = memlens("run", "--no-report", str(script), cwd=tmp_path)
    assert proc.returncode == plain(script, cwd=tmp_path).returncode == 9
    assert latest_run(tmp_path).info.exit_code == 9


def test_exclude_charges_the_calling_line(tmp_path: Path) -> None:
    script = SCRIPTS / "uses_helper.py"
    helper = str(SCRIPTS / "helper.py")
    assert memlens("run", "--no-report", str(script), cwd=tmp_path).returncode == 9
    run = latest_run(tmp_path)
    assert run.files[helper].lines[2].live_bytes >= 4 * MiB
    assert run.files[str(script)].lines[5].live_bytes < 4 * MiB
    assert run.files[str(script)].lines[5].incl_live_bytes >= 4 * MiB

    proc = memlens("run", "--no-report", "--exclude", "helper.py", str(script), cwd=tmp_path)
    assert proc.returncode == 9
    run = latest_run(tmp_path)
    assert helper not in run.files or 2 not in run.files[helper].lines
    assert run.files[str(script)].lines[5].live_bytes >= 4 * MiB

    proc = memlens("run", "--no-report", "--include", "help*.py", str(script), cwd=tmp_path)
    assert proc.returncode == 9
    run = latest_run(tmp_path)
    assert str(script) not in run.files
    assert run.files[helper].lines[2].live_bytes >= 4 * MiB


def test_json_dash_prints_the_export_after_the_programs_output(tmp_path: Path) -> None:
    script = SCRIPTS / "allocs.py"
    proc = memlens("run", "--json", "-", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    program = plain(script, cwd=tmp_path).stdout
    assert proc.stdout.startswith(program)
    doc = json.loads(proc.stdout[len(program) :])
    assert doc["run"]["exit_code"] == 0
    assert doc["run"]["complete"] is True
    assert doc["run"]["command"] == ["python", str(script)]
    line7 = doc["files"][str(script)]["lines"]["7"]
    assert 50 * MiB <= line7["live_bytes"] < 50 * MiB + 4096
    assert "share of peak" not in proc.stdout


def test_json_file_keeps_the_programs_output_apart(tmp_path: Path) -> None:
    script = SCRIPTS / "allocs.py"
    program = plain(script, "x", cwd=tmp_path).stdout
    out = tmp_path / "out" / "run.json"
    out.parent.mkdir()
    proc = memlens("run", "--no-report", "--json", "out/run.json", str(script), "x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == program  # what a script reads on stdout is the program's, alone
    assert proc.stderr.splitlines()[-1] == "memlens: JSON written to out/run.json"
    doc = json.loads(out.read_text())
    assert doc["run"]["command"] == ["python", str(script), "x"]
    assert 50 * MiB <= doc["files"][str(script)]["lines"]["7"]["live_bytes"] < 50 * MiB + 4096
    assert not list(out.parent.glob("*.tmp"))
    # With the report: the report follows the program's output; the JSON is in the file.
    proc = memlens("run", "--json", str(out), str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "share of peak" in proc.stdout
    assert json.loads(out.read_text())["run"]["command"] == ["python", str(script)]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # --json once took no value: `--json app.py data` must not overwrite app.py.
        (("--json", "allocs.py", "helper.py"), "memlens: --json allocs.py: a Python file; "),
        (("--json", "nowhere/x.json", "allocs.py"), "memlens: cannot write nowhere/x.json: "),
    ],
)
def test_json_file_is_checked_before_the_program_runs(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    import shutil

    for name in ("allocs.py", "helper.py"):
        shutil.copy(SCRIPTS / name, tmp_path)
    before = (tmp_path / "allocs.py").read_text()
    proc = memlens("run", *args, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""  # the program did not run
    assert proc.stderr.startswith(message)
    assert len(proc.stderr.splitlines()) == 1
    assert (tmp_path / "allocs.py").read_text() == before


def test_report_ranks_by_alloc_and_limits_rows(tmp_path: Path) -> None:
    proc = memlens("run", "--top", "2", "--by", "alloc", str(SCRIPTS / "allocs.py"), cwd=tmp_path)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("#  line"))
    assert lines[header].split()[2] == "allocated"
    assert lines[header + 1].split()[:2] == ["1", f"{SCRIPTS / 'allocs.py'}:7"]
    assert lines[header + 2].split()[0] == "2"
    assert lines[header + 3] == ""  # two rows, then the listing


def test_flow_compare_puts_each_runs_figures_in_a_node(tmp_path: Path) -> None:
    script = SCRIPTS / "uses_helper.py"
    assert memlens("run", "--no-report", "-o", "a.mlrun", str(script), cwd=tmp_path).returncode
    assert memlens("run", "--no-report", "-o", "b.mlrun", str(script), cwd=tmp_path).returncode
    proc = memlens("flow", "--compare", "a.mlrun", "b.mlrun", "--dot", "g.dot", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "memlens: flow graph written to g.dot\n"
    text = (tmp_path / "g.dot").read_text()
    assert text.startswith("digraph memlens {")
    node = next(ln for ln in text.splitlines() if f"{SCRIPTS / 'helper.py'}:2" in ln)
    assert "\\na: 4.0 MiB / 4.0 MiB\\nb: 4.0 MiB / 4.0 MiB" in node
    caller = next(ln for ln in text.splitlines() if f"{SCRIPTS / 'uses_helper.py'}:5" in ln)
    assert "/ 4.0 MiB\\nb: " in caller
    assert " -> " in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "--timeline-interval", "-1", "x.py"), "memlens: intervals must not be negative"),
        (("run", "--sample", "0", str(SCRIPTS / "allocs.py")), "memlens: --sample: "),
        (("annotate", "nowhere.py", "missing.mlrun"), "memlens: cannot read missing.mlrun"),
        (("flow", "--compare", "missing.mlrun", "--dot", "g.dot"), "memlens: cannot read"),
    ],
)
def test_more_errors_are_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    proc = memlens(*args, cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(message)


def test_annotate_unknown_file_is_one_line(tmp_path: Path) -> None:
    assert memlens("run", "--no-report", str(SCRIPTS / "allocs.py"), cwd=tmp_path).returncode == 0
    proc = memlens("annotate", "nowhere.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "memlens: the run has no figures for nowhere.py\n"
    proc = memlens("show", "--file", "allocs.py", "--top", "1", cwd=tmp_path)
    assert proc.returncode == 0
    assert f"{SCRIPTS / 'allocs.py'}:\n" in proc.stdout


@pytest.mark.parametrize(
    "args",
    [("--top", "3", "-m", "x", "--no-report", "--", "y", "--help"), ("--", "-x", "--json")],
)
def test_everything_after_the_script_belongs_to_the_program(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    script = SCRIPTS / "allocs.py"
    proc = memlens("run", "--no-report", str(script), *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == plain(script, *args, cwd=tmp_path).stdout
    assert proc.stdout.splitlines()[0] == f"argv {list(args)}"
    assert latest_run(tmp_path).info.command == ("python", str(script), *args)


def _read_all(fd: int) -> bytes:
    import os

    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side of the pty is closed
            return data
        if not chunk:
            return data
        data += chunk


def test_terminal_shared_with_the_program_gets_one_line_and_a_rich_report(
    tmp_path: Path,
) -> None:
    import os
    import pty

    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlens", "run", "--top", "1", str(SCRIPTS / "slow.py")],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=sub,
        stderr=sub,
        env={**os.environ, "COLUMNS": "120"},
    )
    os.close(sub)
    text = _read_all(main).decode()
    os.close(main)
    assert proc.wait(timeout=60) == 0
    lines = text.split("\r\n")
    assert lines[0] == (
        f"memlens: profiling {SCRIPTS / 'slow.py'} (Ctrl-C stops it; the run is still written)"
    )
    assert lines[1] == "slow done"  # not mixed with a redrawn status line
    assert "\x1b[K" not in text
    assert "\x1b[1m" in text  # rich styles the report on a terminal
    assert "slow.py:5" in text


def stderr_on_a_terminal(args: list[str], cwd: Path) -> tuple[int, bytes, str]:
    """`memlens ARGS` with stderr on a pseudo-terminal: exit code, stdout, what the terminal got."""
    import os
    import pty

    main, sub = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlens", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=sub,
    )
    os.close(sub)
    err = _read_all(main).decode()
    os.close(main)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_live_status_line_when_only_stderr_is_a_terminal(tmp_path: Path) -> None:
    code, out, err = stderr_on_a_terminal(
        ["run", "--no-report", str(SCRIPTS / "slow.py")], tmp_path
    )
    assert code == 0
    assert out == b"slow done\n"  # stdout untouched
    assert "\r\x1b[K⠋ memlens: profiling" in err
    assert " MiB traced (peak " in err
    # The status line is erased before memlens's last message.
    assert err.endswith("\r\x1b[Kmemlens: run written to " + _run_name(tmp_path) + "\r\n")


def _run_name(cwd: Path) -> str:
    path = Store(cwd).latest()
    assert path is not None
    return str(path.relative_to(cwd))


@pytest.mark.parametrize("flag", ["--json=-", "--top=10"])
def test_closed_stdout_keeps_the_programs_exit_code(tmp_path: Path, flag: str) -> None:
    import os

    r, w = os.pipe()
    os.close(r)  # nobody reads the report: writing it fails with EPIPE
    proc = subprocess.run(
        [sys.executable, "-m", "memlens", "run", flag, str(SCRIPTS / "uses_helper.py")],
        cwd=tmp_path,
        stdout=w,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    os.close(w)
    assert proc.returncode == 9
    assert proc.stderr.startswith("memlens: run written to ")
    assert len(proc.stderr.splitlines()) == 1  # no "Exception ignored ... BrokenPipeError"
    assert latest_run(tmp_path).info.exit_code == 9


@pytest.mark.parametrize(
    "target",
    [
        ("syntax_error.py",),  # SyntaxError: no "Traceback" header, caret, exit 1
        ("pkgmod", "a"),  # a directory with __main__.py
        ("-m", "pkgmod", "a"),  # a package run with -m
    ],
)
def test_same_output_and_exit_code_as_python(tmp_path: Path, target: tuple[str, ...]) -> None:
    import shutil

    shutil.copy(SCRIPTS / "syntax_error.py", tmp_path)
    shutil.copytree(SCRIPTS / "pkgmod", tmp_path / "pkgmod")
    reference = subprocess.run(
        [sys.executable, *target], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    proc = memlens("run", "--no-report", *target, cwd=tmp_path)
    assert proc.returncode == reference.returncode
    assert proc.stdout == reference.stdout
    assert [ln for ln in proc.stderr.splitlines() if not ln.startswith("memlens:")] == (
        reference.stderr.splitlines()
    )
    if target[0] == "syntax_error.py":
        assert reference.returncode == 1
        assert reference.stderr.splitlines()[-1].startswith("SyntaxError:")
    else:
        assert reference.stdout == "pkg main __main__ ['a']\n"


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("example", "by", "line"),
    [
        ("leaky_cache.py", "live", 16),  # the cached history dicts: the leak
        ("pipeline_peak.py", "peak", 23),  # records built while the raw rows are alive
        ("numpy_job.py", "peak", 11),  # the expression's full-size temporaries
        ("peak_then_keep.py", "live", 22),  # the index built after the peak, kept to the end
    ],
)
def test_examples_point_at_their_story(tmp_path: Path, example: str, by: str, line: int) -> None:
    if example == "numpy_job.py":
        pytest.importorskip("numpy")
    proc = memlens("run", "--top", "1", "--by", by, str(EXAMPLES / example), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("#  line"))
    assert lines[header + 1].split()[:2] == ["1", f"{EXAMPLES / example}:{line}"]


def test_timeline_interval_sets_the_sampling_period(tmp_path: Path) -> None:
    counts = {}
    for ms in ("5", "50"):
        out = tmp_path / f"t{ms}.mlrun"
        proc = memlens(
            "run", "--no-report", "--timeline-interval", ms, "-o", str(out),
            str(SCRIPTS / "slow.py"), cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        run = fileformat.read(out)
        counts[ms] = len(run.timeline)
        # The program held 12 MiB at the end; the timeline saw it grow.
        assert max(p.traced_bytes for p in run.timeline) >= 11 * MiB
    # 1.2 s of program: ~240 points every 5 ms, ~24 every 50 ms (the machine may be slow).
    assert counts["50"] >= 5
    assert counts["5"] >= 3 * counts["50"]


def test_program_that_closes_its_streams(tmp_path: Path) -> None:
    script = SCRIPTS / "closes_streams.py"
    reference = plain(script, cwd=tmp_path)
    proc = memlens("run", str(script), cwd=tmp_path)
    assert proc.returncode == reference.returncode == 0
    assert proc.stdout == reference.stdout == "bye\n"
    assert proc.stderr == reference.stderr == ""
    run = latest_run(tmp_path)
    assert run.info.complete
    assert run.files[str(script)].lines[4].live_bytes >= 10**6
