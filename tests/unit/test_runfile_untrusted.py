"""Run files are untrusted input: the reader's defences (docs/file-format.md, "Reading
untrusted files"). Whatever a file holds, reading it ends soon, in bounded memory, with a Run or
one RunFileError line, and runs nothing the file's author wrote."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from memlens.errors import RunFileError
from memlens.model import FunctionStats, TimelinePoint, replace
from memlens.runfile import reader, schema, writer
from memlens.runfile.schema import FORMAT_VERSION
from tests.hostile import default_bomb, trigger_run, view_bomb
from tests.runs import sample_run


def _refused(path: Path, reason: str, *, info_too: bool = True) -> None:
    readers = (reader.read, reader.read_info) if info_too else (reader.read,)
    for read in readers:
        began = time.monotonic()
        with pytest.raises(RunFileError) as err:
            read(path)
        assert time.monotonic() - began < 10
        message = str(err.value)
        assert message.startswith(f"cannot read {path}: ")
        assert "\n" not in message
        assert reason in message, message


def _altered(tmp_path: Path, *sql: str) -> Path:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    con = sqlite3.connect(path)
    for statement in sql:
        con.execute(statement)
    con.commit()
    con.close()
    return path


def test_view_bomb(tmp_path: Path) -> None:
    _refused(view_bomb(tmp_path / "v.mlrun"), "corrupt file (unexpected schema: meta is a view)")


def test_default_bombs(tmp_path: Path) -> None:
    # Big: SQLite's own length limit refuses the schema (3.11+: setlimit); small: the check.
    big = default_bomb(tmp_path / "big.mlrun")
    _refused(big, "corrupt")
    small = default_bomb(tmp_path / "small.mlrun", rows=20, default_bytes=1000)
    _refused(small, f"table files is not as format version {FORMAT_VERSION} defines it")


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("CREATE VIEW extra AS SELECT 1", "unexpected schema: view extra"),
        ("CREATE TABLE extra (x)", "unexpected schema: table extra"),
        ("CREATE INDEX i ON timeline (abs(rss_bytes))", "unexpected schema: index i"),
        ("CREATE INDEX j ON line_columns (part) WHERE part > 0", "unexpected schema: index j"),
        (
            "CREATE TRIGGER t BEFORE DELETE ON meta BEGIN SELECT 1; END",
            "unexpected schema: trigger t",
        ),
        ("ALTER TABLE timeline ADD COLUMN extra INTEGER", "table timeline is not as"),
        (
            "ALTER TABLE timeline ADD COLUMN g INTEGER GENERATED ALWAYS AS (rss_bytes * 2)",
            "table timeline is not as",
        ),
    ],
)
def test_anything_but_the_writers_schema_is_refused(tmp_path: Path, sql: str, reason: str) -> None:
    _refused(_altered(tmp_path, sql), reason)


def test_trigger_and_expression_index(tmp_path: Path) -> None:
    _refused(trigger_run(tmp_path / "t.mlrun"), "unexpected schema: trigger t")


def test_newer_version_is_asked_to_upgrade_before_the_schema_is_checked(tmp_path: Path) -> None:
    newer = FORMAT_VERSION + 1
    path = _altered(
        tmp_path,
        f"UPDATE meta SET value = '{newer}' WHERE key = 'version'",
        "CREATE VIEW newer AS SELECT 1",
    )
    _refused(
        path,
        f"format version {newer} is newer than this memlens understands ({FORMAT_VERSION}); "
        "upgrade memlens",
    )


def test_meta_itself_must_be_the_writers(tmp_path: Path) -> None:
    path = _altered(
        tmp_path,
        "ALTER TABLE meta RENAME TO old",
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL DEFAULT 'x')",
        "INSERT INTO meta SELECT * FROM old",
        "DROP TABLE old",
    )
    _refused(
        path, f"unexpected schema: table meta is not as format version {FORMAT_VERSION} defines it"
    )


def test_row_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    nodes = len(sample_run().call_tree)
    monkeypatch.setitem(schema.MAX_ROWS, "nodes", nodes - 1)
    _refused(
        path,
        f"too large to read (the call tree holds more than {nodes - 1} nodes)",
        info_too=False,
    )
    reader.read_info(path)  # a listing reads no node
    monkeypatch.setitem(schema.MAX_ROWS, "nodes", nodes)
    assert reader.read(path) == sample_run()  # the limit itself is allowed
    monkeypatch.setitem(schema.MAX_ROWS, "timeline", 0)
    _refused(path, "too large to read (timeline holds more than 0 rows)", info_too=False)


def test_meta_limits(tmp_path: Path) -> None:
    rows = _altered(
        tmp_path,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 1000) "
        "INSERT INTO meta SELECT 'k' || x, 'v' FROM c",
    )
    _refused(rows, "corrupt file (meta holds more than 1000 rows)")
    rows.unlink()
    # Any meta value but the run header: at most 1 MiB.
    long = _altered(tmp_path, "INSERT INTO meta VALUES ('note', printf('%.*c', 1048577, 'x'))")
    _refused(long, "corrupt file (meta holds a value that is too long)")
    long.unlink()
    # The run header (it holds a test session's per-test figures): at most 32 MiB.
    assert schema.MAX_HEADER_CHARS == 32 * 1024 * 1024
    long = _altered(
        tmp_path, "UPDATE meta SET value = value || printf('%.*c', 33554432, ' ') WHERE key = 'run'"
    )
    _refused(long, "corrupt file (meta holds a value that is too long)")
    long.unlink()
    spaced = _altered(
        tmp_path, "UPDATE meta SET value = value || printf('%.*c', 2097152, ' ') WHERE key = 'run'"
    )
    assert reader.read_info(spaced) == sample_run().info  # 2 MiB: allowed


def test_name_and_text_lengths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = sample_run()
    sf = run.files["/work/app.py"]
    long_name = replace(sf, functions=(FunctionStats("f" * 5000, 1, 2, 1, 1, 1, 1),))
    path = writer.write(replace(run, files={sf.path: long_name}), tmp_path / "n.mlrun")
    _refused(path, "corrupt file (function_columns holds a name that is too long)", info_too=False)
    path = writer.write(run, tmp_path / "t.mlrun")
    monkeypatch.setattr(reader, "MAX_VALUE_BYTES", 10)  # explicit check (Python < 3.11)
    _refused(path, "corrupt file (files holds a text that is too long)", info_too=False)


@pytest.mark.skipif(not hasattr(sqlite3.Connection, "setlimit"), reason="Python 3.11+")
def test_sqlite_length_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    monkeypatch.setitem(reader.SQLITE_LIMITS, "SQLITE_LIMIT_LENGTH", 20)
    _refused(path, "string or blob too big", info_too=False)


def test_time_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # (20,000 rows: the progress handler, called every 10,000 SQLite steps, is called.)
    timeline = tuple(TimelinePoint(i / 10, i, i) for i in range(20_000))
    path = writer.write(replace(sample_run(), timeline=timeline), tmp_path / "r.mlrun")
    monkeypatch.setattr(reader, "READ_BUDGET_S", 0.0)
    monkeypatch.setattr(reader, "READ_BUDGET_S_PER_MIB", 0.0)
    _refused(path, "took too long to read (more than 0 s)", info_too=False)


def test_connection_is_configured_for_untrusted_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    seen: dict[str, object] = {}
    statements: list[str] = []
    connect = reader.connect_untrusted

    def spy(name: str, budget: reader.Budget) -> sqlite3.Connection:
        con = connect(name, budget)
        for pragma in ("trusted_schema", "cell_size_check", "mmap_size", "query_only"):
            seen[pragma] = con.execute(f"PRAGMA {pragma}").fetchone()
        if hasattr(con, "getlimit"):
            seen["attached"] = con.getlimit(sqlite3.SQLITE_LIMIT_ATTACHED)
            seen["length"] = con.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
        con.set_trace_callback(statements.append)
        return con

    monkeypatch.setattr(reader, "connect_untrusted", spy)
    assert reader.read(path) == sample_run()
    assert seen["trusted_schema"] == (0,)
    assert seen["cell_size_check"] == (1,)
    assert seen["mmap_size"] == (0,)
    assert seen["query_only"] == (1,)
    if "attached" in seen:
        assert seen["attached"] == 0
        assert seen["length"] == schema.MAX_VALUE_BYTES
    # SQLite's advice: check the structure before reading (meta first, then every table).
    checks = [s for s in statements if s.startswith("PRAGMA quick_check")]
    assert checks == ["PRAGMA quick_check(meta)", "PRAGMA quick_check(1)"]
    assert statements.index(checks[-1]) < min(
        i for i, s in enumerate(statements) if "FROM files" in s
    )
    # A listing checks meta's pages only.
    statements.clear()
    reader.read_info(path)
    assert [s for s in statements if s.startswith("PRAGMA quick_check")] == [
        "PRAGMA quick_check(meta)"
    ]
