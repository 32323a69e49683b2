"""Holds 30 MB at one line for a while and frees it, then keeps 20 MB from another line to the
end (issue 26: `memlens show --at peak` / `--at end`)."""

import time


def load():
    scratch = bytearray(30_000_000)  # 30 MB held for a while
    time.sleep(0.3)
    return len(scratch)


def keep():
    return bytearray(20_000_000)  # 20 MB kept to the end


print(load())
kept = keep()
time.sleep(0.3)
print(len(kept))
