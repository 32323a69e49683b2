"""`memlens run` with some of the tracer's start options changed, for comparisons that the
command line does not offer: ``python _memlens_run.py track_reuse=0 -- [run args]``."""

from __future__ import annotations

import sys

from memlens.cli import main
from memlens.tracing import tracer

changes: dict[str, bool] = {}
args = sys.argv[1:]
while args and args[0] != "--":
    key, _, value = args.pop(0).partition("=")
    changes[key] = value == "1"
args = args[1:]
start = tracer.start


def changed(*a: object, **k: object) -> None:
    start(*a, **{**k, **changes})  # type: ignore[arg-type]


tracer.start = changed  # type: ignore[assignment]
sys.exit(main(["run", *args]))
