"""Writes tests/data/formats/v5.mlrun: run ONCE when format version 5 was current.

Version 5 is version 4 with the lines stored by column (``line_columns``, compressed parts
like the call tree's) instead of a row per line: the file holds make_v3.py's run. It is
committed and must be readable by every later memlens forever
(tests/unit/test_runfile.py::test_golden_v5_file). Do not regenerate it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from memlens.runfile import writer  # noqa: E402
from tests.data.formats.make_v3 import golden_v3_run  # noqa: E402

if __name__ == "__main__":
    writer.write(golden_v3_run(), HERE / "v5.mlrun")
