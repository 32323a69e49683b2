"""`memlens attach PID`: a real Python process attached to, detached from, exiting while
attached, and refused. Attaching needs Python 3.14 (``sys.remote_exec``): on older Pythons only
the refusal runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlens.model import Run
from memlens.runfile import reader
from memlens.store import Store
from tests.cli.memlens_cmd import command, memlens, start_memlens

CAN_ATTACH = sys.version_info >= (3, 14)
needs_remote_exec = pytest.mark.skipif(
    not CAN_ATTACH, reason="attaching needs Python 3.14 (sys.remote_exec, PEP 768)"
)
MB = 1_000_000

#: A program that allocates 10 MB a second (100 kB chunks, paced by the clock, at most 0.2 s
#: behind) until the file `finish` appears and it has allocated at least `least` chunks, keeping
#: the last 50 chunks. Its output does not depend on timing; it exits with code 7.
TARGET = """
import os, sys, time

CHUNK = 100_000
RATE = 10_000_000

def allocate(kept, n):
    for _ in range(n):
        kept.append(bytearray(CHUNK))  # @alloc
    del kept[:-50]

def main(least):
    kept = []
    start = time.monotonic()
    done = 0
    print("ready", flush=True)
    while done < least or not os.path.exists("finish"):
        due = int((time.monotonic() - start) * RATE / CHUNK)
        done = max(done, due - 20)
        if due > done:
            allocate(kept, due - done)
            done = due
        time.sleep(0.005)
    print(f"kept {len(kept)} chunks of {CHUNK} bytes", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    sys.exit(7)

main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


class Target:
    """The target program running in ``folder``: started, and waited for to say ready."""

    def __init__(
        self,
        folder: Path,
        *args: str,
        source: str = TARGET,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
        options: tuple[str, ...] = (),
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.script = folder / "target.py"
        self.script.write_text(textwrap.dedent(source))
        self.out = folder / "out.txt"
        self.err = folder / "err.txt"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [python, *options, str(self.script), *args],
                cwd=folder,
                stdout=out,
                stderr=err,
                env=env,
            )
        self.pid = self.proc.pid
        deadline = time.monotonic() + 60
        while "ready" not in self.out.read_text():
            assert self.proc.poll() is None, self.err.read_text()
            assert time.monotonic() < deadline, "the target did not start"
            time.sleep(0.02)

    def finish(self) -> tuple[int, str, str]:
        """Ask the program to end; its exit code, stdout and stderr."""
        (self.folder / "finish").write_text("")
        code = self.proc.wait(60)
        return code, self.out.read_text(), self.err.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def targets() -> Iterator[list[Target]]:
    started: list[Target] = []
    yield started
    for target in started:
        target.kill()


def _plain(folder: Path) -> tuple[int, str, str]:
    """The target program as plain Python runs it: what an attached one must end like."""
    target = Target(folder, "100")
    return target.finish()


def _line(run: Run, script: Path, tag: str) -> Any:
    number = next(
        i for i, text in enumerate(script.read_text().splitlines(), 1) if f"# @{tag}" in text
    )
    return run.files[str(script)].lines[number]


def _wait_attached(attacher: subprocess.Popen[str], pid: int) -> None:
    """Read the attaching process's messages until it says it attached."""
    assert attacher.stderr is not None
    for line in attacher.stderr:
        if line.startswith(f"memlens: attached to process {pid}"):
            return
        assert line.startswith("memlens: waiting for process"), line
    raise AssertionError(f"memlens attach ended without attaching: {attacher.wait()}")


def _folders(pid: int) -> list[str]:
    return [n for n in os.listdir("/tmp") if n.startswith(f"memlens-attach-{pid}-")]


@needs_remote_exec
def test_attach_for_two_seconds_counts_what_was_allocated_meanwhile(
    tmp_path: Path, targets: list[Target]
) -> None:
    """The issue's bar: 10 MB a second, attached for 2 s, shows 10-40 MB on the allocating
    line, and the program then ends exactly as plain Python ends it."""
    targets.append(target := Target(tmp_path / "attached", "100"))
    proc = memlens("attach", str(target.pid), "--duration", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"memlens: attached to process {target.pid}" in proc.stderr
    assert f"memlens: detached from process {target.pid} after" in proc.stderr
    assert "memory allocated before attaching is not counted" in proc.stderr
    assert "target.py:" in proc.stdout  # the report
    run = reader.read(Store(tmp_path).latest() or "")
    assert run.info.attached
    assert run.info.pid == target.pid
    alloc = _line(run, target.script, "alloc")
    assert 10 * MB <= alloc.alloc_bytes <= 40 * MB, alloc
    # The last 50 chunks are kept: at most 5 MB of what was allocated while attached is live.
    assert alloc.live_bytes <= 5 * MB + 64 * 1024
    assert run.info.peak_traced_bytes <= 6 * MB
    assert _folders(target.pid) == []
    assert target.finish() == _plain(tmp_path / "plain")


#: Run in the target (by sys.remote_exec, from this test): what memlens could leave behind, as
#: JSON in the file `probe-N.json`. The probe imports ctypes, threading, json and signal itself
#: (before the first attach too), so that they are not counted as memlens's.
PROBE = """
import ctypes, json, signal, sys, threading, atexit

class _Allocator(ctypes.Structure):
    _fields_ = [(n, ctypes.c_void_p) for n in ("ctx", "malloc", "calloc", "realloc", "free")]

def _allocators():
    get = ctypes.pythonapi.PyMem_GetAllocator
    get.argtypes = [ctypes.c_int, ctypes.POINTER(_Allocator)]
    out = []
    for domain in range(3):
        a = _Allocator()
        get(domain, ctypes.byref(a))
        out.append([a.malloc, a.calloc, a.realloc, a.free])
    return out

def _handler(signum):
    h = signal.getsignal(signum)
    return h if isinstance(h, int) or h is None else repr(h)

_state = {
    "modules": sorted(m for m in sys.modules if m.split(".")[0] in ("memlens",)),
    "allocators": _allocators(),
    "threads": sorted(t.name for t in threading.enumerate()),
    "atexit": atexit._ncallbacks(),
    "tools": [sys.monitoring.get_tool(i) for i in range(6)],
    "signals": {int(s): _handler(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)},
    "meta_path": [type(f).__name__ for f in sys.meta_path],
    "path": list(sys.path),
}
with open(NAME + ".tmp", "w") as fh:
    json.dump(_state, fh)
import os
os.replace(NAME + ".tmp", NAME)
"""


def _probe(target: Target, n: int) -> dict[str, Any]:
    name = target.folder / f"probe-{n}.json"
    script = target.folder / f"probe-{n}.py"
    script.write_text(f"NAME = {str(name)!r}\n{textwrap.dedent(PROBE)}")
    sys.remote_exec(target.pid, str(script))  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while not name.exists():
        assert time.monotonic() < deadline, "the probe did not run"
        time.sleep(0.02)
    state: dict[str, Any] = json.loads(name.read_text())
    state["tasks"] = len(os.listdir(f"/proc/{target.pid}/task"))
    state["fds"] = sorted(
        os.readlink(f"/proc/{target.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{target.pid}/fd")
    )
    return state


@needs_remote_exec
def test_detach_leaves_the_process_as_it_was_and_it_can_be_attached_again(
    tmp_path: Path, targets: list[Target]
) -> None:
    targets.append(target := Target(tmp_path / "target"))
    before = _probe(target, 0)
    assert before["modules"] == []
    for attempt in (1, 2):
        proc = memlens("attach", str(target.pid), "--duration", "0.5", "--no-report", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "left in process" not in proc.stderr
        after = _probe(target, attempt)
        # No hook (the allocators are CPython's own again), no thread, no file descriptor, no
        # sys.monitoring tool, no module, no signal handler changed, no folder; one atexit
        # handler is nanobind's, registered once as the native module first loads (it clears
        # typing's caches at exit; docs/attach.md).
        assert after == {**before, "atexit": before["atexit"] + 1}, attempt
        assert _folders(target.pid) == []
    runs = Store(tmp_path).run_files()
    assert len(runs) == 2
    assert all(reader.read(path).info.attached for path in runs)
    assert target.finish()[0] == 7


@needs_remote_exec
def test_a_process_that_exits_while_attached_still_leaves_its_run(
    tmp_path: Path, targets: list[Target]
) -> None:
    targets.append(target := Target(tmp_path / "attached", "100"))
    attacher = start_memlens("attach", str(target.pid), "--no-report", cwd=tmp_path)
    _wait_attached(attacher, target.pid)
    time.sleep(1)
    ended = target.finish()  # no --duration: the program ends while attached
    _out, err = attacher.communicate(timeout=120)
    assert attacher.returncode == 0, err
    assert f"memlens: process {target.pid} exited while attached" in err
    assert "run written to" in err
    run = reader.read(Store(tmp_path).latest() or "")
    assert run.info.attached
    assert run.info.complete
    assert _line(run, target.script, "alloc").alloc_bytes >= 5 * MB
    assert _folders(target.pid) == []
    assert ended == _plain(tmp_path / "plain")


@needs_remote_exec
def test_a_process_killed_while_attached_leaves_its_last_checkpoint(
    tmp_path: Path, targets: list[Target]
) -> None:
    targets.append(target := Target(tmp_path / "attached", "100"))
    attacher = start_memlens(
        "attach", str(target.pid), "--checkpoint-interval", "0.3", "--no-report", cwd=tmp_path
    )
    _wait_attached(attacher, target.pid)
    deadline = time.monotonic() + 60
    while Store(tmp_path).latest() is None:  # the first checkpoint is copied into the store
        assert time.monotonic() < deadline, "no checkpoint"
        time.sleep(0.05)
    target.kill()
    _out, err = attacher.communicate(timeout=60)
    assert attacher.returncode == 0, err
    assert "its last checkpoint is saved (incomplete)" in err
    run = reader.read(Store(tmp_path).latest() or "")
    assert run.info.attached
    assert not run.info.complete
    assert _folders(target.pid) == []


def _refused(proc: subprocess.CompletedProcess[str], pid: int, reason: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [f"memlens: cannot attach to process {pid}: {reason}"]
    assert proc.stdout == ""


def test_before_python_3_14_attaching_is_refused_in_one_line(
    tmp_path: Path, targets: list[Target]
) -> None:
    found = [sys.executable] if not CAN_ATTACH else []
    found += [p for v in ("3.13", "3.12", "3.11", "3.10") if (p := shutil.which(f"python{v}"))]
    for older in found:
        version = subprocess.run(
            [older, "-c", "import sys; print('{}.{}'.format(*sys.version_info[:2]))"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if version:
            break
    else:
        pytest.skip("no Python older than 3.14 here")
    targets.append(target := Target(tmp_path, python=older))
    proc = memlens("attach", str(target.pid), cwd=tmp_path)
    _refused(
        proc,
        target.pid,
        f"attaching needs Python 3.14 or newer: process {target.pid} runs Python {version}",
    )


@needs_remote_exec
@pytest.mark.parametrize(
    ("env", "options", "how"),
    [
        (
            {"PYTHON_DISABLE_REMOTE_DEBUG": "1"},
            (),
            "PYTHON_DISABLE_REMOTE_DEBUG is set in its environment",
        ),
        ({}, ("-X", "disable-remote-debug"), "-X disable-remote-debug"),
    ],
    ids=["environment", "-X"],
)
def test_remote_debugging_turned_off_is_refused_in_one_line(
    tmp_path: Path, targets: list[Target], env: dict[str, str], options: tuple[str, ...], how: str
) -> None:
    targets.append(target := Target(tmp_path, env={**os.environ, **env}, options=options))
    proc = memlens("attach", str(target.pid), cwd=tmp_path)
    _refused(proc, target.pid, f"process {target.pid} has remote debugging turned off ({how})")
    assert target.finish()[0] == 7


@needs_remote_exec
def test_what_is_not_a_python_process_or_no_process_is_refused(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        proc = memlens("attach", str(sleeper.pid), cwd=tmp_path)
        _refused(proc, sleeper.pid, "it is not a Python process (no Python runtime found in it)")
    finally:
        sleeper.kill()
        sleeper.wait()
    proc = memlens("attach", str(sleeper.pid), cwd=tmp_path)  # gone now
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"memlens: no process with id {sleeper.pid}"]
    assert not _folders(sleeper.pid)


@needs_remote_exec
def test_a_process_memlens_already_traces_is_refused(tmp_path: Path) -> None:
    (tmp_path / "target.py").write_text(textwrap.dedent(TARGET))
    run = start_memlens("run", "--no-report", "target.py", cwd=tmp_path)
    try:
        assert run.stdout is not None
        assert run.stdout.readline().strip() == "ready"
        proc = memlens("attach", str(run.pid), "--dir", str(tmp_path / "other"), cwd=tmp_path)
        _refused(
            proc,
            run.pid,
            "memlens is already tracing this process (memlens run, memlens.profile or another "
            "memlens attach)",
        )
        (tmp_path / "finish").write_text("")
        assert run.wait(60) == 7
    finally:
        run.kill()
        run.wait()
    assert not _folders(run.pid)


#: Makes the program non-dumpable (prctl PR_SET_DUMPABLE 0): not even its own user may ptrace it.
UNDUMPABLE = """
import ctypes, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


@needs_remote_exec
def test_ptrace_not_permitted_is_refused_in_one_line(tmp_path: Path, targets: list[Target]) -> None:
    targets.append(target := Target(tmp_path, source=UNDUMPABLE))
    # Root may ptrace anything (CAP_SYS_PTRACE): memlens attach then runs without that power.
    setpriv = shutil.which("setpriv") if os.geteuid() == 0 else None
    if os.geteuid() == 0 and setpriv is None:
        pytest.skip("root may ptrace anything, and setpriv is missing to drop CAP_SYS_PTRACE")
    drop = [setpriv, "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"] if setpriv else []
    proc = command(
        [*drop, sys.executable, "-m", "memlens", "attach", str(target.pid), "--duration", "0.1"],
        cwd=tmp_path,
    )
    _refused(
        proc,
        target.pid,
        "not permitted (ptrace: the process is not dumpable, or a container or security "
        "module forbids it)",
    )


def _as_nobody_works() -> bool:
    if os.geteuid() != 0:
        return False
    try:
        run = subprocess.run(
            [sys.executable, "-c", "import memlens"], user=65534, capture_output=True, check=False
        )
    except OSError:
        return False
    return run.returncode == 0


@needs_remote_exec
def test_another_users_process_is_refused_in_one_line(
    tmp_path: Path, targets: list[Target]
) -> None:
    if not _as_nobody_works():
        pytest.skip("needs root, and a memlens that the user nobody can run")
    targets.append(target := Target(tmp_path / "target"))
    store = tmp_path / "nobody"
    store.mkdir()
    os.chmod(store, 0o777)
    proc = subprocess.run(
        [sys.executable, "-m", "memlens", "attach", str(target.pid)],
        cwd=store,
        capture_output=True,
        text=True,
        user=65534,
        env={**os.environ, "HOME": str(store)},
        timeout=120,
        check=False,
    )
    _refused(
        proc,
        target.pid,
        f"process {target.pid} belongs to root: attaching needs the same user, or root",
    )


#: A program whose main thread waits in C (reading the FIFO `gate`), then ends.
SLEEPER = """
import os
print("ready", flush=True)
os.read(os.open("gate", os.O_RDONLY), 1)
print("woke", flush=True)
"""


@needs_remote_exec
def test_a_process_running_no_python_code_is_refused_and_left_alone(
    tmp_path: Path, targets: list[Target]
) -> None:
    os.mkfifo(tmp_path / "gate")
    targets.append(target := Target(tmp_path, source=SLEEPER))
    proc = memlens("attach", str(target.pid), "--start-timeout", "0.5", cwd=tmp_path)
    with open(tmp_path / "gate", "w") as gate:  # wake it up
        gate.write("x")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        (
            f"memlens: process {target.pid} ran no Python code for 0.5 s (its main thread is "
            "waiting in a call such as sleep, a lock or a socket read); nothing was started in "
            "it: try again while it runs"
        )
    ]
    # When it wakes up, the withdrawn request does nothing and removes its folder.
    assert target.proc.wait(60) == 0
    assert target.out.read_text() == "ready\nwoke\n"
    assert target.err.read_text() == ""
    assert _folders(target.pid) == []


@needs_remote_exec
def test_the_list_names_python_processes_and_whether_they_can_be_attached(
    tmp_path: Path, targets: list[Target]
) -> None:
    targets.append(target := Target(tmp_path))
    proc = memlens("attach", "--list-json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    found = {p["pid"]: p for p in json.loads(proc.stdout)["processes"]}
    entry = found[target.pid]
    assert entry["command"] == [sys.executable, str(target.script)]
    assert entry["python"] == "{}.{}".format(*sys.version_info[:2])
    assert entry["attachable"] is True
    assert entry["problem"] is None
    text = memlens("attach", "--list", cwd=tmp_path).stdout
    assert any(line.split()[0] == str(target.pid) for line in text.splitlines())
