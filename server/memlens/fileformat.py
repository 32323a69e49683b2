"""Read and write run files (``.mlrun``): one SQLite database per run. Stdlib only.

The layout is specified in ``docs/file-format.md``. In short: a ``meta`` table whose first
keys are the magic ``format = memlens-run`` and ``version``; then the run header
(provenance and totals) as JSON under ``meta.run``; then ``files``, ``lines``, ``functions``,
``nodes`` (call tree) and ``timeline``.

Writers write to a temporary name in the same directory, flush it and rename it into place, so
a reader never sees half a file. Readers reject anything that is not a complete memlens run of
a version they understand with :class:`memlens.errors.RunFileError` (one clear line): missing,
not a regular file, not SQLite, cut short or extended (the SQLite header's page count is the
cheap integrity check), foreign, newer, or with missing tables, columns or ill-typed values;
:func:`read` also checks the content digest (meta ``content_sha256``, when present), so a
damaged file reads back exactly as written or not at all.
For any input, :func:`read` returns a Run or raises RunFileError, nothing else (fuzzed).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3

from memlens.errors import RunFileError, os_error_reason
from memlens.layout import RUN_SUFFIX, open_regular, replace_file
from memlens.model import (
    ERRORS,
    FIGURES,
    CallNode,
    CallTree,
    FunctionStats,
    LineStats,
    Run,
    RunInfo,
    SourceFile,
    TimelinePoint,
    replace,
)

# Neither typing nor pathlib is imported at run time: `memlens run` writes a run at the end of
# every profiled program, and their imports would be a good part of that cost.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping
    from typing import Any, TypeVar

    _T = TypeVar("_T")
    _P = TypeVar("_P", str, "os.PathLike[str]")

MAGIC = "memlens-run"
FORMAT_VERSION = 1
SUFFIX = RUN_SUFFIX
_SQLITE_HEADER = b"SQLite format 3\x00"

_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, sha256 TEXT NOT NULL, text TEXT
);
CREATE TABLE lines (
    file_id INTEGER NOT NULL, line INTEGER NOT NULL,
    {", ".join(f"{f} INTEGER NOT NULL" for f in FIGURES)},
    {", ".join(f"{e} REAL NOT NULL" for e in ERRORS)},
    PRIMARY KEY (file_id, line)
) WITHOUT ROWID;
CREATE TABLE functions (
    file_id INTEGER NOT NULL, qualname TEXT NOT NULL, first_line INTEGER NOT NULL,
    last_line INTEGER NOT NULL, alloc_bytes INTEGER NOT NULL, alloc_count INTEGER NOT NULL,
    live_bytes INTEGER NOT NULL, peak_bytes INTEGER NOT NULL
);
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY, parent INTEGER NOT NULL, file_id INTEGER NOT NULL,
    line INTEGER NOT NULL, function TEXT NOT NULL, alloc_bytes INTEGER NOT NULL,
    alloc_count INTEGER NOT NULL, live_bytes INTEGER NOT NULL, peak_bytes INTEGER NOT NULL
);
CREATE TABLE timeline (t REAL NOT NULL, traced_bytes INTEGER NOT NULL, rss_bytes INTEGER NOT NULL);
"""

_RUN_KEYS = set(RunInfo.__slots__)
_REQUIRED_RUN_KEYS = {
    "command",
    "python",
    "platform",
    "started",
    "ended",
    "duration_s",
    "pid",
    "exit_code",
    "mode",
    "sample_interval_bytes",
    "peak_traced_bytes",
    "peak_rss_bytes",
    "complete",
}


_HEADER_TYPES: dict[str, tuple[type, ...]] = {
    "command": (list,),
    "python": (str,),
    "platform": (str,),
    "started": (str,),
    "ended": (str,),
    "duration_s": (int, float),
    "pid": (int,),
    "exit_code": (int, type(None)),
    "mode": (str,),
    "sample_interval_bytes": (int, type(None)),
    "peak_traced_bytes": (int,),
    "peak_rss_bytes": (int,),
    "complete": (bool,),
    "cwd": (str,),
    "memlens_version": (str,),
    "max_depth": (int,),
    "source": (str,),
    "seed": (int, type(None)),
}


def _is(value: object, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False  # JSON true/false are not numbers here
    return isinstance(value, types)


def write(run: Run, path: _P, *, seal: Callable[[RunInfo], RunInfo] | None = None) -> _P:
    """Write ``run`` to ``path`` atomically (temporary name, then rename). Returns ``path``.

    The data is flushed to disk before the rename, so after a crash (even of the machine) the
    target is either the old file or the complete new one. I/O problems (including SQLite's,
    such as a full disk) raise :class:`OSError`; an inconsistent ``run`` (or a figure that does
    not fit in 64 bits) raises ValueError.

    ``seal``, when given, is called with the run's header once every row is written, just
    before the header and the content digest are: what it returns is the header recorded. (The
    runner uses it to record a signal that arrived while the rows were being written.)
    """
    target = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)

    def fill(tmp_name: str) -> None:
        try:
            _write_db(run, tmp_name, seal)
        except sqlite3.Error as exc:  # e.g. disk full: report it as the I/O error it is
            raise OSError(_errno_of(exc), _one_line(exc), target) from exc
        except OverflowError as exc:  # an int beyond SQLite's 64 bits
            raise ValueError(f"cannot write {target}: a number is too large ({exc})") from None

    replace_file(target, fill)
    return path


def write_final(run: Run, path: _P, *, seal: Callable[[RunInfo], RunInfo] | None = None) -> _P:
    """Write a program's final run to ``path``, where its last checkpoint may be.

    As :func:`write`; but when the disk is too full for the final file beside the checkpoint
    it replaces, the checkpoint first gives way to the run's header alone (a few KiB, marked
    incomplete) and the final run is then written over that. ``path`` holds a readable run at
    every moment: the checkpoint, the header, the final run. If even the final run does not fit
    then, the header stays and the error says so.
    """
    import errno

    try:
        return write(run, path, seal=seal)
    except OSError as exc:
        if exc.errno not in _NO_ROOM or not os.path.isfile(path):
            raise
    header_only = replace(
        run, files={}, call_tree=(), timeline=(), info=replace(run.info, complete=False)
    )
    write(header_only, path)  # fails (and keeps the checkpoint) if even this does not fit
    try:
        return write(run, path, seal=seal)
    except OSError as exc:
        raise OSError(
            exc.errno or errno.ENOSPC,
            f"{exc.strerror or exc}; only the run's header was kept (marked incomplete)",
            os.fspath(path),
        ) from exc


def _no_room_errnos() -> frozenset[int]:
    import errno

    return frozenset(
        getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG") if hasattr(errno, name)
    )


#: errno values that mean "no room for this file" (full disk, quota, file size limit).
_NO_ROOM = _no_room_errnos()


def _errno_of(exc: sqlite3.Error) -> int:
    """The errno an SQLite write error stands for: ENOSPC when SQLite says the disk is full."""
    import errno

    # SQLITE_FULL is 13; sqlite_errorcode exists from Python 3.11 on, the message always.
    if getattr(exc, "sqlite_errorcode", None) == 13 or "disk is full" in str(exc):
        return errno.ENOSPC
    return errno.EIO


def _write_db(run: Run, filename: str, seal: Callable[[RunInfo], RunInfo] | None = None) -> None:
    con = sqlite3.connect(filename, isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("BEGIN")
        _create(con)
        file_ids: dict[str, int] = {}
        for i, (key, sf) in enumerate(run.files.items(), start=1):
            if key != sf.path:
                raise ValueError(f"run.files key {key!r} differs from its path {sf.path!r}")
            file_ids[key] = i
            con.execute("INSERT INTO files VALUES (?, ?, ?, ?)", (i, sf.path, sf.sha256, sf.text))
            con.executemany(
                f"INSERT INTO lines VALUES ({', '.join('?' * (2 + len(FIGURES) + len(ERRORS)))})",
                (
                    (i, line, *(getattr(st, f) for f in FIGURES), *(getattr(st, e) for e in ERRORS))
                    for line, st in sf.lines.items()
                ),
            )
            con.executemany(
                "INSERT INTO functions VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        i,
                        fn.qualname,
                        fn.first_line,
                        fn.last_line,
                        fn.alloc_bytes,
                        fn.alloc_count,
                        fn.live_bytes,
                        fn.peak_bytes,
                    )
                    for fn in sf.functions
                ),
            )
        con.executemany(
            "INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            _node_rows(run.call_tree, file_ids),
        )
        con.executemany(
            "INSERT INTO timeline VALUES (?, ?, ?)",
            ((p.t, p.traced_bytes, p.rss_bytes) for p in run.timeline),
        )
        info = (seal(run.info) if seal is not None else run.info).as_dict()
        info["command"] = list(info["command"])
        con.executemany(
            "INSERT INTO meta VALUES (?, ?)",
            [("format", MAGIC), ("version", str(FORMAT_VERSION)), ("run", json.dumps(info))],
        )
        con.execute("INSERT INTO meta VALUES (?, ?)", (DIGEST_KEY, _content_digest(con)))
        con.execute("COMMIT")
    finally:
        con.close()


def _create(con: sqlite3.Connection) -> None:
    for statement in _SCHEMA.split(";"):
        if statement.strip():
            con.execute(statement)


def _node_rows(tree: CallTree, file_ids: Mapping[str, int]) -> Iterable[tuple[Any, ...]]:
    missing = [f for f in tree.files if f not in file_ids]
    if missing:
        raise ValueError(f"the call tree names a file not in the run: {missing[0]}")
    return tree.rows(file_ids)


def read(path: str | os.PathLike[str]) -> Run:
    """Read a run file. Raises :class:`RunFileError` with a one-line reason on any problem."""
    return _with_db(path, _read_db, whole=True)


def read_info(path: str | os.PathLike[str]) -> RunInfo:
    """Read only a run file's header (fast: for listings). Same errors as :func:`read`."""
    return _with_db(path, _read_info, whole=False)


# -- reading untrusted files -------------------------------------------------------------------
# A run file comes with a workspace, so it is untrusted input: reading one must not run code,
# hang, or take memory out of proportion to the file. docs/file-format.md ("Reading untrusted
# files") lists the defences; SQLite's own advice ("Defense Against the Dark Arts") is followed.

#: Most rows a table may hold (explicit checks, counted as rows are read).
MAX_ROWS: dict[str, int] = {
    "meta": 1_000,
    "files": 100_000,
    "lines": 10_000_000,
    "functions": 10_000_000,
    "nodes": 10_000_000,
    "timeline": 1_000_000,
}
#: Longest text value, in bytes (a recorded source file), and longest name (a path, a
#: qualified name, a meta key), in characters; the run header (meta ``run``) is a name too.
MAX_VALUE_BYTES = 64 * 1024 * 1024
MAX_NAME_CHARS = 4096
MAX_HEADER_CHARS = 1024 * 1024
#: Time a read may take: a base plus this much per MiB of file (reading runs at several MiB/s).
READ_BUDGET_S = 30.0
READ_BUDGET_S_PER_MIB = 1.0
#: SQLite's own limits on this connection (where Python has ``setlimit``, 3.11+), lowered as
#: SQLite advises for untrusted input to what the reader's fixed queries need.
_SQLITE_LIMITS = {
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


class _Budget:
    """The progress handler: stops SQLite once the read has taken longer than allowed."""

    def __init__(self, seconds: float) -> None:
        import time

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
    reader: Callable[[sqlite3.Connection, str], _T],
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
    budget = _Budget(READ_BUDGET_S + READ_BUDGET_S_PER_MIB * size / (1 << 20))
    try:
        con = _connect_untrusted(name, budget)
    except sqlite3.Error as exc:
        raise RunFileError(name, f"not a readable database ({_one_line(exc)})") from None
    try:
        _check_schema(con, name, whole)
        return reader(con, name)
    except RunFileError:
        raise
    except sqlite3.Error as exc:
        if budget.exceeded:
            raise RunFileError(
                name, f"took too long to read (more than {budget.seconds:.0f} s)"
            ) from None
        raise RunFileError(name, f"corrupt or truncated file ({_one_line(exc)})") from None
    except RecursionError:
        raise RunFileError(name, "corrupt file (nesting too deep)") from None
    except MemoryError:
        raise RunFileError(name, "too large to read (out of memory)") from None
    except (ValueError, TypeError, KeyError, IndexError, OverflowError) as exc:
        raise RunFileError(name, f"corrupt file ({type(exc).__name__}: {_one_line(exc)})") from None
    finally:
        con.close()


def _connect_untrusted(name: str, budget: _Budget) -> sqlite3.Connection:
    """A read-only connection to an untrusted file, configured before it reads the schema."""
    # immutable: no locks, no journal, no -wal/-shm files looked for or created.
    con = sqlite3.connect(f"file:{_uri_path(name)}?mode=ro&immutable=1", uri=True)
    try:
        setlimit = getattr(con, "setlimit", None)  # Python 3.11+
        if setlimit is not None:
            for limit, value in _SQLITE_LIMITS.items():
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


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:200] + ("…" if len(text) > 200 else "")


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
    from urllib.parse import quote

    return quote(os.path.abspath(name))


#: Tables and columns a version-1 reader needs (a file may have more; it may not have fewer).
_REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "files": ("id", "path", "sha256", "text"),
    "lines": ("file_id", "line", *FIGURES, *ERRORS),
    "functions": (
        "file_id",
        "qualname",
        "first_line",
        "last_line",
        "alloc_bytes",
        "alloc_count",
        "live_bytes",
        "peak_bytes",
    ),
    "nodes": (
        "id",
        "parent",
        "file_id",
        "line",
        "function",
        "alloc_bytes",
        "alloc_count",
        "live_bytes",
        "peak_bytes",
    ),
    "timeline": ("t", "traced_bytes", "rss_bytes"),
}


def _meta(con: sqlite3.Connection, name: str) -> dict[str, object]:
    """The ``meta`` table as a dict (at most MAX_ROWS["meta"] rows of bounded size)."""
    limit = MAX_ROWS["meta"]
    rows = con.execute(
        "SELECT key, value FROM meta WHERE length(CAST(key AS BLOB)) <= ? "
        "AND length(CAST(value AS BLOB)) <= ? LIMIT ?",
        (MAX_NAME_CHARS, MAX_HEADER_CHARS, limit + 1),
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


def _read_info(con: sqlite3.Connection, name: str) -> RunInfo:
    meta = _meta(con, name)
    header = meta.get("run")
    if not isinstance(header, str):
        raise RunFileError(name, "no run header")
    try:
        raw = json.loads(header)
    except ValueError:
        raise RunFileError(name, "bad run header (not JSON)") from None
    if not isinstance(raw, dict):
        raise RunFileError(name, "bad run header")
    missing = _REQUIRED_RUN_KEYS - raw.keys()
    if missing:
        raise RunFileError(name, f"run header lacks {', '.join(sorted(missing))}")
    raw = {k: v for k, v in raw.items() if k in _RUN_KEYS}
    for key, value in raw.items():
        expected = _HEADER_TYPES.get(key)
        if expected is not None and not _is(value, expected):
            raise RunFileError(name, f"bad run header: {key} is {type(value).__name__}")
    if not all(isinstance(c, str) for c in raw["command"]):
        raise RunFileError(name, "bad run header: command")
    raw["command"] = tuple(raw["command"])
    raw["duration_s"] = float(raw["duration_s"])
    if not math.isfinite(raw["duration_s"]):  # JSON NaN/Infinity: the export must stay JSON
        raise RunFileError(name, "bad run header: duration_s is not a finite number")
    return RunInfo(**raw)


# Integer columns of two tables: their required columns less their one text column.
_FUNCTION_INTS = tuple(c for c in _REQUIRED_COLUMNS["functions"] if c != "qualname")
_NODE_INTS = tuple(c for c in _REQUIRED_COLUMNS["nodes"] if c != "function")


def _check_types(
    con: sqlite3.Connection,
    name: str,
    table: str,
    ints: tuple[str, ...],
    reals: tuple[str, ...],
    text: tuple[str, ...] = (),
) -> None:
    """One query: does any row of ``table`` hold a value of the wrong type (or a name too long)?"""
    tests = [f"typeof({c}) != 'integer'" for c in ints]
    tests += [f"typeof({c}) NOT IN ('real', 'integer')" for c in reals]
    tests += [f"typeof({c}) != 'text' OR length({c}) > {MAX_NAME_CHARS}" for c in text]
    bad = con.execute(f"SELECT 1 FROM {table} WHERE {' OR '.join(tests)} LIMIT 1").fetchone()
    if bad is not None:
        raise RunFileError(name, f"corrupt file ({table} holds a value of the wrong type or size)")
    if reals:
        # SQLite stores NaN as NULL (refused above) but keeps infinities (9e999 is +Inf).
        infinite = " OR ".join(f"{c} IN (9e999, -9e999)" for c in reals)
        if con.execute(f"SELECT 1 FROM {table} WHERE {infinite} LIMIT 1").fetchone():
            raise RunFileError(name, f"corrupt file ({table} holds a number that is not finite)")


_EXPECTED_SCHEMA: dict[str, tuple[str, str, str | None]] | None = None


def _expected_schema() -> dict[str, tuple[str, str, str | None]]:
    """name -> (type, table, SQL with whitespace collapsed) of every object the writer creates.

    Taken from an in-memory database made with :data:`_SCHEMA`, so it also lists the indexes
    SQLite makes for PRIMARY KEY and UNIQUE (``sqlite_autoindex_*``, no SQL).
    """
    global _EXPECTED_SCHEMA
    if _EXPECTED_SCHEMA is None:
        con = sqlite3.connect(":memory:")
        try:
            _create(con)
            rows = con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        finally:
            con.close()
        _EXPECTED_SCHEMA = {name: (kind, table, _squash(sql)) for kind, name, table, sql in rows}
    return _EXPECTED_SCHEMA


def _squash(sql: object) -> str | None:
    return " ".join(sql.split()) if isinstance(sql, str) else None


def _check_schema(con: sqlite3.Connection, name: str, whole: bool) -> None:
    """The schema must be exactly the writer's: same tables, columns, types and constraints.

    No view, trigger, extra index, DEFAULT or generated column can slip in, so nothing the
    file's author wrote runs or expands while the rows are read (a view can loop forever; a
    column DEFAULT can turn a 5 MB file into gigabytes of rows). ``meta`` is checked first and
    alone: the format version is read from it before the rest of the schema, so a newer file
    gets the "upgrade" message even when its tables differ.
    """
    expected = _expected_schema()
    limit = len(expected) + 1
    rows = con.execute(
        f"SELECT type, name, tbl_name, sql FROM sqlite_master LIMIT {limit}"
    ).fetchall()
    found = {str(r[1]): (str(r[0]), str(r[2]), _squash(r[3])) for r in rows}
    meta = found.get("meta")
    if meta is None:
        raise RunFileError(name, "not a memlens run file (no meta table)")
    if meta != expected["meta"]:
        raise RunFileError(name, f"corrupt file (unexpected schema: {_shown_object('meta', meta)})")
    # Only meta's own pages are checked before the header is read (SQLite's advice: check a
    # file's structure before reading it); :func:`_read_db` checks every table.
    _quick_check(con, name, "meta")
    version = _format_version(con, name)
    if version != FORMAT_VERSION:  # pragma: no cover - one version exists so far
        raise RunFileError(name, f"format version {version} is not supported")
    for obj, shape in found.items():
        if expected.get(obj) != shape:
            raise RunFileError(
                name, f"corrupt file (unexpected schema: {_shown_object(obj, shape)})"
            )
    if len(rows) >= limit:  # pragma: no cover - the object past the expected ones differs
        raise RunFileError(name, "corrupt file (unexpected schema: too many objects)")
    for obj, shape in expected.items():
        if obj not in found:
            raise RunFileError(name, f"corrupt file (no {shape[1]} table)")
    if whole:
        _quick_check(con, name, None)


def _shown_object(obj: str, shape: tuple[str, str, str | None]) -> str:
    """How an object that differs from the writer's schema is named in the error."""
    kind = shape[0]
    expected = _expected_schema().get(obj)
    if expected is None:
        return f"{_clip(kind)} {_clip(obj)}"  # "trigger t", "index i", "table extra"
    if kind != expected[0]:
        return f"{_clip(obj)} is a {_clip(kind)}"  # "meta is a view"
    return f"{kind} {obj} is not as format version {FORMAT_VERSION} defines it"


def _clip(text: str) -> str:
    from memlens.layout import printable

    return printable(text[:60])


def _quick_check(con: sqlite3.Connection, name: str, table: str | None) -> None:
    """``PRAGMA quick_check``: SQLite's structural check of the file (or of one table)."""
    query = f"PRAGMA quick_check({table})" if table else "PRAGMA quick_check(1)"
    result = con.execute(query).fetchone()
    if result is None or result[0] != "ok":
        detail = _one_line(Exception(result[0] if result else "no answer"))
        raise RunFileError(name, f"corrupt file ({detail})")


def _read_db(con: sqlite3.Connection, name: str) -> Run:
    info = _read_info(con, name)

    # The rows read are also fed to the content digest (same columns and order as the
    # writer's), so checking it costs no second pass over the tables.
    digest = _RowDigest(con, name)
    paths: dict[int, str] = {}
    files: dict[str, dict[str, Any]] = {}
    for fid, fpath, sha, text in digest.rows(
        "files", "SELECT id, path, sha256, text FROM files ORDER BY id"
    ):
        if not isinstance(fpath, str) or not isinstance(sha, str):
            raise RunFileError(name, "bad file table")
        if text is not None and not isinstance(text, str):
            raise RunFileError(name, "bad file table")
        if len(fpath) > MAX_NAME_CHARS or len(sha) > MAX_NAME_CHARS:
            raise RunFileError(name, "corrupt file (files holds a name that is too long)")
        if text is not None and len(text) > MAX_VALUE_BYTES:
            raise RunFileError(name, "corrupt file (files holds a text that is too long)")
        paths[_int(fid)] = fpath
        files[fpath] = {"sha256": sha, "text": text, "lines": {}, "functions": []}

    def path_of(fid: object, table: str) -> str:
        found = paths.get(fid) if isinstance(fid, int) else None
        if found is None:
            raise RunFileError(name, f"corrupt file ({table} names unknown file id {fid!r})")
        return found

    # Column types are checked once per table in SQL, then rows become objects directly:
    # a 100k-line run loads several times faster than with per-value checks in Python.
    _check_types(con, name, "lines", ("file_id", "line", *FIGURES), ERRORS)
    _check_types(con, name, "functions", _FUNCTION_INTS, (), text=("qualname",))
    _check_types(con, name, "nodes", _NODE_INTS, (), text=("function",))
    _check_types(con, name, "timeline", ("traced_bytes", "rss_bytes"), ("t",))
    by_id: dict[int, dict[str, Any]] = {fid: files[p] for fid, p in paths.items()}

    def entry(fid: int, table: str) -> dict[str, Any]:
        found = by_id.get(fid)
        if found is None:
            raise RunFileError(name, f"corrupt file ({table} names unknown file id {fid!r})")
        return found

    cols = ", ".join((*FIGURES, *ERRORS))
    current_id, current_lines = None, None
    for row in digest.rows(
        "lines", f"SELECT file_id, line, {cols} FROM lines ORDER BY file_id, line"
    ):
        if row[0] != current_id:
            current_id, current_lines = row[0], entry(row[0], "lines")["lines"]
        assert current_lines is not None
        current_lines[row[1]] = LineStats(*row[2:])
    for row in digest.rows(
        "functions",
        "SELECT file_id, qualname, first_line, last_line, alloc_bytes, alloc_count, "
        "live_bytes, peak_bytes FROM functions ORDER BY rowid",
    ):
        entry(row[0], "functions")["functions"].append(FunctionStats(*row[1:]))
    nodes = tuple(
        CallNode(r[0], r[1], path_of(r[2], "nodes"), *r[3:])
        for r in digest.rows(
            "nodes",
            "SELECT id, parent, file_id, line, function, alloc_bytes, alloc_count, "
            "live_bytes, peak_bytes FROM nodes ORDER BY id",
        )
    )
    timeline = tuple(
        TimelinePoint(float(t), tb, rss)
        for t, tb, rss in digest.rows(
            "timeline", "SELECT t, traced_bytes, rss_bytes FROM timeline ORDER BY rowid"
        )
    )
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
            )
            for p, d in files.items()
        },
        call_tree=nodes,
        timeline=timeline,
    )


#: Meta key of the optional SHA-256 over the file's content (see :func:`_content_digest`).
DIGEST_KEY = "content_sha256"

#: What the digest covers, in this order: (table, columns, order). Only version-1 columns, so
#: columns added later (allowed within version 1) do not change the digest.
_DIGESTED: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("meta", ("key", "value"), "key"),
    ("files", _REQUIRED_COLUMNS["files"], "id"),
    ("lines", _REQUIRED_COLUMNS["lines"], "file_id, line"),
    ("functions", _REQUIRED_COLUMNS["functions"], "rowid"),
    ("nodes", _REQUIRED_COLUMNS["nodes"], "id"),
    ("timeline", _REQUIRED_COLUMNS["timeline"], "rowid"),
)


def _content_digest(con: sqlite3.Connection) -> str:
    """SHA-256 (hex) over every row of the run, as docs/file-format.md specifies.

    For each table of :data:`_DIGESTED` in turn: its name and a newline, then its rows (in
    the given order, listed columns only) as one compact JSON array of arrays (UTF-8, no
    ASCII escaping, separators ``,`` and ``:``) and a newline. ``meta`` rows exclude the
    digest's own row. SQLite's page checks catch damage to the file's
    structure; this catches damage to the values themselves (a flipped bit in a figure).
    """
    import hashlib

    h = hashlib.sha256()
    for table, columns, order in _DIGESTED:
        h.update(table.encode() + b"\n")
        where = f" WHERE key != '{DIGEST_KEY}'" if table == "meta" else ""
        query = f"SELECT {', '.join(columns)} FROM {table}{where} ORDER BY {order}"
        # Chunk by chunk (see _RowDigest): the same bytes as the JSON of the whole list.
        cursor = con.execute(query)
        h.update(b"[")
        sep = b""
        while chunk := cursor.fetchmany(_RowDigest.CHUNK):
            text = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))[1:-1]
            h.update(sep + text.encode("utf-8", "surrogatepass"))
            sep = b","
        h.update(b"]\n")
    return h.hexdigest()


class _RowDigest:
    """The content digest, fed with the rows the reader fetches anyway (no second pass).

    ``expected`` is the recorded digest, or None for files written before it existed (still
    valid version-1 files); then nothing is hashed. Rows are hashed in chunks: the JSON of
    a table's rows, chunk by chunk with the chunks' brackets joined, is byte for byte the
    JSON of the whole list, without holding every row at once.
    """

    CHUNK = 4096

    def __init__(self, con: sqlite3.Connection, name: str) -> None:
        import hashlib

        self._con = con
        self._name = name
        row = con.execute("SELECT value FROM meta WHERE key = ?", (DIGEST_KEY,)).fetchone()
        self.expected: object = None if row is None else row[0]
        self._h = hashlib.sha256()
        self._next = 0
        self._broken = False
        if self.expected is not None:
            for _ in self.rows(
                "meta", f"SELECT key, value FROM meta WHERE key != '{DIGEST_KEY}' ORDER BY key"
            ):
                pass

    def rows(self, table: str, query: str) -> Iterator[Any]:
        """Run ``query`` (the table's digested columns, in digest order) and yield its rows.

        At most ``MAX_ROWS[table]`` rows: one more is an error, before it is turned into
        anything.
        """
        cursor = self._con.execute(query)
        limit = MAX_ROWS[table]
        if self.expected is None:
            for count, row in enumerate(cursor, start=1):
                if count > limit:
                    self._too_many(table)
                yield row
            return
        if _DIGESTED[self._next][0] != table:  # pragma: no cover - a reader bug
            raise AssertionError(f"digest fed {table}, expected {_DIGESTED[self._next][0]}")
        self._next += 1
        self._h.update(table.encode() + b"\n[")
        sep = b""
        count = 0
        while chunk := cursor.fetchmany(self.CHUNK):
            count += len(chunk)
            if count > limit:
                self._too_many(table)
            try:
                text = json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))[1:-1]
            except TypeError:  # a BLOB where text belongs: the row checks will name it
                self._broken = True
                text = ""
            self._h.update(sep + text.encode("utf-8", "surrogatepass"))
            sep = b","
            yield from chunk
        self._h.update(b"]\n")

    def _too_many(self, table: str) -> None:
        raise RunFileError(
            self._name, f"too large to read ({table} holds more than {MAX_ROWS[table]:,} rows)"
        )

    def check(self, name: str) -> None:
        """Raise RunFileError when the rows read do not match the recorded digest."""
        if self.expected is None:
            return
        if self._next != len(_DIGESTED):  # pragma: no cover - a reader bug
            raise AssertionError("digest not fed every table")
        if self._broken or self._h.hexdigest() != self.expected:
            raise RunFileError(name, "corrupt file (content does not match its checksum)")


def _int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value
