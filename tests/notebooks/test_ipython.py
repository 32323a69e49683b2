"""``%load_ext memlens`` in a real IPython process: ``%%memlens`` cells run in the user's
namespace as without the magic, print their lines' figures and leave a run in the store; the
tracer leaves nothing behind between cells, also when a cell raises or is interrupted."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from memlens.model import Run
from memlens.runfile import reader
from memlens.source import text_digest
from memlens.store import Store

DRIVER = Path(__file__).with_name("driver.py")
MB = 1_000_000

#: A plain cell that prints what a tracer could leave behind in the kernel.
STATE = """\
import json as _j, os as _o, sys as _s, threading as _t
from memlens import _tracer as _m
print("STATE", _j.dumps({
    "hooks": _m.hooks_installed(), "active": _m.is_active(),
    "threads": _t.active_count(), "tasks": len(_o.listdir("/proc/self/task")),
    "meta_path": [type(f).__name__ for f in _s.meta_path],
    "profile": _s.getprofile() is None, "trace": _s.gettrace() is None,
    "monitoring": [_s.monitoring.get_tool(i) for i in range(6)] if hasattr(_s, "monitoring") else [],
    "sigint": repr(__import__("signal").getsignal(2)),
}))
"""

KEEP = """\
%%memlens
keep = bytearray(10_000_000)
tmp = bytearray(5_000_000)
del tmp
len(keep)
"""


def run_cells(folder: Path, cells: list[object]) -> list[str]:
    """The output of each cell, run one after the other in one IPython process."""
    script = folder / "cells.json"
    script.write_text(json.dumps(cells), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(script)],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": "", "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stdout
    out = done.stdout
    parts = out.split("=== In\n")[1:]
    assert len(parts) == len(cells), out
    return parts


def table(out: str) -> list[list[str]]:
    """The rows of the report's first table: rank, line, peak, allocs, share, live, code."""
    rows = []
    for line in out.splitlines():
        if line.startswith("live at exit ("):
            break  # the second table
        if re.match(r"^\s+\d+\s{2}\S", line) and ":" in line:
            rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def runs(folder: Path) -> list[Run]:
    return [reader.read(p) for p in Store(folder).run_files()]


def states(outputs: list[str]) -> list[dict[str, object]]:
    return [
        json.loads(line[6:])
        for o in outputs
        for line in o.splitlines()
        if line.startswith("STATE ")
    ]


def test_a_cell_keeps_10_mb_on_its_line_and_runs_in_the_users_namespace(tmp_path: Path) -> None:
    outputs = run_cells(
        tmp_path,
        [
            "%load_ext memlens",
            KEEP,
            "print('len', len(keep))",
            STATE,
            "%%memlens --no-report\nlen(keep);  # no Out: the semicolon",
        ],
    )
    assert "Out[" not in outputs[4]
    out = outputs[1]
    assert out.rstrip().endswith("=== ok"), out
    # The last expression is shown as IPython shows it, before the report.
    assert re.search(r"^Out\[2\]: 10000000$", out, re.MULTILINE), out
    # The table: the keeping line holds 9.5 MiB (10 MB) at the cell's end; the freed one 0 B.
    columns = {row[1]: row for row in table(out)}
    assert columns["In [2]:2"][5] == "9.5 MiB", out  # live at the cell's end
    assert columns["In [2]:2"][6] == "keep = bytearray(10_000_000)"
    assert columns["In [2]:3"][5] == "0 B", out
    assert columns["In [2]:3"][2] == "4.8 MiB", out
    # The annotated cell, with the cell's own line numbers (the magic's line is line 1).
    assert re.search(r"^\s+1  %%memlens$", out, re.MULTILINE), out
    assert re.search(
        r"^\s+2  keep = bytearray\(10_000_000\)  # 9\.5 MiB at peak", out, re.MULTILINE
    ), out
    # The variable is the user's, as without the magic.
    assert "len 10000000" in outputs[2]
    run, quiet = sorted(runs(tmp_path), key=lambda r: r.info.started)
    cell = run.info.cell
    assert cell is not None
    assert cell.file == "In [2]"
    assert cell.execution_count == 2
    # The cell as IPython's history holds it (without the last newline).
    assert run.files["In [2]"].text == KEEP.rstrip("\n")
    assert cell.sha256 == text_digest(KEEP.rstrip("\n")) == run.files["In [2]"].sha256
    lines = run.files["In [2]"].lines
    assert 10 * MB <= lines[2].live_bytes < 10 * MB + 4096
    assert lines[3].live_bytes == 0
    assert 5 * MB <= lines[3].alloc_bytes < 5 * MB + 4096
    assert run.info.command == ("%%memlens",)
    assert run.info.exit_code == 0
    assert run.info.complete
    assert reader.read(Store(tmp_path).latest()).info == quiet.info  # the newest run
    assert quiet.info.cell is not None
    assert quiet.info.cell.execution_count == 5


def test_cells_that_raise_or_are_interrupted_fail_as_usual_and_leave_runs_and_nothing_else(
    tmp_path: Path,
) -> None:
    raising = "%%memlens\nx = [1] * 1000\n1 / 0\n"
    interrupted = (
        "%%memlens\nimport os, signal, time\nbig = bytearray(2_000_000)\n"
        "os.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n"
    )
    plain_raising = "x = [1] * 1000\n1 / 0\n"
    outputs = run_cells(
        tmp_path,
        [
            "%load_ext memlens",
            STATE,
            KEEP,
            STATE,
            raising,
            STATE,
            interrupted,
            STATE,
            plain_raising,
            "%%memlens\nimport sys\nsys.exit(3)\n",
            STATE,
            "print('after', x[:2], len(big))",
        ],
    )

    # The traceback is the one the same code gives without the magic (the cell's frames only).
    def traceback(text: str) -> list[str]:
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if "Traceback" in line)
        end = next(i for i, line in enumerate(lines) if line.startswith("ZeroDivisionError:"))
        frames = [line for line in lines[start : end + 1] if "---->" in line or "Error" in line]
        return [re.sub(r"\d+", "N", line) for line in frames]

    assert outputs[4].rstrip().endswith("=== failed"), outputs[4]
    assert traceback(outputs[4]) == traceback(outputs[8])
    assert "magic.py" not in outputs[4]
    assert "Cell In[5], line 3" in outputs[4]
    assert outputs[4].index("ZeroDivisionError:") < outputs[4].index("memlens: run written")
    # Interrupted: IPython's KeyboardInterrupt, the run written (incomplete).
    assert outputs[6].rstrip().endswith("=== failed"), outputs[6]
    assert "KeyboardInterrupt" in outputs[6]
    assert "memlens: run written" in outputs[6]
    # sys.exit in a cell: as IPython says it, no traceback of memlens's.
    assert "SystemExit: 3" in outputs[9]
    assert "Traceback" not in outputs[9]
    assert "magic.py" not in outputs[9]
    assert "after [1, 1] 2000000" in outputs[11]
    # Nothing of the tracer stays between cells: no hooks, threads, import watchers,
    # profile or trace functions, monitoring tools, signal handlers.
    before, *after = states(outputs)
    assert before["hooks"] is False
    assert before["active"] is False
    assert all(state == before for state in after), (before, after)
    made = {r.info.cell.execution_count: r for r in runs(tmp_path) if r.info.cell is not None}
    assert sorted(made) == [3, 5, 7, 10]
    assert (made[5].info.exit_code, made[5].info.complete) == (1, True)
    assert made[5].files["In [5]"].lines[2].live_bytes >= 8000
    assert (made[7].info.exit_code, made[7].info.complete) == (None, False)
    assert made[7].files["In [7]"].lines[3].live_bytes >= 2 * MB
    assert (made[10].info.exit_code, made[10].info.complete) == (3, True)


def test_object_lifetimes_sampling_line_magic_kept_and_errors(tmp_path: Path) -> None:
    outputs = run_cells(
        tmp_path,
        [
            "%load_ext memlens",
            # An object the cell made and bound dies when its name goes, as without memlens.
            (
                "%%memlens\nimport weakref\nclass C: pass\nc = C()\nw = weakref.ref(c)\n"
                "d = bytearray(3_000_000)\n"
            ),
            "del c\nprint('gone', w() is None)",
            "%%memlens --sample 64KiB --seed 7 --top 3\nsampled = [bytearray(1_000_000) for _ in range(8)]\n",
            "import numpy\nzeros = None\n%memlens zeros = bytearray(4_000_000)\nprint('bound', len(zeros))",
            "del d\n%memlens_kept",
            "%%memlens --bogus\nx = 1\n",
            "%%memlens --seed 3\nx = 1\n",
            "%memlens --help",
            "%unload_ext memlens",
            "%%memlens\nx = 1\n",
        ],
    )
    assert "gone True" in outputs[2]
    sampled = next(r for r in runs(tmp_path) if r.info.cell and r.info.cell.execution_count == 4)
    assert sampled.info.mode == "sampling"
    assert sampled.info.seed == 7
    assert sampled.info.command == ("%%memlens", "--sample", "64KiB", "--seed", "7", "--top", "3")
    estimate = sampled.files["In [4]"].lines[2].live_bytes
    assert 4 * MB < estimate < 12 * MB, estimate
    # %memlens STATEMENT: the statement's own line of the cell, the cell's text recorded.
    line_run = next(r for r in runs(tmp_path) if r.info.cell and r.info.cell.execution_count == 5)
    cell = line_run.files["In [5]"]
    assert cell.text is not None
    assert cell.text.startswith("import numpy\n")
    assert list(cell.lines) == [3]
    assert cell.lines[3].live_bytes >= 4 * MB
    assert "bound 4000000" in outputs[4]
    # %memlens_kept: cell by cell, what each left alive, and which of its names still hold it.
    table = outputs[5]
    row2 = re.search(r"^\s+In \[2\]\s+(\S+ \S+)\s.*$", table, re.MULTILINE)
    assert row2 is not None, table
    assert row2.group(1) == "2.9 MiB", table
    assert re.search(r"In \[2\].*\bw\b.*\bc, d\b", table) or re.search(
        r"In \[2\].*C, w.*c, d", table
    ), table
    assert re.search(r"^\s+In \[5\]\s+3\.8 MiB", table, re.MULTILINE), table
    assert re.search(r"^\s+total\s+", table, re.MULTILINE), table
    # Bad options: one line, no traceback; the cell fails (as a failed magic does).
    assert outputs[6].count("\n") <= 3
    assert "memlens: %%memlens: unrecognized arguments: --bogus" in outputs[6]
    assert "Traceback" not in outputs[6]
    assert outputs[6].rstrip().endswith("=== failed")
    assert "--seed is for sampling mode" in outputs[7]
    assert "Traceback" not in outputs[7]
    assert "--sample BYTES" in outputs[8]
    assert outputs[8].rstrip().endswith("=== ok")
    assert "UsageError" in outputs[10] or "not found" in outputs[10], outputs[10]


def test_a_jupyter_cell_records_its_notebook_and_cell_id(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    notebook = str(tmp_path / "sub" / "analysis.ipynb")
    uri = "vscode-notebook-cell:" + notebook + "#W1sZmlsZQ%3D%3D"
    code = "\n%%memlens\nkept = bytearray(1_000_000)\n"  # a blank line above the magic
    outputs = run_cells(
        tmp_path / "sub",
        [
            "%load_ext memlens",
            {"code": code, "cell_id": uri, "notebook": notebook},
            f"%%memlens --dir {tmp_path}\nx = 1\n",
        ],
    )
    assert outputs[1].rstrip().endswith("=== ok"), outputs[1]
    [run] = runs(tmp_path / "sub")  # the store of the kernel's working directory
    [elsewhere] = runs(tmp_path)  # --dir, as memlens run's
    assert elsewhere.info.workspace_root == str(tmp_path.resolve())
    assert run.info.cell is not None
    assert (run.info.cell.notebook, run.info.cell.cell_id) == (notebook, uri)
    assert run.files["In [2]"].text == code
    assert run.info.cell.sha256 == text_digest(code)
    assert list(run.files["In [2]"].lines) == [3]
