"""Errors that memlens reports to users as one clear line."""

from __future__ import annotations


class MemlensError(Exception):
    """An error with a message fit for the user; the CLI prints ``memlens: <message>``."""

    exit_code: int = 2

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class RunFileError(MemlensError):
    """A run file cannot be read (corrupt, truncated, foreign or newer version)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot read {path}: {reason}")
        self.path = path
        self.reason = reason


#: Short reasons for the usual OS errors of reading a file (others say their own).
_OS_ERROR_REASONS: tuple[tuple[type[OSError], str], ...] = (
    (FileNotFoundError, "no such file"),
    (IsADirectoryError, "is a directory"),
    (PermissionError, "permission denied"),
)


def os_error_reason(exc: OSError) -> str:
    """The reason part of a one-line ``cannot read FILE: reason`` for an OS error."""
    for kind, reason in _OS_ERROR_REASONS:
        if isinstance(exc, kind):
            return reason
    return exc.strerror or str(exc)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line, at most 200 characters."""
    text = " ".join(str(exc).split())
    return text[:200] + ("…" if len(text) > 200 else "")
