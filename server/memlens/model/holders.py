"""What holds a line's memory at the end of a run: paths of references from a root to a
sample of the line's objects, recorded once as the program ends
(:mod:`memlens.tracing.holders`) and stored in the run file's ``holders`` tables.
Standard library only.
"""

from __future__ import annotations

from memlens.model.value import Value, _set

#: How a path starts: a module's globals, a running thread's frame, an object that no module
#: or thread reaches and no other such object refers to (held by C code: an extension's
#: cache, a C-level registry), an object in a reference cycle the collector has not freed.
ROOT_KINDS = ("module", "thread", "c", "cycle")
#: How each further hop reaches its object from the one before: ``attribute`` (a module
#: global, a class or instance attribute, a slot; name: the attribute), ``key`` (a dict's
#: value; name: the key as Python writes it), ``dict_key`` (a dict's key), ``index`` (a list's
#: or tuple's item), ``member`` (of a set), ``local`` (a frame's variable), ``frame`` (a
#: calling frame; name: its function), ``buffer`` (memory a container keeps apart from its
#: object: ``items`` of a list, ``table`` of a dict or set, ``data`` of a bytearray or numpy
#: array), ``referent`` (any other reference; name, when known, what it is), ``elided`` (that
#: many hops of a long path left out).
HOP_KINDS = (
    "attribute",
    "key",
    "dict_key",
    "index",
    "member",
    "local",
    "frame",
    "buffer",
    "referent",
    "elided",
)
#: What the search found for a line: paths (``found``); nothing within its budget of objects
#: and time (``budget``); nothing anywhere (``unreached``: the line's live memory is in no
#: object or container buffer memlens can see, e.g. an extension's own allocations).
OUTCOMES = ("found", "budget", "unreached")


class Hop(Value):
    """One step of a path: how its object is reached (``kind``, ``name``: see
    :data:`ROOT_KINDS` and :data:`HOP_KINDS`), the object's type, and the line that allocated
    it (``file`` a key of :attr:`Run.files` and ``line``; "" and 0 when no traced line did)."""

    __slots__ = ("file", "kind", "line", "name", "type")
    kind: str
    name: str
    type: str
    file: str
    line: int

    def __init__(self, kind: str, name: str, type: str = "", file: str = "", line: int = 0) -> None:
        _set(self, "kind", kind)
        _set(self, "name", name)
        _set(self, "type", type)
        _set(self, "file", file)
        _set(self, "line", line)


class HeldBy(Value):
    """What holds the objects of ``file``:``line`` (a line live at the end of the run).

    ``hops`` is one path from its root (``hops[0]``) to one of the line's objects (or to the
    container whose buffer the line allocated); ``objects`` is how many of the objects
    sampled for the line were reached the same way (the same path up to the last hop's
    name: the key or index differs). ``outcome`` (:data:`OUTCOMES`) says why a line has no
    path; then ``hops`` is empty.
    """

    __slots__ = ("file", "hops", "line", "objects", "outcome")
    file: str
    line: int
    objects: int
    outcome: str
    hops: tuple[Hop, ...]

    def __init__(
        self,
        file: str,
        line: int,
        objects: int = 0,
        outcome: str = "found",
        hops: tuple[Hop, ...] = (),
    ) -> None:
        _set(self, "file", file)
        _set(self, "line", line)
        _set(self, "objects", objects)
        _set(self, "outcome", outcome)
        _set(self, "hops", hops)
