"""The Python API: `memlens.profile()`, `start()`, `stop()` with real keyword parameters."""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import memlens
from memlens.errors import MemlensError
from memlens.runfile import reader
from memlens.tracing import tracer
from tests.cli.memlens_cmd import memlens as memlens_command

from .conftest import tagged

#: tracer.start's parameters that memlens run (or attach) alone uses (its launcher, the command
#: it ran, pointing the store's `latest` at each checkpoint, a process that was running before).
INTERNAL = {"hidden", "command", "on_checkpoint", "workspace_root", "attached", "sources", "amend"}


@pytest.mark.parametrize("function", [memlens.profile, memlens.start])
def test_signature_names_every_option_with_the_tracers_default(function: object) -> None:
    params = inspect.signature(function).parameters  # type: ignore[arg-type]
    start = inspect.signature(tracer.start).parameters
    # Every option of the tracer (a new one too) is a real keyword parameter here.
    assert set(params) == set(start) - INTERNAL
    assert list(params)[:2] == ["mode", "sample_interval"]
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in params.values())
    for name, param in params.items():
        assert param.default == start[name].default, name
    stop = inspect.signature(memlens.stop).parameters
    assert {n: p.default for n, p in stop.items()} == {
        n: p.default for n, p in inspect.signature(tracer.stop).parameters.items()
    }


def test_profile_takes_its_options_as_keywords() -> None:
    with memlens.profile("sampling", 4096, seed=3, libraries=True) as p:
        data = [bytearray(10_000) for _ in range(200)]
    assert len(data) == 200
    assert p.run is not None
    assert p.run.info.mode == "sampling"
    assert p.run.info.sample_interval_bytes == 4096
    assert p.run.info.seed == 3
    with pytest.raises(TypeError):
        memlens.profile(sampling=True)  # type: ignore[call-arg]
    with pytest.raises(MemlensError, match="the seed must be an integer from 1 to"):
        memlens.start("sampling", seed=-1)


def test_a_profile_saved_into_the_store_is_latest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, allocator_hooks_restored: None
) -> None:
    """``save=True``: the run goes into the store of the working directory, where `memlens
    show` and the editor find it; ``save=PATH``: the store rooted there."""
    monkeypatch.chdir(tmp_path)
    with memlens.profile(save=True) as p:
        data = [bytearray(100_000) for _ in range(50)]
    assert len(data) == 50
    assert p.run is not None
    assert p.path is not None
    runs = tmp_path / ".memlens" / "runs"
    assert Path(p.path).parent == runs
    assert (runs / "latest").read_text().strip() == Path(p.path).name
    saved = reader.read(p.path)
    assert saved.info.workspace_root == os.path.realpath(tmp_path)
    assert saved.info.peak_traced_bytes == p.run.info.peak_traced_bytes >= 5_000_000
    shown = memlens_command("show", "--no-listing", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "test_api.py" in shown.stdout

    elsewhere = tmp_path / "proj"
    memlens.start(save=elsewhere)
    kept = bytearray(1_000_000)
    run = memlens.stop()
    assert len(kept) == 1_000_000
    (saved_path,) = (elsewhere / ".memlens" / "runs").glob("*.mlrun")
    assert reader.read(saved_path).info.peak_traced_bytes == run.info.peak_traced_bytes
    assert (elsewhere / ".memlens" / "runs" / "latest").read_text().strip() == saved_path.name
    with memlens.profile() as plain_profile:
        pass
    assert plain_profile.path is None
    assert sorted(p.name for p in runs.glob("*.mlrun")) == [Path(p.path).name]


FORKS = """\
import contextlib
import os
import sys
import threading
import time

import memlens

if sys.argv[1] == "thread":
    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()
traced = memlens.profile(checkpoint="ck.mlrun") if sys.argv[2] == "memlens" else contextlib.nullcontext()
with traced:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print("forked")
"""


@pytest.mark.parametrize("threads", ["none", "thread"])
def test_forking_under_the_api_warns_as_without_memlens(tmp_path: Path, threads: str) -> None:
    """Python 3.12+ warns at os.fork in a multi-threaded process (an error under -W error):
    memlens's own threads (the timeline's, the checkpoints') do not make it warn."""
    (tmp_path / "forks.py").write_text(FORKS)

    def forks(tracing: str, *options: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, *options, "forks.py", threads, tracing]
        return subprocess.run(
            argv, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
        )

    for options in ((), ("-W", "error::DeprecationWarning")):
        reference, traced = forks("plain", *options), forks("memlens", *options)
        assert (traced.returncode, traced.stdout) == (reference.returncode, reference.stdout)
        assert re.sub(r"pid=\d+", "", traced.stderr) == re.sub(r"pid=\d+", "", reference.stderr)
        if sys.version_info >= (3, 12) and sys.platform == "linux" and not options:
            assert ("multi-threaded" in traced.stderr) == (threads == "thread"), traced.stderr


def test_a_run_too_big_to_checkpoint_early_gets_its_first_checkpoint_at_the_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first checkpoint comes after 1 s unless the run's size says it would cost more than
    2% of the time so far: then at the interval, as every checkpoint did before the ramp."""
    monkeypatch.setattr(tracer, "_CHECKPOINT_S_PER_NODE", 1.0)  # every run is "big"
    path = tmp_path / "ck.mlrun"
    with memlens.profile(checkpoint=path, checkpoint_interval_s=3.0):
        keep = [bytearray(100) for _ in range(10)]
        time.sleep(1.8)
        early = path.exists()
        deadline = time.monotonic() + 20
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        later = path.exists()
    assert keep
    assert not early, "a big run was checkpointed before the interval"
    assert later, "no checkpoint at the interval"


@pytest.mark.parametrize("seconds", [0, -1, -2.5, float("nan"), float("inf")])
def test_a_checkpoint_interval_that_is_not_a_positive_number_is_refused(
    tmp_path: Path, seconds: float
) -> None:
    with (
        pytest.raises(MemlensError, match="checkpoint interval must be a positive number"),
        memlens.profile(checkpoint=tmp_path / "ck.mlrun", checkpoint_interval_s=seconds),
    ):
        pass
    assert not tracer.is_tracing()


REPEATED_RUNS = """
import ctypes
import gc
import memlens

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def in_use():
    info = libc.mallinfo2()
    return info.uordblks + info.hblkhd  # the C heap's bytes in use, mmap'd blocks included

def work():
    kept = [(i, str(i) * 3) for i in range(150_000)]  # ~5,000 pymalloc pages of the block map
    return len(kept)

sizes = []
for _ in range(14):
    with memlens.profile(holders=False):
        work()
    gc.collect()
    sizes.append(in_use())
print(sizes[3], sizes[-1])
"""


def test_repeated_runs_give_their_memory_back(tmp_path: Path) -> None:
    """Each exact run's block map (a side table per pymalloc page it tracked, ~340 KiB a run
    here) is freed when the next one starts: ten more runs leave the C heap's bytes in use
    where they were (a side table left behind by blocks::destroy() fails this)."""
    if not hasattr(__import__("ctypes").CDLL(None), "mallinfo2"):
        pytest.skip("needs glibc's mallinfo2 (2.33+)")
    script = tmp_path / "runs.py"
    script.write_text(REPEATED_RUNS)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr
    early, late = (int(x) for x in proc.stdout.split())
    assert late - early < 512 * 1024, (early, late)


OWN_WORK = """
import json, sys
import memlens

def work():
    return [0] * 10  # @work

mode = sys.argv[1]
figures = {}

def lines(run):
    for path, source in run.files.items():
        if path.endswith("own.py"):
            for number, s in source.lines.items():
                figures.setdefault(number, [0, 0, 0])
                figures[number][0] += s.alloc_count
                figures[number][1] += s.alloc_bytes
                figures[number][2] += s.live_bytes

with memlens.profile(mode, 1, timeline_interval_ms=0, checkpoint=sys.argv[2]) as p:  # @with
    x = work()
lines(p.run)
memlens.start(mode, 1, timeline_interval_ms=0, checkpoint=sys.argv[2])  # @start
y = work()
lines(memlens.stop())  # @stop
print(json.dumps(figures))
"""


@pytest.mark.parametrize("mode", ["exact", "sampling"])
def test_memlens_own_start_and_stop_are_not_charged_to_the_calling_lines(
    tmp_path: Path, mode: str
) -> None:
    """What memlens does as it starts and stops (sharing sys.monitoring, the checkpoint
    thread, the end of the run) is not the program's: the lines that start and stop tracing
    have nothing of it (3.12+: 20 KB in 230 blocks were charged to them). Python 3.10 still
    allocates a frame object for each memlens function there the first time it is called (kept
    for the next call), before memlens can pause the thread: at most two blocks a line."""
    script = tmp_path / "own.py"
    script.write_text(OWN_WORK)
    proc = subprocess.run(
        [sys.executable, str(script), mode, str(tmp_path / "run.mlrun")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    figures = {int(k): v for k, v in json.loads(proc.stdout).items()}
    # The program's own line is there, from both runs (sampling every byte: every allocation
    # is a sample): the list and its items, twice.
    work = figures[tagged(script, "work")]
    assert work[0] >= 2 * 2, figures
    assert work[1] >= 2 * 88, figures
    for line in (tagged(script, tag) for tag in ("with", "start", "stop")):
        if sys.version_info >= (3, 11):
            assert figures.get(line, [0, 0, 0]) == [0, 0, 0], (line, figures)
        else:
            assert figures.get(line, [0, 0, 0])[0] <= 2, (line, figures)
