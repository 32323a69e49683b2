"""Steady-state CPU cost of tracing depth-60 churn, read inside the process.

Usage: ``python benchmarks/steady.py [--python PYTHON] [--rounds N] [--configs CFG ...]``

Each configuration (plain, ``memlens run --exact``, ``memlens run --sample 128KiB``) runs
`deep_stack_60`'s churn (``workloads/_deep.py``: 100,000 rounds, 60 frames down) 20 times in
one process and keeps its fastest pass; the processes take turns ``--rounds`` times, and each
configuration's figure is its fastest pass over all rounds, divided by plain's. Start-up,
the run's end and the run file are outside the timed passes, and the fastest pass is the one
the machine's other load disturbed least: on a shared machine, where ``run.py``'s whole-process
CPU times swing by tens of percent from run to run, this reads the tracer's own cost per round
to a few percent (it is no substitute for ``run.py``'s figures, which include everything a
user waits for).
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PASSES = 20
ROUNDS_PER_PASS = 100_000


def inner() -> None:
    sys.path.insert(0, str(HERE / "workloads"))
    nest = importlib.import_module("_deep").nest

    best = float("inf")
    for _ in range(PASSES):
        start = time.perf_counter()
        nest(60, ROUNDS_PER_PASS)
        best = min(best, time.perf_counter() - start)
    print(f"STEADY {best:.6f}", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="the interpreter to measure")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--configs", nargs="*", default=["memlens-exact", "memlens-sample"])
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner()
        return 0
    me = [str(Path(__file__).resolve()), "--inner"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        memlens = [args.python, "-m", "memlens", "run", "--no-report", "--checkpoint-interval"]
        memlens += ["0", "-o", os.path.join(tmp, "steady.mlrun")]
        argv = {
            "plain": [args.python, *me],
            "memlens-exact": [*memlens, "--exact", *me],
            "memlens-sample": [*memlens, "--sample", "128KiB", *me],
        }
        chosen = ["plain", *(c for c in args.configs if c != "plain")]
        best = dict.fromkeys(chosen, float("inf"))
        for _ in range(args.rounds):
            for cfg in chosen:
                proc = subprocess.run(
                    argv[cfg], check=False, capture_output=True, text=True, env=env
                )
                found = [ln for ln in proc.stderr.splitlines() if ln.startswith("STEADY ")]
                if proc.returncode != 0 or not found:
                    raise SystemExit(f"{cfg} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
                best[cfg] = min(best[cfg], float(found[0].split()[1]))
    plain = best["plain"]
    parts = [f"deep_stack_60 churn, fastest of {PASSES} passes x {args.rounds} rounds"]
    parts.append(f"plain {plain * 1e3:.1f} ms")
    parts += [f"{cfg} {best[cfg] / plain - 1:+.1%}" for cfg in chosen if cfg != "plain"]
    print(" | ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
