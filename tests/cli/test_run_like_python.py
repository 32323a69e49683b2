"""`memlens run` leaves the program as plain Python runs it: argv, `__main__`, streams, exit
codes and tracebacks, signals and their handlers, threads, fork, atexit. Real scripts in a
subprocess, compared with plain Python.
"""

from __future__ import annotations

import builtins
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlens.store import Store
from memlens.tracing import runner
from tests.cli.memlens_cmd import command, latest_run, memlens, plain

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"


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


def test_python_dash_m_memlens_equals_console_script(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("memlens")
    if not exe.exists():
        pytest.skip("console script not installed next to this interpreter")
    proc = subprocess.run(
        [str(exe), "--version"], capture_output=True, text=True, check=False, env=os.environ
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("memlens ")


pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)


MiB = 1024 * 1024


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


@pytest.mark.parametrize("flag", ["--json=-", "--top=10"])
def test_closed_stdout_keeps_the_programs_exit_code(tmp_path: Path, flag: str) -> None:
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


@pytest.mark.parametrize(
    "source",
    [
        b"# -*- coding: latin-1 -*-\nprint(ascii('caf\xe9'))\n",  # the cookie decides
        b"\xef\xbb\xbfprint(ascii('caf\xc3\xa9'))\n",  # so does a BOM
        # memlens's own `from __future__ import annotations` does not reach the program
        b"def f(x: int) -> None: pass\nprint(f.__annotations__)\n",
        b"import sys\nprint(sys.flags.optimize, __debug__)\nassert False, 'asserts run'\n",
        b"print(1)\nprint(2)  # \x00 a NUL byte\n",  # the interpreter's own SyntaxError
        b"\xef\xbb\xbfx = 1  # \x00\n",  # ... on its line as decoded
        b"# coding: latin-1\nx = '\xe9'  # \x00\n",
        b"print(1)\rprint(2)\r\nx = 3  # \x00\n",  # (old Mac and Windows line ends)
        b"print(1)\nx = (\n",
    ],
    ids=[
        "coding-cookie",
        "bom",
        "no-future-flags",
        "asserts",
        "nul-byte",
        "nul-after-bom",
        "nul-after-cookie",
        "nul-after-cr",
        "syntax-error",
    ],
)
def test_script_compiles_as_python_compiles_it(tmp_path: Path, source: bytes) -> None:
    if b"\x00" in source and sys.version_info < (3, 11, 4):
        pytest.skip("before 3.11.4 the tokenizer reads a NUL byte as the end of its line")
    (tmp_path / "prog.py").write_bytes(source)
    reference = subprocess.run(
        [sys.executable, "prog.py"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    proc = memlens("run", "--no-report", "prog.py", cwd=tmp_path)
    assert proc.returncode == reference.returncode
    assert proc.stdout == reference.stdout
    assert [ln for ln in proc.stderr.splitlines() if not ln.startswith("memlens:")] == (
        reference.stderr.splitlines()
    )
    if b"\x00" in source:
        assert reference.stderr.splitlines()[-1] == (
            "SyntaxError: source code cannot contain null bytes"
        )


def test_optimize_level_reaches_the_script(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text("print(__debug__)\nassert False\nprint('after')\n")
    reference = command([sys.executable, "-O", "prog.py"], cwd=tmp_path)
    proc = command(
        [sys.executable, "-O", "-m", "memlens", "run", "--no-report", "prog.py"], cwd=tmp_path
    )
    assert (proc.returncode, proc.stdout) == (reference.returncode, reference.stdout)
    assert reference.stdout == "False\nafter\n"


def test_a_script_is_not_compiled_by_builtins_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """builtins.compile first creates the ast module's classes: 10-13 M instructions a run
    that plain python does not spend (runner._compile)."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("builtins.compile was called")

    monkeypatch.setattr(builtins, "compile", refuse)
    code = runner._compile(b"x = 6 * 7\n", "/somewhere/prog.py")
    assert code.co_filename == "/somewhere/prog.py"
    namespace: dict[str, object] = {}
    exec(code, namespace)  # noqa: S102
    assert namespace["x"] == 42


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


@pytest.mark.parametrize("as_module", [False, True])
def test_program_chaining_to_the_previous_sigterm_handler(tmp_path: Path, as_module: bool) -> None:
    """The program finds the default action where memlens handles SIGTERM (so it finishes its
    own shutdown instead of calling memlens's handler), and `__builtins__` is a module."""
    shutil.copy(SCRIPTS / "chains_sigterm.py", tmp_path)
    target = ("-m", "chains_sigterm") if as_module else ("chains_sigterm.py",)
    reference = command([sys.executable, *target], cwd=tmp_path)
    proc = memlens("run", "--no-report", *target, cwd=tmp_path)
    assert reference.stdout == (
        "builtins: module\nprevious: True False\nreplaced: True False\nshutting down\n"
    )
    assert (
        (proc.returncode, proc.stdout)
        == (reference.returncode, reference.stdout)
        == (
            3,
            reference.stdout,
        )
    )
    assert [ln for ln in proc.stderr.splitlines() if not ln.startswith("memlens:")] == []
    run = latest_run(tmp_path)
    assert run.info.complete
    assert run.info.exit_code == 3
    assert run.files[str(tmp_path / "chains_sigterm.py")].lines[22].live_bytes >= 3 * MiB


def test_report_goes_where_memlens_was_started_not_into_the_programs_files(
    tmp_path: Path,
) -> None:
    shutil.copy(SCRIPTS / "redirects_output.py", tmp_path)
    proc = memlens("run", "--top", "3", "redirects_output.py", "log.txt", "other.txt", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "log.txt").read_text() == "into the log\n"
    assert (tmp_path / "other.txt").read_text() == "into the other file\n"
    out = proc.stdout.splitlines()
    assert out[0] == "before"
    assert out[1].startswith("memlens: peak ")
    first = next(ln.split() for ln in out if ln.split()[:1] == ["1"])
    assert first[1] == "redirects_output.py:14"
    assert proc.stderr.startswith("memlens: run written to ")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="-P and PYTHONSAFEPATH: Python 3.11+")
@pytest.mark.parametrize(
    ("how", "target"),
    [
        ("-P", ["where.py"]),
        ("-I", ["where.py"]),
        ("PYTHONSAFEPATH", ["where.py"]),
        ("-P", ["-m", "where"]),
        ("PYTHONSAFEPATH", ["-m", "where"]),
    ],
)
def test_safe_path_leaves_the_scripts_folder_off_sys_path(
    tmp_path: Path, how: str, target: list[str]
) -> None:
    (tmp_path / "where.py").write_text(
        "import os, sys\n"
        "print(os.getcwd() in sys.path, os.path.dirname(__file__) in sys.path, sys.path[0])\n"
    )
    flags = [] if how == "PYTHONSAFEPATH" else [how]
    env = dict(os.environ)
    if how == "PYTHONSAFEPATH":
        env["PYTHONSAFEPATH"] = "1"
    if target[0] == "-m":  # found through PYTHONPATH, since its folder is not on the path
        env["PYTHONPATH"] = str(tmp_path.parent)
        target = ["-m", f"{tmp_path.name}.where"]
        (tmp_path / "__init__.py").write_text("")
    reference = command([sys.executable, *flags, *target], cwd=tmp_path, env=env)
    proc = command(
        [sys.executable, *flags, "-m", "memlens", "run", "--no-report", *target],
        cwd=tmp_path,
        env=env,
    )
    assert reference.returncode == 0, reference.stderr
    assert reference.stdout.startswith("False False ")
    assert (proc.returncode, proc.stdout) == (0, reference.stdout), proc.stderr


def test_pytest_with_warnings_as_errors_gives_plain_pytests_result(tmp_path: Path) -> None:
    """`memlens run -m pytest` in a project whose pytest turns warnings into errors. Installed
    from a wheel, memlens is among the files of a distribution with a pytest plugin, which
    pytest marks for assertion rewriting and warns about when it is already imported (as under
    `memlens run`): a distribution listing memlens's package, as its wheel does, shows it here
    (the editable install lists only its import hook)."""
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\n"
        "filterwarnings =\n"
        "    error\n"
        "    ignore:Module already imported so cannot be rewritten; _editable_skbc_memlens"
        ":pytest.PytestAssertRewriteWarning\n"
    )
    dist = tmp_path / "plugged-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plugged\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[pytest11]\nplugged = plugged\n")
    (dist / "RECORD").write_text("plugged.py,,\nmemlens/__init__.py,,\n")
    (tmp_path / "plugged.py").write_text("")
    (tmp_path / "test_it.py").write_text(
        "import pytest\n\n\n@pytest.mark.parametrize('n', range(3))\n"
        "def test_n(n):\n    assert [n] * 2 == [n, n]\n"
    )
    flags = ("-q", "-p", "no:cacheprovider", "-p", "no:asyncio")
    reference = command([sys.executable, "-m", "pytest", *flags], cwd=tmp_path)
    proc = memlens("run", "--no-report", "-m", "pytest", *flags, cwd=tmp_path)
    assert reference.returncode == 0, reference.stdout
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("3 passed")


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")
def test_program_claims_the_monitoring_tool_ids_memlens_holds(tmp_path: Path) -> None:
    script = SCRIPTS / "monitoring_tools.py"
    reference = plain(script, cwd=tmp_path)
    proc = memlens("run", "--no-report", str(script), cwd=tmp_path)
    assert reference.returncode == 0, reference.stderr
    assert reference.stdout.splitlines()[1] == "[None, None, None, 'mine3', 'mine4', 'mine5']"
    assert (proc.returncode, proc.stdout) == (0, reference.stdout), proc.stderr


def test_breakpoint_stops_where_python_stops(tmp_path: Path) -> None:
    """pdb stops on the line of breakpoint() (3.13+; the line after it before 3.13) under
    memlens as under python (3.13 missed a line when memlens watched the frame's code)."""
    script = SCRIPTS / "breaks.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONBREAKPOINT"}
    reference = command([sys.executable, script], cwd=tmp_path, env=env, stdin="c\n")
    proc = command(
        [sys.executable, "-m", "memlens", "run", "--no-report", script],
        cwd=tmp_path,
        env=env,
        stdin="c\n",
    )
    assert reference.returncode == 0, reference.stderr
    stops = [ln for ln in reference.stdout.splitlines() if ln.startswith("-> ")]
    assert stops == ["-> breakpoint()" if sys.version_info >= (3, 13) else "-> after = before + 1"]
    assert (proc.returncode, proc.stdout) == (0, reference.stdout), proc.stderr
