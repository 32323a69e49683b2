"""A pool program ended by SIGTERM sent to it alone (its workers keep running). It says it is
ready once all four workers have started (a barrier in their initializer: otherwise the first
ones may do all the work while the last still starts, under load)."""

import multiprocessing as mp
import sys
import time


def started(barrier):
    barrier.wait()


if __name__ == "__main__":
    context = mp.get_context(sys.argv[1])
    everyone = context.Barrier(4)
    with context.Pool(4, initializer=started, initargs=(everyone,)) as pool:
        pool.map(abs, range(8))
        print("ready", flush=True)
        time.sleep(600)
