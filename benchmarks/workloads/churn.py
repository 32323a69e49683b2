"""Small-object churn: millions of short-lived tuples, lists and dicts."""

from __future__ import annotations

total = 0
for i in range(3_000_000):
    t = (i, i + 1, str(i))
    d = {"a": t, "b": [i, i]}
    total += len(d["b"]) + len(t[2])
print(total)
