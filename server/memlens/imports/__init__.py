"""Importers: other tools' output as memlens runs.

- :func:`memlens.imports.tracemalloc_import.import_snapshot`: a ``tracemalloc.Snapshot.dump()``
  file (pickle: only import files you trust).
- :func:`memlens.imports.pymemtrace_import.import_log`: a pymemtrace cPyMemTrace Profile/Trace
  log.

Both return a :class:`memlens.model.Run` with ``info.mode == "imported"`` and ``info.source``
naming the tool; what each figure means for imported runs is in docs/file-format.md.
"""

from __future__ import annotations
