"""A chain of children: spawn -> spawn -> fork; each allocates on its own line."""

import multiprocessing as mp
import os
import sys

MIB = 1 << 20


def grandchild():
    block = bytearray(3 * MIB)  # line 11: the forked grandchild
    print("grandchild", os.getppid(), flush=True)
    sys.exit(0)


def child():
    block = bytearray(2 * MIB)  # line 17: the spawned grandchild... of the root: a child's child
    pid = os.fork()
    if pid == 0:
        grandchild()
    os.waitpid(pid, 0)


def first():
    block = bytearray(1 * MIB)  # line 25: the root's spawned child
    p = mp.get_context("spawn").Process(target=child)
    p.start()
    p.join()


if __name__ == "__main__":
    p = mp.get_context("spawn").Process(target=first)
    p.start()
    p.join()
    print("done", p.exitcode)
