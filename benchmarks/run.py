"""Overhead benchmark: each workload plain, under tracemalloc and under memlens, in one run.

Usage: ``python benchmarks/run.py [--repeat N] [--only NAME ...] [--json OUT] [--instructions]``

Every configuration runs as its own process, interleaved round-robin, after one warm-up run,
``--repeat`` times; the minimum CPU time (user + system, from ``wait4``: far less sensitive to
other load on a shared machine than wall time), the minimum wall time and the maximum resident
set size are kept. Figures are printed as ratios against the plain run measured in the same
invocation (absolute times mean little here). memlens runs through ``memlens run`` exactly as a
user would (``--no-report``, run file written to a temporary directory), so its figures include
start-up, the snapshot and writing the run file.

``--instructions`` instead counts the instructions each run executes under valgrind's
callgrind (Debian package ``valgrind``): deterministic, so a difference of a fraction of a
percent is real, unlike CPU time on a shared machine. It runs plain and the two memlens modes
once each (about 50 times slower than natively), with a fixed hash seed; memlens's two
time-driven threads (the timeline sampler and checkpoints) are switched off there, since under
valgrind they would fire 50 times too often (their cost is in the CPU-time figures). An empty
program is measured too: its difference is memlens's fixed cost per run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
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


def count_instructions(argv: list[str]) -> int:
    """Instructions one run executes (callgrind's total), deterministic for a given program."""
    env = {**ENV, "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv]
    proc = subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True, check=False
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"benchmark command failed under valgrind: {argv}\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def instructions(names: list[str], json_out: str | None) -> int:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt install valgrind)")
    quiet = ["--checkpoint-interval", "0", "--timeline-interval", "0"]
    results: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = {k: v for k, v in configs(tmp).items() if k != "tracemalloc"}
        cfgs = {k: [*v, *quiet] if k.startswith("memlens") else v for k, v in cfgs.items()}
        empty = os.path.join(tmp, "empty.py")
        Path(empty).write_text("")
        scripts = {"(empty program)": empty}
        scripts.update((n, str(HERE / "workloads" / f"{n}.py")) for n in names)
        for name, script in scripts.items():
            results[name] = {cfg: count_instructions([*argv, script]) for cfg, argv in cfgs.items()}
            r = results[name]
            parts = [f"{name:15s} plain {r['plain'] / 1e9:6.2f} G instructions"]
            for cfg in ("memlens-exact", "memlens-sample"):
                extra = r[cfg] - r["plain"]
                parts.append(f"{cfg} {extra / r['plain']:+7.1%} ({extra / 1e6:+,.0f} M)")
            print(" | ".join(parts), flush=True)
    if json_out:
        Path(json_out).write_text(json.dumps(results, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--json", default=None, help="also write the figures as JSON here")
    ap.add_argument(
        "--instructions", action="store_true", help="count instructions under callgrind instead"
    )
    args = ap.parse_args()
    names = [w for w in WORKLOADS if not args.only or w in args.only]
    if args.instructions:
        return instructions(names, args.json)
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
