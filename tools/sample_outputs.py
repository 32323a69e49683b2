"""The sample outputs in README.md and docs/cli.md, generated from real runs.

A sample is a fenced block right after a marker naming the command::

    <!-- sample: memlens run examples/leaky_cache.py -->
    ```console
    $ memlens run examples/leaky_cache.py
    ...what it printed...
    ```

``python tools/sample_outputs.py --write`` (``./dev docs``) runs each command in a scratch copy
of ``examples/`` (as ``python -m memlens``, standard output and error in the order printed,
no terminal) and writes what it printed into the block. ``--check`` (and
``tests/cli/test_doc_samples.py``) runs them again and compares modulo what differs from run to
run: timings, the peak RSS, run file names, figures within 5% (or 1 KiB, or 8 allocations), and
table rows below 4 KiB (see SMALL_ROW_BYTES).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/cli.md")

_SAMPLE = re.compile(r"<!-- sample: (memlens [^\n]*?) -->\n```(\w*)\n(.*?)```\n", re.DOTALL)


@dataclass(frozen=True)
class Sample:
    doc: str
    command: str
    body: str  # the block's text: "$ command" and what it printed
    start: int  # the block's text in the document
    end: int


def samples(doc: str, text: str) -> Iterator[Sample]:
    for m in _SAMPLE.finditer(text):
        yield Sample(doc, m.group(1), m.group(3), m.start(3), m.end(3))


def run_sample(command: str, root: Path = ROOT) -> str:
    """What ``command`` prints, as the block shows it (first line: ``$ command``)."""
    args = command.split()
    assert args[0] == "memlens", command
    with tempfile.TemporaryDirectory() as scratch:
        shutil.copytree(root / "examples", Path(scratch) / "examples")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("COLUMNS", "MEMLENS"))}
        env["PYTHONHASHSEED"] = "0"
        proc = subprocess.run(
            [sys.executable, "-m", "memlens", *args[1:]],
            cwd=scratch,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
            check=False,
        )
    if proc.returncode != 0:
        raise RuntimeError(f"{command} exited with {proc.returncode}:\n{proc.stdout}")
    lines = [line.rstrip() for line in proc.stdout.splitlines()]
    return "\n".join([f"$ {command}", *lines]) + "\n"


#: What differs from run to run, and what stands for it in comparisons.
_VARIABLE = (
    (re.compile(r"\.memlens/runs/\d{8}-\d{6}-\d+(?:-\d+)?\.mlrun"), ".memlens/runs/<run>.mlrun"),
    (re.compile(r"peak RSS \d+(?:\.\d+)? (?:B|KiB|MiB|GiB)"), "peak RSS <rss>"),
    (re.compile(r" · \d+\.\d\d s · "), " · <seconds> s · "),
)
#: A figure: a size, a count with a suffix, a share, or a count of allocations in a label.
#: Other bare integers (line numbers, the table's allocs column) must match exactly.
_FIGURE = re.compile(r"(\d+(?:\.\d+)?)( ?(?:B|KiB|MiB|GiB|k|M|G)\b|%| (?=allocs?\b))")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "k": 1e3, "M": 1e6, "G": 1e9}
#: A row of a report table, and its ranked figure.
_ROW = re.compile(r"^\s+\d+\s+\S+:\d+\s+(\d+(?:\.\d+)?) (B|KiB|MiB|GiB)\s")
#: The memory of a program's first steps (imports, definitions) moves a little from run to run:
#: CPython's free lists and caches start from whatever memlens's own start-up left. Rows whose
#: ranked figure is below this come and go, and are left out of the comparison.
SMALL_ROW_BYTES = 4096


def _skeleton(line: str) -> tuple[str, list[tuple[float, str]]]:
    for pattern, stand_in in _VARIABLE:
        line = pattern.sub(stand_in, line)
    figures = [(float(m.group(1)), m.group(2).strip()) for m in _FIGURE.finditer(line)]
    text = re.sub(r"\ballocs\b", "alloc", _FIGURE.sub("#", line))  # 1 alloc, 2 allocs
    return " ".join(text.split()), figures


def _close(a: tuple[float, str], b: tuple[float, str]) -> bool:
    """Equal within 5%, or a few bytes or allocations (see SMALL_ROW_BYTES)."""
    if a[1] == "%" or b[1] == "%":
        return a[1] == b[1] and abs(a[0] - b[0]) <= 1
    x, y = a[0] * _UNITS.get(a[1], 1), b[0] * _UNITS.get(b[1], 1)
    slack = 8 if a[1] in ("", "k", "M", "G") else 1024  # allocations, bytes
    return math.isclose(x, y, rel_tol=0.05, abs_tol=slack)


def _compared(text: str) -> list[str]:
    """The lines that are compared: all but the table rows of small figures."""
    out = []
    for line in text.splitlines():
        row = _ROW.match(line)
        if row and float(row.group(1)) * _UNITS[row.group(2)] < SMALL_ROW_BYTES:
            continue
        out.append(line)
    return out


def differences(documented: str, real: str) -> list[str]:
    """Where ``documented`` and ``real`` differ beyond what differs from run to run."""
    doc_lines, real_lines = _compared(documented), _compared(real)
    out = []
    if len(doc_lines) != len(real_lines):
        out.append(f"{len(doc_lines)} lines documented, {len(real_lines)} printed")
    for n, (d, r) in enumerate(zip(doc_lines, real_lines, strict=False), start=1):
        (d_text, d_figures), (r_text, r_figures) = _skeleton(d), _skeleton(r)
        same_figures = len(d_figures) == len(r_figures) and all(
            _close(a, b) for a, b in zip(d_figures, r_figures, strict=True)
        )
        if d_text != r_text or not same_figures:
            out.append(f"line {n}:\n  documented: {d}\n  printed:    {r}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the samples")
    parser.add_argument("--check", action="store_true", help="compare (default)")
    args = parser.parse_args(argv)
    failed = False
    for doc in DOCS:
        path = ROOT / doc
        text = path.read_text(encoding="utf-8")
        found = list(samples(doc, text))
        for sample in reversed(found):  # from the end: earlier offsets stay valid
            real = run_sample(sample.command)
            if args.write:
                text = text[: sample.start] + real + text[sample.end :]
                continue
            for problem in differences(sample.body, real):
                failed = True
                print(f"{doc}: {sample.command}: {problem}", file=sys.stderr)
        if args.write:
            path.write_text(text, encoding="utf-8")
            print(f"{doc}: {len(found)} sample(s) written", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
