"""Run files (``.mlrun``): one SQLite database per run, specified in docs/file-format.md.

- :mod:`memlens.runfile.schema`: what a file holds, per format version, and the most a reader
  accepts of each part;
- :mod:`memlens.runfile.header`: the run header (provenance and totals, as JSON), written and
  checked;
- :mod:`memlens.runfile.digest`: the content digest over every row;
- :mod:`memlens.runfile.writer`: :func:`~memlens.runfile.writer.write` (atomically) and
  :func:`~memlens.runfile.writer.write_final` (even on a full disk);
- :mod:`memlens.runfile.reader`: :func:`~memlens.runfile.reader.read` and
  :func:`~memlens.runfile.reader.read_info`, the one reader, hardened for untrusted files.

Standard library only. This package imports nothing itself: writing a run (at the end of every
``memlens run``) loads no reader.
"""
