"""joblib's loky pool of two worker processes maps a task allocating 5 MiB over 8 inputs."""

from joblib import Parallel, delayed


def task(i):
    block = bytearray(5 * 1024 * 1024)
    return len(block) + i


if __name__ == "__main__":
    print(sum(Parallel(n_jobs=2)(delayed(task)(i) for i in range(8))))
