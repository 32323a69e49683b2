"""Many small objects kept: 5M tuples and ints alive at once (an in-memory index)."""

from __future__ import annotations

index = {}
for i in range(2_500_000):
    index[i] = (i, -i)
print(len(index))
