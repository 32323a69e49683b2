"""A Dask LocalCluster of two worker processes maps a task allocating 5 MiB over 8 inputs."""

from distributed import Client, LocalCluster


def task(i):
    block = bytearray(5 * 1024 * 1024)
    return len(block) + i


if __name__ == "__main__":
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        print(sum(client.gather(client.map(task, range(8)))))
