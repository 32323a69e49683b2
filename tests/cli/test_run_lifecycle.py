"""The end of a run: signals, SIGKILL and a full disk while the final run is
written, checkpoints as `latest`, and programs that never start.

Each case is compared with what plain Python does with the same program and signal.
"""

from __future__ import annotations

import os
import pty
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlens.layout import read_pointer
from memlens.model import LineStats, Run, replace
from memlens.runfile import reader, writer
from memlens.store import Store
from tests.cli.memlens_cmd import latest_run, memlens, start_memlens
from tests.runs import sample_run

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "scripts"

PROGRAM = """\
data = [bytearray(1000) for _ in range(2000)]
print("program done", flush=True)
"""

#: Runs `memlens ARGS` with the final write patched to receive SIGNAL at a given moment: while
#: the rows are written ("rows": before the run is sealed) or right after (during the rename).
DRIVER = """\
import os, signal, sys, time
from memlens.runfile import reader, writer

when, name = sys.argv[1], sys.argv[2]
signum = getattr(signal, name)
if when == "rows":
    write_db = writer._write_db

    def slow(*args, **kwargs):
        os.kill(os.getpid(), signum)
        time.sleep(0.2)  # the signal is handled (held) while the rows are still being written
        return write_db(*args, **kwargs)

    writer._write_db = slow
else:
    real_replace = os.replace
    fired = []

    def late(src, dst):
        if not fired and str(dst).endswith(".mlrun"):
            fired.append(1)
            os.kill(os.getpid(), signum)
            time.sleep(0.2)
        return real_replace(src, dst)

    writer.os.replace = late

from memlens.cli import main

sys.exit(main(sys.argv[3:]))
"""


def _plain(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )


def _drive(tmp_path: Path, when: str, name: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "drive.py").write_text(DRIVER)
    (tmp_path / "prog.py").write_text(PROGRAM)
    return subprocess.run(
        [
            sys.executable,
            "drive.py",
            when,
            name,
            "run",
            "--no-report",
            "--checkpoint-interval",
            "0",
            "prog.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _own(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if not ln.startswith("memlens:")]


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_signal_while_the_run_is_written_is_recorded_then_obeyed(tmp_path: Path, name: str) -> None:
    signum = getattr(signal, name)
    # Plain Python, signalled at the program's very end.
    reference = _plain(
        PROGRAM + f"import os, signal; os.kill(os.getpid(), signal.{name})\n", tmp_path
    )
    proc = _drive(tmp_path, "rows", name)
    assert proc.returncode == reference.returncode == -signum, proc.stderr
    assert proc.stdout == reference.stdout == "program done\n"
    if name == "SIGINT":
        assert _own(proc.stderr) == ["KeyboardInterrupt"]
        assert reference.stderr.splitlines()[-1] == "KeyboardInterrupt"
    else:
        assert _own(proc.stderr) == [] == _own(reference.stderr)
    assert "memlens: run written to" in proc.stderr
    run = latest_run(tmp_path)
    # The run is whole, and says the program did not exit by itself: as the process did not.
    assert run.info.exit_code is None
    assert run.info.complete is True
    assert run.files[str(tmp_path / "prog.py")].lines[1].live_bytes >= 2_000_000


def test_signal_after_the_run_was_sealed_comes_too_late(tmp_path: Path) -> None:
    proc = _drive(tmp_path, "rename", "SIGTERM")
    # The run was sealed as the program ended (exit 0): the process ends the same way.
    assert proc.returncode == 0, proc.stderr
    assert latest_run(tmp_path).info.exit_code == 0


def test_sighup_during_the_program_writes_the_run_then_dies_by_it(tmp_path: Path) -> None:
    sleeper = SCRIPTS / "sleeper.py"
    results = []
    for command in (
        [sys.executable, str(sleeper)],
        [sys.executable, "-m", "memlens", "run", "--no-report", str(sleeper)],
    ):
        proc = subprocess.Popen(
            command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGHUP)
        proc.communicate(timeout=60)
        results.append(proc.returncode)
    assert results == [-signal.SIGHUP, -signal.SIGHUP]
    run = latest_run(tmp_path)
    assert run.info.complete is False
    assert run.info.exit_code is None
    assert run.files[str(sleeper)].lines[3].live_bytes >= 5 * 1024 * 1024


def test_hangup_of_the_terminal_the_report_goes_to(tmp_path: Path) -> None:
    # The terminal closes (its master end goes away) and SIGHUP follows: the run is written,
    # the report has nowhere to go (EIO), and the process still dies by SIGHUP.

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlens", "run", str(SCRIPTS / "sleeper.py")],
        cwd=tmp_path,
        stdin=slave,
        stdout=slave,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(slave)
    seen = b""
    # The whole line, its newline included: print() writes "ready" and "\n" apart, and a
    # write after the terminal is gone fails (EIO), as it would without memlens.
    while b"\n" not in seen.partition(b"ready")[2]:
        seen += os.read(master, 1024)
    os.close(master)
    proc.send_signal(signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGHUP, err
    assert "Traceback" not in err
    assert latest_run(tmp_path).info.complete is False


@pytest.mark.parametrize("target", [("syntax_error.py",), ("-m", "badmod"), ("too_complex.py",)])
def test_a_program_that_does_not_compile_writes_no_run(
    tmp_path: Path, target: tuple[str, ...]
) -> None:
    shutil.copy(SCRIPTS / "syntax_error.py", tmp_path)
    (tmp_path / "badmod.py").write_text("def broken(:\n    pass\n")
    # The parser gives up with a MemoryError, not a SyntaxError: it did not start either.
    (tmp_path / "too_complex.py").write_text("x = " + "-" * 100_000 + "1\n")
    store = Store(tmp_path)
    before = writer.write(sample_run(), store.runs_dir / "20261122-100000-1.mlrun")
    store.set_pointer("latest", before)
    reference = subprocess.run(
        [sys.executable, *target], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    proc = memlens("run", *target, cwd=tmp_path)
    assert proc.returncode == reference.returncode == 1
    assert proc.stdout == reference.stdout == ""
    ours, python = _own(proc.stderr), reference.stderr.splitlines()
    if target[0] == "-m":  # Python's traceback also shows runpy's frames; memlens leaves them out
        ours, python = (lines[-3:] for lines in (ours, python))
    assert ours == python
    assert ours[-1].startswith("MemoryError" if target[0] == "too_complex.py" else "SyntaxError")
    assert proc.stderr.splitlines()[-1] == "memlens: no run written (the program did not start)"
    assert store.run_files() == [before]
    assert store.latest() == before


def test_a_program_whose_import_fails_to_compile_still_ran(tmp_path: Path) -> None:
    (tmp_path / "badmod.py").write_text("def broken(:\n    pass\n")
    (tmp_path / "main.py").write_text("keep = bytearray(3_000_000)\nimport badmod\n")
    proc = memlens("run", "--no-report", "main.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert "SyntaxError" in proc.stderr
    run = latest_run(tmp_path)
    assert run.info.exit_code == 1
    assert run.files[str(tmp_path / "main.py")].lines[1].live_bytes >= 3_000_000


LONG = """\
import time
keep = [bytearray(1 << 20) for _ in range(4)]
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def test_sigkill_after_4_s_leaves_latest_naming_the_incomplete_run(tmp_path: Path) -> None:
    store = Store(tmp_path)
    older = writer.write(sample_run(), store.runs_dir / "20261122-100000-1.mlrun")
    store.set_pointer("latest", older)
    (tmp_path / "long.py").write_text(LONG)
    proc = start_memlens("run", "--checkpoint-interval", "1", "long.py", cwd=tmp_path)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(4)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    latest = store.latest()
    assert latest is not None
    assert latest != older
    shown = memlens("show", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "INCOMPLETE (the program did not finish)" in shown.stdout
    assert "long.py:2" in shown.stdout


def test_sigkill_two_seconds_in_leaves_a_run_with_the_default_interval(tmp_path: Path) -> None:
    """The first checkpoint comes after 1 s, not after the full interval (5 s): a program the
    OOM killer ends a few seconds in still leaves a run."""
    store = Store(tmp_path)
    (tmp_path / "long.py").write_text(LONG)
    proc = start_memlens("run", "long.py", cwd=tmp_path)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    began = time.monotonic()
    # (Polled: on a loaded machine the first checkpoint, due 1 s after the start, may take a
    # while to write; before this change none came before 5 s.)
    while store.latest() is None and time.monotonic() - began < 3.5:
        time.sleep(0.05)
    proc.kill()
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert store.latest() is not None, "no checkpoint within 3.5 s of the program's start"
    shown = memlens("show", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "INCOMPLETE (the program did not finish)" in shown.stdout
    assert "long.py:2" in shown.stdout


#: A program with a big call tree (8**5 call paths): its final run takes a while to build and
#: write. It waits for its first checkpoint (argv[1]) before it ends.
TREE = """\
import os, sys, time
def f(d):
    if d == 0:
        return bytearray(64)
    r = []
    r.append(f(d - 1))
    r.append(f(d - 1))
    r.append(f(d - 1))
    r.append(f(d - 1))
    r.append(f(d - 1))
    r.append(f(d - 1))
    r.append(f(d - 1))
    r.append(f(d - 1))
    return r
keep = f(5)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
print("done", flush=True)
"""


def _temporaries(runs: Path) -> set[str]:
    try:
        return {p.name for p in runs.iterdir() if p.name.endswith(".tmp") and ".mlrun." in p.name}
    except FileNotFoundError:
        return set()


def test_sigkill_during_the_final_write_keeps_the_checkpoint_as_latest(tmp_path: Path) -> None:
    (tmp_path / "tree.py").write_text(TREE)
    store = Store(tmp_path)
    runs = store.runs_dir
    older = writer.write(sample_run(), runs / "20261122-090000-1.mlrun")
    store.set_pointer("latest", older)
    out = runs / "20261122-100000-1.mlrun"  # named by hand, in the store: latest follows it
    proc = start_memlens(
        "run",
        "--no-report",
        "--checkpoint-interval",
        "0.5",
        "-o",
        str(out),
        "tree.py",
        str(out),
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "done\n"
    # Checkpoints have stopped once the program ended; a temporary that appears now is the
    # final run's. Kill the process while it is there.
    seen = _temporaries(runs)
    deadline = time.monotonic() + 60
    while not (_temporaries(runs) - seen) and proc.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.002)
    proc.kill()
    proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the final write ended before the kill landed (a very fast machine)")
    assert proc.returncode == -signal.SIGKILL
    assert Store(tmp_path).latest() == out
    run = reader.read(out)
    assert run.info.complete is False  # the checkpoint
    assert run.info.checkpoint is True  # marked as one: editors never compare it
    assert Store(tmp_path).latest("program") == out
    shown = memlens("show", cwd=tmp_path)
    assert shown.returncode == 0
    assert "INCOMPLETE" in shown.stdout


def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


READ_LATEST = (
    "from memlens.runfile import reader; from memlens.store import Store; "
    "i = reader.read(Store().latest()).info; print('complete', i.complete, i.exit_code)"
)


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="cannot mount a small tmpfs here")
def test_full_disk_the_final_run_replaces_its_checkpoint(tmp_path: Path) -> None:
    (tmp_path / "tree.py").write_text(TREE)
    # How big the run is, on a roomy disk.
    probe = tmp_path / "probe"
    probe.mkdir()
    done = memlens(
        "run",
        "--no-report",
        "--checkpoint-interval",
        "0.5",
        "--dir",
        str(probe),
        "tree.py",
        str(probe / ".memlens" / "runs" / "latest"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    (size,) = [p.stat().st_size for p in Store(probe).run_files()]
    # A disk with room for one such run (and a little), not for the checkpoint and the run.
    disk = tmp_path / "disk"
    disk.mkdir()
    room = (int(size * 1.5) // 4096 + 4) * 4096
    script = f"""
set -e
mount -t tmpfs -o size={room} tmpfs {disk}
cd {tmp_path}
set +e
{sys.executable} -m memlens run --no-report --checkpoint-interval 0.5 --dir {disk} tree.py \\
    {disk}/.memlens/runs/latest
echo "exit=$?"
cd {disk}
ls -a .memlens/runs
{sys.executable} -c "{READ_LATEST}"
"""
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout.splitlines()
    assert "exit=0" in out, proc.stdout + proc.stderr
    files = [ln for ln in out if ln.endswith((".mlrun", ".tmp"))]
    assert len(files) == 1, out  # the final run, in the checkpoint's place; no temporary left
    assert out[-1] == "complete True 0", proc.stdout + proc.stderr
    assert "cannot write" not in proc.stderr
    assert "cannot write checkpoint" not in proc.stderr


def _run_with_lines(n: int, **info: object) -> Run:
    run = sample_run(**info)
    sf = run.files["/work/app.py"]
    lines = {i: LineStats(alloc_bytes=i, alloc_count=1, peak_bytes=i) for i in range(1, n + 1)}
    return replace(run, files={"/work/app.py": replace(sf, lines=lines)})


def test_full_disk_never_leaves_no_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulated disk of fixed size (works everywhere): what fits, and what is left."""
    checkpoint = _run_with_lines(5000, complete=False, exit_code=None)
    final = _run_with_lines(10000, exit_code=0)
    header_only = replace(final, files={}, call_tree=(), timeline=())
    sizes = {}
    for name, run in (("checkpoint", checkpoint), ("final", final), ("header", header_only)):
        sizes[name] = writer.write(run, tmp_path / f"{name}.mlrun").stat().st_size
        (tmp_path / f"{name}.mlrun").unlink()
    out = tmp_path / "r.mlrun"
    real = writer._write_db
    seen: list[list[str]] = []

    def disk(capacity: int) -> object:
        def write_db(run: Run, filename: str, seal: object = None) -> None:
            real(run, filename, seal)  # type: ignore[arg-type]
            used = sum(p.stat().st_size for p in tmp_path.iterdir())
            seen.append(sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")))
            if used > capacity:
                raise sqlite3.OperationalError("database or disk is full")

        return write_db

    # Room for the final run and a header, not for the final run beside the checkpoint.
    writer.write(checkpoint, out)
    capacity = sizes["final"] + sizes["header"] + 4096
    assert sizes["checkpoint"] + sizes["final"] > capacity
    monkeypatch.setattr(writer, "_write_db", disk(capacity))
    writer.write_final(final, out)
    assert reader.read(out) == final
    assert len(seen) == 3  # the final run (no room), the header, the final run again
    assert all(names == ["r.mlrun"] for names in seen)  # a run at the target all along
    assert [p.name for p in tmp_path.iterdir()] == ["r.mlrun"]
    # No room for the final run at all: the header stays (incomplete), and the error says so.
    monkeypatch.setattr(writer, "_write_db", real)
    writer.write(checkpoint, out)
    monkeypatch.setattr(writer, "_write_db", disk(sizes["checkpoint"] + sizes["header"]))
    with pytest.raises(OSError, match="only the run's header was kept") as err:
        writer.write_final(final, out)
    assert err.value.errno is not None
    kept = reader.read(out)
    assert kept.info.complete is False
    assert kept.files == {}
    assert kept.info.peak_traced_bytes == final.info.peak_traced_bytes
    assert [p.name for p in tmp_path.iterdir()] == ["r.mlrun"]
    # The disk filled up before the first checkpoint: the header, which fits, is written.
    out.unlink()
    monkeypatch.setattr(writer, "_write_db", disk(sizes["header"] + 4096))
    with pytest.raises(OSError, match="only the run's header was kept"):
        writer.write_final(final, out)
    kept = reader.read(out)
    assert (kept.info.complete, kept.files) == (False, {})
    assert kept.info.peak_traced_bytes == final.info.peak_traced_bytes
    assert [p.name for p in tmp_path.iterdir()] == ["r.mlrun"]
    # Other write errors are not a full disk: the checkpoint stays as it was.
    monkeypatch.setattr(writer, "_write_db", real)
    writer.write(checkpoint, out)
    monkeypatch.setattr(writer, "_write_db", _broken)
    with pytest.raises(OSError, match="disk I/O error"):
        writer.write_final(final, out)
    assert reader.read(out) == checkpoint


def _broken(run: Run, filename: str, seal: object = None) -> None:
    raise sqlite3.OperationalError("disk I/O error")


def test_checkpoint_points_latest_at_itself(tmp_path: Path) -> None:
    # Seen from the pointer file while the program still runs.
    (tmp_path / "long.py").write_text(LONG)
    proc = start_memlens("run", "--checkpoint-interval", "0.3", "long.py", cwd=tmp_path)
    try:
        runs = Store(tmp_path).runs_dir
        deadline = time.monotonic() + 60
        while read_pointer(str(runs), "latest")[0] is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        named, problem = read_pointer(str(runs), "latest")
        assert problem is None
        assert named is not None
        assert reader.read_info(named).complete is False
        assert os.path.basename(named) == Store(tmp_path).run_files()[0].name
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM


def test_checkpoints_never_become_the_programs_main_thread(tmp_path: Path) -> None:
    # Checkpoints run in memlens's own thread. If anything they import imported threading
    # first (3.12's sysconfig does), threading would take that thread for the main one: the
    # program would see the wrong main thread, and the interpreter would wait for it at exit.
    script = tmp_path / "prog.py"
    script.write_text(
        "import time\n"
        "end = time.monotonic() + 1.5\n"
        "keep = []\n"
        "while time.monotonic() < end:\n"
        "    keep.append(bytearray(1000))\n"
        "import threading\n"
        "print(threading.current_thread() is threading.main_thread())\n"
    )
    proc = memlens(
        "run", "--no-report", "--checkpoint-interval", "0.2", "-o", str(tmp_path / "r.mlrun"),
        str(script), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "True\n"


#: A big call tree (2^15 distinct paths, several of the tree's chunks) and a thread that goes on
#: allocating and freeing, on known paths and new ones, while the run is built and written
#: (the run's last snapshot gives the tree's chunks back as it copies them).
STILL_ALLOCATING = """\
import sys
import threading
import time

sys.setrecursionlimit(10_000)


def walk(level, path):
    if level == 0:
        return bytearray(32)  # @leaf
    if path & 1:
        return walk(level - 1, path >> 1)
    return walk(level - 1, path >> 1)


def churn():
    kept = []
    n = 0
    while True:
        kept.append([walk(8, n + i) for i in range(64)])
        n += 64
        if len(kept) > 40:
            del kept[:20]


threading.Thread(target=churn, daemon=True).start()
paths = [walk(15, p) for p in range(2**15)]
time.sleep(0.05)
print(len(paths))
"""


@pytest.mark.parametrize("mode", [("--exact",), ("--sample", "4KiB", "--seed", "7")])
def test_a_thread_allocating_while_a_big_tree_is_written(
    tmp_path: Path, mode: tuple[str, ...]
) -> None:
    """The program's other thread still allocates and frees while memlens takes the last
    snapshot, builds and writes the run (charging nodes whose memory the snapshot gave back):
    the run is written, the program's output and exit code are plain python's, and the kept
    objects are on their line."""
    script = tmp_path / "still.py"
    script.write_text(STILL_ALLOCATING)
    done = memlens("run", "--no-report", *mode, str(script), cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "32768\n"), done.stderr[-2000:]
    run = latest_run(tmp_path)
    number = STILL_ALLOCATING.splitlines().index("        return bytearray(32)  # @leaf") + 1
    leaf = run.files[str(script)].lines[number]
    # Every kept bytearray (an object and its buffer) at least, whatever the thread did.
    assert leaf.live_count >= 2 * 2**15 * 0.9
    assert leaf.incl_live_bytes >= leaf.live_bytes
