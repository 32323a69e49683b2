"""Writes tests/data/formats/v1.mlrun: run ONCE when format version 1 was current.

The file is committed and must be readable by every later memlens forever
(tests/unit/test_runfile.py::test_golden_v1_file). Do not regenerate it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from memlens.runfile import writer  # noqa: E402
from runs import sample_run  # noqa: E402

if __name__ == "__main__":
    writer.write(sample_run(), HERE / "v1.mlrun")
