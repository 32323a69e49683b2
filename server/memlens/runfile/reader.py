"""Reading run files, hardened for untrusted files: the one reader (the CLI, the servers, the
export, diffs and merges all go through :func:`read` and :func:`read_info`).

Readers reject anything that is not a complete memlens run of a version they understand with
:class:`memlens.errors.RunFileError` (one clear line): missing, not a regular file, not SQLite,
cut short or extended (the SQLite header's page count is the cheap integrity check), foreign,
newer, or with missing tables, columns or ill-typed values; :func:`read` also checks the
content digest (meta ``content_sha256``, when present), so a damaged file reads back exactly as
written or not at all. For any input, :func:`read` returns a Run or raises RunFileError,
nothing else (fuzzed). Standard library only.
"""

from __future__ import annotations

import json
import os
import sqlite3
import struct
import sys
import time
import zlib
from array import array
from bisect import bisect_right
from itertools import accumulate, islice, pairwise, repeat
from itertools import chain as chained
from math import isfinite
from operator import le
from urllib.parse import quote

from memlens.errors import RunFileError, one_line, os_error_reason
from memlens.layout import open_regular
from memlens.model import (
    DEVICE_FIGURES,
    ERRORS,
    FIGURES,
    GPU_FIGURES,
    HOP_KINDS,
    NATIVE,
    OUTCOMES,
    ROOT_KINDS,
    CallNode,
    CallTree,
    FunctionStats,
    GpuDeviceLine,
    HeldBy,
    Hop,
    LineTable,
    LineTableBuilder,
    Moments,
    Run,
    RunInfo,
    SourceFile,
    TimelinePoint,
)
from memlens.model.collector import collector_paused
from memlens.model.lines import INTS
from memlens.model.tree import indexes_in, parents_first
from memlens.runfile.digest import DIGEST_KEY, Digest
from memlens.runfile.header import clip, parse_header
from memlens.runfile.schema import (
    BLOB,
    COMPRESSED_PARTS,
    FORMAT_VERSION,
    FORMATS,
    FUNCTION_COLUMNS,
    FUNCTION_KEYS,
    FUNCTION_NAMES,
    FUNCTION_PARTS,
    INT,
    LINE_COLUMNS,
    LINE_KEYS,
    LINE_PARTS,
    MAGIC,
    MAX_FUNCTION_NAME_BYTES,
    MAX_HEADER_CHARS,
    MAX_HOLDER_CHAINS,
    MAX_HOLDER_HOPS,
    MAX_META_VALUE_CHARS,
    MAX_NAME_CHARS,
    MAX_ROWS,
    MAX_VALUE_BYTES,
    MOMENT_FUNCTION_COLUMNS,
    MOMENT_LINE_COLUMNS,
    REAL,
    TEXT,
    TREE_COLUMNS,
    TREE_PART,
    Table,
    expected_schema,
    squash,
    tables_of,
)

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
    from typing import Any, TypeVar

    _T = TypeVar("_T")

_SQLITE_HEADER = b"SQLite format 3\x00"


def read(path: str | os.PathLike[str], texts: Mapping[str, str] | None = None) -> Run:
    """Read a run file. Raises :class:`RunFileError` with a one-line reason on any problem.

    ``texts``: recorded texts already held, by their SHA-256 (another run's): a file's text
    equal to one of them is that string, held once (two runs of a program share most of
    their texts; a diff holds both)."""

    def read_db(con: sqlite3.Connection, name: str, version: int) -> Run:
        return _read_db(con, name, version, texts or {})

    with collector_paused():
        return _with_db(path, read_db, whole=True)


def read_info(path: str | os.PathLike[str]) -> RunInfo:
    """Read only a run file's header (fast: for listings). Same errors as :func:`read`."""
    return _with_db(path, _read_info, whole=False)


#: Time a read may take: a base plus this much per MiB of file (reading runs at several MiB/s).
READ_BUDGET_S = 30.0
READ_BUDGET_S_PER_MIB = 1.0
#: SQLite's own limits on this connection (where Python has ``setlimit``, 3.11+), lowered as
#: SQLite advises for untrusted input to what the reader's fixed queries need.
SQLITE_LIMITS = {
    "SQLITE_LIMIT_LENGTH": MAX_VALUE_BYTES,
    "SQLITE_LIMIT_SQL_LENGTH": 100_000,
    "SQLITE_LIMIT_COLUMN": 100,
    "SQLITE_LIMIT_EXPR_DEPTH": 100,
    "SQLITE_LIMIT_COMPOUND_SELECT": 3,
    "SQLITE_LIMIT_VDBE_OP": 25_000,
    "SQLITE_LIMIT_FUNCTION_ARG": 8,
    "SQLITE_LIMIT_ATTACHED": 0,
    "SQLITE_LIMIT_LIKE_PATTERN_LENGTH": 50,
    "SQLITE_LIMIT_VARIABLE_NUMBER": 10,
    "SQLITE_LIMIT_TRIGGER_DEPTH": 1,
    "SQLITE_LIMIT_WORKER_THREADS": 0,
}


class Budget:
    """The progress handler: stops SQLite once the read has taken longer than allowed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._clock = time.monotonic
        self._deadline = time.monotonic() + seconds
        self.exceeded = False

    def __call__(self) -> int:
        if self._clock() > self._deadline:
            self.exceeded = True
            return 1  # SQLite interrupts the statement
        return 0


def _with_db(
    path: str | os.PathLike[str],
    reader: Callable[[sqlite3.Connection, str, int], _T],
    *,
    whole: bool,
) -> _T:
    name = os.fspath(path)
    try:
        # Opened without blocking and checked on the descriptor itself: a FIFO, a device
        # (/dev/zero), a link to one (/proc/self/fd/0) or a directory is refused at once.
        fd = open_regular(name)
        try:
            header = os.read(fd, 100)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
    except OSError as exc:
        raise RunFileError(name, os_error_reason(exc)) from None
    except ValueError as exc:  # e.g. a NUL byte in the name
        raise RunFileError(name, f"bad file name ({exc})") from None
    if header[: len(_SQLITE_HEADER)] != _SQLITE_HEADER:
        raise RunFileError(name, "not a memlens run file")
    if len(header) < 100:
        raise RunFileError(name, "truncated file")
    expected = _expected_size(header)
    if expected is None:
        raise RunFileError(name, "corrupt file (bad SQLite header)")
    if size < expected:
        raise RunFileError(name, "truncated file")
    if size > expected:
        raise RunFileError(name, "corrupt file (trailing data)")
    budget = Budget(READ_BUDGET_S + READ_BUDGET_S_PER_MIB * size / (1 << 20))
    try:
        con = connect_untrusted(name, budget)
    except sqlite3.Error as exc:
        raise RunFileError(name, f"not a readable database ({one_line(exc)})") from None
    try:
        version = _check_schema(con, name, whole)
        return reader(con, name, version)
    except RunFileError:
        raise
    except sqlite3.Error as exc:
        if budget.exceeded:
            raise RunFileError(
                name, f"took too long to read (more than {budget.seconds:.0f} s)"
            ) from None
        raise RunFileError(name, f"corrupt or truncated file ({one_line(exc)})") from None
    except RecursionError:
        raise RunFileError(name, "corrupt file (nesting too deep)") from None
    except MemoryError:
        raise RunFileError(name, "too large to read (out of memory)") from None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        raise RunFileError(name, f"corrupt file ({type(exc).__name__}: {one_line(exc)})") from None
    finally:
        con.close()


def connect_untrusted(name: str, budget: Budget) -> sqlite3.Connection:
    """A read-only connection to an untrusted file, configured before it reads the schema."""
    # immutable: no locks, no journal, no -wal/-shm files looked for or created.
    con = sqlite3.connect(f"file:{_uri_path(name)}?mode=ro&immutable=1", uri=True)
    try:
        setlimit = getattr(con, "setlimit", None)  # Python 3.11+
        if setlimit is not None:
            for limit, value in SQLITE_LIMITS.items():
                setlimit(getattr(sqlite3, limit), value)
        setconfig = getattr(con, "setconfig", None)  # Python 3.12+: views and triggers off
        if setconfig is not None:
            for option, on in (
                ("SQLITE_DBCONFIG_DEFENSIVE", True),
                ("SQLITE_DBCONFIG_TRUSTED_SCHEMA", False),
                ("SQLITE_DBCONFIG_ENABLE_VIEW", False),
                ("SQLITE_DBCONFIG_ENABLE_TRIGGER", False),
            ):
                if hasattr(sqlite3, option):
                    setconfig(getattr(sqlite3, option), on)
        con.set_progress_handler(budget, 10_000)
        # No function or virtual table the schema might name runs; pages are checked as read;
        # no memory-mapped I/O (SQLite's advice for untrusted files); never a write.
        for pragma in ("trusted_schema=OFF", "cell_size_check=ON", "mmap_size=0", "query_only=ON"):
            con.execute(f"PRAGMA {pragma}")
    except BaseException:
        con.close()
        raise
    return con


def _expected_size(header: bytes) -> int | None:
    """File size the SQLite header promises (page size x page count), None if unknown."""
    if len(header) < 100:
        return None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    page_count = int.from_bytes(header[28:32], "big")
    change_counter = header[24:28]
    valid_for = header[92:96]
    # The in-header page count is only valid when "version-valid-for" matches the change
    # counter; our writer always leaves it valid.
    if page_size < 512 or page_count == 0 or change_counter != valid_for:
        return None
    return page_size * page_count


def _uri_path(name: str) -> str:
    # (As bytes: a name that is not UTF-8 holds surrogates, which quote() cannot encode.)
    return quote(os.fsencode(os.path.abspath(name)))


def _meta(con: sqlite3.Connection, name: str) -> dict[str, object]:
    """The ``meta`` table as a dict (at most MAX_ROWS["meta"] rows of bounded size)."""
    limit = MAX_ROWS["meta"]
    rows = con.execute(
        "SELECT key, value FROM meta WHERE length(CAST(key AS BLOB)) <= ? "
        "AND length(CAST(value AS BLOB)) <= (CASE key WHEN 'run' THEN ? ELSE ? END) LIMIT ?",
        (MAX_NAME_CHARS, MAX_HEADER_CHARS, MAX_META_VALUE_CHARS, limit + 1),
    ).fetchall()
    if len(rows) > limit:
        raise RunFileError(name, f"corrupt file (meta holds more than {limit} rows)")
    (total,) = con.execute("SELECT count(*) FROM meta").fetchone()
    if total != len(rows):
        raise RunFileError(name, "corrupt file (meta holds a value that is too long)")
    return {k: v for k, v in rows if isinstance(k, str)}


def _format_version(con: sqlite3.Connection, name: str) -> int:
    """The format version, after checking the magic; newer than ours asks for an upgrade."""
    meta = _meta(con, name)
    if meta.get("format") != MAGIC:
        raise RunFileError(name, "not a memlens run file")
    version_text = meta.get("version")
    if not isinstance(version_text, str) or len(version_text) > 20:
        raise RunFileError(name, "bad format version")
    version_text = version_text.strip()
    if not (version_text.isascii() and version_text.isdigit()):
        raise RunFileError(name, "bad format version")
    version = int(version_text)
    if version > FORMAT_VERSION:
        raise RunFileError(
            name,
            f"format version {version} is newer than this memlens understands "
            f"({FORMAT_VERSION}); upgrade memlens",
        )
    if version < 1:
        raise RunFileError(name, f"bad format version {version}")
    return version


def _read_info(con: sqlite3.Connection, name: str, version: int = FORMAT_VERSION) -> RunInfo:
    """The run header, read from ``meta`` and checked (the same in every version)."""
    header = _meta(con, name).get("run")
    if not isinstance(header, str):
        raise RunFileError(name, "no run header")
    try:
        raw = json.loads(header)
    except ValueError:
        raise RunFileError(name, "bad run header (not JSON)") from None
    return parse_header(raw, name)


def _check_types(con: sqlite3.Connection, name: str, table: Table, types: bool = True) -> None:
    """One query per table: does any row hold a value of the wrong type (or too long)? And
    one for its REAL columns: does any hold an infinity? (``types`` False: only that.)"""
    tests = []
    for column, kind, nullable in table.columns:
        if kind == INT:
            tests.append(f"typeof({column}) != 'integer'")
        elif kind == REAL:
            tests.append(f"typeof({column}) NOT IN ('real', 'integer')")
        elif kind == BLOB:
            tests.append(f"typeof({column}) != 'blob'")
        elif nullable:  # a long text: the recorded source (its size is checked as it is read)
            tests.append(f"typeof({column}) NOT IN ('text', 'null')")
        else:
            tests.append(f"typeof({column}) != 'text' OR length({column}) > {MAX_NAME_CHARS}")
    where = " OR ".join(tests)
    if types and con.execute(f"SELECT 1 FROM {table.name} WHERE {where} LIMIT 1").fetchone():
        raise RunFileError(
            name, f"corrupt file ({table.name} holds a value of the wrong type or size)"
        )
    reals = [c for c, kind, _ in table.columns if kind == REAL]
    if reals:
        # SQLite stores NaN as NULL (refused above) but keeps infinities (9e999 is +Inf).
        infinite = " OR ".join(f"{c} IN (9e999, -9e999)" for c in reals)
        if con.execute(f"SELECT 1 FROM {table.name} WHERE {infinite} LIMIT 1").fetchone():
            raise RunFileError(
                name, f"corrupt file ({table.name} holds a number that is not finite)"
            )


_EXPECTED_SCHEMA: dict[int, dict[str, tuple[str, str, str | None]]] = {}


def _check_schema(con: sqlite3.Connection, name: str, whole: bool) -> int:
    """The schema must be exactly the writer's of the file's version: same tables, columns,
    types and constraints. Returns the version.

    No view, trigger, extra index, DEFAULT or generated column can slip in, so nothing the
    file's author wrote runs or expands while the rows are read (a view can loop forever; a
    column DEFAULT can turn a 5 MB file into gigabytes of rows). ``meta`` (the same in every
    version) is checked first and alone: the format version is read from it before the rest of
    the schema, so a newer file gets the "upgrade" message even when its tables differ.
    """
    largest = max(len(expected_schema(v)) for v in FORMATS)
    limit = largest + 1
    rows = con.execute(
        f"SELECT type, name, tbl_name, sql FROM sqlite_master LIMIT {limit}"
    ).fetchall()
    found = {str(r[1]): (str(r[0]), str(r[2]), squash(r[3])) for r in rows}
    meta = found.get("meta")
    if meta is None:
        raise RunFileError(name, "not a memlens run file (no meta table)")
    if meta != expected_schema(FORMAT_VERSION)["meta"]:
        raise RunFileError(
            name, f"corrupt file (unexpected schema: {_shown_object('meta', meta, FORMAT_VERSION)})"
        )
    # Only meta's own pages are checked before the header is read (SQLite's advice: check a
    # file's structure before reading it); :func:`_read_db` checks every table.
    _quick_check(con, name, "meta")
    version = _format_version(con, name)
    expected = expected_schema(version)
    for obj, shape in found.items():
        if expected.get(obj) != shape:
            raise RunFileError(
                name, f"corrupt file (unexpected schema: {_shown_object(obj, shape, version)})"
            )
    if len(rows) >= limit:  # pragma: no cover - the object past the expected ones differs
        raise RunFileError(name, "corrupt file (unexpected schema: too many objects)")
    for obj, shape in expected.items():
        if obj not in found:
            raise RunFileError(name, f"corrupt file (no {shape[1]} table)")
    if whole:
        _quick_check(con, name, None)
    return version


def _shown_object(obj: str, shape: tuple[str, str, str | None], version: int) -> str:
    """How an object that differs from the writer's schema is named in the error."""
    kind = shape[0]
    expected = expected_schema(version).get(obj)
    if expected is None:
        return f"{clip(kind)} {clip(obj)}"  # "trigger t", "index i", "table extra"
    if kind != expected[0]:
        return f"{clip(obj)} is a {clip(kind)}"  # "meta is a view"
    return f"{kind} {obj} is not as format version {version} defines it"


def _quick_check(con: sqlite3.Connection, name: str, table: str | None) -> None:
    """``PRAGMA quick_check``: SQLite's structural check of the file (or of one table)."""
    query = f"PRAGMA quick_check({table})" if table else "PRAGMA quick_check(1)"
    result = con.execute(query).fetchone()
    if result is None or result[0] != "ok":
        detail = one_line(Exception(result[0] if result else "no answer"))
        raise RunFileError(name, f"corrupt file ({detail})")


def _read_db(con: sqlite3.Connection, name: str, version: int, texts: Mapping[str, str]) -> Run:
    info = _read_info(con, name, version)
    tables = tables_of(version)
    for table in tables.values():
        if table.name != "meta":
            # (The lines' types are checked as they are read: see below.)
            _check_types(con, name, table, types=table.name != "lines")

    # The rows read are also fed to the content digest (same columns and order as the
    # writer's), so checking it costs no second pass over the tables.
    digest = RowDigest(con, name, version)
    paths: list[str] = []
    ids: dict[int, int] = {}  # file id -> position
    files: dict[str, dict[str, Any]] = {}
    for fid, fpath, sha, text in digest.rows(tables["files"]):
        if len(fpath) > MAX_NAME_CHARS or len(sha) > MAX_NAME_CHARS:
            raise RunFileError(name, "corrupt file (files holds a name that is too long)")
        if text is not None and len(text) > MAX_VALUE_BYTES:
            raise RunFileError(name, "corrupt file (files holds a text that is too long)")
        if fpath in files:
            raise RunFileError(name, "corrupt file (files names a file twice)")
        known = texts.get(sha)
        if known is not None and known == text:
            text = known
        ids[fid] = len(paths)
        paths.append(fpath)
        files[fpath] = {
            "sha256": sha,
            "text": text,
            "lines": None,
            "functions": [],
            "gpu_devices": {},
        }
    by_id = [files[p] for p in paths]

    def entry(fid: int, table: str) -> dict[str, Any]:
        pos = ids.get(fid)
        if pos is None:
            raise RunFileError(name, f"corrupt file ({table} names unknown file id {fid!r})")
        return by_id[pos]

    v1 = version == 1
    function_keys: list[tuple[str, str, int, int]] = []
    if version >= LINE_PARTS:
        for at, lines in enumerate(_read_line_columns(name, digest, tables, len(paths))):
            by_id[at]["lines"] = lines
    else:
        _read_line_rows(con, name, digest, tables["lines"], v1, entry)
    if "gpu_devices" in tables:  # version 3 on: a line's GPU figures per device
        for fid, line, device, *figures in digest.rows(tables["gpu_devices"]):
            entry(fid, "gpu_devices")["gpu_devices"].setdefault(line, []).append(
                GpuDeviceLine(device, **dict(zip(DEVICE_FIGURES, figures, strict=True)))
            )
    if version >= FUNCTION_PARTS:
        for at, functions in _read_function_columns(name, digest, tables, len(paths)):
            by_id[at]["functions"] += functions
            path = paths[at]
            function_keys += ((path, f.qualname, f.first_line, f.last_line) for f in functions)
    else:
        for row in digest.rows(tables["functions"]):
            entry(row[0], "functions")["functions"].append(FunctionStats(*row[1:]))
            function_keys.append((paths[ids[row[0]]], row[1], row[2], row[3]))
    if v1:

        def path_of(fid: int) -> str:
            pos = ids.get(fid)
            if pos is None:
                raise RunFileError(name, f"corrupt file (nodes names unknown file id {fid!r})")
            return paths[pos]

        nodes = [CallNode(r[0], r[1], path_of(r[2]), *r[3:]) for r in digest.rows(tables["nodes"])]
        try:
            tree = CallTree.from_nodes(nodes)
        except ValueError as exc:
            raise RunFileError(name, f"corrupt file ({exc})") from None
    else:
        tree = _read_tree(name, digest, tables, paths)
    timeline = tuple(
        TimelinePoint(float(t), tb, rss) for t, tb, rss in digest.rows(tables["timeline"])
    )
    holders = _read_holders(name, digest, tables, ids, paths) if version >= 3 else ()
    moments = (
        _read_moments(name, digest, tables, paths, function_keys) if version >= 3 else Moments()
    )
    if not v1:
        for _ in digest.rows(tables["meta"]):
            pass
    digest.check(name)  # last: the row checks above name damage more precisely
    return Run(
        info=info,
        files={
            p: SourceFile(
                path=p,
                sha256=d["sha256"],
                text=d["text"],
                lines=d["lines"],
                functions=tuple(d["functions"]),
                gpu_devices={line: tuple(each) for line, each in d["gpu_devices"].items()},
            )
            for p, d in files.items()
        },
        call_tree=tree,
        timeline=timeline,
        moments=moments,
        holders=holders,
    )


def _read_line_rows(
    con: sqlite3.Connection,
    name: str,
    digest: RowDigest,
    table: Table,
    v1: bool,
    entry: Callable[[int, str], dict[str, Any]],
) -> None:
    """The lines of versions 1 to 4, a row each, into each file's entry (``lines``)."""
    # Rows go into each file's columns by chunk, with no work per row in Python: a chunk's
    # values are packed as machine values (struct, which refuses a value of the wrong type:
    # so the lines table, by far the biggest, is not scanned for types in SQL), each column
    # taken from them as bytes into a typed array. One object per line only when it is
    # looked at (memlens.model.LineTable): a million lines load in about 100 MB. Fetching a
    # value costs more than anything else done with it: the figures that are 0 on every line
    # (GPU figures of a run without GPU memory, often the native ones) are not fetched.
    lines_table = table
    width = len(lines_table.columns)
    ints = 2 + len(FIGURES) + (0 if v1 else len(NATIVE))  # v1: no native figures
    errs = ints + len(ERRORS)  # then the GPU figures (version 3 on)
    zero = _zero_columns(con, lines_table)
    fetched = [k for k, (c, _, _) in enumerate(lines_table.columns) if c not in zero]
    row_format = "".join("d" if lines_table.columns[k][1] == REAL else "q" for k in fetched)
    packers: dict[int, struct.Struct] = {}
    builder: LineTableBuilder | None = None
    current: dict[str, Any] = {}  # the file whose lines come now

    def finish() -> None:  # a file's lines are all read: its table (its columns trimmed)
        if builder is not None:
            try:
                current["lines"] = builder.table()
            except ValueError:  # the primary key keeps them in order: a damaged file
                raise RunFileError(name, "corrupt file (lines are not in order)") from None

    try:
        for chunk in digest.chunks(lines_table, zero):
            n = len(chunk)
            packer = packers.get(n) or packers.setdefault(n, struct.Struct("=" + row_format * n))
            values = memoryview(packer.pack(*chained.from_iterable(chunk))).cast("q")
            columns: list[memoryview | None] = [None] * width
            for j, k in enumerate(fetched):
                columns[k] = values[j :: len(fetched)]
            fids = [row[0] for row in chunk] if chunk[0][0] != chunk[-1][0] else None
            start = 0
            while start < n:
                fid = chunk[start][0]
                end = n if fids is None else bisect_right(fids, fid, start)
                if entry(fid, "lines") is not current:
                    finish()
                    current = entry(fid, "lines")
                    if current["lines"] is not None:
                        raise RunFileError(name, "corrupt file (lines of a file are not together)")
                    builder = LineTableBuilder()
                assert builder is not None
                part = [
                    bytes(8 * (end - start)) if c is None else c[start:end].tobytes()
                    for c in columns
                ]
                native = [bytes(8 * (end - start))] * len(NATIVE) if v1 else []
                builder.frombytes(part[1], [*part[2:ints], *native], part[ints:errs], part[errs:])
                start = end
    except (struct.error, TypeError, OverflowError):
        raise RunFileError(
            name, "corrupt file (lines holds a value of the wrong type or size)"
        ) from None
    finish()


def _read_line_columns(
    name: str, digest: RowDigest, tables: Mapping[str, Table], files: int
) -> list[LineTable | None]:
    """Version 5's lines, from their column parts: each file's table (None: no lines), in the
    files table's order. Checked: every column present (version 6: every key column; a figure
    column not stored is 0 on every line) with the same number of values, files that exist
    and come together, each file's lines in increasing order, finite errors. One whole column
    is held at a time, while it is cut into the files' columns."""
    table = tables["line_columns"]
    unstored = digest.version >= FUNCTION_PARTS
    parts = _fetch_parts(name, digest, table, LINE_COLUMNS, LINE_KEYS if unstored else None)
    codes = dict(LINE_COLUMNS)
    stored = set(parts)

    def column(c: str) -> array[Any] | None:
        what = "the run holds more than {limit:,} lines"
        return _stored_column(
            name, digest, table, parts, stored, c, codes[c], MAX_ROWS["lines"], what
        )

    which = column("file") or array("i")
    n = len(which)
    spans = _file_spans(name, table, which, files)
    del which
    zeros: dict[tuple[str, int], array[Any]] = {}  # one array of zeros per file and kind

    def split(c: str) -> list[array[Any]]:
        values = column(c)
        if values is None:  # (arrays of zeros are shared: a table's columns are read only)
            code = codes[c]
            out = []
            for k, (_, first, end) in enumerate(spans):
                if (code, k) not in zeros:
                    zeros[code, k] = array(code, [0]) * (end - first)
                out.append(zeros[code, k])
            return out
        if len(values) != n:
            raise RunFileError(name, "corrupt file (line_columns columns differ in length)")
        return [values[first:end] for _, first, end in spans]

    def group(names: tuple[str, ...]) -> list[list[array[Any]]]:
        # A group of columns (the error estimates, the GPU figures) that holds 0 on every line
        # of the run, as most do (exact mode, no GPU), is no file's: not cut into files.
        if stored and stored.isdisjoint(names):
            return [[] for _ in spans]
        cut = [split(c) for c in names]
        return [list(each) for each in zip(*cut, strict=True)]

    numbers = split("line")
    ints = [split(c) for c in INTS]
    errs = group(ERRORS)
    gpu = group(GPU_FIGURES)
    for values in chained.from_iterable(errs):  # (NaN and infinities are true: all 0 is fine)
        if any(values) and not all(map(isfinite, values)):
            raise RunFileError(
                name, "corrupt file (line_columns holds a number that is not finite)"
            )
    out: list[LineTable | None] = [None] * files
    for k, (at, _, _) in enumerate(spans):
        try:
            out[at] = LineTable.checked(numbers[k], [c[k] for c in ints], errs[k], gpu[k])
        except ValueError:
            raise RunFileError(name, "corrupt file (lines are not in order)") from None
    return out


def _stored_column(
    name: str,
    digest: RowDigest,
    table: Table,
    parts: dict[str, list[bytes]],
    stored: Collection[str],
    column: str,
    code: str,
    limit: int,
    what: str,
) -> array[Any] | None:
    """One column of version 5's or 6's lines or functions from its ``parts`` (taken from
    them); None for a figure column not stored (version 6: 0 on every row), and no values
    when the table stores nothing (no rows)."""
    if column not in stored:
        return None if stored else array(code)
    return _column_of(
        name, table.name, column, code, parts.pop(column), digest.version, limit, what
    )


def _file_spans(
    name: str, table: Table, which: array[int], files: int
) -> list[tuple[int, int, int]]:
    """(file, first row, end) of each file's rows, from the ``file`` column of version 5's
    lines or 6's functions, checked: files that exist and come together."""
    n = len(which)
    if n and (
        which[0] < 0 or which[-1] >= files or not all(map(le, which, islice(which, 1, None)))
    ):
        raise RunFileError(name, f"corrupt file ({table.name} names an unknown or misplaced file)")
    spans: list[tuple[int, int, int]] = []
    start = 0
    while start < n:
        end = bisect_right(which, which[start], start)
        spans.append((which[start], start, end))
        start = end
    return spans


def _read_function_columns(
    name: str, digest: RowDigest, tables: Mapping[str, Table], files: int
) -> list[tuple[int, list[FunctionStats]]]:
    """Version 6's functions, from their column parts: (file, its functions) for each file
    with functions, in the files table's order. Checked: every key column present (a figure
    column not stored is 0 on every function), of one length (but the names'), files that
    exist and come together, names of at most MAX_NAME_CHARS characters that are UTF-8 and
    fill ``names`` exactly."""
    table = tables["function_columns"]
    parts = _fetch_parts(name, digest, table, (*FUNCTION_COLUMNS, FUNCTION_NAMES), FUNCTION_KEYS)
    stored = set(parts)

    def column(c: str, code: str, limit: int, what: str) -> array[Any] | None:
        return _stored_column(name, digest, table, parts, stored, c, code, limit, what)

    too_many = "the run holds more than {limit:,} functions"
    columns = [column(c, code, MAX_ROWS["functions"], too_many) for c, code in FUNCTION_COLUMNS]
    which, lengths = columns[0] or array("i"), columns[-1] or array("i")
    n = len(which)
    if any(c is not None and len(c) != n for c in columns):
        raise RunFileError(name, "corrupt file (function_columns columns differ in length)")
    spans = _file_spans(name, table, which, files)
    raw = column(
        *FUNCTION_NAMES,
        MAX_FUNCTION_NAME_BYTES,
        "its functions' names hold more than {limit:,} bytes",
    ) or array("B")
    try:
        text = raw.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        raise RunFileError(
            name, "corrupt file (function_columns holds a name that is not UTF-8)"
        ) from None
    del raw
    if n and min(lengths) < 0:
        raise RunFileError(name, "corrupt file (function_columns holds a negative name length)")
    if n and max(lengths) > MAX_NAME_CHARS:
        raise RunFileError(name, "corrupt file (function_columns holds a name that is too long)")
    ends = list(accumulate(lengths))
    if (ends[-1] if ends else 0) != len(text):
        raise RunFileError(name, "corrupt file (function_columns names do not fill names)")
    names = list(map(text.__getitem__, map(slice, [0, *ends], ends)))
    figures = [repeat(0) if c is None else c for c in columns[1:-1]]
    functions = list(map(FunctionStats, names, *figures))
    return [(at, functions[first:end]) for at, first, end in spans]


def _zero_columns(con: sqlite3.Connection, table: Table) -> frozenset[str]:
    """The groups of ``table``'s figures (the native ones, the GPU ones) that hold the integer
    0 on every row: one scan each, stopped at the first row that holds anything else."""
    names = set(table.names)
    out: set[str] = set()
    for group in (NATIVE, GPU_FIGURES):
        if names.issuperset(group):
            where = " OR ".join(f"typeof({c}) != 'integer' OR {c} != 0" for c in group)
            if con.execute(f"SELECT 1 FROM {table.name} WHERE {where} LIMIT 1").fetchone() is None:
                out.update(group)
    return frozenset(out)


def _read_parts(
    name: str,
    digest: RowDigest,
    table: Table,
    columns: tuple[tuple[str, str], ...],
    limit: int,
    what: str,
) -> dict[str, Any]:
    """A table of column parts (``tree``, ``moment_lines``...) as typed arrays, checked: only
    known columns, parts in order, whole values, at most ``limit`` values per column (else
    ``what``, formatted with the limit, says why), every column of one length (no column at
    all when the table is empty)."""
    parts = _fetch_parts(name, digest, table, columns)
    out = {
        column: _column_of(
            name, table.name, column, code, parts.get(column, ()), digest.version, limit, what
        )
        for column, code in columns
    }
    if len({len(c) for c in out.values()}) > 1:
        raise RunFileError(name, f"corrupt file ({table.name} columns differ in length)")
    return out


def _fetch_parts(
    name: str,
    digest: RowDigest,
    table: Table,
    columns: tuple[tuple[str, str], ...],
    keys: Collection[str] | None = None,
) -> dict[str, list[bytes]]:
    """The stored parts of each column of a table of column parts, checked: only known
    columns, parts in order, every column (with ``keys``: every one of them; the others may
    be absent) or none (an empty table)."""
    codes = dict(columns)
    parts: dict[str, list[bytes]] = {}
    for column, part, data in digest.rows(table):
        code = codes.get(column)
        if code is None or part != len(parts.setdefault(column, [])):
            raise RunFileError(
                name, f"corrupt file ({table.name} holds an unknown or misplaced part)"
            )
        parts[column].append(data)
    if parts and not set(codes if keys is None else keys).issubset(parts):
        raise RunFileError(name, f"corrupt file ({table.name} lacks a column)")
    return parts


def _column_of(
    name: str,
    table: str,
    column: str,
    code: str,
    parts: Iterable[bytes],
    version: int,
    limit: int,
    what: str,
) -> array[Any]:
    """One column's values from its stored parts (see :func:`_read_parts`)."""
    values = array(code)
    compressed = version >= COMPRESSED_PARTS
    for data in parts:
        if compressed:
            data = _decompressed(name, table, column, data, TREE_PART * values.itemsize)
        if len(data) % values.itemsize:
            raise RunFileError(name, f"corrupt file ({table} column {column} is cut short)")
        values.frombytes(data)
        if len(values) > limit:
            raise RunFileError(name, f"too large to read ({what.format(limit=limit)})")
    if sys.byteorder == "big":
        values.byteswap()
    return values


def _decompressed(name: str, table: str, column: str, data: bytes, most: int) -> bytes:
    """A compressed column part's bytes (version 4), at most ``most`` of them (a part holds
    at most TREE_PART values: a part that would inflate beyond is refused before it does)."""
    inflate = zlib.decompressobj()
    try:
        out = inflate.decompress(data, most)
    except zlib.error:
        raise RunFileError(name, f"corrupt file ({table} column {column} is damaged)") from None
    if inflate.unconsumed_tail or inflate.unused_data or not inflate.eof:
        raise RunFileError(name, f"corrupt file ({table} column {column} is damaged)")
    return out


def _read_moments(
    name: str,
    digest: RowDigest,
    tables: Mapping[str, Table],
    paths: list[str],
    function_keys: list[tuple[str, str, int, int]],
) -> Moments:
    """Version 3's moments, checked: times finite, in order; every change names an existing
    moment, file and function, in moment order."""
    t: list[float] = []
    traced: list[int] = []
    for when, total in digest.rows(tables["moments"]):
        if t and when < t[-1]:
            raise RunFileError(name, "corrupt file (moments are not in time order)")
        t.append(float(when))
        traced.append(total)
    limit = MAX_ROWS["moment_values"]
    what = "the moments hold more than {limit:,} changes"
    lines = _read_parts(name, digest, tables["moment_lines"], MOMENT_LINE_COLUMNS, limit, what)
    fns = _read_parts(
        name, digest, tables["moment_functions"], MOMENT_FUNCTION_COLUMNS, limit, what
    )
    for cols, index, sizes in (
        (lines, "file", len(paths)),
        (fns, "function", len(function_keys)),
    ):
        moment = cols["moment"]
        if moment and (min(moment) < 0 or max(moment) >= len(t)):
            raise RunFileError(name, "corrupt file (a moment change names no moment)")
        if any(b < a for a, b in pairwise(moment)):
            raise RunFileError(name, "corrupt file (moment changes are not in moment order)")
        column = cols[index]
        if column and (min(column) < 0 or max(column) >= sizes):
            raise RunFileError(name, f"corrupt file (a moment change names an unknown {index})")
    return Moments(t, traced, paths, lines, function_keys, fns)


def _read_holders(
    name: str,
    digest: RowDigest,
    tables: Mapping[str, Table],
    ids: Mapping[int, int],
    paths: list[str],
) -> tuple[HeldBy, ...]:
    """Version 3's paths to what holds each line, checked: known files, kinds and outcomes,
    paths numbered from 0 per line and hops from 0 per path, found paths with hops."""

    def bad(what: str) -> RunFileError:
        return RunFileError(name, f"corrupt file ({what})")

    def path_of(fid: int, table: str) -> str:
        pos = ids.get(fid)
        if pos is None:
            raise bad(f"{table} names unknown file id {fid!r}")
        return paths[pos]

    chains: dict[tuple[int, int, int], tuple[str, int, int, str, list[Hop]]] = {}
    count: dict[tuple[int, int], int] = {}
    for fid, line, chain, objects, outcome in digest.rows(tables["holders"]):
        if outcome not in OUTCOMES or not 0 <= objects < 2**31:
            raise bad("holders holds an unknown outcome or a bad count")
        if chain != count.get((fid, line), 0) or chain >= MAX_HOLDER_CHAINS:
            raise bad("holders numbers a line's paths out of order")
        count[fid, line] = chain + 1
        chains[fid, line, chain] = (path_of(fid, "holders"), line, objects, outcome, [])
    for fid, line, chain, hop, kind, text, type_, at_file, at_line in digest.rows(
        tables["holder_hops"]
    ):
        entry = chains.get((fid, line, chain))
        if entry is None:
            raise bad("holder_hops names a path holders does not hold")
        hops = entry[4]
        if hop != len(hops) or hop >= MAX_HOLDER_HOPS:
            raise bad("holder_hops numbers a path's hops out of order")
        if kind not in (ROOT_KINDS if hop == 0 else HOP_KINDS):
            raise bad(f"holder_hops holds an unknown kind {kind[:40]!r}")
        where = path_of(at_file, "holder_hops") if at_file else ""
        hops.append(Hop(kind, text, type_, where, at_line if where else 0))
    out = []
    for path, line, objects, outcome, hops in chains.values():
        if (outcome == "found") != bool(hops):
            raise bad("holders holds a path without hops, or hops without a path")
        out.append(HeldBy(path, line, objects, outcome, tuple(hops)))
    return tuple(out)


def _read_tree(
    name: str, digest: RowDigest, tables: Mapping[str, Table], paths: list[str]
) -> CallTree:
    """Version 2's call tree from its column parts, checked: every column present with the
    same number of nodes, parents before children, files and names that exist."""
    columns = _read_parts(
        name,
        digest,
        tables["tree"],
        TREE_COLUMNS,
        MAX_ROWS["nodes"],
        "the call tree holds more than {limit:,} nodes",
    )
    names = [n for _, n in digest.rows(tables["tree_names"])]
    n = len(columns["parent"])
    if n:
        if not parents_first(columns["parent"]):
            raise RunFileError(name, "corrupt file (a tree node comes before its parent)")
        if not indexes_in(columns["file"], len(paths)):
            raise RunFileError(name, "corrupt file (tree names an unknown file)")
        if not indexes_in(columns["function"], len(names)):
            raise RunFileError(name, "corrupt file (tree names an unknown function)")
    columns["id"] = range(n)
    return CallTree(paths, names, columns, canonical=True)


def _digest_text(table: Table, zero: Collection[str]) -> Callable[[list[Any]], bytes]:
    """The digest's text of a chunk of ``table``'s rows fetched without the ``zero`` columns
    (:meth:`Digest.chunk_text`): the same as :func:`memlens.runfile.digest.digest_json` of
    the whole rows for rows of numbers (JSON writes an int as ``%d`` does, a float as its
    repr); TypeError for a value that is not a number (a corrupt file)."""
    row = ",".join(
        "0" if c in zero else "%r" if kind == REAL else "%d" for c, kind, _ in table.columns
    )
    forms: dict[int, str] = {}

    def text(rows: list[Any]) -> bytes:
        n = len(rows)
        form = forms.get(n) or forms.setdefault(n, ",".join([f"[{row}]"] * n))
        return (form % tuple(chained.from_iterable(rows))).encode()

    return text


class RowDigest:
    """The content digest, fed with the rows the reader fetches anyway (no second pass).

    ``expected`` is the recorded digest, or None for version-1 files written before it existed
    (still valid); then nothing is hashed. Every table is read through :meth:`rows`, in the
    version's order.
    """

    def __init__(self, con: sqlite3.Connection, name: str, version: int) -> None:
        self._con = con
        self._name = name
        self.version = version
        self._order = [t.name for t in FORMATS[version]]
        row = con.execute("SELECT value FROM meta WHERE key = ?", (DIGEST_KEY,)).fetchone()
        self.expected: object = None if row is None else row[0]
        if self.expected is None and version > 1:
            raise RunFileError(name, "corrupt file (no content checksum)")
        self._d = Digest()
        self._next = 0
        self._broken = False
        if self._order[0] == "meta":  # version 1: meta first (its rows were read already)
            if self.expected is None:
                self._next = 1
            else:
                for _ in self.rows(tables_of(version)["meta"]):
                    pass

    def rows(self, table: Table) -> Iterator[Any]:
        """The table's rows in digest order (see :meth:`chunks`)."""
        for chunk in self.chunks(table):
            yield from chunk

    def chunks(self, table: Table, zero: Collection[str] = ()) -> Iterator[list[Any]]:
        """The table's rows in digest order, by chunk. At most ``MAX_ROWS[table]`` rows: one
        more is an error, before it is turned into anything. ``zero``: integer columns that
        hold 0 on every row (:func:`_zero_columns`), not fetched: the rows lack them."""
        query = table.select()
        text = None
        # A table with texts (the recorded sources) is hashed a row at a time: a chunk's JSON
        # would hold every text of the run at once, several times over.
        by_row = any(nullable and kind == TEXT for _, kind, nullable in table.columns)
        if zero:
            kept = [c for c in table.names if c not in zero]
            query = query.replace(", ".join(table.names), ", ".join(kept), 1)
            text = _digest_text(table, zero)
        if table.name == "meta":
            query = query.replace(" ORDER BY", f" WHERE key != '{DIGEST_KEY}' ORDER BY")
        cursor = self._con.execute(query)
        limit = MAX_ROWS[table.name]
        if self._next >= len(self._order) or self._order[self._next] != table.name:
            raise AssertionError(f"read {table.name} out of order")  # pragma: no cover - a bug
        self._next += 1
        if self.expected is not None:
            self._d.start(table.name)
        count = 0
        # (Texts a few at a time: each is let go as soon as it is read.)
        while chunk := cursor.fetchmany(16 if by_row else Digest.CHUNK):
            count += len(chunk)
            if count > limit:
                raise RunFileError(
                    self._name,
                    f"too large to read ({table.name} holds more than {limit:,} rows)",
                )
            if self.expected is not None:
                try:
                    if by_row:
                        for row in chunk:
                            self._d.chunk([row])
                    elif text is None:
                        self._d.chunk(chunk)
                    else:
                        self._d.chunk_text(text(chunk))
                except TypeError:  # a BLOB where text belongs: the row checks will name it
                    self._broken = True
            yield chunk
        if self.expected is not None:
            self._d.end()

    def check(self, name: str) -> None:
        """Raise RunFileError when the rows read do not match the recorded digest."""
        if self.expected is None:
            return
        if self._next != len(self._order):  # pragma: no cover - a reader bug
            raise AssertionError("digest not fed every table")
        if self._broken or self._d.hexdigest() != self.expected:
            raise RunFileError(name, "corrupt file (content does not match its checksum)")
