"""SHA-256, the one digest of source texts and run files, without loading OpenSSL for small
inputs.

``hashlib`` loads OpenSSL's libcrypto on import (~11 M instructions, 3-4 ms: more than
building and writing a small run), while CPython's own SHA-256 (``_sha2``, ``_sha256`` before
3.12) loads nothing but hashes ~10 times slower on a CPU with SHA instructions (150 ms for
18 MB here, against 16 ms). So data up to ``SMALL`` bytes is hashed by CPython's; more, or a
program that has loaded ``hashlib`` already, by OpenSSL's. Both compute the same digest.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class _Hash(Protocol):
        def update(self, data: bytes, /) -> None: ...
        def hexdigest(self) -> str: ...


def _find_builtin() -> Callable[[bytes], _Hash] | None:
    """CPython's own SHA-256 (``_sha2`` from 3.12, ``_sha256`` before), or None in a build
    without it."""
    for name in ("_sha2", "_sha256"):
        try:
            found: Callable[[bytes], _Hash] = __import__(name).sha256
        except (ImportError, AttributeError):
            continue
        return found
    return None


_builtin = _find_builtin()

#: Up to this many bytes CPython's own SHA-256 costs less than loading OpenSSL.
SMALL = 256 * 1024


def _openssl() -> Callable[[bytes], _Hash]:
    import hashlib  # noqa: PLC0415 - only for large inputs (see the module's docstring)

    return hashlib.sha256


def _cheap(size: int) -> Callable[[bytes], _Hash] | None:
    """CPython's own SHA-256 where it costs less for ``size`` bytes, else None."""
    return _builtin if size <= SMALL and "hashlib" not in sys.modules else None


def hexdigest(data: bytes) -> str:
    """The hex SHA-256 of ``data``."""
    new = _cheap(len(data)) or _openssl()
    return new(data).hexdigest()


class Sha256:
    """An incremental SHA-256 (``update``, ``hexdigest``): the data is kept until it passes
    ``SMALL`` bytes, and then goes to OpenSSL's as it comes."""

    def __init__(self) -> None:
        self._kept: list[bytes] = []
        self._size = 0
        self._h: _Hash | None = None if _cheap(0) is not None else _openssl()(b"")

    def update(self, data: bytes) -> None:
        if self._h is not None:
            self._h.update(data)
            return
        self._kept.append(data)
        self._size += len(data)
        if _cheap(self._size) is None:
            self._h = _openssl()(b"".join(self._kept))
            self._kept = []

    def hexdigest(self) -> str:
        if self._h is not None:
            return self._h.hexdigest()
        return hexdigest(b"".join(self._kept))
