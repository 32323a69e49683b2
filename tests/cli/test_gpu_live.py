"""GPU memory of a profiled program (``memlens run`` of a program that uses PyTorch's CUDA).

CI has no GPU. The live path is tested end to end on programs that import a stand-in for
PyTorch (tests/data/fake_torch, installed under a site-packages folder as PyTorch is): its
caching allocator history has PyTorch's API and shape, so everything memlens does is real: the
import hook that arms recording when the program initialises CUDA (never before, never when it
does not), the snapshot at the end, the attribution of frameless backward allocations, the
figures in the run file and the export. ``test_real_pytorch_on_a_gpu`` runs the fixture's
training loop on a real GPU where there is one, and says why it skips elsewhere.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memlens.model import Run
from tests.cli.memlens_cmd import command, latest_run, memlens
from tests.fake_torch import environment

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "torch_cuda"
MIB = 1 << 20

PROGRAM = """\
import torch

keep = []
cache = {}


def step(i):
    x = torch.empty(4 << 20, device="cuda")  # 4 MiB per step, freed when step returns
    y = torch.empty(1 << 20, device="cuda")
    keep.append(y)
    y.backward()  # the gradient (1 MiB) is allocated on an engine thread, with no frame
    if i % 2 == 0:
        cache[i] = torch.empty(2 << 20, device="cuda")
    return x.nbytes


total = sum(step(i) for i in range(4))
print(total, len(keep), len(cache), torch.cuda.is_initialized())
"""


def _run(tmp_path: Path, program: str, *args: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    script = tmp_path / "prog.py"
    script.write_text(program)
    env = environment(tmp_path)
    plain = command([sys.executable, script], cwd=tmp_path, env=env)
    profiled = memlens("run", "--no-report", *args, str(script), cwd=tmp_path, env=env)
    return plain, profiled


def _lines(run: Run, name: str) -> dict[int, tuple[int, int, int, int]]:
    (path,) = [p for p in run.files if p.endswith(name)]
    return {
        n: (st.gpu_alloc_bytes, st.gpu_alloc_count, st.gpu_live_bytes, st.gpu_peak_bytes)
        for n, st in run.files[path].lines.items()
        if st.has_gpu()
    }


def test_a_programs_gpu_memory_is_charged_to_its_lines(tmp_path: Path) -> None:
    plain, profiled = _run(tmp_path, PROGRAM)
    assert plain.returncode == 0, plain.stderr
    assert profiled.returncode == 0, profiled.stderr
    assert profiled.stdout == plain.stdout == f"{16 * MIB} 4 2 True\n"
    assert "memlens: GPU" not in profiled.stderr  # no warning
    run = latest_run(tmp_path)
    lines = _lines(run, "prog.py")
    # (allocated, allocations, live at the end, held at the GPU peak), per line.
    assert lines[8] == (16 * MIB, 4, 0, 4 * MIB)
    assert lines[9] == (4 * MIB, 4, 4 * MIB, 4 * MIB)
    # The gradients, allocated with no frame, go to the line waiting in backward(); the seeds
    # (4 bytes each, made by backward() itself) are freed, the last one after the peak.
    assert lines[11] == (4 * MIB + 16, 8, 4 * MIB, 4 * MIB + 4)
    assert lines[13] == (4 * MIB, 2, 4 * MIB, 4 * MIB)
    assert set(lines) == {8, 9, 11, 13, 17}  # 17 (the loop) holds them all through its calls
    path = next(p for p in run.files if p.endswith("prog.py"))
    loop = run.files[path].lines[17]
    assert (loop.incl_gpu_live_bytes, loop.incl_gpu_peak_bytes) == (12 * MIB, 16 * MIB + 4)
    (step,) = [f for f in run.files[path].functions if f.qualname == "step"]
    assert (step.gpu_alloc_count, step.gpu_live_bytes) == (18, 12 * MIB)
    # The peak: the last step's x (4 MiB) and seed with everything kept so far.
    assert run.info.gpu_peak_bytes == 16 * MIB + 4
    (device,) = run.info.gpus
    assert (device.device, device.live_bytes, device.complete) == (0, 12 * MIB, True)
    # Only the program's own file: the stand-in PyTorch (a library) is transparent.
    assert [p for p in run.files if "torch" in p] == []


def test_the_export_and_show_have_the_gpu_figures(tmp_path: Path) -> None:
    _run(tmp_path, PROGRAM)
    exported = memlens("export", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    doc = json.loads(exported.stdout)
    assert doc["run"]["gpu_peak_bytes"] == 16 * MIB + 4
    (lines,) = [f["lines"] for p, f in doc["files"].items() if p.endswith("prog.py")]
    assert lines["13"]["gpu_live_bytes"] == 4 * MIB
    assert lines["9"]["gpu_alloc_count"] == 4
    shown = memlens("show", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "GPU peak 16.0 MiB" in shown.stdout
    assert "GPU memory (PyTorch CUDA):" in shown.stdout
    (listed,) = [ln for ln in shown.stdout.splitlines() if ln.startswith("  13  ")]
    assert listed.startswith('  13          cache[i] = torch.empty(2 << 20, device="cuda")  # ')
    assert listed.endswith(" · GPU 4.0 MiB at peak")


def test_a_followed_childs_gpu_memory_is_in_the_run(tmp_path: Path) -> None:
    # A worker process (as a DDP worker per GPU) started with the same interpreter.
    (tmp_path / "worker.py").write_text(
        "import torch\nheld = torch.empty(3 << 20, device='cuda')\nprint('worker', held.nbytes)\n"
    )
    program = "import subprocess, sys\nsubprocess.run([sys.executable, 'worker.py'], check=True)\n"
    plain, profiled = _run(tmp_path, program)
    assert profiled.returncode == 0, profiled.stderr
    assert profiled.stdout == plain.stdout == f"worker {3 * MIB}\n"
    run = latest_run(tmp_path)
    assert len(run.info.processes) == 2
    assert _lines(run, "worker.py") == {2: (3 * MIB, 1, 3 * MIB, 3 * MIB)}
    assert run.info.gpu_peak_bytes == 3 * MIB


def test_no_gpu_leaves_gpu_memory_out(tmp_path: Path) -> None:
    plain, profiled = _run(tmp_path, PROGRAM, "--no-gpu")
    assert profiled.stdout == plain.stdout
    run = latest_run(tmp_path)
    assert (run.info.gpu_peak_bytes, run.info.gpus) == (0, ())
    assert not any(st.has_gpu() for sf in run.files.values() for st in sf.lines.values())


def test_recording_never_starts_after_tracing_stopped(tmp_path: Path) -> None:
    # CUDA initialised after the profiled block: the call memlens queued does nothing then.
    program = textwrap.dedent(
        """        import memlens

        with memlens.profile() as p:
            import torch
        t = torch.empty(1 << 20, device="cuda")
        print(torch.cuda.is_initialized(), torch.cuda.memory._recording, p.run.info.gpus)
        """
    )
    script = tmp_path / "late.py"
    script.write_text(program)
    proc = command([sys.executable, script], cwd=tmp_path, env=environment(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "True False ()\n"


def test_a_program_that_never_uses_cuda_is_left_alone(tmp_path: Path) -> None:
    # Importing torch arms nothing: memlens never initialises CUDA itself, and a run without
    # CUDA has no GPU figures.
    program = "import torch\nt = torch.empty(1024)\nprint(torch.cuda.is_initialized())\n"
    plain, profiled = _run(tmp_path, program)
    assert profiled.stdout == plain.stdout == "False\n"
    assert profiled.returncode == 0, profiled.stderr
    run = latest_run(tmp_path)
    assert (run.info.gpu_peak_bytes, run.info.gpus) == (0, ())


def test_a_program_that_never_imports_torch_loads_no_torch(tmp_path: Path) -> None:
    program = "import sys\nprint(sorted(m for m in sys.modules if m.startswith('torch')))\n"
    plain, profiled = _run(tmp_path, program)
    assert profiled.stdout == plain.stdout == "[]\n"


def test_cuda_initialised_before_tracing_starts_is_armed_at_start(tmp_path: Path) -> None:
    # memlens.profile() in a program that initialised CUDA already: recording starts then.
    program = textwrap.dedent(
        """\
        import torch
        import memlens

        early = torch.empty(1 << 20, device="cuda")
        with memlens.profile() as p:
            late = torch.empty(2 << 20, device="cuda")
        print(p.run.info.gpu_peak_bytes, sum(
            st.gpu_live_bytes for sf in p.run.files.values() for st in sf.lines.values()
        ))
        """
    )
    script = tmp_path / "early.py"
    script.write_text(program)
    plain = command([sys.executable, script], cwd=tmp_path, env=environment(tmp_path))
    assert plain.returncode == 0, plain.stderr
    # The history starts with recording: `late` is on its line; `early`, allocated before,
    # is on none, but counts in the peak (the snapshot's blocks say it was held).
    assert plain.stdout == f"{3 * MIB} {2 * MIB}\n"


def test_real_pytorch_on_a_gpu(tmp_path: Path) -> None:
    """The fixture's training loop under PyTorch on a real GPU: the figures its snapshot
    gives (tests/unit/test_gpu.py), live."""
    probe = command(
        [
            sys.executable,
            "-c",
            "import torch; print(torch.__version__, torch.cuda.is_available())",
        ],
        cwd=tmp_path,
    )
    if probe.returncode != 0:
        pytest.skip("PyTorch is not installed in this environment (pip install torch)")
    version, available = probe.stdout.split()
    if available != "True":
        pytest.skip(f"CUDA is not available to PyTorch {version} here (no GPU, or a CPU build)")
    script = tmp_path / "train.py"
    shutil.copy(FIXTURE / "train.py", script)
    proc = memlens("run", "--no-report", str(script), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    run = latest_run(tmp_path)
    live = {n: st.gpu_live_bytes / MIB for n, st in run.files[str(script)].lines.items()}
    assert {n: round(live.get(n, 0.0), 1) for n in (6, 14, 17, 18, 21)} == {
        6: 32.0,
        14: 49.0,
        17: 64.0,
        18: 64.0,
        21: 64.0,
    }
    assert run.info.gpu_peak_bytes > 300 * MIB
