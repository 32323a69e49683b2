"""Notebooks: ``%load_ext memlens``, then ``%%memlens`` profiles a cell where it runs.

:mod:`memlens.notebook.magic` is the IPython side (the magics, running a cell in the user's
namespace with the tracer on, its run saved in the store); :mod:`memlens.notebook.cells` is
pure (where a cell's lines are in its text, the names it bound, the ``%memlens_kept`` table).
IPython is never imported: the magics are registered on the shell that loads them, so IPython
is no dependency of memlens. See docs/notebooks.md.
"""
