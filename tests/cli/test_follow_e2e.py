"""`memlens run` follows child processes: each start method, bare os.fork (also leaving by
os._exit), Python subprocesses, nested children, a child killed by SIGKILL or still running,
and --no-follow. Real programs (tests/data/scripts/children/) in real processes, compared
with plain Python where it matters.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memlens.layout import processes_folder
from memlens.model import Run
from memlens.runfile import reader
from tests.cli.memlens_cmd import latest_name, latest_run, memlens, plain

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)
if not hasattr(os, "fork"):
    pytest.skip("child processes are followed on POSIX systems", allow_module_level=True)

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts" / "children"
MiB = 1024 * 1024


def run_o(
    tmp_path: Path, script: str, *args: str, options: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], Run, Path]:
    """`memlens run --no-report -o run.mlrun SCRIPT ARGS`: the process, its run, the file."""
    out = tmp_path / "run.mlrun"
    proc = memlens(
        "run", "--no-report", *options, "-o", str(out), str(SCRIPTS / script), *args,
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert out.exists(), proc.stderr
    return proc, reader.read(out), out


def alloc(run: Run, script: str, line: int) -> int:
    return run.files[str(SCRIPTS / script)].lines[line].alloc_bytes


def memlens_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("memlens:")]


def test_spawn_pool_fork_pool_and_os_exit_child_are_merged(tmp_path: Path) -> None:
    """Spawn and fork pools and a child leaving by os._exit: every process's figures are in the
    run, and the program's output and exit code are those of plain Python."""
    script = SCRIPTS / "pools.py"
    reference = plain(script, cwd=tmp_path)
    proc, run, out = run_o(tmp_path, "pools.py")
    assert proc.returncode == reference.returncode == 5
    assert sorted(proc.stdout.splitlines()) == sorted(reference.stdout.splitlines())
    assert "bare child exit 3" in proc.stdout
    assert memlens_lines(proc.stderr) == ["memlens: run written to run.mlrun"]

    assert 20.0 * MiB <= alloc(run, "pools.py", 10) <= 20.5 * MiB  # spawn pool: 4 x 5 MiB
    assert 6.0 * MiB <= alloc(run, "pools.py", 15) <= 6.2 * MiB  # fork pool: 3 x 2 MiB
    assert 3.0 * MiB <= alloc(run, "pools.py", 20) <= 3.1 * MiB  # bare fork, os._exit
    # The bare child left by os._exit holding its 3 MiB: live at its exit.
    assert run.files[str(script)].lines[20].live_bytes >= 3 * MiB

    processes = run.info.processes
    root = processes[0]
    assert (root.pid, root.command) == (run.info.pid, ("python", str(script)))
    # The program, up to 2 spawned and 2 forked workers, the bare child: nothing else (no
    # resource tracker). A worker that was still starting when the pool ended it (SIGTERM)
    # ran no task and may have left no run; the others, each with its final run.
    assert all(p.parent_pid == root.pid for p in processes[1:])
    spawned = [p for p in processes if "--multiprocessing-fork" in p.command]
    forked = [p for p in processes[1:] if p.command == root.command]
    assert len(processes) == 1 + len(spawned) + len(forked)
    assert 1 <= len(spawned) <= 2
    assert 2 <= len(forked) <= 3  # 1 or 2 fork-pool workers, the bare child
    folder = Path(processes_folder(str(out)))
    for p in processes:
        if p.complete:  # its final run is in the processes folder
            assert reader.read(folder / f"{p.pid}.mlrun").info.processes == (p,)
    assert root.complete
    # Listed in the order they ended (those without a final run last): the bare child is the
    # last process that ended, after both pools.
    ended = [p for p in processes[1:] if p.complete]
    assert list(processes[1:]) == ended + [p for p in processes[1:] if not p.complete]
    assert ended[-1] in forked
    bare = reader.read(folder / f"{ended[-1].pid}.mlrun")
    assert bare.info.exit_code == 3
    assert bare.info.processes == (ended[-1],)
    assert 3 * MiB <= bare.files[str(script)].lines[20].alloc_bytes < 3.1 * MiB
    # The merged peak is at least each process's own.
    assert run.info.peak_traced_bytes >= max(p.peak_traced_bytes for p in processes)

    # `show --process` shows one process's own run.
    shown = memlens("show", str(out), "--process", str(bare.info.pid), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"process {bare.info.pid}, child of {root.pid}" in shown.stdout.splitlines()[0]

    exported = json.loads(memlens("export", str(out), cwd=tmp_path).stdout)
    assert exported["run"]["processes"][0] == {
        "pid": root.pid,
        "parent_pid": root.parent_pid,
        "command": ["python", str(script)],
        "complete": True,
        "peak_traced_bytes": root.peak_traced_bytes,
    }


def test_forkserver_workers_are_followed_not_the_server(tmp_path: Path) -> None:
    proc, run, _ = run_o(tmp_path, "forkserver.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "forkserver 5242880\n"
    assert 5 * MiB <= alloc(run, "forkserver.py", 7) < 5.1 * MiB
    # The program and its (up to) two workers; the fork server and the resource tracker are
    # not traced (they live as long as the program: no one waits for them). The workers the
    # fork server forks are the program's children, as it asked for them.
    processes = run.info.processes
    assert 2 <= len(processes) <= 3
    assert processes[0].complete
    assert processes[1].complete
    assert all(p.parent_pid == run.info.pid for p in processes[1:])
    assert all("multiprocessing.forkserver" in " ".join(p.command) for p in processes[1:])


def test_a_forkserver_worker_has_memlens_signal_watcher(tmp_path: Path) -> None:
    """A fork server's child drops the server's wakeup descriptor before it runs the task
    loop; memlens's watcher (which interrupts a wait the SIGTERM handler would never run
    after) is started then: else a pool terminating a worker just as it blocked on the
    queue's lock waited for it for ever (the run above, about once in 200 under load)."""
    proc, _, _ = run_o(tmp_path, "forkserver_watched.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "watched True\n"


def test_python_subprocess_is_followed_and_the_users_sitecustomize_still_runs(
    tmp_path: Path,
) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("MARK = 'mine'\n")
    env = {**os.environ, "PYTHONPATH": str(own)}
    out = tmp_path / "run.mlrun"
    proc = subprocess.run(
        [sys.executable, "-m", "memlens", "run", "--no-report", "-o", str(out),
         str(SCRIPTS / "sub.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    reference = subprocess.run(
        [sys.executable, str(SCRIPTS / "sub.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == reference.returncode == 0, proc.stderr
    assert (
        proc.stdout
        == reference.stdout
        == ("user sitecustomize: mine\nmemlens on sys.path: False\nallocated 4194304\n")
    )
    run = reader.read(out)
    assert 4 * MiB <= alloc(run, "sub_child.py", 4) < 4.1 * MiB
    child = run.info.processes[1]
    assert child.command == ("python", str(SCRIPTS / "sub_child.py"))
    assert child.parent_pid == run.info.pid


def _old_pythons() -> list[str]:
    """Pythons older than 3.7 (which cannot read `from __future__ import annotations`) found
    on this machine: pyenv's, or Debian's python2.7."""
    found = sorted(
        str(p)
        for p in (Path.home() / ".pyenv" / "versions").glob("*/bin/python")
        if re.match(r"(2\.|3\.[0-6]\.)", p.parent.parent.name)
    )
    if not found and Path("/usr/bin/python2.7").exists():
        found.append("/usr/bin/python2.7")
    return found


def test_older_pythons_started_by_the_program_start_as_without_memlens(tmp_path: Path) -> None:
    """The start-up hook that follows children is read by every Python the program starts:
    an old one (2.7, 3.6) prints no error and runs as without memlens (not followed)."""
    pythons = _old_pythons()
    if not pythons:
        pytest.skip("no Python older than 3.7 on this machine")
    script = SCRIPTS / "old_python.py"
    reference = plain(script, *pythons, cwd=tmp_path)
    proc, run, _ = run_o(tmp_path, "old_python.py", *pythons)
    assert proc.returncode == reference.returncode == 0, proc.stderr
    assert proc.stdout == reference.stdout
    assert all(line.endswith(" ''") for line in proc.stdout.splitlines()), proc.stdout
    assert len(run.info.processes) <= 1  # nothing followed


def test_program_replacing_itself_with_python_goes_on_with_its_run(tmp_path: Path) -> None:
    """os.execv of a Python program: that program runs under `memlens run` too, and the one
    run holds both parts (as two processes of the same id), with one report at the end."""
    script, target = SCRIPTS / "execs_python.py", SCRIPTS / "exec_target.py"
    reference = plain(script, str(target), "a", cwd=tmp_path)
    proc = memlens("run", "--top", "3", str(script), str(target), "a", cwd=tmp_path)
    assert proc.returncode == reference.returncode == 0, proc.stderr
    assert reference.stdout == "launcher\nbecame ['a'] __main__\n"
    assert proc.stdout.startswith(reference.stdout)
    assert proc.stdout.count("memlens: peak") == 1
    assert memlens_lines(proc.stderr) == [f"memlens: run written to {latest_name(tmp_path)}"]
    run = latest_run(tmp_path)
    assert 3 * MiB <= alloc(run, "exec_target.py", 5) < 3.1 * MiB
    assert 2 * MiB <= alloc(run, "execs_python.py", 7) < 2.1 * MiB
    assert alloc(run, "execs_python.py", 16) < 4096  # memlens's own work at the exec is not
    first, second = run.info.processes
    assert first.pid == second.pid == run.info.pid
    assert first.command == ("python", str(target), "a")
    assert second.command == ("python", str(script), str(target), "a")


def test_child_replacing_itself_with_python_is_followed(tmp_path: Path) -> None:
    target = SCRIPTS / "exec_target.py"
    proc, run, _ = run_o(tmp_path, "execs_python.py", "fork", str(target))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "launcher",
        "became ['child'] __main__",
        "child exit 0",
        "became [] __main__",
    ]
    assert 6 * MiB <= alloc(run, "exec_target.py", 5) < 6.2 * MiB  # the child's and the root's
    pids = [p.pid for p in run.info.processes]
    assert len(pids) == 4  # the root's two parts, the child's two
    assert len(set(pids)) == 2


def test_program_replacing_itself_with_another_program_ends_its_run(tmp_path: Path) -> None:
    script = SCRIPTS / "execs_shell.py"
    reference = plain(script, cwd=tmp_path)
    proc, run, out = run_o(tmp_path, "execs_shell.py")
    assert proc.returncode == reference.returncode == 0
    assert proc.stdout == reference.stdout == "launcher\nfrom sh\n"
    assert memlens_lines(proc.stderr) == ["memlens: run written to run.mlrun"]
    assert run.info.complete
    assert 2 * MiB <= alloc(run, "execs_shell.py", 5) < 2.1 * MiB
    assert not os.path.exists(processes_folder(str(out)))  # nothing followed the shell


def test_nested_children_are_followed(tmp_path: Path) -> None:
    proc, run, _ = run_o(tmp_path, "nested.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "done 0"
    assert 1 * MiB <= alloc(run, "nested.py", 25) < 1.1 * MiB
    assert 2 * MiB <= alloc(run, "nested.py", 17) < 2.1 * MiB
    assert 3 * MiB <= alloc(run, "nested.py", 11) < 3.1 * MiB
    # A chain: the program -> spawned child -> its spawned child -> its forked child.
    processes = run.info.processes
    assert len(processes) == 4
    assert all(p.complete for p in processes)
    parent_of = {p.pid: p.parent_pid for p in processes}
    chain = [processes[0].pid]
    while len(chain) < 4:
        chain.append(next(pid for pid, parent in parent_of.items() if parent == chain[-1]))
    assert f"grandchild {chain[-2]}" in proc.stdout  # os.getppid() in the forked one


def test_function_shipped_by_value_is_charged_to_its_line_in_both_processes(
    tmp_path: Path,
) -> None:
    """cloudpickle rebuilds a function of __main__ under the file name "<dynamic-code>": in the
    child that unpickles it and in the program itself, its 5 MiB are on its own line."""
    reference = plain(SCRIPTS / "shipped.py", cwd=tmp_path)
    proc, run, _ = run_o(tmp_path, "shipped.py")
    assert proc.returncode == reference.returncode == 0, proc.stderr
    assert proc.stdout == reference.stdout == "5242881\n5242882\n"
    assert len(run.info.processes) == 2
    assert 10 * MiB <= alloc(run, "shipped.py", 12) < 10.1 * MiB
    calls = run.files[str(SCRIPTS / "shipped.py")].lines
    assert calls[18].alloc_bytes < MiB  # subprocess.run
    assert calls[19].alloc_bytes < MiB  # print(pickle.loads(payload)(2))


def _child_ended_by_a_signal(tmp_path: Path, script: str, stdout: str) -> tuple[Run, Path]:
    """SCRIPT (given the run's processes folder, where its child's checkpoints appear) under
    plain Python and under `memlens run` with checkpoints every 0.05 s: exit code 0 and
    ``stdout`` both times. The run and its file."""
    out = tmp_path / "run.mlrun"
    folder = processes_folder(str(out))
    reference = plain(SCRIPTS / script, folder, cwd=tmp_path)
    proc, run, _ = run_o(tmp_path, script, folder, options=("--checkpoint-interval", "0.05"))
    assert proc.returncode == reference.returncode == 0, proc.stderr
    assert proc.stdout == reference.stdout == stdout
    return run, out


def test_child_killed_by_sigkill_leaves_the_programs_run_whole(tmp_path: Path) -> None:
    run, out = _child_ended_by_a_signal(tmp_path, "killed.py", "child -9\n")
    assert run.info.complete
    root, child = run.info.processes
    assert root.complete
    assert not child.complete
    assert child.parent_pid == root.pid
    assert child.command == root.command
    # What the killed child's last checkpoint held is counted; the program's run is whole.
    assert 4 * MiB <= alloc(run, "killed.py", 11) < 4.1 * MiB
    assert child.peak_traced_bytes >= 4 * MiB
    assert "(2 processes (1 incomplete)" not in memlens("show", str(out), cwd=tmp_path).stdout
    assert " · 2 processes (1 incomplete)" in memlens("show", str(out), cwd=tmp_path).stdout


def test_child_still_running_is_waited_for_then_recorded_incomplete(tmp_path: Path) -> None:
    proc, run, _ = run_o(tmp_path, "lingering.py", "600", options=("--follow-wait", "0.2"))
    pid = int(proc.stdout.split()[1])
    try:
        assert proc.returncode == 0, proc.stderr
        os.kill(pid, 0)  # still running after the program's run was written
        root, child = run.info.processes
        assert (child.pid, child.complete, child.parent_pid) == (pid, False, root.pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_child_ending_after_the_program_is_waited_for(tmp_path: Path) -> None:
    proc, run, _ = run_o(tmp_path, "lingering.py", "0.5", options=("--follow-wait", "120"))
    assert proc.returncode == 0, proc.stderr
    _, child = run.info.processes
    assert child.complete
    assert 2 * MiB <= alloc(run, "lingering.py", 10) < 2.1 * MiB


def test_child_ended_by_sigterm_writes_its_run_and_dies_by_it(tmp_path: Path) -> None:
    script = SCRIPTS / "terminated.py"
    reference = plain(script, cwd=tmp_path)
    proc, run, out = run_o(tmp_path, "terminated.py")
    assert proc.returncode == reference.returncode == 0, proc.stderr
    assert proc.stdout == reference.stdout == "child -15\n"
    _, child = run.info.processes
    assert child.complete  # its final run was written before it died
    line = run.files[str(script)].lines[10]
    assert 3 * MiB <= line.alloc_bytes < 3.1 * MiB
    assert 3 * MiB <= line.live_bytes < 3.1 * MiB  # held when the signal came
    # memlens's own work when the signal came (writing the run) is not charged to the line
    # the child was on (time.sleep): the child's own run holds line 10 and next to nothing.
    own = reader.read(Path(processes_folder(str(out))) / f"{child.pid}.mlrun")
    others = [st.alloc_bytes for n, st in own.files[str(script)].lines.items() if n != 10]
    assert sum(others) < 64 * 1024


def test_children_ended_while_starting_write_their_runs(tmp_path: Path) -> None:
    """Spawned children terminated while they start (at moments spread over their start-up)
    die by SIGTERM as without memlens, and each one that claimed a run wrote it whole."""
    proc, run, _ = run_o(tmp_path, "terminated_while_starting.py", "12")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"exit codes [{-signal.SIGTERM}]\n"
    assert memlens_lines(proc.stderr) == ["memlens: run written to run.mlrun"]
    assert [p.pid for p in run.info.processes[1:] if not p.complete] == []


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_program_ended_by_sigterm_does_not_wait_for_its_children(
    tmp_path: Path, method: str
) -> None:
    """Plain python dies of SIGTERM at once, leaving its pool's workers: so does the program
    under memlens, after writing its run, without waiting --follow-wait for the workers."""
    out = tmp_path / "run.mlrun"
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlens", "run", "--no-report", "--follow-wait", "600",
         "-o", str(out), str(SCRIPTS / "pool_sigterm.py"), method],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)  # far less than --follow-wait
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the workers it left
    assert proc.returncode == -signal.SIGTERM
    assert memlens_lines(err) == ["memlens: run written to run.mlrun"]
    run = reader.read(out)
    assert not run.info.complete
    assert len(run.info.processes) >= 5
    assert [p.complete for p in run.info.processes[1:]] == [False] * 4


@pytest.mark.parametrize("follow", [True, False], ids=["follow", "no-follow"])
def test_no_follow_leaves_children_alone(tmp_path: Path, follow: bool) -> None:
    script = SCRIPTS / "env_child.py"
    options = () if follow else ("--no-follow",)
    proc, run, out = run_o(tmp_path, "env_child.py", options=options)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == [
        f"fork {follow} 1048576",
        f"spawn {follow} 1048576",
    ]
    lines = run.files[str(script)].lines
    if follow:
        assert len(run.info.processes) == 3
        assert 2 * MiB <= lines[10].alloc_bytes < 2.1 * MiB
    else:
        assert run.info.processes == ()
        assert 10 not in lines  # the children were not traced
        assert not os.path.exists(processes_folder(str(out)))
        assert " processes" not in memlens("show", str(out), cwd=tmp_path).stdout


def test_show_process_errors_are_one_line(tmp_path: Path) -> None:
    proc, _, out = run_o(tmp_path, "env_child.py", options=("--no-follow",))
    assert proc.returncode == 0
    shown = memlens("show", str(out), "--process", "1", cwd=tmp_path)
    assert shown.returncode == 2
    assert shown.stderr == "memlens: the run has no process 1 (it is a run of one process)\n"


def test_child_stuck_in_a_c_call_still_dies_by_sigterm(tmp_path: Path) -> None:
    """The child cannot take memlens's handler (its main thread is in a C call that checks no
    signal): after child.KICK_LIMIT_S it dies by the signal's default action, as plain Python
    would have at once; what its last checkpoint held is counted."""
    run, _ = _child_ended_by_a_signal(tmp_path, "stuck.py", "child -15\n")
    root, child = run.info.processes
    assert root.complete
    assert not child.complete
    assert 3 * MiB <= alloc(run, "stuck.py", 15) < 3.1 * MiB


def test_a_damaged_child_run_leaves_the_programs_run_whole(tmp_path: Path) -> None:
    out = tmp_path / "run.mlrun"
    folder = processes_folder(str(out))
    script = SCRIPTS / "damaged.py"
    reference = plain(script, folder, cwd=tmp_path)
    proc, run, _ = run_o(tmp_path, "damaged.py", folder)
    assert proc.returncode == reference.returncode == 0, proc.stderr
    assert proc.stdout == reference.stdout == "child done\n"
    damaged = memlens_lines(proc.stderr)
    assert len(damaged) == 2, proc.stderr
    assert damaged[0].startswith(f"memlens: cannot read {folder}{os.sep}")
    assert damaged[1] == "memlens: run written to run.mlrun"
    root, child = run.info.processes
    assert root.complete
    assert not child.complete  # its figures are not counted: its run could not be read
    assert 1 * MiB <= alloc(run, "damaged.py", 6) < 1.1 * MiB
    assert 9 not in run.files[str(script)].lines


@pytest.mark.parametrize("threads", ["none", "thread"])
def test_the_fork_warning_is_as_without_memlens(tmp_path: Path, threads: str) -> None:
    """Python 3.12+ warns at os.fork in a multi-threaded process: memlens's own threads do
    not make it warn, the program's own still do."""
    reference = plain(SCRIPTS / "threads_fork.py", threads, cwd=tmp_path)
    proc, _, _ = run_o(tmp_path, "threads_fork.py", threads)
    assert proc.returncode == reference.returncode == 0, proc.stderr
    assert proc.stdout == reference.stdout == "forked\n"

    def warnings_of(stderr: str) -> list[str]:
        return [
            re.sub(r"pid=\d+", "pid=N", line)
            for line in stderr.splitlines()
            if not line.startswith("memlens:")
        ]

    assert warnings_of(proc.stderr) == warnings_of(reference.stderr)
    if sys.version_info >= (3, 12) and sys.platform == "linux":
        assert bool(warnings_of(proc.stderr)) == (threads == "thread")
