"""A deterministic allocation-heavy program for the sampling accuracy test.

Each tagged line allocates a known share of the run's bytes in small blocks that are freed at
once (the regime sampling is for: many allocations, modest live memory). Blocks of 1000 bytes
and more come from pymalloc's large-request path (the RAW domain); the @s_tiny lines make
blocks pymalloc serves from its pools (at most 512 bytes), which sampling mode handles apart.
"""

from __future__ import annotations

KIB = 1024
KEPT: list[list[bytes]] = []  # what the @..._keep lines allocate stays alive until cleared


def churn(blocks: int, size: int) -> int:
    total = 0
    for _ in range(blocks):
        b = bytes(size)  # @s_churn
        total += len(b)
    return total


def main() -> int:
    total = 0
    for _ in range(300):
        total += len(bytes(1000 * KIB))  # @s_big: 300 MiB in 1000 KiB blocks
    total += churn(200_000, 1000)  # @s_call: 200 MB in 1000-byte blocks
    keep = [bytes(2000) for _ in range(10_000)]  # @s_keep: 20 MB kept alive
    KEPT.append(keep)
    for _ in range(5_000):
        total += len(bytes(2000))  # @s_small: 10 MB (about 1.6% of the run)
    for i in range(40_000):
        total += len(bytes(300 + i % 2))  # @s_tiny: 13 MB in blocks of ~330 bytes
    tiny = [bytes(300) for _ in range(40_000)]  # @s_tiny_keep: 13 MB kept alive
    KEPT.append(tiny)
    return total + len(keep) + len(tiny)
