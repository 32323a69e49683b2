"""Map recorded lines onto the open buffer when the file was edited after profiling.

The recorded source text (kept in the run file) is compared with the buffer; when they
differ, :func:`memlens.mapping.line_map` (the matcher ``memlens diff`` uses too) keeps only
the lines that are the same code, following blocks that moved, so a line that was edited,
inserted or deleted loses its figures instead of showing them on the wrong line. Results are
cached per (uri, version, run file). No LSP types here.

The re-mapping runs on a daemon thread (:func:`memlens_lsp.background.in_thread`), never
on the event loop, and its cost is bounded by :func:`memlens.mapping.line_map` (beyond the
bound, lines stay unmatched: the file shows as stale there). Per document one re-mapping runs
at a time; a request for a version that a newer one replaced before its turn gets
:class:`Superseded`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memlens.mapping import line_map
from memlens.source import text_digest
from memlens_lsp.background import in_thread
from memlens_lsp.index import FileView


class Superseded(Exception):
    """The document changed again before its re-mapping started."""


@dataclass(frozen=True, slots=True)
class LineMapping:
    """Recorded line <-> buffer line (both 1-based). ``identity`` skips the dicts."""

    identity: bool
    stale: bool
    to_buffer: Mapping[int, int]
    from_buffer: Mapping[int, int]

    def buffer_line(self, recorded: int) -> int | None:
        return recorded if self.identity else self.to_buffer.get(recorded)

    def recorded_line(self, buffer: int) -> int | None:
        return buffer if self.identity else self.from_buffer.get(buffer)


IDENTITY = LineMapping(True, False, {}, {})
NOTHING = LineMapping(False, True, {}, {})


def buffer_lines(text: str) -> list[str]:
    """Lines of a buffer without their line endings (LSP line numbering)."""
    # LSP counts a line after a trailing newline; splitlines drops it, which is harmless
    # here because an empty last line never carries figures.
    return text.splitlines()


def map_lines(view: FileView, buffer: str, lines: list[str] | None = None) -> LineMapping:
    """The mapping between the recorded source of ``view`` and ``buffer``."""
    recorded = view.source.text
    if recorded is None:
        return IDENTITY if text_digest(buffer) == view.source.sha256 else NOTHING
    if recorded == buffer:
        return IDENTITY
    rec_lines = view.text_lines or ()
    buf_lines = lines if lines is not None else buffer_lines(buffer)
    if list(rec_lines) == buf_lines:
        return IDENTITY  # only line endings or a trailing newline differ
    to_buffer = line_map(rec_lines, buf_lines)
    from_buffer = {new: old for old, new in to_buffer.items()}
    return LineMapping(False, True, to_buffer, from_buffer)


def prepare(view: FileView, buffer: str) -> tuple[list[str], LineMapping]:
    """The buffer's lines and mapping, and the view's derived tables a request will read
    (baseline figures re-mapped onto the run, call-tree sums): all the costly work, done
    together off the event loop."""
    lines = buffer_lines(buffer)
    mapping = map_lines(view, buffer, lines)
    view.warm()
    return lines, mapping


@dataclass(slots=True)
class _Entry:
    version: int | None
    view: FileView
    future: asyncio.Future[tuple[list[str], LineMapping]]


class MappingCache:
    """Per-document cache of (version, run file) -> (buffer lines, mapping)."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(
        self, uri: str, version: int | None, view: FileView, buffer: str
    ) -> tuple[list[str], LineMapping]:
        entry = self._entries.get(uri)
        if entry is None or entry.version != version or entry.view is not view or version is None:
            future = asyncio.ensure_future(self._compute(uri, version, view, buffer))
            future.add_done_callback(_consume)
            entry = self._entries[uri] = _Entry(version, view, future)
        return await asyncio.shield(entry.future)

    async def _compute(
        self, uri: str, version: int | None, view: FileView, buffer: str
    ) -> tuple[list[str], LineMapping]:
        lock = self._locks.setdefault(uri, asyncio.Lock())
        async with lock:
            latest = self._entries.get(uri)
            if latest is not None and (latest.version != version or latest.view is not view):
                raise Superseded(uri)
            return await in_thread(prepare, view, buffer, name="memlens-remap")

    def forget(self, uri: str) -> None:
        self._entries.pop(uri, None)
        lock = self._locks.get(uri)
        if lock is not None and not lock.locked():
            del self._locks[uri]

    def clear(self) -> None:
        for uri in list(self._entries):
            self.forget(uri)


def _consume(future: asyncio.Future[Any]) -> None:
    """Mark a dropped computation's outcome as seen (no "never retrieved" warnings)."""
    if not future.cancelled():
        future.exception()
