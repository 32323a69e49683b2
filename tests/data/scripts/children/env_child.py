"""Forks a child and starts a subprocess; both report what they see of memlens."""

import multiprocessing as mp
import os
import subprocess
import sys


def report(tag):
    block = bytearray(1 << 20)  # line 10
    print(tag, os.environ.get("MEMLENS_FOLLOW") is not None, len(block), flush=True)


if __name__ == "__main__":
    pid = os.fork()
    if pid == 0:
        report("fork")
        os._exit(0)
    os.waitpid(pid, 0)
    p = mp.get_context("spawn").Process(target=report, args=("spawn",))
    p.start()
    p.join()
