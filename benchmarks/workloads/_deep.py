"""Small-object churn run at a given call depth (imported by the deep_stack_* workloads).

Frameworks, test runners and web servers put 30 to 100 frames under the code that allocates."""

from __future__ import annotations


def churn(n):
    total = 0
    for i in range(n):
        t = (i, i + 1, str(i))
        d = {"a": t, "b": [i, i]}
        total += len(d["b"]) + len(t[2])
    return total


def nest(depth, n):
    if depth <= 1:
        return churn(n)
    return nest(depth - 1, n)


def main(depth):
    print(nest(depth, 1_500_000))
