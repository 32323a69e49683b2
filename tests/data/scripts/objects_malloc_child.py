import ctypes
import multiprocessing as mp
import sys


def child():
    data = [bytearray(1_000_000) for _ in range(20)]  # line 7: 20 MB in a spawned child
    return len(data)


if __name__ == "__main__":
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    kept = [bytearray(1_000) for _ in range(10_000)]  # line 14: 10 MB of objects, kept
    blocks = [libc.malloc(1_000_000) for _ in range(10)]  # line 15: 10 MB of C malloc, kept
    worker = mp.get_context("spawn").Process(target=child)
    worker.start()
    worker.join()
    print("kept", len(kept), "blocks", sum(1 for b in blocks if b), "child", worker.exitcode)
    sys.exit(3)
