"""A big call tree: 2^levels distinct call paths, each ending in a small allocation that is
kept (imported by the call_paths* workloads)."""

from __future__ import annotations

import sys

sys.setrecursionlimit(10_000)


def walk(level, path):
    if level == 0:
        return bytearray(32)
    if path & 1:
        return walk(level - 1, path >> 1)
    return walk(level - 1, path >> 1)


def main(levels):
    kept = [walk(levels, p) for p in range(2**levels)]
    print(len(kept))
