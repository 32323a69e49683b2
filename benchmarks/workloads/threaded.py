"""Threads: four threads building and dropping lists of strings."""

from __future__ import annotations

import threading

results = [0] * 4


def work(k):
    total = 0
    for i in range(1_200_000):
        row = [str(i), str(k)] * 3
        total += len(row)
    results[k] = total


threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sum(results))
