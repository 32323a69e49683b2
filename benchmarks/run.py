"""Overhead benchmark: each workload plain, under tracemalloc and under memlens, in one run.

Usage: ``python benchmarks/run.py [--repeat N] [--only NAME ...] [--json OUT]``

Every configuration runs as its own process, interleaved round-robin, ``--repeat`` times; the
minimum wall time and the maximum resident set size (from ``wait4``) are kept. Figures are
printed as ratios against the plain run measured in the same invocation (this machine is
shared and noisy: absolute times mean little). memlens runs through ``memlens run`` exactly as a
user would (``--no-report``, run file written to a temporary directory), so its figures include
start-up, the snapshot and writing the run file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = sorted(p.stem for p in (HERE / "workloads").glob("*.py"))


def configs(tmp: str) -> dict[str, list[str]]:
    py = sys.executable
    out = os.path.join(tmp, "bench.mlrun")
    memlens = [py, "-m", "memlens", "run", "--no-report", "-o", out]
    return {
        "plain": [py],
        "tracemalloc": [py, "-X", "tracemalloc=1"],
        "memlens-exact": [*memlens, "--exact"],
        "memlens-sample": [*memlens, "--sample", "128KiB"],
    }


# Users' Pythons cache bytecode; a session that sets PYTHONDONTWRITEBYTECODE would make every
# memlens module compile on each run and bias the figures.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def measure(argv: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed ({proc.returncode}): {argv}\n{err}")
    return elapsed, usage.ru_maxrss * 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--json", default=None, help="also write the figures as JSON here")
    args = ap.parse_args()
    names = [w for w in WORKLOADS if not args.only or w in args.only]
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = configs(tmp)
        for name in names:
            script = str(HERE / "workloads" / f"{name}.py")
            best: dict[str, list[float]] = {c: [float("inf"), 0.0] for c in cfgs}
            for argv in cfgs.values():  # warm-up: bytecode caches, page cache
                measure([*argv, script])
            for _ in range(args.repeat):
                for cfg, argv in cfgs.items():
                    t, rss = measure([*argv, script])
                    best[cfg][0] = min(best[cfg][0], t)
                    best[cfg][1] = max(best[cfg][1], rss)
            results[name] = {c: {"seconds": v[0], "rss_bytes": v[1]} for c, v in best.items()}
            print(_row(name, results[name]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def _row(name: str, r: dict[str, dict[str, float]]) -> str:
    base = r["plain"]["seconds"]
    base_rss = r["plain"]["rss_bytes"]
    parts = [f"{name:14s} plain {base:6.2f}s"]
    tm_over = r["tracemalloc"]["seconds"] / base - 1
    for cfg in ("tracemalloc", "memlens-exact", "memlens-sample"):
        over = r[cfg]["seconds"] / base - 1
        mem = r[cfg]["rss_bytes"] / base_rss
        parts.append(f"{cfg} {over:+7.1%} (rss x{mem:.2f})")
    ex_over = r["memlens-exact"]["seconds"] / base - 1
    parts.append(
        f"exact/tracemalloc overhead {ex_over / tm_over if tm_over > 0 else float('nan'):.2f}"
    )
    return " | ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
