"""How much memory CPython's free lists move to the wrong line, and what stays "live at exit".

Usage: ``python benchmarks/free_lists.py [--python PYTHON ...] [-n N]``

CPython keeps freed tuples, dicts, lists and floats on per-type free lists and makes new
objects in them without calling the allocator. Under ``memlens run`` (exact mode) each program
below streams N containers through a generator into a loop that keeps a new container of the
same type per item (the generator's line keeps nothing; the storing line keeps N objects), and
the last one fills every free list and frees everything (nothing is live at its end). Printed
per interpreter: the bytes the storing line shows live at exit against the truth, the bytes
the generator's line shows (all of them misplaced), and what the last program's line shows
live at exit (dead objects sitting on free lists). From Python 3.13 memlens follows reused
blocks (the reference tracer); before, the stored objects show on the generator's line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

FLOWS = {
    # name: (what the generator yields, what the loop keeps)
    "tuple": ("(i % 100, None)", "(x[0], x[1])"),
    "dict": ('{"k": i % 100}', '{"v": x["k"]}'),
    "list": ("[i % 100]", "[x[0]]"),
    "float": ("float(i % 100)", "x + 0.5"),
}

FLOW = """\
import sys

store = []


def produce(n):
    for i in range(n):
        yield {made}  # @gen


def main(n):
    for x in produce(n):
        store.append({kept})  # @store
    size = sys.getsizeof(store[0]) * len(store)
    print(size)


main({n})
"""

FULL = """\
def fill():
    held = []
    for k in range(1, 21):
        held.extend(tuple(range(k)) for _ in range(2000))  # @fill
    held.extend(float(i) for i in range(200))  # @fill
    held.extend([i] for i in range(200))  # @fill
    held.extend({"i": i} for i in range(200))  # @fill
    del held


fill()
"""

READ = """\
import json, sys
from memlens.runfile import reader
run = reader.read(sys.argv[1])
out = {}
for path, sf in run.files.items():
    text = (sf.text or "").splitlines()
    for line, st in sf.lines.items():
        tag = text[line - 1].split("# @")[-1] if "# @" in text[line - 1] else None
        if tag:
            out[tag] = out.get(tag, 0) + st.live_bytes
print(json.dumps({"lines": out, "python": run.info.python}))
"""


def measure(python: str, source: str, tmp: str) -> tuple[dict[str, int], str, str]:
    script = os.path.join(tmp, "prog.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(source))
    out = os.path.join(tmp, "r.mlrun")
    proc = subprocess.run(
        [python, "-m", "memlens", "run", "--no-report", "--no-holders", "-o", out, script],
        capture_output=True,
        text=True,
        check=True,
    )
    read = subprocess.run(
        [python, "-c", READ, out], capture_output=True, text=True, check=True
    ).stdout
    doc = json.loads(read)
    return doc["lines"], doc["python"], proc.stdout.strip()


def mib(n: float) -> str:
    return f"{n / 2**20:7.2f} MiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", nargs="*", default=[sys.executable])
    ap.add_argument("-n", type=int, default=200_000)
    args = ap.parse_args()
    for python in args.python:
        with tempfile.TemporaryDirectory() as tmp:
            for name, (made, kept) in FLOWS.items():
                lines, version, truth = measure(
                    python, FLOW.format(made=made, kept=kept, n=args.n), tmp
                )
                stored, gen = lines.get("store", 0), lines.get("gen", 0)
                print(
                    f"Python {version:8s} {name:5s}: storing line {mib(stored)} "
                    f"(its {args.n} objects: {mib(int(truth))}), generator's line {mib(gen)} "
                    f"(misplaced: {gen / max(int(truth), 1):.0%} of what the loop keeps)",
                    flush=True,
                )
            lines, version, _ = measure(python, FULL, tmp)
            print(
                f"Python {version:8s} full free lists: {mib(lines.get('fill', 0))} live at exit "
                "(dead objects on free lists)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
