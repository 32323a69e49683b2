"""What `memlens run` records and shows: the run file (`-o`, sampling, filters, the
timeline), the report and `--json`, `show`/`annotate`/`flow` on saved runs, one-line errors,
the status line on a terminal, the bundled examples.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memlens.runfile import reader
from tests.cli.memlens_cmd import latest_name, latest_run, memlens, plain

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"


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
    run = reader.read(out)
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


@pytest.mark.any_interpreter
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


@pytest.mark.any_interpreter
def test_bad_option_exits_2(tmp_path: Path) -> None:
    proc = memlens("run", "--sample", "lots", str(SCRIPTS / "allocs.py"), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "memlens: --sample: not a size: 'lots'"
    proc = memlens("run", "--no-such-option", cwd=tmp_path)
    assert proc.returncode == 2


@pytest.mark.any_interpreter
def test_unreadable_run_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlrun"
    bad.write_bytes(b"not a run at all")
    proc = memlens("show", str(bad), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == f"memlens: cannot read {bad}: not a memlens run file\n"


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


pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)


MiB = 1024 * 1024


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


@pytest.mark.any_interpreter
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


def _read_all(fd: int) -> bytes:

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
    assert err.endswith("\r\x1b[Kmemlens: run written to " + latest_name(tmp_path) + "\r\n")


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
        run = reader.read(out)
        counts[ms] = len(run.timeline)
        # The program held 12 MiB at the end; the timeline saw it grow.
        assert max(p.traced_bytes for p in run.timeline) >= 11 * MiB
    # 1.2 s of program: ~240 points every 5 ms, ~24 every 50 ms (the machine may be slow).
    assert counts["50"] >= 5
    assert counts["5"] >= 3 * counts["50"]
