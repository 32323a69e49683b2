"""The release workflow (never run here: no GitHub Actions) stays in step with the project."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def test_release_builds_every_supported_cpython_on_three_systems() -> None:
    text = WORKFLOW.read_text()
    assert "uses: pypa/cibuildwheel@" in text
    assert "pypa/gh-action-pypi-publish" in text
    build = re.search(r'CIBW_BUILD: "([^"]+)"', text)
    assert build is not None
    built = sorted(int(tag.split("-")[0][3:]) for tag in build.group(1).split())
    # From requires-python's lower bound to the newest CPython native/src/compat.hpp supports.
    lowest = re.search(r'requires-python = ">=3\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert lowest is not None
    compat = (ROOT / "native" / "src" / "compat.hpp").read_text()
    supported = re.search(r"supports CPython 3\.(\d+) to 3\.(\d+)", compat)
    assert supported is not None
    assert int(supported.group(1)) == int(lowest.group(1))
    assert built == list(range(int(lowest.group(1)), int(supported.group(2)) + 1))
    systems = re.search(r"os: \[([^\]]+)\]", text)
    assert systems is not None
    assert {s.strip().split("-")[0] for s in systems.group(1).split(",")} == {
        "ubuntu",
        "macos",
        "windows",
    }
