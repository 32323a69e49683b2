"""The stand-in for PyTorch (tests/data/fake_torch) made importable for a program or a pytest
session, from a site-packages folder as PyTorch is: memlens's library filter treats the user
site folder as a library, so its frames are transparent (as PyTorch's are)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

FAKE_TORCH = Path(__file__).resolve().parent / "data" / "fake_torch" / "torch"


def environment(tmp_path: Path) -> dict[str, str]:
    """This process's environment with the stand-in importable as ``torch``."""
    base = tmp_path / "userbase"
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = base / "lib" / version / "site-packages"
    if not (site / "torch").exists():
        shutil.copytree(FAKE_TORCH, site / "torch")
    env = dict(os.environ, PYTHONUSERBASE=str(base), PYTHONPATH=str(site))
    env.pop("PYTHONSAFEPATH", None)
    return env
