"""Pure line re-mapping between two versions of a source text. Stdlib only.

Used wherever figures recorded against one version of a file must be shown on another: the
language server (recorded source vs. the edited buffer) and ``memlens diff`` (source of run A
vs. source of run B). Only lines inside blocks that ``difflib`` finds unchanged are mapped; a
line that was edited, inserted or deleted maps to nothing, so its figures are hidden rather
than shown on the wrong line.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence


def line_map(old: str | Sequence[str], new: str | Sequence[str]) -> dict[int, int]:
    """Map 1-based line numbers of ``old`` to 1-based line numbers of ``new``.

    Lines that are the same text in the same matched block map to their new number; lines that
    changed are absent from the result. Identical texts give the identity map.
    """
    a = old.splitlines() if isinstance(old, str) else list(old)
    b = new.splitlines() if isinstance(new, str) else list(new)
    if a == b:
        return {i: i for i in range(1, len(a) + 1)}
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    mapping: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            mapping[block.a + k + 1] = block.b + k + 1
    return mapping
