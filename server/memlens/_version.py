# The single source of memlens's version: pyproject.toml reads it from here (scikit-build-core
# regex provider), so `memlens --version` needs no importlib.metadata at start-up.
from __future__ import annotations

__version__ = "0.1.0"
