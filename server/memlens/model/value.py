"""The base of the model's types: slotted, immutable values compared and hashed by value, and
:func:`replace` (as :func:`dataclasses.replace`, without importing dataclasses)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from typing import Any, TypeVar

    _V = TypeVar("_V", bound="Value")

_set = object.__setattr__


class Value:
    """Base of the model's types: slotted, immutable, compared and hashed by value.

    The fields are the ``__slots__``, in order.
    """

    __slots__: tuple[str, ...] = ()

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
