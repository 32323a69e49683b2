"""``memlens.dask.ProfileWorkers``: a Dask worker plugin that profiles the workers of a cluster
that is already running, each into a run of its own in a folder you name (shared storage),
for ``memlens merge`` (docs/distributed.md).

Registered from a client (``client.register_plugin(ProfileWorkers("/shared/runs"))``), it is
sent to every worker, present and future; each starts the tracer in its own process (the
tracer starts in running programs, as ``memlens attach``'s does), keeps a checkpoint of its run
in the folder while it runs, and writes its final run when the worker closes or the plugin is
unregistered (``client.unregister_worker_plugin("memlens")``). Imported only by programs that
use it: it needs Dask's ``distributed``, which memlens itself does not.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from distributed.diagnostics.plugin import WorkerPlugin

import memlens
from memlens.errors import MemlensError
from memlens.runfile import writer

if TYPE_CHECKING:
    from distributed import Worker

logger = logging.getLogger("memlens.dask")


class ProfileWorkers(WorkerPlugin):
    """Profile each worker into ``folder/<host>-<pid>.mlrun``; ``options`` are
    :func:`memlens.start`'s (``mode``, ``sample_interval``, ``include``...). A worker that is
    traced already (started under ``memlens run``) is left as it is."""

    name = "memlens"

    def __init__(self, folder: str | os.PathLike[str], **options: Any) -> None:
        self.folder = os.fspath(folder)
        self.options = options
        self._path: str | None = None

    def setup(self, worker: Worker) -> None:
        path = os.path.join(self.folder, f"{socket.gethostname()}-{os.getpid()}.mlrun")
        try:
            os.makedirs(self.folder, exist_ok=True)
            memlens.start(checkpoint=path, **self.options)
        except (MemlensError, OSError) as exc:
            logger.warning("memlens: worker %s is not profiled: %s", worker.address, exc)
            return
        self._path = path

    def teardown(self, worker: Worker) -> None:
        path, self._path = self._path, None
        if path is None:
            return
        try:
            writer.write(memlens.stop(), path)
        except (MemlensError, OSError, ValueError) as exc:
            logger.warning("memlens: the run of worker %s is not written: %s", worker.address, exc)
