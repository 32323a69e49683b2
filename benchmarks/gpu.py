"""What GPU memory (PyTorch CUDA) costs memlens, beside plain and beside PyTorch's own recording.

``python benchmarks/gpu.py [--rounds N]``. No GPU is needed: per allocation, memlens adds
nothing to what PyTorch's own recording costs (``_record_memory_history``: the allocator
records every event itself; memlens only turns it on and reads it at the end). What memlens
adds is measured here, each beside a baseline measured in the same invocation:

1. the import hook that waits for ``torch.cuda`` (a meta-path finder consulted on every import),
   on ``import torch`` (when PyTorch is installed: the heaviest import a GPU program makes),
   CPU time against the same import without it;
2. reading the history at the end of the run (``memlens.gpu``: check, attribute, replay, charge
   to lines) on synthetic histories of 1,000 to 100,000 events (PyTorch keeps at most 100,000
   for memlens) with stacks 40 frames deep, against what PyTorch's own
   ``torch.cuda.memory._dump_snapshot`` does with the same history to save it for its viewer
   (``pickle.dumps``);
3. ``memlens import torch-snapshot``'s pickle reader (plain data only, in Python) against the
   standard C unpickler (which would run any code the file asks for), on the real snapshot of
   tests/data/torch_cuda and on a 100,000-event one.

Ratios are medians over rounds; the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "server"))

from memlens import gpu  # noqa: E402
from memlens.imports._build import Sources  # noqa: E402
from memlens.imports.plain_pickle import loads  # noqa: E402
from memlens.model import Run, RunInfo  # noqa: E402

FIXTURE = HERE.parent / "tests" / "data" / "torch_cuda" / "snapshot-python-stacks.pickle"


def _child_cpu(code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_hook(rounds: int) -> None:
    probe = subprocess.run([sys.executable, "-c", "import torch"], check=False, capture_output=True)
    if probe.returncode != 0:
        print("1. import hook: PyTorch is not installed here (skipped)")
        return
    plain = "import torch"
    hooked = "from memlens.tracing import cuda\ncuda.watch()\nimport torch"
    ratios, plains = [], []
    for i in range(rounds):
        order = [plain, hooked] if i % 2 else [hooked, plain]
        got = {code: _child_cpu(code) for code in order}
        ratios.append(got[hooked] / got[plain])
        plains.append(got[plain])
    print(
        f"1. import torch with the torch.cuda hook: {statistics.median(ratios):.3f}x plain "
        f"(plain {statistics.median(plains):.2f} s CPU, {rounds} rounds)"
    )


def synthetic(events: int, depth: int = 40) -> dict[str, object]:
    """A training loop's history: allocations and frees from a few hundred call sites, every
    fourth allocation frameless (a backward pass), stacks ``depth`` frames deep."""
    site_packages = "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py"
    roots = [{"filename": "/proj/train.py", "line": 40, "name": "<module>"}]
    roots += [
        {"filename": site_packages, "line": 1700 + i, "name": "_call_impl"}
        for i in range(depth - 3)
    ]
    stacks = []
    for site in range(300):
        stacks.append(
            [
                {"filename": "/proj/model.py", "line": 10 + site % 50, "name": "forward"},
                {"filename": "/proj/train.py", "line": 20 + site % 7, "name": "step"},
                *roots,
            ]
        )
    backward = [
        {
            "filename": "/venv/lib/python3.12/site-packages/torch/_tensor.py",
            "line": 631,
            "name": "backward",
        },
        {"filename": "/proj/train.py", "line": 25, "name": "step"},
        *roots,
    ]
    trace: list[dict[str, object]] = []
    live: list[int] = []
    t = 1_700_000_000_000_000
    for i in range(events):
        t += 3
        if live and (i % 3 == 2 or len(live) > 500):
            addr = live.pop(0)
            trace.append(
                {"action": "free_completed", "addr": addr, "size": 4096, "time_us": t, "frames": []}
            )
            continue
        addr = 1 << 40 | i << 12
        live.append(addr)
        frames = [] if i % 4 == 3 else (backward if i % 4 == 2 else stacks[i % len(stacks)])
        trace.append(
            {"action": "alloc", "addr": addr, "size": 4096, "time_us": t, "frames": frames}
        )
    return {"segments": [], "device_traces": [trace]}


def end_of_run(rounds: int) -> None:
    empty = Run(info=RunInfo((), "", "", "", "", 0.0, 0, 0, "exact", None, 0, 0, True))
    print("2. reading the history at the end of the run (per 1,000 events):")
    print(f"   {'events':>8}  {'memlens':>9}  {'pickle.dumps':>12}  {'ratio':>6}")
    for n in (1_000, 10_000, 100_000):
        snap = synthetic(n)
        ours, theirs = [], []
        for _ in range(rounds):
            began = time.process_time()
            history = gpu.read_snapshot(snap)
            gpu.attach(
                empty, gpu.build(history, lambda f: None if "site-packages" in f else f, Sources())
            )
            ours.append(time.process_time() - began)
            began = time.process_time()
            pickle.dumps(snap, protocol=4)
            theirs.append(time.process_time() - began)
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"   {n:>8,}  {a / n * 1e6:>7.1f}ms  {b / n * 1e6:>10.1f}ms  {a / b:>5.1f}x")


def pickle_reader(rounds: int) -> None:
    print("3. memlens import torch-snapshot's reader against the C unpickler:")
    for name, data in (
        (f"{FIXTURE.name} ({FIXTURE.stat().st_size / 1024:.0f} KiB)", FIXTURE.read_bytes()),
        ("100,000 events", pickle.dumps(synthetic(100_000), protocol=4)),
    ):
        ours, theirs = [], []
        for _ in range(rounds):
            began = time.process_time()
            loads(data)
            ours.append(time.process_time() - began)
            began = time.process_time()
            pickle.loads(data)  # the baseline, on our own data
            theirs.append(time.process_time() - began)
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"   {name}: {a:.2f} s vs {b:.3f} s ({a / b:.0f}x), {len(data) / a / 1e6:.1f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    import_hook(args.rounds)
    end_of_run(args.rounds)
    pickle_reader(max(1, args.rounds // 2))


if __name__ == "__main__":
    main()
