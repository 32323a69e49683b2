"""What holds a line, written out: a path of :class:`memlens.model.HeldBy` as Python would
name it (``ledger._price_cache['AB-1'][0]``), split into parts that each end at one object
(with its type and the line that allocated it), and as the export's JSON.

The one place paths are written: ``memlens show --why``, the hover, the export and the MCP
server use it. Names come from a run file (untrusted): terminals pass them through
:func:`memlens.layout.printable`, the editor through :mod:`memlens_lsp.markdown`. Stdlib only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memlens.model import HeldBy, Hop, Run

#: What a container keeps apart from its object, by the buffer hop's name.
BUFFERS = {"items": "its item array", "table": "its hash table", "data": "its data"}
#: Why a line has no path, by outcome (HeldBy.outcome).
NO_PATH = {
    "budget": "not found within the search's budget (objects visited, time)",
    "unreached": (
        "not found in any object: its memory is held where the search does not look "
        "(e.g. an extension's own allocations)"
    ),
}


class Part:
    """A piece of a path's text that ends at one object: ``text`` (``ledger._price_cache``,
    ``['AB-1']``, ``[0]``), the object's ``type`` and the line that allocated it (``file``
    and ``line``; "" and 0 when none did)."""

    __slots__ = ("file", "line", "text", "type")

    def __init__(self, text: str, type: str, file: str, line: int) -> None:
        self.text = text
        self.type = type
        self.file = file
        self.line = line

    def __repr__(self) -> str:
        return f"Part({self.text!r}, {self.type!r}, {self.file!r}, {self.line})"


def _root_text(hop: Hop) -> str:
    if hop.kind == "module":
        return hop.name
    if hop.kind == "thread":
        return f"<thread {hop.name}>"
    if hop.kind == "c":
        return f"<{hop.name} held by C code>"
    return f"<{hop.name} in a reference cycle>"


def _hop_text(hop: Hop) -> str:
    kind, name = hop.kind, hop.name
    if kind == "attribute":
        return f".{name}"
    if kind in ("key", "index"):
        return f"[{name}]"
    if kind == "dict_key":
        return f".keys() ∋ {name}"
    if kind == "member":
        return " ∋ member"
    if kind == "local":
        return f" local {name}"
    if kind == "frame":
        return f" → {name}()"
    if kind == "elided":
        return f" → … {name} more …"
    if kind == "buffer":
        return f" ({BUFFERS.get(name, name)})"
    return f" → {name}" if name else f" → <{hop.type}>"


def parts(held: HeldBy) -> list[Part]:
    """The path's text in parts, one per object reached (an attribute joins the part before
    it: ``ledger`` and ``._price_cache`` are one part, ending at the dict)."""
    out: list[Part] = []
    for i, hop in enumerate(held.hops):
        text = _root_text(hop) if i == 0 else _hop_text(hop)
        if out and hop.kind == "attribute" and held.hops[i - 1].kind in ("module", "attribute"):
            last = out[-1]
            out[-1] = Part(last.text + text, hop.type, hop.file, hop.line)
            continue
        out.append(Part(text, hop.type, hop.file, hop.line))
    return out


def expression(held: HeldBy) -> str:
    """The whole path as one text: ``ledger._price_cache['AB-1'][0]``."""
    return "".join(p.text for p in parts(held))


def index(run: Run) -> dict[tuple[str, int], list[HeldBy]]:
    """The run's paths by (file, line)."""
    out: dict[tuple[str, int], list[HeldBy]] = {}
    for h in run.holders:
        out.setdefault((h.file, h.line), []).append(h)
    return out


def of_line(run: Run, file: str, line: int) -> list[HeldBy]:
    """What holds ``file``:``line`` (empty when the run recorded nothing for it)."""
    return [h for h in run.holders if h.file == file and h.line == line]


def sampled(held: Iterable[HeldBy]) -> int:
    """How many of a line's objects its paths stand for."""
    return sum(h.objects for h in held)


def summary(held: list[HeldBy]) -> str | None:
    """One line: what holds most of a line's sampled objects (``ledger._price_cache[…]``),
    or why nothing was found; None when nothing was recorded."""
    if not held:
        return None
    found = [h for h in held if h.outcome == "found"]
    if not found:
        return NO_PATH.get(held[0].outcome, held[0].outcome)
    top = max(found, key=lambda h: h.objects)
    return expression(top)


def to_json(held: Iterable[HeldBy], paths: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """A line's paths under the export's names (docs/file-format.md, "Export"). ``paths`` maps
    the run's file names to the ones to show (the editor's local files), when they differ."""
    rename = paths or {}
    out: list[dict[str, Any]] = []
    for h in held:
        entry: dict[str, Any] = {"objects": h.objects, "outcome": h.outcome}
        if h.outcome == "found":
            entry["path"] = expression(h)
            entry["hops"] = [
                {
                    "kind": hop.kind,
                    "name": hop.name,
                    "type": hop.type,
                    "file": rename.get(hop.file, hop.file) or None,
                    "line": hop.line or None,
                }
                for hop in h.hops
            ]
        out.append(entry)
    return out
