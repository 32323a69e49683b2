"""Run files hold finite numbers only, so ``memlens export`` always prints valid JSON."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from memlens.errors import MemlensError, RunFileError
from memlens.export import to_json_dict
from memlens.imports.pymemtrace_import import import_log
from memlens.runfile import reader, writer
from tests.runs import sample_run


def _damage(path: Path, statement: str) -> None:
    con = sqlite3.connect(path)
    con.execute(statement)
    con.execute("DELETE FROM meta WHERE key = 'content_sha256'")  # values, not the digest
    con.commit()
    con.close()


@pytest.mark.parametrize(
    ("statement", "reason"),
    [
        (
            (
                "UPDATE meta SET value = replace(value, '\"duration_s\": 1.5', '\"duration_s\": NaN') "
                "WHERE key = 'run'"
            ),
            "bad run header: duration_s is not a finite number",
        ),
        (
            (
                "UPDATE meta SET value = replace(value, '\"duration_s\": 1.5', "
                "'\"duration_s\": Infinity') WHERE key = 'run'"
            ),
            "bad run header: duration_s is not a finite number",
        ),
        (
            "UPDATE timeline SET t = -9e999",
            "corrupt file (timeline holds a number that is not finite)",
        ),
    ],
)
def test_non_finite_numbers_are_refused(tmp_path: Path, statement: str, reason: str) -> None:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    _damage(path, statement)
    with pytest.raises(RunFileError) as info:
        reader.read(path)
    assert str(info.value) == f"cannot read {path}: {reason}"


def test_export_of_what_was_read_is_strict_json(tmp_path: Path) -> None:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    text = json.dumps(to_json_dict(reader.read(path)), allow_nan=False)
    assert json.loads(text)["run"]["duration_s"] == 1.5


def test_pymemtrace_log_with_an_infinite_clock_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "trace.log"
    log.write_text(
        "SOF\n"
        "HEDR: Event dEvent Clock What File Line Function RSS dRSS\n"
        "FRST: 0 +0 1.0 LINE app.py 1 <module> 4096 4096\n"
        "NEXT: 1 +1 1e999 LINE app.py 2 <module> 8192 4096\n"
        "LAST: 2 +1 2.0 LINE app.py 3 <module> 8192 0\n"
        "EOF\n"
    )
    with pytest.raises(MemlensError) as info:
        import_log(str(log))
    assert str(info.value) == f"cannot read {log}: line 4: bad clock"
