"""Writes tests/data/formats/v3.mlrun: run ONCE when format version 3 was current.

The file is committed and must be readable by every later memlens forever
(tests/unit/test_runfile.py::test_golden_v3_file, which spells out what it holds). Do not
regenerate it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from memlens.runfile import writer  # noqa: E402
from memlens.model import Moments, Run, replace  # noqa: E402
from tests.data.formats.make_v2 import golden_v2_run  # noqa: E402

MIB = 1024 * 1024


def golden_v3_run() -> Run:
    """Version 2's golden run, with when its peak happened and moments: db.py:4 holds 8 MiB at
    0.5 s, 20 MiB from 1.0 s on; app.py:4 holds 512 B from 1.0 s, and app.py:7 all that in
    calls; main() likewise."""
    run = golden_v2_run()
    moments = Moments(
        [0.5, 1.0, 1.5],
        [8 * MIB, 20 * MIB + 512, 20 * MIB + 512],
        ["/work/app.py", "/work/db.py"],
        {
            "moment": [0, 0, 1, 1, 1],
            "file": [1, 0, 0, 0, 1],
            "line": [4, 7, 4, 7, 4],
            "live_bytes": [8 * MIB, 0, 512, 0, 20 * MIB],
            "incl_live_bytes": [8 * MIB, 8 * MIB, 20 * MIB + 512, 20 * MIB + 512, 20 * MIB],
        },
        [("/work/app.py", "main", 3, 5), ("/work/db.py", "load", 3, 4)],
        {"moment": [0, 0, 1, 1], "function": [0, 1, 0, 1], "live_bytes": [8 * MIB, 8 * MIB, 20 * MIB + 512, 20 * MIB]},
    )
    return replace(run, info=replace(run.info, peak_at_s=1.25), moments=moments)


if __name__ == "__main__":
    writer.write(golden_v3_run(), HERE / "v3.mlrun")
