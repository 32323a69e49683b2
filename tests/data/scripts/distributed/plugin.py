"""A Dask LocalCluster of two worker processes, not profiled, whose workers a client profiles
with memlens's worker plugin (into the folder argv[1]) while it maps a task allocating 5 MiB
over 8 inputs."""

import sys

from distributed import Client, LocalCluster

from memlens.dask import ProfileWorkers


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
        client.register_plugin(ProfileWorkers(sys.argv[1]))
        print(sum(client.gather(client.map(task, range(8)))))
