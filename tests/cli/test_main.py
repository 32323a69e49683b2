from __future__ import annotations

from memlens._version import __version__
from tests.cli.memlens_cmd import memlens as _memlens


def test_version() -> None:
    proc = _memlens("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"memlens {__version__}"
    assert __version__ != "0.0.0+unknown"


def test_help_lists_commands() -> None:
    from memlens.cli import COMMANDS

    proc = _memlens("--help")
    assert proc.returncode == 0
    for name in COMMANDS:
        assert f"    {name} " in proc.stdout or f"    {name}\n" in proc.stdout, name
