"""Overhead benchmark: each workload plain, under tracemalloc and under memlens, in one run.

Usage: ``python benchmarks/run.py [--repeat N] [--only NAME ...] [--json OUT]``

Every configuration runs as its own process, interleaved round-robin, after one warm-up run,
``--repeat`` times; the minimum CPU time (user + system, from ``wait4``: far less sensitive to
other load on a shared machine than wall time), the minimum wall time and the maximum resident
set size are kept. Figures are printed as ratios against the plain run measured in the same
invocation (absolute times mean little here). memlens runs through ``memlens run`` exactly as a
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


def measure(argv: list[str]) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, max RSS bytes) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed ({proc.returncode}): {argv}\n{err}")
    return usage.ru_utime + usage.ru_stime, elapsed, usage.ru_maxrss * 1024


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
            best = {c: [float("inf"), float("inf"), 0.0] for c in cfgs}
            for argv in cfgs.values():  # warm-up: bytecode caches, page cache
                measure([*argv, script])
            for _ in range(args.repeat):
                for cfg, argv in cfgs.items():
                    cpu, wall, rss = measure([*argv, script])
                    best[cfg][0] = min(best[cfg][0], cpu)
                    best[cfg][1] = min(best[cfg][1], wall)
                    best[cfg][2] = max(best[cfg][2], rss)
            results[name] = {
                c: {"cpu_s": v[0], "wall_s": v[1], "rss_bytes": v[2]} for c, v in best.items()
            }
            print(_row(name, results[name]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def _row(name: str, r: dict[str, dict[str, float]]) -> str:
    base = r["plain"]["cpu_s"]
    base_rss = r["plain"]["rss_bytes"]
    parts = [f"{name:14s} plain {base:5.2f}s cpu"]
    tm_over = r["tracemalloc"]["cpu_s"] / base - 1
    for cfg in ("tracemalloc", "memlens-exact", "memlens-sample"):
        over = r[cfg]["cpu_s"] / base - 1
        wall = r[cfg]["wall_s"] / r["plain"]["wall_s"] - 1
        mem = r[cfg]["rss_bytes"] / base_rss
        parts.append(f"{cfg} {over:+7.1%} (wall {wall:+.0%}, rss x{mem:.2f})")
    ex_over = r["memlens-exact"]["cpu_s"] / base - 1
    ratio = ex_over / tm_over if tm_over > 0.05 else float("nan")
    parts.append(f"exact/tracemalloc overhead {ratio:.2f}")
    return " | ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
