"""A growing cache: a dict that keeps every computed value (a typical leak)."""

from __future__ import annotations

cache = {}


def compute(key):
    if key not in cache:
        cache[key] = [key] * 20
    return cache[key]


total = 0
for i in range(1_000_000):
    total += len(compute(i % 600_000))
print(total, len(cache))
