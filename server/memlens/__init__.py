"""memlens: line-level Python memory profiler whose results live in your editor."""

from __future__ import annotations

from memlens._version import __version__

__all__ = ["__version__"]
