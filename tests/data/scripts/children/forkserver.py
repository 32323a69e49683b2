import multiprocessing as mp

MIB = 1 << 20


def task(i):
    block = bytearray(MIB)  # line 7: 5 tasks of 1 MiB in forkserver workers
    return len(block)


if __name__ == "__main__":
    with mp.get_context("forkserver").Pool(2) as pool:
        print("forkserver", sum(pool.map(task, range(5))))
