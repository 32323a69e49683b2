"""Records built and filtered: 300k dict records stay alive while they are filtered and grouped
(a data-cleaning script: the live set outgrows the CPU caches)."""

from __future__ import annotations

rows = []
for i in range(300_000):
    rows.append({"id": i, "name": f"user{i}", "score": i % 97, "tags": [i % 7, i % 11]})

total = 0
for rnd in range(4):
    kept = [r for r in rows if r["score"] > 20 + rnd]
    groups: dict[int, list[str]] = {}
    for r in kept:
        groups.setdefault(r["tags"][0], []).append(r["name"].upper())
    total += sum(len(v) for v in groups.values())
print(len(rows), total)
