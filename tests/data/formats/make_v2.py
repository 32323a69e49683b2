"""Writes tests/data/formats/v2.mlrun: run ONCE when format version 2 was current.

The file is committed and must be readable by every later memlens forever
(tests/unit/test_runfile.py::test_golden_v2_file, which spells out what it holds). Do not
regenerate it.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from memlens.runfile import writer  # noqa: E402
from memlens.model import (  # noqa: E402
    CallNode,
    FunctionStats,
    LineStats,
    Run,
    RunInfo,
    SourceFile,
    TimelinePoint,
)

MIB = 1024 * 1024


def golden_v2_run() -> Run:
    app = SourceFile(
        path="/work/app.py",
        sha256="ab" * 32,
        text="import db\n\ndef main():\n    rows = db.load()\n    return rows\n\nmain()\n",
        lines={
            4: LineStats(1024, 2, 512, 1, 512, 24 * MIB + 1024, 20 * MIB + 512, 24 * MIB + 512),
            7: LineStats(0, 0, 0, 0, 0, 24 * MIB + 1024, 20 * MIB + 512, 24 * MIB + 512),
        },
        functions=(FunctionStats("main", 3, 5, 24 * MIB + 1024, 302, 20 * MIB + 512, 24 * MIB + 512),),
    )
    db = SourceFile(
        path="/work/db.py",
        sha256="cd" * 32,
        text="import sqlite3\n\ndef load():\n    return sqlite3.connect(':memory:')\n",
        lines={
            4: LineStats(
                24 * MIB, 300, 20 * MIB, 250, 24 * MIB, 24 * MIB, 20 * MIB, 24 * MIB,
                16 * MIB, 16 * MIB, 16 * MIB, 0.0, 0.0, 0.0,
            ),  # fmt: skip
        },
        functions=(FunctionStats("load", 3, 4, 24 * MIB, 300, 20 * MIB, 24 * MIB),),
    )
    nodes = (
        CallNode(0, -1, "/work/app.py", 7, "<module>", 0, 0, 0, 0),
        CallNode(1, 0, "/work/app.py", 4, "main", 1024, 2, 512, 512),
        CallNode(2, 1, "/work/db.py", 4, "load", 24 * MIB, 300, 20 * MIB, 24 * MIB),
    )
    info = RunInfo(
        command=("python", "app.py"),
        python="3.11.7",
        platform="Linux-test",
        started="2026-11-23T10:00:00+00:00",
        ended="2026-11-23T10:00:02+00:00",
        duration_s=2.0,
        pid=4343,
        exit_code=0,
        mode="exact",
        sample_interval_bytes=None,
        peak_traced_bytes=24 * MIB + 512,
        peak_rss_bytes=60 * MIB,
        complete=True,
        cwd="/work",
        memlens_version="0.2.0",
        max_depth=0,
    )
    return Run(
        info=info,
        files={app.path: app, db.path: db},
        call_tree=nodes,
        timeline=(TimelinePoint(0.0, 0, 10 * MIB), TimelinePoint(2.0, 24 * MIB, 60 * MIB)),
    )


if __name__ == "__main__":
    writer.write(golden_v2_run(), HERE / "v2.mlrun")
