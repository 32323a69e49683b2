"""A free-threaded Python (3.13t, 3.14t) gets no tracer (native/CMakeLists.txt builds none
there): `memlens run`, `memlens.profile()` and `pytest --memlens` each refuse with one line
that names what would work. No free-threaded build is at hand, so the test gives a regular
one the two things that tell them apart: the config variable, and no `memlens._tracer`."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.cli.memlens_cmd import command

AS_FREE_THREADED = """\
import sys, sysconfig
sys.modules["memlens._tracer"] = None  # (importing it raises ImportError)
_config = sysconfig.get_config_var
sysconfig.get_config_var = lambda name: 1 if name == "Py_GIL_DISABLED" else _config(name)
"""
VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
REFUSAL = (
    f"memlens: cannot trace a free-threaded Python ({VERSION}t) yet: run the program with the "
    f"regular build (python{VERSION}); memlens show, diff and the editor work here"
)


def _python(code: str, cwd: Path) -> tuple[int, str, str]:
    proc = command([sys.executable, "-c", AS_FREE_THREADED + code], cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def test_memlens_run_refuses_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text("print('ran')\n")
    code = "from memlens.cli import main\nsys.exit(main(['run', 'prog.py']))\n"
    assert _python(code, tmp_path) == (2, "", REFUSAL + "\n")


def test_profile_refuses_with_a_memlens_error(tmp_path: Path) -> None:
    code = (
        "import memlens\nfrom memlens.errors import MemlensError\n"
        "try:\n    memlens.profile().__enter__()\nexcept MemlensError as exc:\n    print(exc)\n"
    )
    assert _python(code, tmp_path) == (0, REFUSAL.removeprefix("memlens: ") + "\n", "")


def test_pytest_memlens_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    code = "import pytest\nsys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--memlens']))\n"
    returncode, _, stderr = _python(code, tmp_path)
    assert returncode == 4
    assert stderr == f"ERROR: {REFUSAL}\n\n"
