"""What attaching costs the program attached to: `memlens attach` against `memray attach`.

A target program does units of work (small-object churn over a live set of 50,000 records, as
a service does) and logs how many it has done, ten times a second. For each way of attaching, a
fresh target runs alone for a while (its own pace), then is attached to for --duration seconds,
then runs alone again. Printed per configuration, as ratios to the target's own pace measured in
the same run (this machine is shared and noisy: absolute times mean little):

- *command*: its pace from the start of the attaching command to its end (the attaching
  process starting, the target loading the profiler, tracing, writing the run);
- *tracing*: its pace between memlens's "attached" and "detached" messages (memray says
  nothing of the kind: not measured);
- *longest stall*: the longest time the target did no work during the command (its main thread
  loading the profiler, or building the run);
- *after*: its pace once detached (nothing left behind should mean 1.00);
- the first row, *not attached*, runs a Python process that only sleeps as long: how far this
  machine's noise moves the same figures;
- *extra*: the attaching command's wall time beyond --duration.

    python benchmarks/attach.py [--duration S] [--repeat N] [--configs a,b]   (Python 3.14+)
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import NamedTuple

TARGET = """
import sys, time
LOG = sys.argv[1]
records = []
done = 0
last = time.monotonic()
with open(LOG, "w") as log:
    while True:
        for i in range(200):  # one unit: 200 records made, the oldest dropped past 50,000
            records.append({"id": done, "name": f"user-{done}-{i}", "tags": [i, i + 1]})
        del records[:-50_000]
        done += 1
        now = time.monotonic()
        if now - last >= 0.1:
            log.write(f"{now} {done}\\n")
            log.flush()
            last = now
"""

#: How each configuration attaches for D seconds to PID, its run going into OUT (a folder).
CONFIGS: dict[str, list[str]] = {
    # Not attached: a Python process that sleeps as long (the noise of this machine, and of a
    # second Python starting beside the target).
    "not attached": ["-c", "import time; time.sleep({d})"],
    "memlens-exact": ["-m", "memlens", "attach", "{pid}", "--duration", "{d}", "--no-report"],
    "memlens-sample": [
        *("-m", "memlens", "attach", "{pid}", "--duration", "{d}", "--no-report"),
        *("--sample", "128KiB"),
    ],
    "memray-python-allocators": [
        *("-m", "memray", "attach", "{pid}", "--duration", "{d}", "--method", "sys.remote_exec"),
        *("--trace-python-allocators", "-o", "{out}/memray.bin", "-f"),
    ],
    "memray": [
        *("-m", "memray", "attach", "{pid}", "--duration", "{d}", "--method", "sys.remote_exec"),
        *("-o", "{out}/memray.bin", "-f"),
    ],
}


def _log(log: Path) -> list[tuple[float, int]]:
    points = []
    for line in log.read_text().splitlines():
        t, n = line.split()
        points.append((float(t), int(n)))
    return points


def _pace(points: list[tuple[float, int]], start: float, end: float) -> float:
    """Units a second the target did between two monotonic times (from its log)."""
    inside = [(t, n) for t, n in points if start <= t <= end]
    if len(inside) < 2:
        raise SystemExit(f"the target logged too little between {start:.1f} and {end:.1f}")
    (t0, n0), (t1, n1) = inside[0], inside[-1]
    return (n1 - n0) / (t1 - t0)


def _stall(points: list[tuple[float, int]], start: float, end: float) -> float:
    """The longest time between two log points (0.1 s apart at work) in [start, end]."""
    inside = [t for t, _n in points if start <= t <= end]
    return max((b - a for a, b in itertools.pairwise(inside)), default=0.0) - 0.1


class Row(NamedTuple):
    command: float
    tracing: float | None
    stall: float
    after: float
    extra: float


def measure(config: str, duration: float, folder: Path) -> Row:
    script = folder / "target.py"
    script.write_text(textwrap.dedent(TARGET))
    log = folder / f"{config}.log"
    target = subprocess.Popen([sys.executable, str(script), str(log)], cwd=folder)
    try:
        time.sleep(3.0)  # warm: the live set fills
        before_start = time.monotonic()
        time.sleep(2.0)
        words = [w.format(pid=target.pid, d=f"{duration:g}", out=folder) for w in CONFIGS[config]]
        began = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, *words], cwd=folder, stderr=subprocess.PIPE, text=True
        )
        assert proc.stderr is not None
        said = [(time.monotonic(), line) for line in proc.stderr]
        ended = time.monotonic()
        if proc.wait() != 0:
            raise SystemExit(f"{config}: {said[-1:]}")
        time.sleep(0.5)
        after_start = time.monotonic()
        time.sleep(2.0)
        after_end = time.monotonic()
        points = _log(log)
        own = _pace(points, before_start, began)
        marks = [
            t for t, line in said if line.startswith(("memlens: attached", "memlens: detached"))
        ]
        return Row(
            _pace(points, began, ended) / own,
            _pace(points, marks[0], marks[1]) / own if len(marks) == 2 else None,
            _stall(points, began, ended),
            _pace(points, after_start, after_end) / own,
            ended - began - duration,
        )
    finally:
        target.kill()
        target.wait()


def main() -> int:
    if sys.version_info < (3, 14):
        print("attaching needs Python 3.14 (sys.remote_exec)", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    try:
        import memray  # noqa: F401, PLC0415 - measured beside memlens when installed

        have_memray = True
    except ImportError:
        have_memray = False
    if not have_memray:
        configs = [c for c in configs if not c.startswith("memray")]
    results: dict[str, list[Row]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeat):
            for config in configs[round_ % len(configs) :] + configs[: round_ % len(configs)]:
                folder = Path(tmp) / f"{config}-{round_}"
                folder.mkdir()
                results[config].append(measure(config, args.duration, folder))
    print(
        f"attached for {args.duration:g} s, median of {args.repeat} rounds, Python "
        f"{sys.version.split()[0]}, {os.cpu_count()} CPUs; paces as ratios to the target's own"
    )
    print(
        f"{'configuration':<26} {'command':>8} {'tracing':>8} {'longest stall':>14} "
        f"{'after':>6} {'extra':>7}"
    )
    for config, rows in results.items():
        tracing = [r.tracing for r in rows if r.tracing is not None]
        print(
            f"{config:<26} {statistics.median(r.command for r in rows):>8.2f} "
            + (f"{statistics.median(tracing):>8.2f} " if tracing else f"{'-':>8} ")
            + f"{statistics.median(r.stall for r in rows):>13.2f}s "
            f"{statistics.median(r.after for r in rows):>6.2f} "
            f"{statistics.median(r.extra for r in rows):>+6.2f}s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
