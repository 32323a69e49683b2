"""``python -m memlens``: the same as the ``memlens`` command."""

from __future__ import annotations

from memlens.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
