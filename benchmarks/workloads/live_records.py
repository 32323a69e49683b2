"""1M records kept alive, small-object churn beside them (a long-lived service: a big live set
that the allocator's bookkeeping must not slow down)."""

from __future__ import annotations

records = [(i, str(i), [i]) for i in range(1_000_000)]

total = 0
for i in range(1_500_000):
    t = (i, i + 1, str(i))
    d = {"a": t, "b": [i, i]}
    total += len(d["b"]) + len(t[2])
print(len(records), total)
