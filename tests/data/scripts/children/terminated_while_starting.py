"""Spawned children terminated (SIGTERM) at moments spread over their start-up, as a pool
that is closed at once ends workers still starting. Prints each child's exit code."""

import multiprocessing as mp
import sys
import time


def work(ready):
    ready.set()
    time.sleep(600)


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    count = int(sys.argv[1])
    # How long a child takes to start here (and now): the moments are spread over that.
    ready = ctx.Event()
    began = time.monotonic()
    first = ctx.Process(target=work, args=(ready,))
    first.start()
    ready.wait()
    startup = time.monotonic() - began
    first.terminate()
    first.join()
    codes = [first.exitcode]
    for i in range(count):
        child = ctx.Process(target=work, args=(ready,))
        child.start()
        time.sleep(startup * i / count)
        child.terminate()
        child.join()
        codes.append(child.exitcode)
    print("exit codes", sorted(set(codes)))
