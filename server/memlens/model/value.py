"""The base of the model's types: slotted, immutable values compared and hashed by value, and
:func:`replace` (as :func:`dataclasses.replace`, without importing dataclasses)."""

from __future__ import annotations

TYPE_CHECKING = False  # see memlens/__init__.py: typing is not imported at run time
if TYPE_CHECKING:
    from typing import Any, ClassVar, TypeVar

    from typing_extensions import dataclass_transform  # (typing's from 3.11; checking only)

    _V = TypeVar("_V", bound="Value")
else:

    def dataclass_transform(**_: object) -> object:
        return lambda cls: cls


_set = object.__setattr__


@dataclass_transform(frozen_default=True)
class _Fields(type):
    """The metaclass of :class:`Value`: a class that declares its fields (annotated, with or
    without a default) and no ``__init__`` gets ``__slots__`` (the fields in alphabetical
    order, unless the class names its own order) and an ``__init__`` taking them in the order
    they are declared, as :mod:`dataclasses` would make it (type checkers see it that way), at
    the cost of compiling one small function. A class with its own ``__init__`` keeps it and
    declares its ``__slots__`` itself."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _Fields:
        fields = [f for f in ns.get("__annotations__", {}) if not f.startswith("__")]
        if "__init__" not in ns and fields:
            defaults = {f: ns.pop(f) for f in fields if f in ns}
            slots = ns.setdefault("__slots__", tuple(sorted(fields)))
            if sorted(slots) != sorted(fields):
                raise TypeError(f"{name}: __slots__ are not its fields")
            ns["__init__"] = _init(name, fields, defaults)
        return super().__new__(mcs, name, bases, ns)


def _init(name: str, fields: list[str], defaults: dict[str, object]) -> Any:
    """An ``__init__`` that sets ``fields`` from its arguments (``defaults`` by name)."""
    params = ", ".join(f"{f}=_defaults[{f!r}]" if f in defaults else f for f in fields)
    body = "".join(f"    _set(self, {f!r}, {f})\n" for f in fields)
    scope = {"_set": _set, "_defaults": defaults}
    exec(f"def __init__(self, {params}):\n{body}", scope)  # noqa: S102 - our own field names
    init: Any = scope["__init__"]
    init.__qualname__ = f"{name}.__init__"
    return init


class Value(metaclass=_Fields):
    """Base of the model's types: slotted, immutable, compared and hashed by value.

    The fields are the ``__slots__``, in order (see :class:`_Fields`).
    """

    __slots__: ClassVar[tuple[str, ...]] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Value)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({inner})"

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot delete {name}")

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict (shallow)."""
        return {name: getattr(self, name) for name in self.__slots__}


def replace(value: _V, **changes: Any) -> _V:
    """A copy of ``value`` with some fields changed (as :func:`dataclasses.replace`)."""
    unknown = set(changes) - set(value.__slots__)
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field {', '.join(sorted(unknown))}")
    return type(value)(**{**value.as_dict(), **changes})
