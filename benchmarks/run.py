"""Overhead benchmark: each workload plain, under tracemalloc, memray and memlens, in one run.

Usage: ``python benchmarks/run.py [--repeat N] [--only NAME ...] [--configs CFG ...]
[--python PYTHON] [--base-python PYTHON] [--json OUT] [--instructions]``

Every configuration runs as its own process, after one warm-up run, in ``--repeat`` rounds;
a round runs each configuration once, back to back, the first one rotating from round to round. The figure of a configuration is the median
over rounds of its CPU time (user + system, from ``wait4``: far less sensitive to other load on
a shared machine than wall time) divided by plain's in the same round; wall time likewise, and
the largest resident set size. Absolute times mean little here. memlens runs through ``memlens run`` exactly as a
user would (``--no-report``, run file written to a temporary directory), so its figures include
start-up, the snapshot and writing the run file. memray (``memray run
--trace-python-allocators``: every Python allocation, as memlens's exact mode sees them) runs
when it is installed in the interpreter under test (``pip install -e .[bench]``).

``--python`` measures another interpreter (with memlens, and memray if wanted, installed in it):
the tracer is version-specific, and figures must hold on every supported version.

``--base-python`` adds ``memlens-exact-base``: exact mode of the memlens installed in another
interpreter of the same Python (a build of another branch, e.g. the main branch before a
change), measured in the same rounds, so that what a change costs is a ratio of two memlens
runs on the same machine at the same time. The run files' sizes are printed beside them.

``--instructions`` instead counts the instructions each run executes under valgrind's
callgrind (Debian package ``valgrind``): deterministic, so a difference of a fraction of a
percent is real, unlike CPU time on a shared machine. It runs plain and sampling mode (the mode
with a 5% target; or the memlens configurations ``--configs`` names) once each (about 50 times slower than natively), with a fixed hash seed; memlens's two
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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOADS = sorted(p.stem for p in (HERE / "workloads").glob("*.py") if not p.stem.startswith("_"))


CONFIGS = (
    "tracemalloc",
    "memray",
    "memlens-exact",
    "memlens-exact-base",
    "memlens-sample",
    "memlens-exact-no-native",
)


def run_file(tmp: str, cfg: str) -> str:
    """Where configuration ``cfg`` writes its run file."""
    return os.path.join(tmp, f"{cfg}.mlrun")


def configs(tmp: str, py: str = sys.executable, base: str | None = None) -> dict[str, list[str]]:
    def memlens(cfg: str, python: str = py) -> list[str]:
        return [python, "-m", "memlens", "run", "--no-report", "-o", run_file(tmp, cfg)]

    cfgs = {
        "plain": [py],
        "tracemalloc": [py, "-X", "tracemalloc=1"],
        "memray": [py, "-m", "memray", "run", "--trace-python-allocators", "-q", "-f", "-o"],
        "memlens-exact": [*memlens("memlens-exact"), "--exact"],
        "memlens-sample": [*memlens("memlens-sample"), "--sample", "128KiB"],
        # What tracing C libraries' allocations adds (run only when asked for, with --configs).
        "memlens-exact-no-native": [*memlens("memlens-exact-no-native"), "--exact", "--no-native"],
    }
    if base is not None:
        cfgs["memlens-exact-base"] = [*memlens("memlens-exact-base", base), "--exact"]
    cfgs["memray"].append(os.path.join(tmp, "bench.memray"))
    has_memray = (
        subprocess.run([py, "-c", "import memray"], check=False, capture_output=True).returncode
        == 0
    )
    if not has_memray:
        del cfgs["memray"]
    return cfgs


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
    """Instructions one run executes (callgrind's total), deterministic for a given program:
    fixed hash seed, address randomisation off (setarch -R, where it exists)."""
    env = {**ENV, "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv]
    if shutil.which("setarch"):
        cmd = ["setarch", os.uname().machine, "-R", *cmd]
    proc = subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True, check=False
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"benchmark command failed under valgrind: {argv}\n{proc.stderr[-2000:]}")
    return int(found.group(1))


def instructions(
    names: list[str], json_out: str | None, chosen: list[str] | None, py: str = sys.executable
) -> int:
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt install valgrind)")
    quiet = ["--checkpoint-interval", "0", "--timeline-interval", "0"]
    wanted = {"plain", *(chosen or ["memlens-sample"])}
    results: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cfgs = {k: v for k, v in configs(tmp, py).items() if k in wanted and k != "memray"}
        cfgs = {k: [*v, *quiet] if k.startswith("memlens") else v for k, v in cfgs.items()}
        empty = os.path.join(tmp, "empty.py")
        Path(empty).write_text("")
        scripts = {"(empty program)": empty}
        scripts.update((n, str(HERE / "workloads" / f"{n}.py")) for n in names)
        for name, script in scripts.items():
            results[name] = {cfg: count_instructions([*argv, script]) for cfg, argv in cfgs.items()}
            r = results[name]
            parts = [f"{name:15s} plain {r['plain'] / 1e9:6.2f} G instructions"]
            for cfg in cfgs:
                if cfg != "plain":
                    extra = r[cfg] - r["plain"]
                    parts.append(f"{cfg} {extra / r['plain']:+7.1%} ({extra / 1e6:+,.0f} M)")
            print(" | ".join(parts), flush=True)
    if json_out:
        Path(json_out).write_text(json.dumps(results, indent=2))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--json", default=None, help="also write the figures as JSON here")
    ap.add_argument(
        "--configs",
        nargs="*",
        default=None,
        help=f"only these configurations (plain is always run): {' '.join(CONFIGS)}",
    )
    ap.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter to measure (memlens installed in it); default: this one",
    )
    ap.add_argument(
        "--base-python",
        default=None,
        help="also measure exact mode of the memlens installed in this interpreter "
        "(memlens-exact-base: another build, same Python)",
    )
    ap.add_argument(
        "--instructions", action="store_true", help="count instructions under callgrind instead"
    )
    args = ap.parse_args()
    names = [w for w in WORKLOADS if not args.only or w in args.only]
    if args.instructions:
        return instructions(names, args.json, args.configs, args.python)
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        default = [c for c in CONFIGS if c != "memlens-exact-no-native"]
        cfgs = {
            k: v
            for k, v in configs(tmp, args.python, args.base_python).items()
            if k == "plain" or k in (args.configs or default)
        }
        if "memray" not in cfgs and (args.configs is None or "memray" in args.configs):
            print("(memray is not installed in that interpreter: pip install -e .[bench])")
        for name in names:
            results[name] = compare(cfgs, str(HERE / "workloads" / f"{name}.py"), args.repeat)
            for cfg in cfgs:
                if os.path.isfile(run_file(tmp, cfg)):
                    results[name][cfg]["run_file_bytes"] = os.path.getsize(run_file(tmp, cfg))
            print(_row(name, results[name]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


def compare(cfgs: dict[str, list[str]], script: str, repeat: int) -> dict[str, dict[str, float]]:
    """Runs ``script`` under each configuration (``plain`` among them) once to warm up, then
    ``repeat`` rounds of all of them back to back; the rounds' :func:`_summary`."""
    for argv in cfgs.values():  # warm-up: bytecode caches, page cache
        measure([*argv, script])
    rounds: list[dict[str, tuple[float, float, int]]] = []
    order = list(cfgs)
    for i in range(repeat):
        # Rotate who goes first: on this machine a run is measurably slower when it
        # follows another one closely (plain, always first, looked 5% faster).
        turn = order[i % len(order) :] + order[: i % len(order)]
        rounds.append({cfg: measure([*cfgs[cfg], script]) for cfg in turn})
    return _summary(rounds)


def _summary(rounds: list[dict[str, tuple[float, float, int]]]) -> dict[str, dict[str, float]]:
    """Per configuration: the median over rounds of its CPU (and wall) time divided by plain's
    in the same round (the configurations of a round run back to back, so slow drifts of the
    machine's speed cancel out), plain's median times, and the largest RSS."""
    out: dict[str, dict[str, float]] = {}
    for cfg in rounds[0]:
        out[cfg] = {
            "cpu_ratio": statistics.median(r[cfg][0] / r["plain"][0] for r in rounds),
            "wall_ratio": statistics.median(r[cfg][1] / r["plain"][1] for r in rounds),
            "cpu_s": statistics.median(r[cfg][0] for r in rounds),
            "rss_bytes": max(r[cfg][2] for r in rounds),
        }
    return out


def _row(name: str, r: dict[str, dict[str, float]]) -> str:
    base_rss = r["plain"]["rss_bytes"]
    parts = [f"{name:14s} plain {r['plain']['cpu_s']:5.2f}s cpu"]
    for cfg in (c for c in CONFIGS if c in r):
        over = r[cfg]["cpu_ratio"] - 1
        wall = r[cfg]["wall_ratio"] - 1
        mem = r[cfg]["rss_bytes"] / base_rss
        parts.append(f"{cfg} {over:+7.1%} (wall {wall:+.0%}, rss x{mem:.2f})")
    if "memlens-exact-base" in r and "memlens-exact" in r:
        ratio = r["memlens-exact"]["cpu_ratio"] / r["memlens-exact-base"]["cpu_ratio"] - 1
        sizes = [
            r[c].get("run_file_bytes", 0) / 1024 for c in ("memlens-exact-base", "memlens-exact")
        ]
        parts.append(
            f"exact vs base {ratio:+.1%} cpu, run file {sizes[0]:,.0f} -> {sizes[1]:,.0f} KiB"
        )
    for peer in ("tracemalloc", "memray"):
        if peer in r and "memlens-exact" in r:
            peer_over = r[peer]["cpu_ratio"] - 1
            ex_over = r["memlens-exact"]["cpu_ratio"] - 1
            ratio = ex_over / peer_over if peer_over > 0.05 else float("nan")
            parts.append(f"exact/{peer} overhead {ratio:.2f}")
    return " | ".join(parts)


if __name__ == "__main__":
    raise SystemExit(main())
