"""What looking for what holds the live lines costs (docs/how-it-works.md, "What holds a line"),
on a program that holds a million live records (``workloads/live_records.py``: 4 million
objects) and on the other big-live-set workloads, beside the run's own time.

Usage: ``python benchmarks/holders.py [--python PYTHON] [--repeat N] [--only NAME ...]
[--sample BYTES]``

``memlens run --exact`` (``--sample BYTES``: sampling mode) with and without ``--no-holders``, in rounds as ``run.py`` measures
(the median over rounds of CPU time divided by plain's in the same round); then one more run
that reports the search itself: objects visited, its time, its memory, whether it ended by
finding every line's samples, by walking everything, or by its bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import run as harness

WORKLOADS = ("live_records", "kept_objects", "records")

#: Runs `memlens run`, printing what each search of the run reported on stderr as JSON.
STATS = """\
import json, sys
from memlens.tracing import holders
found = holders._tracer.holders
def reporting(*args):
    answer = found(*args)
    stats = {k: v for k, v in answer.items() if k != "chains"}
    stats["lines_found"] = len({t for t, _ in answer["chains"]})
    print("HOLDERS " + json.dumps(stats), file=sys.stderr)
    return answer
holders._tracer.holders = reporting
from memlens.cli import main
sys.exit(main(["run", *sys.argv[1:]]))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--sample", default=None, help="sampling mode at this interval (e.g. 128KiB)")
    args = ap.parse_args()
    mode = ["--sample", args.sample] if args.sample else ["--exact"]
    label = "sampling" if args.sample else "exact"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.mlrun")
        memlens = [args.python, "-m", "memlens", "run", "--no-report", *mode, "-o", out]
        cfgs = {
            "plain": [args.python],
            "no-holders": [*memlens, "--no-holders"],
            "holders": memlens,
        }
        for name in args.only or WORKLOADS:
            script = os.path.join(harness.HERE, "workloads", f"{name}.py")
            r = harness.compare(cfgs, script, args.repeat)
            without, with_ = r["no-holders"], r["holders"]
            share = (with_["cpu_ratio"] - without["cpu_ratio"]) / without["cpu_ratio"]
            proc = subprocess.run(
                [args.python, "-c", STATS, "--no-report", *mode, "-o", out, script],
                capture_output=True,
                text=True,
                check=True,
            )
            walks = [
                json.loads(line.split(" ", 1)[1])
                for line in proc.stderr.splitlines()
                if line.startswith("HOLDERS ")
            ]
            walk = " + ".join(
                f"{w['visited'] / 1e6:.2f}M objects in {w['seconds']:.2f} s, "
                f"{w['bytes'] / 2**20:.0f} MiB, {w['lines_found']} lines found, "
                + ("complete" if w["complete"] else "timed out" if w["timed_out"] else "bounded")
                for w in walks
            )
            print(
                f"{name:13s} plain {r['plain']['cpu_s']:5.2f}s cpu | {label} --no-holders "
                f"{without['cpu_ratio'] - 1:+7.1%} | {label} {with_['cpu_ratio'] - 1:+7.1%} | "
                f"the search: {share:+.1%} of the run's time, rss x{with_['rss_bytes'] / without['rss_bytes']:.2f} | "
                f"{walk}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
