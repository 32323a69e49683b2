"""A big call tree: 2^17 distinct call paths, each ending in a small allocation that is kept
(a recursive descent: parsers, tree walkers, serializers)."""

from __future__ import annotations

import sys

sys.setrecursionlimit(10_000)
LEVELS = 17
kept = []


def walk(level, path):
    if level == 0:
        return bytearray(32)
    if path & 1:
        return walk(level - 1, path >> 1)
    return walk(level - 1, path >> 1)


for p in range(2**LEVELS):
    kept.append(walk(LEVELS, p))
print(len(kept))
