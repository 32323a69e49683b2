"""The tracer started in a program that is already running (what ``memlens attach`` does): frames
already on the stack, code objects never seen, threads already running, ``sys.monitoring`` tool
ids the program holds, blocks allocated before it started; and stopped while the program's
threads go on allocating."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

MIB = 1024 * 1024

#: A program that starts tracing 20 frames deep, with a thread waiting and blocks allocated
#: before. It prints the figures of its tagged lines as JSON.
PROGRAM = """
import json, re, sys, threading
import memlens

MIB = 1 << 20
HOLD = {hold}
before = [bytearray(MIB) for _ in range(8)]  # never counted: allocated before tracing
returns = [0]
if sys.version_info >= (3, 12):
    mon = sys.monitoring
    for tool in HOLD:
        mon.use_tool_id(tool, "the program's")
        mon.register_callback(tool, mon.events.PY_RETURN, lambda code, offset, value: returns.__setitem__(0, returns[0] + 1))
        mon.set_events(tool, mon.events.PY_RETURN)

ready, go, out = threading.Event(), threading.Event(), []

def worker():
    ready.set()
    go.wait()  # running (waiting in C) when tracing starts
    out.append(bytearray(3 * MIB))  # @thread

thread = threading.Thread(target=worker)
thread.start()
ready.wait()
kept = []

def deep(n):
    if n:
        result = deep(n - 1)  # @call
        kept.append(bytearray(MIB))  # @outer
        return result
    memlens.start()
    kept.append(bytearray(2 * MIB))  # @inner
    return 0

deep(20)  # @top
go.set()
thread.join()
del before[-2:]  # blocks from before freed while tracing: nothing to take back
grown = before[0]
grown.extend(bytes(MIB))  # @grown
from memlens import _tracer
watched = _tracer.watches_exits()
run = memlens.stop()
returns_while_traced = returns[0]
source = open(__file__).read().splitlines()
figures = {{}}
for number, text in enumerate(source, start=1):
    tag = re.search(r"# @(\\w+)", text)
    stats = run.files[__file__].lines.get(number) if tag else None
    if stats is not None:
        figures[tag[1]] = [stats.alloc_bytes, stats.live_bytes, stats.peak_bytes,
                           stats.incl_alloc_bytes]
functions = {{f.qualname: f.alloc_bytes for f in run.files[__file__].functions}}
print(json.dumps({{"figures": figures, "functions": functions, "watched": watched,
                  "peak": run.info.peak_traced_bytes, "returns": returns_while_traced}}))
"""


def _run(tmp_path: Path, hold: tuple[int, ...]) -> dict[str, Any]:
    script = tmp_path / "mid_run.py"
    script.write_text(textwrap.dedent(PROGRAM.format(hold=hold)))
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _near(value: int, expected: int, slack: int = 64 * 1024) -> bool:
    return expected <= value <= expected + slack


@pytest.mark.parametrize(
    "hold",
    [(), (3, 4), (0, 1, 2, 3, 4, 5)],
    ids=["no-tool-held", "memlens-ids-held", "every-id-held"],
)
def test_tracing_started_mid_run_charges_the_right_lines(
    tmp_path: Path, hold: tuple[int, ...]
) -> None:
    out = _run(tmp_path, hold)
    fig = out["figures"]
    # The line that allocated after tracing started, 21 frames deep.
    assert _near(fig["inner"][0], 2 * MIB), fig
    # The 20 frames that were on the stack before: each allocated 1 MiB after its callee
    # returned, on its own line.
    assert _near(fig["outer"][0], 20 * MIB), fig
    assert _near(fig["outer"][1], 20 * MIB), fig
    # Inclusive figures through frames older than tracing: the recursive call line holds what
    # the calls below it allocated (each path once), the module's call all of it.
    assert _near(fig["call"][3], 21 * MIB, 128 * 1024), fig
    assert _near(fig["top"][3], 22 * MIB, 128 * 1024), fig
    assert _near(out["functions"]["deep"], 22 * MIB, 128 * 1024), out["functions"]
    # A thread that was running (waiting) when tracing started.
    assert _near(fig["thread"][0], 3 * MIB), fig
    # A block from before, resized: its new block is the resizing line's (the old one was never
    # counted, so its release is not either), beside the 1 MiB of bytes it was extended with.
    assert _near(fig["grown"][0], 3 * MIB), fig
    assert _near(fig["grown"][1], 2 * MIB), fig
    # Blocks from before that were freed take nothing off: the peak is what was allocated since
    # (all of it, with the temporary bytes of the last line).
    assert _near(out["peak"], 28 * MIB, 256 * 1024), out["peak"]
    if sys.version_info >= (3, 12):
        # memlens watches frame exits only with a tool id the program leaves free...
        assert out["watched"] == (len(hold) < 6)
        # ...and the program's own tools keep their events while it traces.
        assert out["returns"] >= (20 if hold else 0)


#: Threads call the C allocator (through ctypes, without the GIL) as fast as they can while the
#: tracer is started, stopped and its tables freed, over and over.
STRESS = """
import ctypes, sys, threading, time
from memlens import _tracer

libc = ctypes.CDLL(None)
calls = {}
stop = False

def churn():
    while not stop:
        blocks = [calls["malloc"](64) for _ in range(200)]
        for block in blocks:
            calls["free"](block)

_tracer.start("exact", 0, 0, 10.0, True, True)
calls["malloc"] = libc.malloc  # looked up while tracing: memlens's own hook
calls["malloc"].restype = ctypes.c_void_p
calls["free"] = libc.free
calls["free"].argtypes = [ctypes.c_void_p]
_tracer.stop()
_tracer.reset()
threads = [threading.Thread(target=churn) for _ in range(3)]
for thread in threads:
    thread.start()
for _ in range(int(sys.argv[1])):
    _tracer.start("exact", 0, 0, 10.0, True, True)
    time.sleep(0.002)
    _tracer.stop()
    _tracer.snapshot()
    _tracer.reset()
stop = True
for thread in threads:
    thread.join()
print("ok")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="native memory is Linux only")
def test_stopping_while_threads_allocate_without_the_gil(tmp_path: Path) -> None:
    """A detached program goes on: events made without the GIL that saw the run active must be
    done before its tables are freed (without that wait, this crashed within 150 cycles)."""
    script = tmp_path / "stress.py"
    script.write_text(textwrap.dedent(STRESS))
    proc = subprocess.run(
        [sys.executable, str(script), "100"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok"), proc.stderr[-2000:]


def _numpy_malloc(numpy: Any) -> int:
    """The malloc function of numpy's current data-memory handler (NEP 49), read through its C
    API: PyDataMem_GetHandler (slot 305), then the handler's allocator (after a 127-byte name
    and a version byte, a context pointer, then malloc)."""
    import ctypes  # noqa: PLC0415 - this test only

    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    core = getattr(numpy, "_core", None) or numpy.core
    table = (ctypes.c_void_p * 400).from_address(
        get_pointer(core._multiarray_umath._ARRAY_API, None)
    )
    handler = ctypes.PYFUNCTYPE(ctypes.py_object)(int(table[305] or 0))()
    address = get_pointer(handler, b"mem_handler")
    return int(ctypes.c_void_p.from_address(address + 128 + 8).value or 0)


def test_a_stopped_tracer_leaves_nothing_installed() -> None:
    """After stop(): no allocator or arena hook, numpy's default handler with its own
    functions, no C-library interposition, no sys.monitoring tool (memlens attach reports
    anything that stays; here nothing may)."""
    numpy = pytest.importorskip("numpy")
    import memlens  # noqa: PLC0415 - the tracer is loaded by the tests that run it
    from memlens import _tracer  # noqa: PLC0415

    own = _numpy_malloc(numpy)
    with memlens.profile():
        data = numpy.ones(MIB)
        assert _tracer.leftovers() == ["the tracer (still tracing)"]
        assert _numpy_malloc(numpy) != own  # routed through memlens while tracing
    assert _tracer.leftovers() == []
    assert _numpy_malloc(numpy) == own
    assert float(data.sum()) == MIB  # an array made while traced is freed by numpy's own free
    del data
    with memlens.profile() as again:  # a new run routes numpy through memlens again
        more = numpy.ones(MIB)
    assert again.run is not None
    assert again.run.info.peak_traced_bytes >= 8 * MIB
    assert _numpy_malloc(numpy) == own
    del more
