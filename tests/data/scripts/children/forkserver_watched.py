import multiprocessing as mp
import signal
import sys


def watched(_):
    # The wakeup descriptor the worker runs with: memlens's own (its signal watcher's), once
    # the fork server's child has dropped the server's.
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    runner = sys.modules.get("memlens.tracing.runner")
    ours = getattr(runner, "_wakeup", None)
    return fd != -1 and ours is not None and ours[1] == fd


if __name__ == "__main__":
    with mp.get_context("forkserver").Pool(1) as pool:
        print("watched", all(pool.map(watched, range(2))))
