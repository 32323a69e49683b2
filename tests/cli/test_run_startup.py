"""`memlens run`'s fixed cost: what it imports is overhead on every profiled program.

Two checks. Before the program starts, `memlens run` loads only its own run path (and the
built-in `atexit`): every other module would be overhead, and would hide the cost of the
program's own import of it (`import argparse` in the program must cost what it costs under
plain Python). After the program, building and writing the run keeps out the modules that
made up most of that cost (measured: dataclasses + inspect ~14 ms CPU, pathlib ~4 ms, typing
~3 ms, shutil ~2 ms, json with re ~5 ms). Both on the default path (the run goes to the store and becomes
`latest`) and with `-o`; the MCP SDK (`memlens mcp` only) never loads there either.
docs/ARCHITECTURE.md ("Start-up") lists what remains, and why.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from memlens.store import Store

HEAVY = (
    # json's decoder compiles regular expressions on import (~30 M instructions): the run file
    # is written through json's C encoder instead (memlens.runfile.jsontext).
    "json",
    # hashlib loads OpenSSL's libcrypto (~11 M instructions): a small run's digests use
    # CPython's own SHA-256 (memlens.sha256).
    "hashlib",
    "re",
    "dataclasses",
    "inspect",
    "typing",
    "pathlib",
    "platform",
    "shutil",
    "secrets",
    "rich",
    "mcp",
    "memlens_mcp",
)

#: What `memlens run` loads before the program starts: its run path, nothing else.
RUN_PATH = {
    "atexit",
    "memlens",
    "memlens._tracer",
    "memlens._version",
    "memlens.cli",
    "memlens.cli.options",
    "memlens.cli.run",
    "memlens.errors",
    "memlens.layout",
    "memlens.tracing",
    "memlens.tracing.child",
    "memlens.tracing.cuda",
    "memlens.tracing.follow",
    "memlens.tracing.runner",
    "memlens.tracing.tracer",
}
#: ... and with --sample, the size parser.
SAMPLING = {"memlens.units"}
#: Loaded by every memlens module's `from __future__ import annotations` (plain Python loads
#: it too when a site package does, as here): a few names, no code. And 3.13 loads linecache
#: for code given with -c, as this test starts memlens (the `memlens` script does not).
FUTURE = {"__future__", "linecache"} if sys.version_info >= (3, 13) else {"__future__"}
if sys.version_info >= (3, 12):
    # sys.monitoring's functions wrapped with _functools.partial (the C core, no Python code:
    # tracer._share_monitoring); loaded by site already on some builds, not on Debian's 3.14.
    FUTURE |= {"_functools"}

#: As the `memlens` console script starts memlens.
MEMLENS = "import sys\nfrom memlens.cli import main\nsys.exit(main())\n"

CHECK = """
import atexit, sys
# (what the interpreter loaded before memlens is not memlens's: Debian's 3.15 loads re in site)
heavy = [m for m in {heavy!r} if m not in sys.modules]
atexit.register(lambda: print("LOADED", *[m for m in heavy if m in sys.modules], file=sys.stderr))
from memlens.cli import main
raise SystemExit(main({argv!r}))
"""

#: The profiled program: writes the modules loaded when it starts, before importing anything.
PROBE = """\
import sys
loaded = sorted(sys.modules)
with open(sys.argv[1], "w") as fh:
    fh.write("\\n".join(loaded))
data = [bytearray(1000) for _ in range(100)]
print(len(data))
"""


def _python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def _editable_finder_modules(cwd: Path) -> set[str]:
    """What an editable install's import hook loads on `import memlens` (importlib.machinery,
    importlib.util and their imports): not memlens's, and not there with a wheel install."""
    kind = _python("-c", "import memlens; print(type(memlens.__spec__.loader).__module__)", cwd=cwd)
    assert kind.returncode == 0, kind.stderr
    if not kind.stdout.startswith("_editable"):
        return set()
    # In a fresh interpreter: what those cost when nothing else loaded them.
    code = "import sys\nb = set(sys.modules)\nimport importlib.machinery, importlib.util\n"
    code += "print(*(set(sys.modules) - b))"
    cost = _python("-c", code, cwd=cwd)
    assert cost.returncode == 0, cost.stderr
    return set(cost.stdout.split())


@pytest.mark.parametrize("mode", [[], ["--sample", "128KiB"]], ids=["exact", "sampling"])
def test_only_the_run_path_is_loaded_before_the_program(tmp_path: Path, mode: list[str]) -> None:
    (tmp_path / "probe.py").write_text(PROBE)
    plain = _python("probe.py", "plain.txt", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    # The default path: no -o, the run goes to the store.
    proc = _python(
        "-c", MEMLENS, "run", "--no-report", *mode, "probe.py", "under.txt", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == plain.stdout == "100\n"
    assert Store(tmp_path).latest() is not None

    before = set((tmp_path / "plain.txt").read_text().split())
    under = set((tmp_path / "under.txt").read_text().split())
    expected = RUN_PATH | (SAMPLING if mode else set())
    extra = under - before
    # The program's own imports are not among memlens's: e.g. argparse, re, enum, signal,
    # threading, importlib.util cost the program what they cost under plain Python.
    finder = _editable_finder_modules(tmp_path)
    assert expected <= extra
    assert extra - expected - FUTURE <= finder, sorted(extra - expected)


@pytest.mark.parametrize("store", [True, False], ids=["store", "output"])
@pytest.mark.parametrize("mode", [[], ["--sample", "128KiB"]], ids=["exact", "sampling"])
def test_run_path_avoids_costly_imports(tmp_path: Path, mode: list[str], store: bool) -> None:
    script = tmp_path / "app.py"
    script.write_text("data = [bytearray(1000) for _ in range(100)]\nprint(len(data))\n")
    out = tmp_path / "r.mlrun"
    output = [] if store else ["-o", str(out)]
    argv = ["run", "--no-report", *output, *mode, str(script)]
    proc = subprocess.run(
        [sys.executable, "-c", CHECK.format(heavy=HEAVY, argv=argv)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "100\n"
    written = Store(tmp_path).latest() if store else out
    assert written is not None
    assert written.is_file()
    loaded = [line for line in proc.stderr.splitlines() if line.startswith("LOADED")]
    assert loaded == ["LOADED"], proc.stderr
