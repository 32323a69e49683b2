"""Writing run files: atomically (a temporary name, flushed, then renamed into place), so a
reader never sees half a file; the final run of a program even on a full disk
(:func:`write_final`). Standard library only.
"""

from __future__ import annotations

import _sqlite3 as sqlite3  # (the sqlite3 package without what it adds: see schema.py)
import _thread  # (not threading: nothing of it is needed)
import errno
import os
import sys
import zlib
from array import array
from itertools import pairwise, repeat
from operator import attrgetter, itemgetter

from memlens import model
from memlens.errors import one_line
from memlens.layout import replace_file
from memlens.model import replace
from memlens.model.lines import INTS
from memlens.runfile.digest import DIGEST_KEY, Digest
from memlens.runfile.header import header_json
from memlens.runfile.schema import (
    FORMAT_VERSION,
    FUNCTION_COLUMNS,
    FUNCTION_KEYS,
    FUNCTION_NAMES,
    LINE_COLUMNS,
    LINE_KEYS,
    MAGIC,
    MOMENT_FUNCTION_COLUMNS,
    MOMENT_LINE_COLUMNS,
    TREE_COLUMNS,
    TREE_PART,
    Table,
    create,
    tables_of,
)

# Neither typing nor pathlib is imported at run time: `memlens run` writes a run at the end of
# every profiled program, and their imports would be a good part of that cost.
TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
    from typing import Any, TypeVar

    from memlens.model import CallTree, FunctionKey, Moments, Run, RunInfo

    _P = TypeVar("_P", str, "os.PathLike[str]")


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
            raise OSError(_errno_of(exc), one_line(exc), target) from exc
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
    then, the header stays and the error says so. Without a checkpoint (the disk filled up
    before the first one), the header is written where the run does not fit.
    """
    try:
        return write(run, path, seal=seal)
    except OSError as exc:
        if exc.errno not in _NO_ROOM:
            raise
        failure = exc
    header_only = replace(
        run,
        files={},
        call_tree=(),
        timeline=(),
        moments=None,
        holders=(),
        info=replace(run.info, complete=False),
    )
    had_checkpoint = os.path.isfile(path)
    write(header_only, path)  # fails (and keeps the checkpoint) if even this does not fit
    try:
        if not had_checkpoint:
            raise failure  # nothing was freed: the final run would not fit now either
        return write(run, path, seal=seal)
    except OSError as exc:
        raise OSError(
            exc.errno or errno.ENOSPC,
            f"{exc.strerror or exc}; only the run's header was kept (marked incomplete)",
            os.fspath(path),
        ) from exc


def _no_room_errnos() -> frozenset[int]:
    return frozenset(
        getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG") if hasattr(errno, name)
    )


#: errno values that mean "no room for this file" (full disk, quota, file size limit).
_NO_ROOM = _no_room_errnos()


def _errno_of(exc: sqlite3.Error) -> int:
    """The errno an SQLite write error stands for: ENOSPC when SQLite says the disk is full."""
    # SQLITE_FULL is 13; sqlite_errorcode exists from Python 3.11 on, the message always.
    if getattr(exc, "sqlite_errorcode", None) == 13 or "disk is full" in str(exc):
        return errno.ENOSPC
    return errno.EIO


#: SQLite's page size for a small run: each of a file's 15 tables takes at least a page, which
#: at SQLite's default (4,096 bytes) made a short run's file mostly empty pages (60 KiB of
#: 90); a small run's file is about half as large in pages of 1,024 bytes.
SMALL_PAGE = 1024
#: A run is small while its line rows, call-tree nodes and moment changes are at most this
#: many (a larger one keeps SQLite's default page, faster to write and read in bulk).
SMALL_RUN_ROWS = 20_000


def _page_size(run: Run) -> int:
    rows = len(run.call_tree) + len(run.moments.lines["moment"])
    for sf in run.files.values():
        rows += len(sf.lines)
    return SMALL_PAGE if rows <= SMALL_RUN_ROWS else 4096


def _write_db(run: Run, filename: str, seal: Callable[[RunInfo], RunInfo] | None = None) -> None:
    """Writes the current format; the content digest is computed from the rows as they go in,
    table by table in digest order (rows are inserted in that order)."""
    con = sqlite3.connect(filename, isolation_level=None)
    try:
        con.execute(f"PRAGMA page_size={_page_size(run)}")
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute("BEGIN")
        create(con, FORMAT_VERSION)
        tables = tables_of(FORMAT_VERSION)
        digest = Digest()
        file_ids: dict[str, int] = {}
        function_ids: dict[FunctionKey, int] = {}
        files: list[tuple[Any, ...]] = []
        lines = _LineColumns()
        gpu_devices: list[tuple[Any, ...]] = []
        functions = _FunctionColumns()
        for i, (key, sf) in enumerate(run.files.items(), start=1):
            if key != sf.path:
                raise ValueError(f"run.files key {key!r} differs from its path {sf.path!r}")
            file_ids[key] = i
            files.append((i, sf.path, sf.sha256, sf.text))
            lines.add(i - 1, sf.lines)
            gpu_devices.extend(
                (i, line, d.device, *(int(getattr(d, f)) for f in model.DEVICE_FIGURES))
                for line, each in sorted(sf.gpu_devices.items())
                for d in sorted(each, key=lambda d: d.device)
            )
            for k, fn in enumerate(sf.functions, start=len(functions)):
                function_ids.setdefault((sf.path, fn.qualname, fn.first_line, fn.last_line), k)
            functions.add(i - 1, sf.functions)
        _insert(con, digest, tables["files"], files)
        _insert(con, digest, tables["line_columns"], lines.parts())
        _insert(con, digest, tables["gpu_devices"], gpu_devices)
        _insert(con, digest, tables["function_columns"], functions.parts())
        parts, names = _tree_rows(run.call_tree, file_ids)
        _insert(con, digest, tables["tree"], parts)
        _insert(con, digest, tables["tree_names"], list(enumerate(names)))
        _insert(
            con,
            digest,
            tables["timeline"],
            [(float(p.t), p.traced_bytes, p.rss_bytes) for p in run.timeline],
        )
        held, hops = _holder_rows(run, file_ids)
        _insert(con, digest, tables["holders"], held)
        _insert(con, digest, tables["holder_hops"], hops)
        moments, moment_lines, moment_functions = _moment_rows(run.moments, file_ids, function_ids)
        _insert(con, digest, tables["moments"], moments)
        _insert(con, digest, tables["moment_lines"], moment_lines)
        _insert(con, digest, tables["moment_functions"], moment_functions)
        info = seal(run.info) if seal is not None else run.info
        meta = [("format", MAGIC), ("run", header_json(info)), ("version", str(FORMAT_VERSION))]
        _insert(con, digest, tables["meta"], meta)
        con.execute("INSERT INTO meta VALUES (?, ?)", (DIGEST_KEY, digest.hexdigest()))
        con.execute("COMMIT")
    finally:
        con.close()


class _LineColumns:
    """The run's lines by column (rows of ``line_columns``), file after file: each file's
    :class:`memlens.model.LineTable` columns appended as they are (no object per line)."""

    def __init__(self) -> None:
        self._columns: dict[str, array[Any]] = {name: array(code) for name, code in LINE_COLUMNS}

    def add(self, file: int, lines: Mapping[int, model.LineStats]) -> None:
        try:
            table = model.LineTable.of(lines)
        except TypeError as exc:  # e.g. a float figure
            raise ValueError(f"a line's figure is not a number of its kind ({exc})") from None
        n = len(table)
        columns = self._columns
        columns["file"].extend(repeat(file, n))
        columns["line"].extend(table.numbers)
        for name in INTS:
            columns[name].extend(table.column(name))
        for name in model.ERRORS:
            errs = table.error_column(name)
            # (+ 0.0: -0.0 is written as 0.0, the one zero)
            columns[name].extend(repeat(0.0, n) if errs is None else (e + 0.0 for e in errs))
        for name in model.GPU_FIGURES:
            columns[name].extend(table.column(name) if table.has_gpu else repeat(0, n))

    def parts(self) -> list[tuple[Any, ...]]:
        """The parts; none for a run without lines (as the moments': no column at all)."""
        n = len(self._columns["file"])
        return _parts("line", LINE_COLUMNS, self._columns, n, LINE_KEYS) if n else []


class _FunctionColumns:
    """The run's functions by column (rows of ``function_columns``), file after file."""

    def __init__(self) -> None:
        self._columns: dict[str, array[Any]] = {
            name: array(code) for name, code in FUNCTION_COLUMNS
        }
        self._names: list[str] = []

    def __len__(self) -> int:
        return len(self._names)

    def add(self, file: int, functions: Sequence[model.FunctionStats]) -> None:
        columns = self._columns
        names = [fn.qualname for fn in functions]
        if not all(type(name) is str for name in names):
            raise ValueError("a function's qualified name is not a str")
        self._names += names
        columns["name_length"].extend(map(len, names))
        columns["file"].extend(repeat(file, len(functions)))
        try:
            for name, _ in FUNCTION_COLUMNS[1:-1]:
                columns[name].extend(map(attrgetter(name), functions))
        except TypeError as exc:  # e.g. a float figure
            raise ValueError(f"a function's figure is not an integer ({exc})") from None

    def parts(self) -> list[tuple[Any, ...]]:
        """The parts, in (column, part) order; none for a run without functions."""
        n = len(self._columns["file"])
        if not n:
            return []
        names = "".join(self._names).encode("utf-8")
        rows = _parts("function", FUNCTION_COLUMNS, self._columns, n, FUNCTION_KEYS)
        rows += _parts("function", (FUNCTION_NAMES,), {FUNCTION_NAMES[0]: names}, len(names))
        return sorted(rows, key=itemgetter(0, 1))


def _insert(
    con: sqlite3.Connection, digest: Digest, table: Table, rows: list[tuple[Any, ...]]
) -> None:
    con.executemany(table.insert(), rows)
    digest.table(table.name, rows)


def _holder_rows(
    run: Run, file_ids: Mapping[str, int]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows of the ``holders`` and ``holder_hops`` tables, in key order (paths of a line
    numbered from 0 in the order of ``run.holders``)."""
    chains: dict[tuple[int, int], int] = {}
    held: list[tuple[Any, ...]] = []
    hops: list[tuple[Any, ...]] = []
    for h in run.holders:
        fid = file_ids.get(h.file)
        if fid is None:
            raise ValueError(f"what holds a line names a file not in the run: {h.file}")
        chain = chains[fid, h.line] = chains.get((fid, h.line), -1) + 1
        held.append((fid, h.line, chain, h.objects, h.outcome))
        for i, hop in enumerate(h.hops):
            at = file_ids.get(hop.file, 0)
            hops.append(
                (fid, h.line, chain, i, hop.kind, hop.name, hop.type, at, hop.line if at else 0)
            )
    held.sort(key=lambda r: r[:3])
    hops.sort(key=lambda r: r[:4])
    return held, hops


def _tree_rows(
    tree: CallTree, file_ids: Mapping[str, int]
) -> tuple[list[tuple[Any, ...]], tuple[str, ...]]:
    """The call tree's column parts (rows of the ``tree`` table) and its function names."""
    n = len(tree)
    if not tree.is_canonical():
        raise ValueError(
            "the call tree is not canonical: node ids that are not positions, a node before "
            "its parent, or a file or function index out of its table (see model.CallTree)"
        )
    # (The nodes' files are read only when the file table names one the run lacks.)
    if any(f not in file_ids for f in tree.files):
        missing = [tree.files[i] for i in set(tree.file) if tree.files[i] not in file_ids]
        if missing:
            raise ValueError(f"the call tree names a file not in the run: {missing[0]}")
    # `file` holds indexes into the files table in id order (ids are 1, 2, ...).
    index = [file_ids.get(f, 0) - 1 for f in tree.files]
    file_column: Iterable[int] = tree.file
    if index != list(range(len(index))):
        file_column = (index[f] for f in tree.file)
    values: dict[str, Sequence[int] | Iterable[int]] = {
        "parent": tree.parent,
        "file": file_column,
        "line": tree.line,
        "function": tree.function,
        "alloc_bytes": tree.alloc_bytes,
        "alloc_count": tree.alloc_count,
        "live_bytes": tree.live_bytes,
        "peak_bytes": tree.peak_bytes,
    }
    return _parts("call-tree", TREE_COLUMNS, values, n), tree.functions


def _parts(
    what: str,
    columns: tuple[tuple[str, str], ...],
    values: Mapping[str, Sequence[int] | Iterable[int]],
    n: int,
    keys: Collection[str] | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of a table of column parts (``tree``, ``moment_lines``...): each column a typed
    array of ``n`` values, little-endian, cut in parts of at most TREE_PART values, each part
    compressed (version 4: COMPRESSED_PARTS). With ``keys`` (version 6's lines and functions),
    a column not among them that holds 0 on every row is not stored."""
    rows: list[tuple[Any, ...]] = []
    for name, code in sorted(columns):
        column = values[name]
        data = (
            column if isinstance(column, array) and column.typecode == code else array(code, column)
        )
        if len(data) != n:
            raise ValueError(f"{what} column {name} has {len(data)} values, not {n}")
        if keys is not None and name not in keys and data.tobytes() == bytes(n * data.itemsize):
            continue
        if sys.byteorder == "big":
            data = array(code, data)
            data.byteswap()
        # (Parts are compressed from views of the column: no copies of a big tree's bytes.)
        raw, size = memoryview(data).cast("B"), data.itemsize
        for part, start in enumerate(range(0, max(n, 1), TREE_PART)):
            rows.append((name, part, raw[start * size : (start + TREE_PART) * size]))
    packed = _compressed_all([row[2] for row in rows])
    return [(name, part, blob) for (name, part, _raw), blob in zip(rows, packed, strict=True)]


#: Parts of at least this many bytes in all are compressed by two threads at once.
PARALLEL_BYTES = 1 << 20


def _compressed_all(raws: list[memoryview]) -> list[bytes]:
    """Each part compressed (:func:`_compressed`). A big tree's parts by two threads at once,
    this one and a helper: zlib lets go of the GIL while it compresses, and compressing was
    most of writing a big run (2^17 call paths on 3.12: 38 of 45 ms). The threads take the
    parts in turn from one iterator (a range's, which the GIL keeps whole); what the helper
    raises is raised here."""
    if len(raws) < 2 or sum(len(r) for r in raws) < PARALLEL_BYTES:
        return [_compressed(r) for r in raws]
    out: list[bytes] = [b""] * len(raws)
    turns = iter(range(len(raws)))
    failed: list[BaseException] = []
    done = _thread.allocate_lock()
    done.acquire()

    def work() -> None:
        for i in turns:
            out[i] = _compressed(raws[i])

    def helper() -> None:
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - handed to the writing thread
            failed.append(exc)
        finally:
            done.release()

    try:
        _thread.start_new_thread(helper, ())
    except RuntimeError:  # no thread to be had: this one does it all
        done.release()
    try:
        work()
    finally:
        done.acquire()  # (the helper is done with the parts, whatever happened here)
    if failed:
        raise failed[0]
    return out


#: zlib's level for column parts: its fastest (a 19 MB call tree in about 50 ms, to 0.75 MB;
#: higher levels take five times as long for 10% less).
PART_LEVEL = 1


def _compressed(raw: bytes | memoryview) -> bytes:
    """A part's bytes compressed (RFC 1950), with a window no larger than they are: zlib's
    default window and hash (~256 KiB, allocated and freed per call) cost ~70 µs a part, most
    of a small run's writing (its 38 parts); the same bytes as zlib.compress from 16 KiB on."""
    wbits = min(15, max(9, (len(raw) - 1).bit_length()))
    deflate = zlib.compressobj(PART_LEVEL, zlib.DEFLATED, wbits, 8 if wbits == 15 else wbits - 7)
    return deflate.compress(raw) + deflate.flush()


def _moment_rows(
    moments: Moments, file_ids: Mapping[str, int], function_ids: Mapping[FunctionKey, int]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows of ``moments``, ``moment_lines`` and ``moment_functions``: files as positions
    in the files table, functions as rows of the functions table."""
    rows = [(float(t), int(b)) for t, b in zip(moments.t, moments.traced_bytes, strict=True)]
    if any(b < a for a, b in pairwise(moments.t)):
        raise ValueError("the moments are not in time order")
    missing = [moments.files[f] for f in set(moments.lines["file"])]
    missing = [f for f in missing if f not in file_ids]
    if missing:
        raise ValueError(f"the moments name a file not in the run: {missing[0]}")
    index = [file_ids.get(f, 0) - 1 for f in moments.files]
    lines = moments.lines
    n = len(lines["moment"])
    file_column = lines["file"]
    line_values = {**lines, "file": file_column}
    if index != list(range(len(index))):
        line_values["file"] = [index[f] for f in file_column]
    fns = moments.functions
    keys = moments.function_keys
    unknown = [keys[f] for f in set(fns["function"]) if keys[f] not in function_ids]
    if unknown:
        raise ValueError(f"the moments name a function not in the run: {unknown[0][1]}")
    fn_values = {**fns, "function": [function_ids[keys[f]] for f in fns["function"]]}
    return (
        rows,
        _parts("moment", MOMENT_LINE_COLUMNS, line_values, n) if n else [],
        _parts("moment", MOMENT_FUNCTION_COLUMNS, fn_values, len(fns["moment"]))
        if len(fns["moment"])
        else [],
    )
