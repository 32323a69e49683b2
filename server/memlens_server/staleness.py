"""Map recorded lines onto the open buffer when the file was edited after profiling.

The recorded source text (kept in the run file) is compared with the buffer; when they
differ, :func:`memlens.mapping.line_map` keeps only the lines inside unchanged blocks, so a
line that was edited, inserted or deleted loses its figures instead of showing them on the
wrong line. Results are cached per (uri, version, run file). No LSP types here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from memlens.mapping import line_map
from memlens_server.index import FileView


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
        digest = hashlib.sha256(buffer.encode("utf-8")).hexdigest()
        return IDENTITY if digest == view.source.sha256 else NOTHING
    if recorded == buffer:
        return IDENTITY
    rec_lines = view.text_lines or ()
    buf_lines = lines if lines is not None else buffer_lines(buffer)
    if list(rec_lines) == buf_lines:
        return IDENTITY  # only line endings or a trailing newline differ
    to_buffer = line_map(rec_lines, buf_lines)
    from_buffer = {new: old for old, new in to_buffer.items()}
    return LineMapping(False, True, to_buffer, from_buffer)


class MappingCache:
    """Per-document cache of (version, run file, buffer lines, mapping)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int | None, FileView, list[str], LineMapping]] = {}

    def get(
        self, uri: str, version: int | None, view: FileView, buffer: str
    ) -> tuple[list[str], LineMapping]:
        entry = self._entries.get(uri)
        if entry is not None and entry[0] == version and entry[1] is view and version is not None:
            return entry[2], entry[3]
        lines = buffer_lines(buffer)
        mapping = map_lines(view, buffer, lines)
        self._entries[uri] = (version, view, lines, mapping)
        return lines, mapping

    def forget(self, uri: str) -> None:
        self._entries.pop(uri, None)

    def clear(self) -> None:
        self._entries.clear()
