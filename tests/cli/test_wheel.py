"""Install as a user would: `./dev wheel` from a copy of the checkout, then `pip install` of
that wheel into a fresh virtual environment, then `memlens run` from there.

Also checks that a plain (non-editable) build leaves no build/ folder in the checkout
(pyproject.toml: only editable installs keep one), and that, installed from a wheel, `memlens
run` loads exactly its run path before the program (no editable import hook to allow for).
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest

from memlens._version import __version__
from tests.cli.memlens_cmd import command
from tests.cli.test_run_startup import FUTURE, PROBE, RUN_PATH

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "data" / "scripts"

pytestmark = pytest.mark.slow


def _sh(
    *cmd: str | Path, cwd: Path, env: dict[str, str] | None = None, timeout: float = 900
) -> str:
    proc = command(cmd, cwd=cwd, env=env, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _copy_of_checkout(dest: Path) -> Path:
    """The project's files (tracked, and new ones not ignored), as a fresh clone has them."""
    files = _sh("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", cwd=ROOT)
    for name in filter(None, files.split("\0")):
        source = ROOT / name
        if source.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    checkout = _copy_of_checkout(tmp_path_factory.mktemp("checkout"))
    # Wheels built earlier: this version's for another Python stays, another version's goes.
    dist = checkout / "dist"
    dist.mkdir()
    other_python = dist / f"memlens-{__version__}-cp399-cp399-manylinux_2_17_x86_64.whl"
    other_version = dist / "memlens-0.0.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    other_python.write_bytes(b"")
    other_version.write_bytes(b"")
    # The tests' own virtual environment builds it (it has the build tools: no download).
    env = dict(os.environ, MEMLENS_VENV=sys.prefix)
    _sh("bash", checkout / "dev", "wheel", "--python", sys.executable, cwd=checkout, env=env)
    assert other_python.exists()
    assert not other_version.exists()
    other_python.unlink()
    wheels = sorted(dist.glob("memlens-*.whl"))
    assert len(wheels) == 1, wheels
    # A plain build is out of tree: no build/ folder appeared in the checkout.
    assert not (checkout / "build").exists()
    return wheels[0]


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed; returns its bin directory."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    _sh(sys.executable, "-m", "venv", "--without-pip", venv, cwd=venv.parent)
    python = venv / "bin" / "python"
    # The documented command, from this environment's pip (offline: --no-index), without the
    # dependencies, which the fresh environment reads from this one (rich, pygls, ...).
    _sh(sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps",
        wheel, cwd=venv.parent)  # fmt: skip
    site = _sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=venv)
    (Path(site.strip()) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def test_wheel_is_manylinux_tagged_on_linux(wheel: Path) -> None:
    tags = wheel.name.removesuffix(".whl").split("-")[2:]
    assert tags[0] == f"cp{sys.version_info[0]}{sys.version_info[1]}"
    if sys.platform.startswith("linux"):
        assert tags[2].startswith("manylinux_"), wheel.name


def test_installed_wheel_profiles_a_program(installed: Path, tmp_path: Path) -> None:
    where = _sh(installed / "python", "-c", "import memlens; print(memlens.__file__)", cwd=tmp_path)
    assert where.startswith(str(installed.parent)), where  # the wheel's, not the checkout's
    shutil.copy(SCRIPTS / "transient_peak.py", tmp_path)
    out = _sh(installed / "memlens", "run", "transient_peak.py", cwd=tmp_path)
    assert out.splitlines()[0] == f"{50 << 20} {5 << 20}"
    assert "live at exit (what the program still held when it ended):" in out
    assert (tmp_path / ".memlens" / "runs" / "latest").is_file()


def test_installed_wheel_loads_only_the_run_path(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    _sh(installed / "python", "probe.py", "plain.txt", cwd=tmp_path)
    _sh(installed / "memlens", "run", "--no-report", "probe.py", "under.txt", cwd=tmp_path)
    before = set((tmp_path / "plain.txt").read_text().split())
    extra = set((tmp_path / "under.txt").read_text().split()) - before
    assert extra >= RUN_PATH
    assert extra - RUN_PATH <= FUTURE, sorted(extra - RUN_PATH)


def test_installed_wheel_holds_every_package(installed: Path, tmp_path: Path) -> None:
    """The core with its subpackages, the language server and the MCP server (whose SDK the
    tests' environment has): each imports from the wheel."""
    code = (
        "import memlens.cli.lsp, memlens.runfile.reader, memlens.tracing.child, "
        "memlens_lsp.server, memlens_mcp.server, memlens_mcp.tools\n"
        "print(memlens_lsp.server.__file__, memlens_mcp.server.__file__)"
    )
    where = _sh(installed / "python", "-c", code, cwd=tmp_path).split()
    assert all(w.startswith(str(installed.parent)) for w in where), where


def test_installed_wheel_runs_pytest_with_warnings_as_errors(
    installed: Path, tmp_path: Path
) -> None:
    """`memlens run -m pytest` gives plain pytest's result in a project whose pytest turns
    warnings into errors (installed from a wheel, pytest finds memlens among the files of a
    distribution with a pytest plugin, already imported)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    (tmp_path / "test_it.py").write_text("def test_it():\n    assert [1] * 2 == [1, 1]\n")
    flags = ("-q", "-p", "no:cacheprovider", "-p", "no:asyncio")
    plain = command([installed / "python", "-m", "pytest", *flags], cwd=tmp_path)
    under = command(
        [installed / "memlens", "run", "--no-report", "-m", "pytest", *flags], cwd=tmp_path
    )
    assert plain.returncode == 0, plain.stdout
    assert under.returncode == 0, under.stdout + under.stderr
    assert under.stdout.splitlines()[-1].startswith("1 passed")
