"""Writes tests/data/formats/v6.mlrun: run ONCE when format version 6 was current.

Version 6 is version 5 with the functions stored by column (``function_columns``, compressed
parts like the lines') instead of a row per function: the file holds make_v3.py's run with a
second file of three functions (one named in Greek, one with an empty name), so that the
functions of two files and names of several bytes a character are pinned. It is committed and
must be readable by every later memlens forever
(tests/unit/test_runfile.py::test_golden_v6_file). Do not regenerate it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from memlens.model import FunctionStats, LineStats, Run, SourceFile, replace  # noqa: E402
from memlens.runfile import writer  # noqa: E402
from tests.data.formats.make_v3 import golden_v3_run  # noqa: E402


def golden_v6_run() -> Run:
    run = golden_v3_run()
    text = "def a():\n    return [0] * 10\n\n\nclass Klass:\n    def μέθοδος(self):\n        pass\n"
    lib = SourceFile(
        path="/work/lib.py",
        sha256="7" * 64,
        text=text,
        lines={2: LineStats(alloc_bytes=80, alloc_count=1, peak_bytes=80, incl_alloc_bytes=80)},
        functions=(
            FunctionStats("a", 1, 2, 80, 1, 0, 80),
            FunctionStats("Klass.μέθοδος", 6, 7, 2**40, 3, 2**33, 2**40 + 1),
            FunctionStats("", 8, 8),
        ),
    )
    return replace(run, files={**run.files, lib.path: lib})


if __name__ == "__main__":
    writer.write(golden_v6_run(), HERE / "v6.mlrun")
