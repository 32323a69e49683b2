"""Names on disk, in one place: the run-file suffix and the store's directories. Stdlib only.

Kept free of imports so that ``memlens run`` can name its run file before the profiled program
starts without loading the reader/writer.
"""

from __future__ import annotations

#: Suffix of run files.
RUN_SUFFIX = ".mlrun"
#: The store lives in <root>/STORE_DIR/RUNS_DIR.
STORE_DIR = ".memlens"
RUNS_DIR = "runs"
#: Pointer files beside the runs.
POINTERS = ("latest", "baseline")
