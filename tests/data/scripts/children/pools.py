"""The issue's program: a spawn pool, a fork pool and a bare os.fork child (os._exit)."""

import multiprocessing as mp
import os

MIB = 1 << 20


def spawn_task(i):
    block = bytearray(5 * MIB)  # line 10: 4 tasks of 5 MiB in spawned workers
    return len(block)


def fork_task(i):
    block = bytearray(2 * MIB)  # line 15: 3 tasks of 2 MiB in forked workers
    return len(block)


def bare_child():
    block = bytearray(3 * MIB)  # line 20: 3 MiB in a bare os.fork child
    print("bare child allocated", len(block), flush=True)
    os._exit(3)


if __name__ == "__main__":
    with mp.get_context("spawn").Pool(2) as pool:
        print("spawn", sum(pool.map(spawn_task, range(4))), flush=True)
    with mp.get_context("fork").Pool(2) as pool:
        print("fork", sum(pool.map(fork_task, range(3))), flush=True)
    pid = os.fork()
    if pid == 0:
        bare_child()
    _, status = os.waitpid(pid, 0)
    print("bare child exit", os.waitstatus_to_exitcode(status), flush=True)
    raise SystemExit(5)
