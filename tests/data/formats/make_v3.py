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

from memlens.model import HeldBy, Hop, Run, replace  # noqa: E402
from memlens.runfile import writer  # noqa: E402
from tests.data.formats.make_v2 import golden_v2_run  # noqa: E402


def golden_v3_run() -> Run:
    """Version 2's run, and what holds its live lines: db.py line 4's connection is held by
    app.py's `rows` through main()'s frame in a thread; app.py line 4's own bytes by nothing
    the search could see."""
    run = golden_v2_run()
    return replace(
        run,
        info=replace(run.info, memlens_version="0.3.0", python="3.13.1"),
        holders=(
            HeldBy("/work/app.py", 4, 0, "unreached"),
            HeldBy(
                "/work/db.py",
                4,
                3,
                "found",
                (
                    Hop("thread", "worker in main", "frame"),
                    Hop("local", "rows", "Connection", "/work/db.py", 4),
                    Hop("buffer", "data", "", "/work/db.py", 4),
                ),
            ),
            HeldBy(
                "/work/db.py",
                4,
                2,
                "found",
                (
                    Hop("module", "app", "module", "/work/app.py", 1),
                    Hop("attribute", "cache", "dict", "/work/app.py", 2),
                    Hop("key", "'rows'", "Connection", "/work/db.py", 4),
                ),
            ),
        ),
    )


if __name__ == "__main__":
    writer.write(golden_v3_run(), HERE / "v3.mlrun")
