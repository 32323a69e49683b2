"""The content digest of a run file: SHA-256 over every row, as docs/file-format.md specifies.

SQLite's page checks catch damage to the file's structure; the digest catches damage to the
values themselves (a flipped bit in a figure). The writer computes it from the rows as they go
in; the reader from the rows it fetches anyway (:class:`memlens.runfile.reader.RowDigest`).
"""

from __future__ import annotations

from memlens import sha256
from memlens.runfile.jsontext import compact

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

DIGEST_KEY = "content_sha256"


def digest_json(rows: Sequence[Sequence[Any]]) -> bytes:
    """A chunk of rows as the digest hashes them: compact JSON (UTF-8, no ASCII escaping,
    separators ``,`` and ``:``) without the enclosing brackets; a BLOB as the hex SHA-256 of
    its bytes (version 2's tree parts)."""
    try:
        # Most chunks hold no BLOB: JSON refuses bytes, and only then are they looked for
        # (a scan of every value costs more than the JSON itself on a big run).
        text = compact(rows)
    except TypeError:
        rows = [[sha256.hexdigest(v) if isinstance(v, bytes) else v for v in r] for r in rows]
        text = compact(rows)
    return text[1:-1].encode("utf-8", "surrogatepass")


class Digest:
    """SHA-256 over every row of a run, as docs/file-format.md specifies: for each table of the
    version in turn (its order in ``FORMATS``), its name and a newline, then its rows (in the
    table's order, all columns; ``meta`` without the digest's own row) as one JSON array of
    arrays (:func:`_digest_json`) and a newline. SQLite's page checks catch damage to the
    file's structure; this catches damage to the values themselves (a flipped bit in a figure).
    Rows are hashed in chunks: the JSON of a table's rows, chunk by chunk with the chunks'
    brackets joined, is byte for byte the JSON of the whole list."""

    CHUNK = 4096

    def __init__(self) -> None:
        self._h = sha256.Sha256()

    def start(self, table: str) -> None:
        self._h.update(table.encode() + b"\n[")
        self._sep = b""

    def chunk(self, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.chunk_text(digest_json(rows))

    def chunk_text(self, text: bytes) -> None:
        """A chunk of rows given as :func:`digest_json` makes them (not empty)."""
        self._h.update(self._sep)
        self._h.update(text)
        self._sep = b","

    def end(self) -> None:
        self._h.update(b"]\n")

    def table(self, table: str, rows: Sequence[Sequence[Any]]) -> None:
        self.start(table)
        for i in range(0, len(rows), self.CHUNK):
            self.chunk(rows[i : i + self.CHUNK])
        self.end()

    def hexdigest(self) -> str:
        return self._h.hexdigest()
