"""The content digest (meta ``content_sha256``): damage to values, not only to structure.

SQLite notices damage to its pages, but a flipped bit inside a stored figure leaves a valid
database that reads back a wrong number. Files carry a SHA-256 over their rows, checked by
:func:`memlens.reader.read`; files written before it existed (the golden v1 file) still
read.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlens.errors import RunFileError
from memlens.model import LineStats, Run, TimelinePoint, replace
from memlens.runfile import reader, writer
from tests.runs import sample_holders, sample_run

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "formats" / "v1.mlrun"

#: The digest as docs/file-format.md spells it (version 6), written independently of the
#: reader's code: tables in this order, meta last; a BLOB as the hex SHA-256 of its bytes.
_SPEC = (
    ("files", "id, path, sha256, text", "id"),
    ("line_columns", "column, part, data", "column, part"),
    (
        "gpu_devices",
        "file_id, line, device, alloc_bytes, alloc_count, live_bytes, peak_bytes",
        "file_id, line, device",
    ),
    ("function_columns", "column, part, data", "column, part"),
    ("tree", "column, part, data", "column, part"),
    ("tree_names", "id, name", "id"),
    ("timeline", "t, traced_bytes, rss_bytes", "rowid"),
    ("holders", "file_id, line, chain, objects, outcome", "file_id, line, chain"),
    (
        "holder_hops",
        "file_id, line, chain, hop, kind, name, type, at_file, at_line",
        "file_id, line, chain, hop",
    ),
    ("moments", "t, traced_bytes", "rowid"),
    ("moment_lines", "column, part, data", "column, part"),
    ("moment_functions", "column, part, data", "column, part"),
    ("meta", "key, value", "key"),
)


def _spec_digest(path: Path) -> str:
    con = sqlite3.connect(path)
    h = hashlib.sha256()
    for table, columns, order in _SPEC:
        where = " WHERE key != 'content_sha256'" if table == "meta" else ""
        rows = [
            [hashlib.sha256(v).hexdigest() if isinstance(v, bytes) else v for v in r]
            for r in con.execute(f"SELECT {columns} FROM {table}{where} ORDER BY {order}")
        ]
        h.update(f"{table}\n".encode())
        h.update(json.dumps(rows, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    con.close()
    return h.hexdigest()


def _meta(path: Path) -> dict[str, str]:
    con = sqlite3.connect(path)
    rows = dict(con.execute("SELECT key, value FROM meta").fetchall())
    con.close()
    return rows


def _sql(path: Path, statement: str) -> None:
    con = sqlite3.connect(path)
    con.execute(statement)
    con.commit()
    con.close()


def _with_holders() -> Run:
    return replace(sample_run(), holders=sample_holders())


def test_written_digest_is_the_documented_one(tmp_path: Path) -> None:
    path = writer.write(_with_holders(), tmp_path / "r.mlrun")
    digest = _meta(path)["content_sha256"]
    assert len(digest) == 64
    assert digest == _spec_digest(path)
    assert reader.read(path) == _with_holders()


def test_golden_file_without_digest_still_reads() -> None:
    assert "content_sha256" not in _meta(GOLDEN)
    reader.read(GOLDEN)  # exact contents are pinned in test_runfile.py


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE files SET text = text || ' '",
        "UPDATE tree_names SET name = 'renamed'",
        "UPDATE timeline SET rss_bytes = 0",
        "UPDATE holder_hops SET name = 'other' WHERE kind = 'attribute'",
        "UPDATE holders SET objects = 4 WHERE outcome = 'found'",
        "DELETE FROM timeline",
        "UPDATE meta SET value = replace(value, '\"exit_code\": 0', '\"exit_code\": 1') WHERE key = 'run'",
    ],
)
def test_changed_values_are_refused_in_one_line(tmp_path: Path, statement: str) -> None:
    path = writer.write(_with_holders(), tmp_path / "r.mlrun")
    _sql(path, statement)
    _refused_by_checksum(path)


def test_changed_call_tree_values_are_refused_in_one_line(tmp_path: Path) -> None:
    """A call-tree column whose values changed (its part still a whole compressed part of
    the same length) is caught by the digest."""
    path = writer.write(_with_holders(), tmp_path / "r.mlrun")
    con = sqlite3.connect(path)
    (data,) = con.execute("SELECT data FROM tree WHERE column = 'alloc_bytes'").fetchone()
    zeros = zlib.compress(bytes(len(zlib.decompress(data))))
    con.execute("UPDATE tree SET data = ? WHERE column = 'alloc_bytes'", (zeros,))
    con.commit()
    con.close()
    _refused_by_checksum(path)


def _refused_by_checksum(path: Path) -> None:
    with pytest.raises(RunFileError) as info:
        reader.read(path)
    assert str(info.value) == (
        f"cannot read {path}: corrupt file (content does not match its checksum)"
    )


@pytest.mark.parametrize("column", ["peak_bytes", "incl_live_bytes", "line", "live_count"])
def test_changed_line_values_are_refused_in_one_line(tmp_path: Path, column: str) -> None:
    """A line column whose values changed (still a whole compressed part of the same length,
    the lines still in order) is caught by the digest."""
    path = writer.write(_with_holders(), tmp_path / "r.mlrun")
    con = sqlite3.connect(path)
    query = "SELECT data FROM line_columns WHERE column = ?"
    raw = bytearray(zlib.decompress(con.execute(query, (column,)).fetchone()[0]))
    raw[-2] ^= 1  # the last line's value, a high bit (a line number only grows)
    con.execute("UPDATE line_columns SET data = ? WHERE column = ?", (zlib.compress(raw), column))
    con.commit()
    con.close()
    _refused_by_checksum(path)


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM line_columns WHERE column = 'peak_bytes'",
        (
            "INSERT INTO line_columns SELECT 'gpu_peak_bytes', part, data FROM line_columns "
            "WHERE column = 'peak_bytes'"
        ),
        "DELETE FROM function_columns WHERE column = 'alloc_bytes'",
    ],
)
def test_a_figure_column_removed_or_added_is_refused_in_one_line(tmp_path: Path, sql: str) -> None:
    """A figure column of zeros is not stored (version 6): a stored one removed, or one
    added where none was, reads as other figures, which the digest catches."""
    path = writer.write(_with_holders(), tmp_path / "r.mlrun")
    _sql(path, sql)
    _refused_by_checksum(path)


@pytest.mark.parametrize(("column", "at"), [("peak_bytes", -2), ("names", 0)])
def test_changed_function_values_are_refused_in_one_line(
    tmp_path: Path, column: str, at: int
) -> None:
    """A function column whose values changed (still a whole compressed part of the same
    length; a name still UTF-8 of the same length: "load" becomes "moad") is caught by the
    digest."""
    path = writer.write(_with_holders(), tmp_path / "r.mlrun")
    con = sqlite3.connect(path)
    query = "SELECT data FROM function_columns WHERE column = ?"
    raw = bytearray(zlib.decompress(con.execute(query, (column,)).fetchone()[0]))
    raw[at] ^= 1
    con.execute(
        "UPDATE function_columns SET data = ? WHERE column = ?", (zlib.compress(raw), column)
    )
    con.commit()
    con.close()
    _refused_by_checksum(path)


@pytest.mark.parametrize("native", [0, 7])
def test_lines_without_gpu_or_native_figures_digest_as_written(tmp_path: Path, native: int) -> None:
    # Error estimates of every size, and figures 0 on every line, read back exactly; the
    # digest is the documented one.
    base = sample_run(mode="sampling")
    sf = base.files["/work/app.py"]
    errors = (0.1, 1 / 3, 1e-300, 12345.678, 2.5e16, 0.0)
    lines = {
        n: LineStats(
            peak_bytes=n * 1000, alloc_err=e, live_err=e / 7, peak_err=e,
            native_alloc_bytes=native,
        )
        for n, e in enumerate(errors, start=1)
    }  # fmt: skip
    run = replace(base, files={sf.path: replace(sf, lines=lines)})
    path = writer.write(run, tmp_path / "r.mlrun")
    assert _meta(path)["content_sha256"] == _spec_digest(path)
    assert reader.read(path) == run


def test_header_only_reads_skip_the_digest(tmp_path: Path) -> None:
    # Listings stay fast: read_info reads the header alone, so value damage in the tables
    # shows only when the run is opened.
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    _sql(path, "UPDATE timeline SET rss_bytes = 0")
    assert reader.read_info(path) == sample_run().info
    with pytest.raises(RunFileError):
        reader.read(path)


def test_version_2_files_need_their_digest(tmp_path: Path) -> None:
    # Version 1 files written before the digest existed read without one (the golden file);
    # every version-2 writer writes it, so its absence is damage.
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    _sql(path, "DELETE FROM meta WHERE key = 'content_sha256'")
    with pytest.raises(RunFileError, match=r"corrupt file \(no content checksum\)$"):
        reader.read(path)


@pytest.fixture(scope="module")
def fresh_file(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("digest") / "r.mlrun"
    writer.write(sample_run(), path)
    return path.read_bytes()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_damaged_file_never_reads_back_different_figures(
    tmp_path: Path, fresh_file: bytes, data: st.DataObject
) -> None:
    # Any damage (1 to 8 bytes replaced anywhere) is either refused in one line or harmless
    # (unused space): the run read back is then exactly the one written.
    blob = bytearray(fresh_file)
    for _ in range(data.draw(st.integers(1, 8))):
        offset = data.draw(st.integers(0, len(blob) - 1))
        blob[offset] = data.draw(st.integers(0, 255))
    path = tmp_path / "damaged.mlrun"
    path.write_bytes(bytes(blob))
    try:
        run = reader.read(path)
    except RunFileError as exc:
        message = str(exc)
    else:
        assert run == sample_run()
        return
    assert "\n" not in message
    assert message.startswith(f"cannot read {path}: ")


def test_digest_of_tables_larger_than_one_chunk(tmp_path: Path) -> None:
    # Reader and writer hash rows in chunks of 4096; the bytes must be those of the whole
    # table's JSON, as the spec says, however many chunks there are.

    base = sample_run()
    sf = base.files["/work/app.py"]
    lines = {n: LineStats(alloc_bytes=n, peak_bytes=2 * n, alloc_err=n / 3) for n in range(1, 9001)}
    run = replace(
        base,
        files={sf.path: replace(sf, lines=lines)},
        timeline=tuple(TimelinePoint(i / 7, i, 2 * i) for i in range(8193)),
    )
    path = writer.write(run, tmp_path / "big.mlrun")
    assert _meta(path)["content_sha256"] == _spec_digest(path)
    assert reader.read(path) == run


def test_texts_already_held_are_shared(tmp_path: Path) -> None:
    # A diff reads the second run with the first one's texts: an equal text is that string
    # (held once); a text that differs under the same digest is the file's own.
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    sf = sample_run().files["/work/app.py"]
    held = "".join(list(sf.text or ""))  # equal, another object
    run = reader.read(path, {sf.sha256: held})
    assert run == sample_run()
    assert run.files[sf.path].text is held
    other = reader.read(path, {sf.sha256: "something else"})
    assert other.files[sf.path].text == sf.text
