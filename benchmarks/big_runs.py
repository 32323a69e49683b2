"""Big runs: time and peak RSS of what reads a whole run, on a run with a million line rows.

Writes (with memlens's own writer) two runs of ``--files`` files with figures on every one of
their ``--lines`` lines in all (a million by default; the files' text is recorded, as ``memlens
run`` records it), then measures, each as a fresh process: ``memlens show`` (plain text),
``memlens diff A B --json``, ``memlens export``, and the language server (``memlens lsp``)
from its start to the inlay hints of one whole file of the run (initialize, the run loaded,
didOpen, textDocument/inlayHint). Then ``memlens export`` of the run of an ordinary program:
a call tree of ``--paths`` distinct call paths (``workloads/_calls.py``), profiled with
``memlens run`` (its run file's size is printed). Targets: each of the first four under 500 MB
peak RSS and 10 s; the export of a ~12 MB run within 2 s. Each row gives its ratio to the
target, and with ``--baseline`` another checkout's figures measured in the same run (each
checkout reads runs its own writer wrote, of the same figures: run-file formats differ).

    .venv/bin/python benchmarks/big_runs.py [--lines 1000000] [--files 100] [--paths 80000]
        [--baseline ../main/.venv/bin/python]   # another checkout, measured in the same run
        [--only show "diff --json" export "export, ordinary run" "language server"]

Peak RSS: the process's own (``wait4``'s ``ru_maxrss``; the server's ``VmHWM``, read before it
is shut down). Figures are of this shared machine: compare them within one invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

import run as harness
from lsp_latency import bench_info, make_source, rng, start_server
from memlens.layout import RUN_SUFFIX
from memlens.model import FunctionStats, LineTable, Run, SourceFile
from memlens.model.lines import INTS
from memlens.runfile import writer
from memlens.store import Store

MB = 1_000_000
#: What each measure is held to: seconds and bytes of peak RSS.
TARGET_S = {"export, ordinary run": 2.0}
DEFAULT_TARGET_S = 10.0
TARGET_RSS = 500 * MB


def line_table(n: int, rnd: random.Random) -> LineTable:
    """Figures on lines 1 to ``n``, made by column (a million LineStats would take a
    gigabyte here before the writer's own rows)."""
    size = [rnd.randint(2_000, 5_000_000) for _ in range(n)]
    columns = {
        "alloc_bytes": [s * 2 for s in size],
        "alloc_count": [rnd.randint(1, 5000) for _ in range(n)],
        "live_bytes": [s // 3 for s in size],
        "live_count": [3] * n,
        "peak_bytes": size,
        "incl_alloc_bytes": [s * 2 for s in size],
        "incl_live_bytes": [s // 3 for s in size],
        "incl_peak_bytes": size,
    }
    ints = [array("q", columns.get(name, [0] * n)) for name in INTS]
    return LineTable(array("q", range(1, n + 1)), ints)


def make_run(root: Path, files: int, per_file: int, seed: int) -> Run:
    """A run of ``files`` files of ``per_file`` lines under ``root`` (written there too),
    with figures on every line and a function every ten lines."""
    rnd = random.Random(seed)
    text = make_source(per_file)
    sha = hashlib.sha256(text.encode()).hexdigest()
    out = {}
    for i in range(files):
        path = root / "pkg" / f"mod{i}.py"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        fns = tuple(
            FunctionStats(f"f{k}", k, min(k + 9, per_file), 10 * MB, 100, 0, 5 * MB)
            for k in range(1, per_file + 1, 10)
        )
        key = str(path)
        out[key] = SourceFile(key, sha, text, line_table(per_file, rnd), fns)
    info = bench_info("app.py", 5 * MB * files * per_file // 2)
    return Run(info, out)


def write_run(root: Path, files: int, per_file: int, seed: int, path: Path) -> None:
    writer.write(make_run(root, files, per_file, seed), path)


def write_runs(python: str, root: Path, files: int, per_file: int) -> tuple[Path, Path]:
    """Runs A and B under ``root``, written by ``python``'s memlens (another checkout writes
    its own format), in another process: this one stays small, and so do the processes it
    starts (a child's peak RSS counts its parent's pages until it executes). B is the
    store's latest."""
    t0 = time.perf_counter()
    a = root / f"a{RUN_SUFFIX}"
    b = Store(root).runs_dir / f"20261127-000000-1{RUN_SUFFIX}"
    b.parent.mkdir(parents=True, exist_ok=True)
    for path, seed in ((a, 1), (b, 2)):
        code = (
            f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import big_runs; "
            f"big_runs.write_run(big_runs.Path({str(root)!r}), {files}, {per_file}, {seed}, "
            f"big_runs.Path({str(path)!r}))"
        )
        subprocess.run([python, "-c", code], check=True)
    Store(root).set_pointer("latest", b)
    print(
        f"  two runs of {files} x {per_file:,} lines written in "
        f"{time.perf_counter() - t0:.0f} s ({b.stat().st_size / MB:.0f} MB each)",
        file=sys.stderr,
    )
    return a, b


async def lsp_session(python: str, root: Path, src: Path) -> tuple[float, int]:
    """(seconds from the server's start to the whole file's inlay hints, its peak RSS); an
    infinite time and no RSS when the server showed no run within a minute (it gives up on
    a folder whose runs it cannot read within 20 s)."""
    start = time.perf_counter()
    try:
        client = await start_server(python, root, load_timeout=60)
    except asyncio.TimeoutError:
        print(f"  {python}: the language server loaded no run", file=sys.stderr)
        return float("inf"), 0
    proc = client.proc
    text = src.read_text(encoding="utf-8")
    doc = {"uri": src.as_uri(), "languageId": "python", "version": 1, "text": text}
    client.notify("textDocument/didOpen", {"textDocument": doc})
    hints = await client.request(
        "textDocument/inlayHint",
        {"textDocument": {"uri": src.as_uri()}, "range": rng(0, text.count("\n"))},
    )
    seconds = time.perf_counter() - start
    if not hints:
        raise SystemExit(f"{python}: no inlay hints for {src}")
    status = Path(f"/proc/{proc.pid}/status").read_text()
    peak = next(int(line.split()[1]) * 1024 for line in status.splitlines() if "VmHWM" in line)
    await client.request("shutdown", None)
    client.notify("exit", None)
    await proc.wait()
    return seconds, peak


#: The measures, by name (``--only``).
MEASURES = ("show", "diff --json", "export", "export, ordinary run", "language server")


def measure_all(
    python: str, root: Path, runs: tuple[Path, Path, Path], src: Path, only: set[str]
) -> dict[str, tuple[float, int]]:
    """(seconds, peak RSS bytes) of each measure in ``only`` with ``python``'s memlens, on
    the ``runs`` (A, B, the ordinary run)."""
    a, b, ordinary = runs
    memlens = [python, "-m", "memlens"]
    out: dict[str, tuple[float, int]] = {}
    for name, argv in (
        ("show", [*memlens, "show", str(b), "--dir", str(root)]),
        ("diff --json", [*memlens, "diff", str(a), str(b), "--json", "--dir", str(root)]),
        ("export", [*memlens, "export", str(b), "--dir", str(root)]),
        ("export, ordinary run", [*memlens, "export", str(ordinary)]),
    ):
        if name in only:
            _, wall, rss = harness.measure(argv)
            out[name] = (wall, rss)
            print(f"  {name}: {wall:.2f} s, {rss / MB:.0f} MB", file=sys.stderr)
    if "language server" in only:
        out["language server"] = seconds, rss = asyncio.run(lsp_session(python, root, src))
        print(f"  language server: {seconds:.2f} s, {rss / MB:.0f} MB", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="line rows in all")
    ap.add_argument("--files", type=int, default=100)
    ap.add_argument("--paths", type=int, default=80_000, help="the ordinary program's paths")
    ap.add_argument("--baseline", metavar="PYTHON", help="another checkout's interpreter")
    ap.add_argument("--only", nargs="+", choices=MEASURES, default=MEASURES, metavar="MEASURE")
    args = ap.parse_args()
    per_file = args.lines // args.files
    with tempfile.TemporaryDirectory(prefix="memlens-big-") as tmp:
        root = Path(tmp).resolve()
        program = root / "ordinary.py"
        program.write_text(
            f"import sys\nsys.path.insert(0, {str(harness.HERE / 'workloads')!r})\n"
            f"from _calls import walk\nkept = [walk(17, p) for p in range({args.paths})]\n",
            encoding="utf-8",
        )
        ordinary_size = 0
        results = {}
        for name, python in (("this checkout", sys.executable), ("baseline", args.baseline)):
            if python:
                print(f"{name}:", file=sys.stderr)
                # Each checkout reads runs its own writer wrote (in its own run-file format).
                store = root / name.replace(" ", "-")
                a, b = write_runs(python, store, args.files, per_file)
                ordinary = store / f"ordinary{RUN_SUFFIX}"
                harness.measure(
                    [
                        python,
                        "-m",
                        "memlens",
                        "run",
                        "--no-report",
                        "-o",
                        str(ordinary),
                        str(program),
                    ]
                )
                ordinary_size = ordinary.stat().st_size
                src = store / "pkg" / "mod0.py"
                results[name] = measure_all(python, store, (a, b, ordinary), src, set(args.only))
    print(
        f"memlens on big runs: {args.lines:,} line rows ({args.files} files); the ordinary run: "
        f"{ordinary_size / MB:.1f} MB ({args.paths:,} call paths); Python "
        f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    head = f"{'measure':<30} {'this: s':>8} {'MB':>6} {'s/target':>9} {'MB/target':>10}"
    if args.baseline:
        head += f" {'baseline: s':>12} {'MB':>6} {'s/target':>9} {'MB/target':>10}"
    print(head)
    for measure in results["this checkout"]:
        target_s = TARGET_S.get(measure, DEFAULT_TARGET_S)
        row = f"{measure:<30}"
        for name in results:
            seconds, rss = results[name][measure]
            row += f" {seconds:{8 if name != 'baseline' else 12}.2f} {rss / MB:6.0f}"
            row += f" {seconds / target_s:8.2f}x {rss / TARGET_RSS:9.2f}x"
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
