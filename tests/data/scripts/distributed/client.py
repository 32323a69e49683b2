"""A Dask client (not profiled) that waits for two workers of the scheduler named in the file
argv[1], then maps a task allocating 5 MiB over 8 inputs on them."""

import sys

from distributed import Client


def task(i):
    block = bytearray(5 * 1024 * 1024)
    return len(block) + i


if __name__ == "__main__":
    with Client(scheduler_file=sys.argv[1], timeout=60) as client:
        client.wait_for_workers(2, timeout=60)
        print(sum(client.gather(client.map(task, range(8)))))
