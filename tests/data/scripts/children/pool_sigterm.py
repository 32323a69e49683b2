"""A pool program ended by SIGTERM sent to it alone (its workers keep running)."""

import multiprocessing as mp
import sys
import time

if __name__ == "__main__":
    with mp.get_context(sys.argv[1]).Pool(4) as pool:
        pool.map(abs, range(8))
        print("ready", flush=True)
        time.sleep(600)
