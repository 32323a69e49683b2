"""What following reused blocks costs (Python 3.13+: the reference tracer, docs/how-it-works.md
"Free lists"): exact mode with and without it, on the workloads where objects are made most.

Usage: ``python benchmarks/reuse.py [--python PYTHON] [--repeat N] [--only NAME ...]
[--instructions]``

Both memlens configurations run through the same driver (``_memlens_run.py``, which only
changes the tracer's ``track_reuse`` option), in rounds as ``run.py`` measures: the figure is
the median over rounds of CPU time divided by plain's in the same round. With
``--instructions`` each runs once under callgrind instead (deterministic: a difference of a
fraction of a percent is real).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import run as harness

WORKLOADS = ("records", "live_records", "deep_stack_60", "churn")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--instructions", action="store_true")
    args = ap.parse_args()
    driver = os.path.join(harness.HERE, "_memlens_run.py")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.mlrun")
        quiet = (
            ["--checkpoint-interval", "0", "--timeline-interval", "0"] if args.instructions else []
        )
        run_args = ["--", "--no-report", "--no-holders", "--exact", *quiet, "-o", out]
        cfgs = {
            "plain": [args.python],
            "exact": [args.python, driver, "track_reuse=1", *run_args],
            "exact-no-reuse": [args.python, driver, "track_reuse=0", *run_args],
        }
        for name in args.only or WORKLOADS:
            script = os.path.join(harness.HERE, "workloads", f"{name}.py")
            if args.instructions:
                n = {cfg: harness.count_instructions([*argv, script]) for cfg, argv in cfgs.items()}
                extra = (n["exact"] - n["exact-no-reuse"]) / n["plain"]
                print(
                    f"{name:14s} plain {n['plain'] / 1e9:6.2f} G | exact-no-reuse "
                    f"{(n['exact-no-reuse'] - n['plain']) / n['plain']:+7.1%} | exact "
                    f"{(n['exact'] - n['plain']) / n['plain']:+7.1%} | following reused blocks "
                    f"{extra:+.1%} of plain",
                    flush=True,
                )
                continue
            r = harness.compare(cfgs, script, args.repeat)
            with_, without = r["exact"]["cpu_ratio"] - 1, r["exact-no-reuse"]["cpu_ratio"] - 1
            print(
                f"{name:14s} plain {r['plain']['cpu_s']:5.2f}s cpu | exact-no-reuse {without:+7.1%}"
                f" | exact {with_:+7.1%} | following reused blocks {with_ - without:+.1%} of plain",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
