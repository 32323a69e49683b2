"""Big buffers: a few large bytearrays and bytes copies (memory-bound, few allocations)."""

from __future__ import annotations

blocks = []
for _ in range(2000):
    b = bytearray(4 * 1024 * 1024)
    b[::4096] = b"x" * len(b[::4096])
    blocks.append(bytes(b))
    if len(blocks) > 8:
        blocks.pop(0)
print(sum(len(b) for b in blocks))
