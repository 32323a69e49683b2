"""Hostile workspace content for tests: run files and pointer files made to hang or exhaust.

Everything here is what a cloned repository (or anyone who can write to a folder) can carry
into ``.memlens/runs``; readers must refuse all of it quickly with one line.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from memlens.runfile import writer
from tests.runs import sample_run

#: A recorded name carrying terminal escapes (a window title, a colour, a cursor move, a
#: bidi override and an 8-bit CSI), Markdown and HTML.
ESCAPES = "\x1b]0;pwned\x07\x1b[31mred\x1b[2J\u202e\x9b1m"


def view_bomb(path: Path) -> Path:
    """A run whose ``meta`` is a view over an endless recursive CTE: reading it never ends."""
    writer.write(sample_run(), path)
    con = sqlite3.connect(path)
    con.executescript(
        """
        ALTER TABLE meta RENAME TO meta_real;
        CREATE VIEW meta(key, value) AS
          WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)
          SELECT 'k' || x, 'v' FROM c;
        """
    )
    con.close()
    return path


def default_bomb(path: Path, *, rows: int = 2000, default_bytes: int = 5 << 20) -> Path:
    """A run whose ``files.text`` was re-added with a big DEFAULT: every row reads it back.

    With the defaults, a 5 MB file turns into ~10 GiB of rows for a reader that selects the
    column.
    """
    writer.write(sample_run(), path)
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE files DROP COLUMN text")
    con.executemany(
        "INSERT INTO files (id, path, sha256) VALUES (?, ?, '')",
        [(i, f"/work/f{i}.py") for i in range(2, rows)],
    )
    con.execute(f"ALTER TABLE files ADD COLUMN text TEXT DEFAULT '{'x' * default_bytes}'")
    con.commit()
    con.execute("VACUUM")
    con.close()
    return path


def trigger_run(path: Path) -> Path:
    """A run with a trigger and an index on an expression added: not the writer's schema."""
    writer.write(sample_run(), path)
    con = sqlite3.connect(path)
    con.executescript(
        """
        CREATE TRIGGER t AFTER INSERT ON line_columns BEGIN DELETE FROM line_columns; END;
        CREATE INDEX i ON timeline (abs(rss_bytes));
        """
    )
    con.close()
    return path


#: Kinds of hostile pointer file, for :func:`hostile_pointer`.
POINTER_KINDS = ("fifo", "dev-zero", "stdin", "non-utf8", "huge", "outside", "dotdot")


def hostile_pointer(runs_dir: Path, name: str, kind: str, elsewhere: Path | None = None) -> Path:
    """Make the pointer file ``name`` (``latest``/``baseline``) in ``runs_dir`` hostile."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    pointer = runs_dir / name
    pointer.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(pointer)  # reading it waits for a writer forever
    elif kind == "dev-zero":
        pointer.symlink_to("/dev/zero")  # reading it never ends and fills memory
    elif kind == "stdin":
        pointer.symlink_to("/proc/self/fd/0")  # reading it waits on the reader's stdin
    elif kind == "non-utf8":
        pointer.write_bytes(b"\xff\xfe\x80run.mlrun\n")
    elif kind == "huge":
        pointer.write_bytes(b"a" * (1 << 20) + b".mlrun\n")
    elif kind == "outside":
        assert elsewhere is not None
        pointer.write_text(str(elsewhere) + "\n")  # a real run, outside the store
    elif kind == "dotdot":
        pointer.write_text("../../../elsewhere.mlrun\n")
    else:  # pragma: no cover - a test bug
        raise ValueError(kind)
    return pointer
