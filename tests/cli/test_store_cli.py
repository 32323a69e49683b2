"""runs / baseline / export / diff / import, end to end through the `memlens` command."""

from __future__ import annotations

import errno
import io
import json
import os
import re
import sqlite3
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from memlens.cli import main
from memlens.model import LineStats, replace
from memlens.runfile import reader, writer
from memlens.store import Store
from tests.cli.memlens_cmd import memlens
from tests.runs import MIB, sample_run

A_ID = "20261122-100000-1"
B_ID = "20261122-110000-2"


def _store_with_two_runs(tmp: Path) -> tuple[Path, Path]:
    """Run A (baseline-to-be) and run B, where B's source gained a first line."""
    store = Store(tmp)
    a = store.runs_dir / f"{A_ID}.mlrun"
    b = store.runs_dir / f"{B_ID}.mlrun"
    writer.write(sample_run(), a)
    moved = "# new header\n" + sample_run().files["/work/app.py"].text  # type: ignore[operator]
    run_b = sample_run(text=moved, complete=False, exit_code=None, duration_s=2.25)
    sf = run_b.files["/work/app.py"]
    lines = {
        5: replace(sf.lines[4], peak_bytes=30 * MIB),
        7: sf.lines[6],
        1: LineStats(peak_bytes=MIB),
    }
    run_b = replace(run_b, files={"/work/app.py": replace(sf, sha256="cd" * 32, lines=lines)})
    writer.write(run_b, b)
    store.set_pointer("latest", b)
    return a, b


def test_runs_list_baseline_and_prune(tmp_path: Path) -> None:
    a, b = _store_with_two_runs(tmp_path)
    out = memlens("runs", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0].split() == ["id", "started", "peak", "duration", "complete", "command"]
    assert rows[1].split() == [
        A_ID,
        "2026-11-22",
        "10:00:00",
        "48.0",
        "MiB",
        "1.50",
        "s",
        "yes",
        "python",
        "app.py",
    ]
    assert rows[2].split()[-4:] == ["no", "python", "app.py", "[latest]"]
    assert "2.25 s" in rows[2]

    set_out = memlens("baseline", "set", "20261122-100000", cwd=tmp_path)  # an id prefix
    assert set_out.returncode == 0, set_out.stderr
    assert Store(tmp_path).baseline() == a
    shown = memlens("baseline", "show", cwd=tmp_path).stdout.splitlines()
    assert shown[0].split()[0] == A_ID
    assert shown[1] == str(a)
    assert memlens("runs", cwd=tmp_path).stdout.splitlines()[1].endswith("[baseline]")

    listed = json.loads(memlens("runs", "--json", cwd=tmp_path).stdout)
    assert [(r["id"], r["complete"], r["baseline"], r["latest"]) for r in listed] == [
        (A_ID, True, True, False),
        (B_ID, False, False, True),
    ]
    assert listed[0]["peak_traced_bytes"] == 48 * MIB
    assert listed[1]["duration_s"] == 2.25

    # prune never removes the baseline; --keep 1 keeps the newest.
    pruned = memlens("runs", "prune", "--keep", "0", cwd=tmp_path)
    assert pruned.returncode == 0
    assert "removed 1 run(s)" in pruned.stderr
    assert Store(tmp_path).run_files() == [a]
    assert Store(tmp_path).latest() == a
    assert not b.exists()

    assert memlens("baseline", "clear", cwd=tmp_path).returncode == 0
    none = memlens("baseline", "show", cwd=tmp_path)
    assert none.returncode == 2
    assert none.stderr.strip() == "memlens: no baseline set (use `memlens baseline set RUN`)"


def test_prune_keeps_the_newest(tmp_path: Path) -> None:
    store = Store(tmp_path)
    paths = [store.runs_dir / f"20261122-1{i}0000-{i}.mlrun" for i in range(4)]
    for p in paths:
        writer.write(sample_run(), p)
        # The runs of its processes (memlens run followed children) go with it.
        folder = p.with_suffix(".processes")
        folder.mkdir()
        writer.write(sample_run(), folder / "4242.mlrun")
    assert memlens("runs", "prune", "--keep", "2", cwd=tmp_path).returncode == 0
    assert store.run_files() == paths[2:]
    assert [p.with_suffix(".processes").is_dir() for p in paths] == [False, False, True, True]
    bad = memlens("runs", "prune", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.strip() == "memlens: runs prune needs --keep N"


def test_runs_in_an_empty_directory(tmp_path: Path) -> None:
    out = memlens("runs", cwd=tmp_path)
    assert out.returncode == 0
    assert out.stdout == ""
    assert out.stderr.startswith("memlens: no runs in ")
    assert json.loads(memlens("runs", "--json", cwd=tmp_path).stdout) == []
    export = memlens("export", cwd=tmp_path)
    assert export.returncode == 2
    assert export.stderr.startswith("memlens: no runs yet in ")


def test_export_prints_the_documented_json(tmp_path: Path) -> None:
    a, b = _store_with_two_runs(tmp_path)
    out = memlens("export", cwd=tmp_path)  # default: latest
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["format"] == "memlens-run"
    assert doc["version"] == 1
    assert doc["run"]["complete"] is False
    assert doc["run"]["exit_code"] is None
    assert doc["files"]["/work/app.py"]["sha256"] == "cd" * 32
    assert doc["files"]["/work/app.py"]["lines"]["5"]["peak_bytes"] == 30 * MIB
    # RUN as a path, an id, latest; baseline once set.
    assert json.loads(memlens("export", str(b), cwd=tmp_path).stdout) == doc
    assert json.loads(memlens("export", B_ID, cwd=tmp_path).stdout) == doc
    assert json.loads(memlens("export", "latest", cwd=tmp_path).stdout) == doc
    memlens("baseline", "set", A_ID, cwd=tmp_path)
    base = json.loads(memlens("export", "baseline", cwd=tmp_path).stdout)
    assert base["run"]["complete"] is True
    # --dir points at another store root.
    elsewhere = memlens("export", "--dir", str(tmp_path), cwd=a.parents[3])
    assert json.loads(elsewhere.stdout) == doc


def test_diff_table_and_json_follow_moved_lines(tmp_path: Path) -> None:
    _store_with_two_runs(tmp_path)
    assert memlens("baseline", "set", A_ID, cwd=tmp_path).returncode == 0
    out = memlens("diff", cwd=tmp_path)  # baseline -> latest
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0] == f"memlens: peak per line, {A_ID} -> {B_ID}"
    assert rows[1].split() == ["line", "before", "after", "change"]
    # Sorted by absolute change: the moved line (-10 MiB) first, then the new line (+1 MiB).
    assert rows[2].split() == [
        "/work/app.py:5",
        "(moved",
        "from",
        "4)",
        "40.0",
        "MiB",
        "30.0",
        "MiB",
        "−10.0",
        "MiB",
        "−25%",
    ]
    assert rows[3].split() == [
        "/work/app.py:1",
        "(new",
        "code)",
        "-",
        "1.0",
        "MiB",
        "+1.0",
        "MiB",
        "new",
    ]
    assert len([r for r in rows if r.startswith("  /work/app.py:")]) == 2  # line 7 unchanged
    assert rows[-1] == "run peak: 48.0 MiB -> 48.0 MiB (±0 B, ±0%)"

    doc = json.loads(memlens("diff", "--json", cwd=tmp_path).stdout)
    assert doc["format"] == "memlens-diff"
    assert doc["by"] == "peak_bytes"
    assert doc["files"] == {"/work/app.py": {"matched_by": "text"}}
    first = doc["lines"][0]
    assert (first["line_a"], first["line_b"], first["status"]) == (4, 5, "moved")
    assert first["figures"]["peak_bytes"] == {
        "a": 40 * MIB,
        "b": 30 * MIB,
        "delta": -10 * MIB,
        "ratio": -0.25,
    }
    assert len(doc["lines"]) == 3  # JSON has every line, unchanged ones too
    same = next(ld for ld in doc["lines"] if ld["line_b"] == 7)
    assert same["line_a"] == 6
    assert all(c["delta"] == 0 for c in same["figures"].values())
    # --by alloc: nothing changed in allocated bytes on matched lines, --top limits rows.
    top = json.loads(memlens("diff", A_ID, B_ID, "--json", "--top", "1", cwd=tmp_path).stdout)
    assert len(top["lines"]) == 1
    by_alloc = memlens("diff", "--by", "alloc", cwd=tmp_path).stdout.splitlines()
    assert by_alloc[0] == f"memlens: alloc per line, {A_ID} -> {B_ID}"
    assert by_alloc[1] == "memlens: no line changed"


def test_diff_without_baseline(tmp_path: Path) -> None:
    _store_with_two_runs(tmp_path)
    out = memlens("diff", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr == "memlens: no baseline set (use `memlens baseline set RUN`)\n"


def _work() -> list[bytearray]:
    return [bytearray(1 << 20) for _ in range(2)]


def test_import_tracemalloc_into_the_store(tmp_path: Path) -> None:
    tracemalloc.start(5)
    try:
        keep = _work()
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    snap.dump(str(tmp_path / "s.pickle"))
    out = memlens("import", "tracemalloc", "s.pickle", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "only import snapshots you trust" in out.stderr
    run = reader.read(Store(tmp_path).latest())  # type: ignore[arg-type]
    assert run.info.source == "tracemalloc"
    assert run.info.mode == "imported"
    line = run.files[str(Path(__file__).resolve())].lines[_work.__code__.co_firstlineno + 1]
    assert 2 << 20 <= line.live_bytes < (2 << 20) + 4096
    # A snapshot has neither the RSS nor the duration: the report and the list say so.
    shown = memlens("show", cwd=tmp_path).stdout.splitlines()[0]
    assert "· peak RSS not recorded · duration not recorded · imported from tracemalloc" in shown
    listed = memlens("runs", cwd=tmp_path).stdout.splitlines()[1]
    assert " not recorded " in listed
    assert " 0.00 s " not in listed
    # -o writes elsewhere and leaves latest alone.
    other = memlens("import", "tracemalloc", "s.pickle", "-o", "x.mlrun", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    assert reader.read(tmp_path / "x.mlrun").info.source == "tracemalloc"
    assert len(Store(tmp_path).run_files()) == 1
    assert keep


def test_import_pymemtrace_into_the_store(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text("def main():\n    big = [0] * 10**6\n")
    (tmp_path / "trace.log").write_text(
        "SOF\n"
        "HEDR: Event dEvent Clock What File Line Function RSS dRSS\n"
        "FRST: 0 +0 1.000 LINE prog.py 1 main 1000000 1000000\n"
        "NEXT: 1 +1 1.500 LINE prog.py 2 main 9000000 8000000\n"
        "LAST: 2 +1 2.000 RETURN prog.py 2 main 9000000 0\n"
        "EOF\n"
    )
    out = memlens("import", "pymemtrace", "trace.log", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(memlens("export", cwd=tmp_path).stdout)
    assert doc["run"]["mode"] == "imported"
    assert doc["run"]["duration_s"] == 1.0
    assert doc["run"]["peak_rss_bytes"] == 9000000
    line = doc["files"][str(tmp_path / "prog.py")]["lines"]["2"]
    assert line["alloc_bytes"] == line["peak_bytes"] == 8000000
    bad = memlens("import", "pymemtrace", "prog.py", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr == "memlens: cannot read prog.py: not a pymemtrace log (no SOF line)\n"


@pytest.mark.parametrize(
    "blob",
    [
        b"SQLite format 3\x00" + b"\x00" * 200,  # a cut SQLite header
        b"hello, world\n",  # a text file
        b"",  # empty
    ],
)
def test_bad_run_file_is_one_line_everywhere(tmp_path: Path, blob: bytes) -> None:
    bad = tmp_path / "bad.mlrun"
    bad.write_bytes(blob)
    for args in (
        ("export", str(bad)),
        ("diff", str(bad), str(bad)),
        ("baseline", "set", str(bad)),
        ("show", str(bad)),
    ):
        out = memlens(*args, cwd=tmp_path)
        assert out.returncode == 2, args
        lines = out.stderr.splitlines()
        assert len(lines) == 1, out.stderr
        assert lines[0].startswith(f"memlens: cannot read {bad}: ")
        assert out.stdout == ""


def test_unreadable_run_in_the_store_is_listed_not_fatal(tmp_path: Path) -> None:
    _store_with_two_runs(tmp_path)
    broken = Store(tmp_path).runs_dir / "20261122-120000-3.mlrun"
    broken.write_bytes(b"not a run")
    out = memlens("runs", cwd=tmp_path)
    assert out.returncode == 0
    last = out.stdout.splitlines()[-1]
    assert last.startswith("20261122-120000-3")
    assert "unreadable: not a memlens run file" in last


KILLED = """
import os, signal, sys, time
import memlens
from memlens.tracing import tracer

tracer.start(checkpoint=sys.argv[1], checkpoint_interval_s=0.1, command=["killed.py"])
keep = [bytearray(1 << 20) for _ in range(3)]
deadline = time.monotonic() + 20
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(0.3)  # at least one checkpoint after the allocations
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_killed_program_leaves_a_readable_incomplete_run(tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    out = tmp_path / "k.mlrun"
    proc = subprocess.run(
        [sys.executable, str(script), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == -9, proc.stderr
    run = reader.read(out)
    assert run.info.complete is False
    assert run.info.exit_code is None
    assert run.info.command == ("killed.py",)
    assert run.info.peak_traced_bytes >= 3 << 20
    # What the export and the listing say about it.
    doc = json.loads(memlens("export", str(out), cwd=tmp_path).stdout)
    assert doc["run"]["complete"] is False
    # SIGKILL may land mid-checkpoint: then only a dot-named temporary is left beside the run.
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert all(n.startswith(".k.mlrun.") and n.endswith(".tmp") for n in leftovers)


def test_diff_on_a_terminal_is_a_rich_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    _store_with_two_runs(tmp_path)
    screen = Terminal()
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["diff", A_ID, B_ID, "--dir", str(tmp_path)]) == 0
    text = screen.getvalue()
    assert "\x1b[" in text  # coloured
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    assert f"memlens: peak per line, {A_ID} -> {B_ID}" in plain
    row = next(line for line in plain.splitlines() if "/work/app.py:5 (moved from 4)" in line)
    assert "40.0 MiB" in row
    assert "30.0 MiB" in row
    assert "−10.0 MiB" in row
    assert "−25%" in row


def test_prune_removes_stale_temporaries_only(tmp_path: Path) -> None:
    store = Store(tmp_path)
    run = store.runs_dir / f"{A_ID}.mlrun"
    writer.write(sample_run(), run)
    stale = store.runs_dir / f".{A_ID}.mlrun.0123456789ab.tmp"
    fresh = store.runs_dir / f".{B_ID}.mlrun.ba9876543210.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"being written")
    os.utime(stale, (1, 1))
    assert memlens("runs", "prune", "--keep", "5", cwd=tmp_path).returncode == 0
    assert not stale.exists()
    assert fresh.exists()  # a writer may still be at work
    assert store.run_files() == [run]


def test_show_timeline_draws_the_peak_in_the_terminal_and_as_svg(tmp_path: Path) -> None:
    (tmp_path / "grow.py").write_text(
        "import time\nkeep = []\nfor i in range(20):\n"
        "    keep.append(bytearray(1 << 20))\n    time.sleep(0.01)\ndel keep\n"
    )
    assert memlens("run", "--no-report", "grow.py", cwd=tmp_path).returncode == 0
    shown = memlens("show", "--timeline", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "▲ peak" in shown.stdout
    assert "held most at the peak:" in shown.stdout
    assert "grow.py:4" in shown.stdout
    written = memlens("show", "--timeline", "--svg", "t.svg", "--html", "t.html", cwd=tmp_path)
    assert written.returncode == 0
    assert (tmp_path / "t.svg").read_text().startswith("<svg ")
    assert "<svg " in (tmp_path / "t.html").read_text()
    # A file asked for is the timeline's: --timeline goes without saying.
    for option, name in (("--svg", "u.svg"), ("--html", "u.html")):
        alone = memlens("show", option, name, cwd=tmp_path)
        assert alone.returncode == 0, alone.stderr
        assert alone.stdout == ""
        assert alone.stderr == f"memlens: timeline written to {name}\n"
        assert "<svg " in (tmp_path / name).read_text()
    bad = memlens("show", "--timeline", "--svg", str(tmp_path / "no" / "dir.svg"), cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("memlens: cannot write")


def test_program_and_test_runs_have_their_own_latest_and_baseline(tmp_path: Path) -> None:
    """A test suite's run (pytest --memlens) is the newest run, yet the program's latest and
    baseline stay; `baseline set` sets the baseline of the run's kind."""
    store = Store(tmp_path)
    program = store.runs_dir / f"{A_ID}.mlrun"
    tests = store.runs_dir / f"{B_ID}.mlrun"
    writer.write(sample_run(), program)
    writer.write(
        replace(sample_run(), info=replace(sample_run().info, command=("pytest", "-q"))), tests
    )
    store.point_latest(program)
    store.point_latest(tests, "tests")
    assert (store.latest(), store.latest("program"), store.latest("tests")) == (
        tests,
        program,
        tests,
    )
    for run in (A_ID, B_ID):
        assert memlens("baseline", "set", run, cwd=tmp_path).returncode == 0
    assert (store.baseline("program"), store.baseline("tests"), store.baseline()) == (
        program,
        tests,
        program,
    )
    shown = memlens("baseline", "show", cwd=tmp_path).stdout.splitlines()
    assert shown[0].startswith(A_ID)
    assert shown[2].startswith(B_ID)
    assert shown[2].endswith("pytest -q  (baseline of test runs)")
    assert memlens("show", "latest-program", "--top", "1", cwd=tmp_path).returncode == 0
    # `memlens diff` compares the latest run (a test run) with the baseline of its kind.
    diffed = json.loads(memlens("diff", "--json", cwd=tmp_path).stdout)
    assert (diffed["a"], diffed["b"]) == (str(tests), str(tests))
    cleared = memlens("baseline", "clear", "--kind", "tests", cwd=tmp_path)
    assert cleared.stderr.strip() == "memlens: baseline of tests runs cleared"
    assert (store.baseline("program"), store.baseline("tests")) == (program, None)


def test_a_store_made_before_kinds_reads_as_before(tmp_path: Path) -> None:
    """Only `latest` and `baseline` (older memlens): the latest run of each kind is found, and a
    `baseline` naming a test run is the test runs' baseline, never the programs'."""
    store = Store(tmp_path)
    runs = [store.runs_dir / f"20261122-1{i}0000-{i}.mlrun" for i in range(3)]
    commands = [("python", "app.py"), ("pytest",), ("python", "app.py")]
    for path, command in zip(runs, commands, strict=True):
        writer.write(replace(sample_run(), info=replace(sample_run().info, command=command)), path)
    store.set_pointer("latest", runs[1])
    store.set_pointer("baseline", runs[1])
    assert store.latest("tests") == runs[1]
    assert store.latest("program") == runs[2]  # the newest program run
    assert (store.baseline("tests"), store.baseline("program")) == (runs[1], None)
    assert store.resolve("baseline-tests") == runs[1]
    # Once memlens writes a kind's pointer, it is what counts for that kind.
    store.point_latest(runs[0])
    assert store.latest("program") == runs[0]
    # prune never removes a baseline of either kind.
    store.set_pointer("baseline", runs[0])
    store.set_pointer("baseline-tests", runs[1])
    store.prune(0)
    assert store.run_files() == runs[:2]


def test_odd_entries_in_the_store_give_one_line(tmp_path: Path) -> None:
    """A run file named with bytes that are not UTF-8, a directory named like a run file, a
    header integer of 10**400: listed, shown or refused in one line each, never a traceback."""
    store = Store(tmp_path)
    good = store.runs_dir / f"{A_ID}.mlrun"
    writer.write(sample_run(), good)
    odd = os.fsdecode(bytes(store.runs_dir) + b"/\xff\xfeodd.mlrun")
    writer.write(sample_run(), odd)
    (store.runs_dir / "20261122-120000-3.mlrun").mkdir()
    huge = store.runs_dir / "20261122-130000-4.mlrun"
    writer.write(sample_run(), huge)
    con = sqlite3.connect(huge)
    header = json.loads(con.execute("SELECT value FROM meta WHERE key='run'").fetchone()[0])
    header["peak_traced_bytes"] = 10**400
    con.execute("UPDATE meta SET value = ? WHERE key = 'run'", (json.dumps(header),))
    con.commit()
    con.close()

    listed = memlens("runs", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr == ""
    rows = listed.stdout.splitlines()[1:]
    assert [r.split()[0] for r in rows] == [A_ID, "20261122-130000-4", "\\udcff\\udcfeodd"]
    assert "unreadable: bad run header: peak_traced_bytes is out of range" in rows[1]
    as_json = memlens("runs", "--json", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    assert [e["id"] for e in json.loads(as_json.stdout)] == [
        A_ID, "20261122-130000-4", "\udcff\udcfeodd",
    ]  # fmt: skip
    for args in (("show", "20261122-13"), ("show", "20261122-120000-3.mlrun")):
        proc = memlens(*args, cwd=tmp_path)
        assert proc.returncode == 2
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith("memlens: cannot read "), proc.stderr
    shown = memlens("show", odd, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    pruned = memlens("runs", "prune", "--keep", "0", cwd=tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stderr == "memlens: removed 3 run(s), kept 0\n"
    assert (store.runs_dir / "20261122-120000-3.mlrun").is_dir()  # not a run: not removed


def test_a_read_only_store_gives_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runs prune` and `baseline set` where the store cannot be changed (a read-only mount;
    simulated: tests may run as root, which permissions do not stop)."""
    a, _ = _store_with_two_runs(tmp_path)

    def refused(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(args[0]))

    monkeypatch.setattr(os, "unlink", refused)
    monkeypatch.setattr(os, "replace", refused)
    monkeypatch.setattr(Path, "unlink", refused)
    for args, action in (
        (["runs", "prune", "--keep", "0"], "remove"),
        (["baseline", "set", A_ID], "write"),
        (["baseline", "clear"], "remove"),
    ):
        assert main([*args, "--dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"memlens: cannot {action} "), err
        assert err.endswith(": Read-only file system\n"), err
        assert len(err.splitlines()) == 1
    assert a.exists()


def test_prune_removes_processes_folders_whose_run_is_gone(tmp_path: Path) -> None:
    """A program that followed its children and ended before its first checkpoint (or whose
    run was removed by hand) leaves a processes folder that no run lists: prune removes it
    once it is an hour old (a fresh one may belong to a program still starting)."""
    store = Store(tmp_path)
    run = store.runs_dir / f"{A_ID}.mlrun"
    writer.write(sample_run(), run)
    kept = store.runs_dir / f"{A_ID}.processes"  # its run is there
    orphan = store.runs_dir / f"{B_ID}.processes"
    fresh = store.runs_dir / "20261122-120000-3.processes"
    for folder in (kept, orphan, fresh):
        folder.mkdir()
        writer.write(sample_run(), folder / "4243.mlrun")
    for folder in (kept, orphan):
        os.utime(folder, (1, 1))
    assert memlens("runs", "prune", "--keep", "5", cwd=tmp_path).returncode == 0
    assert not orphan.exists()
    assert kept.exists()
    assert fresh.exists()
