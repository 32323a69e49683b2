"""Hostile workspaces: nothing a folder carries can hang, exhaust or inject.

Every command that reads the store meets hostile pointer files (a FIFO, a link to /dev/zero or
to the reader's own stdin, bytes that are not UTF-8...) and hostile run files (a view that
loops forever, a column DEFAULT that multiplies the file, a trigger): each ends well within
10 s with one line on stderr and exit code 2.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlens.model import CallNode, FunctionStats, LineStats, SourceFile, replace
from memlens.report import render
from memlens.runfile import reader, writer
from memlens.runfile.schema import FORMAT_VERSION
from memlens.store import Store
from tests.hostile import (
    ESCAPES,
    POINTER_KINDS,
    default_bomb,
    hostile_pointer,
    trigger_run,
    view_bomb,
)
from tests.runs import MIB, sample_run

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev/zero")

#: Commands that read the store; each must fail cleanly on a hostile one.
READERS: list[tuple[str, ...]] = [
    ("show",),
    ("annotate", "app.py"),
    ("export",),
    ("flow",),
    ("diff",),
    ("diff", "latest", "latest"),
    ("baseline", "show"),
    ("baseline", "set", "latest"),
]
#: Generous bound on one command (the hostile cases take milliseconds; the bound is for a busy
#: machine, and the point is that nothing waits forever).
BOUND_S = 10.0


def _memlens(cwd: Path, *args: str) -> tuple[int, str, str, float]:
    """Run `memlens ARGS` with a stdin pipe that stays open (as a terminal's would)."""
    read_end, write_end = os.pipe()
    began = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "memlens", *args],
            cwd=cwd,
            stdin=read_end,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - began


def _assert_one_line_error(cwd: Path, args: tuple[str, ...], reason: str) -> None:
    code, out, err, took = _memlens(cwd, *args)
    assert took < BOUND_S, (args, took)
    assert code == 2, (args, code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1, (args, err)
    assert lines[0].startswith("memlens: "), (args, err)
    assert reason in lines[0], (args, err)
    assert "Traceback" not in err


@pytest.mark.parametrize("kind", POINTER_KINDS)
def test_hostile_pointers_alone_give_one_line_errors(tmp_path: Path, kind: str) -> None:
    runs = Store(tmp_path).runs_dir
    elsewhere = writer.write(sample_run(), tmp_path / "elsewhere.mlrun")
    for name in ("latest", "baseline"):
        hostile_pointer(runs, name, kind, elsewhere)
    reason = {
        "fifo": "not a regular file",
        "dev-zero": "is a symbolic link",
        "stdin": "is a symbolic link",
        "non-utf8": "not UTF-8 text",
        "huge": "larger than 4096 bytes",
        "outside": "names a run outside the store",
        "dotdot": "names a run outside the store",
    }[kind]
    for args in READERS:
        _assert_one_line_error(tmp_path, args, reason)
    # The listing has nothing to list, and says so, also in time.
    code, out, err, took = _memlens(tmp_path, "runs")
    assert took < BOUND_S
    assert (code, out) == (0, "")
    assert "no runs in" in err


@pytest.mark.parametrize("kind", POINTER_KINDS)
def test_a_hostile_pointer_is_ignored_with_one_message(tmp_path: Path, kind: str) -> None:
    store = Store(tmp_path)
    good = writer.write(sample_run(), store.runs_dir / "20261122-100000-1.mlrun")
    elsewhere = writer.write(sample_run(exit_code=3), tmp_path / "elsewhere.mlrun")
    hostile_pointer(store.runs_dir, "latest", kind, elsewhere)
    code, out, err, took = _memlens(tmp_path, "show")
    assert took < BOUND_S
    assert code == 0, err
    assert "app.py:4" in out  # the store's newest run, not the file outside it
    warnings = err.splitlines()
    assert len(warnings) == 1
    assert warnings[0].startswith("memlens: warning: ignoring .memlens/runs/latest: ")
    code, out, err, _ = _memlens(tmp_path, "runs", "--json")
    assert code == 0
    assert '"latest": true' in out
    assert good.stem in out
    assert len(err.splitlines()) == 1


def _bombs(tmp_path: Path) -> dict[str, Path]:
    runs = Store(tmp_path).runs_dir
    runs.mkdir(parents=True)
    return {
        "view": view_bomb(runs / "20261122-100000-1.mlrun"),
        "default": default_bomb(runs / "20261122-100000-2.mlrun"),
        "small-default": default_bomb(
            runs / "20261122-100000-3.mlrun", rows=20, default_bytes=1000
        ),
        "trigger": trigger_run(runs / "20261122-100000-4.mlrun"),
    }


def test_bomb_runs_give_one_line_errors(tmp_path: Path) -> None:
    bombs = _bombs(tmp_path)
    store = Store(tmp_path)
    reasons = {
        "view": "corrupt file (unexpected schema: meta is a view)",
        # SQLite's own length limit stops it while reading the schema (Python 3.11+); without
        # setlimit the schema check does, as for the small one.
        "default": "corrupt",
        "small-default": "unexpected schema: table files is not as format version "
        f"{FORMAT_VERSION} defines it",
        "trigger": "unexpected schema: trigger t",
    }
    for kind, path in bombs.items():
        for pointer in ("latest", "baseline"):
            (store.runs_dir / pointer).write_text(path.name + "\n")
        for args in READERS:
            _assert_one_line_error(tmp_path, args, reasons[kind])
        _assert_one_line_error(tmp_path, ("show", str(path)), reasons[kind])
    code, out, err, took = _memlens(tmp_path, "runs")
    assert took < BOUND_S
    assert code == 0, err
    rows = out.splitlines()[1:]
    assert len(rows) == len(bombs)
    assert all("unreadable: " in row for row in rows)


def test_links_out_of_the_store_are_not_runs(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.runs_dir.mkdir(parents=True)
    outside = writer.write(sample_run(), tmp_path / "outside.mlrun")
    (store.runs_dir / "20261122-100000-1.mlrun").symlink_to(outside)
    (store.runs_dir / "20261122-100000-2.mlrun").symlink_to("/dev/zero")
    os.mkfifo(store.runs_dir / "20261122-100000-3.mlrun")
    _assert_one_line_error(tmp_path, ("show",), "no runs yet")
    _assert_one_line_error(tmp_path, ("show", "20261122-100000-1"), "outside the store")
    _assert_one_line_error(tmp_path, ("show", "20261122-100000-2"), "outside the store")
    _assert_one_line_error(tmp_path, ("show", "20261122-100000-3"), "not a regular file")
    code, out, err, took = _memlens(tmp_path, "runs")
    assert took < BOUND_S
    assert code == 0
    assert out.count("unreadable: a link to a file outside the store") == 2
    assert out.count("unreadable: not a regular file") == 1
    # A pointer is only ever set to a run of the store; one from elsewhere is copied in.
    code, _, err, _ = _memlens(tmp_path, "baseline", "set", str(outside))
    assert code == 0, err
    assert (store.runs_dir / "baseline").read_text() == "outside.mlrun\n"
    assert (store.runs_dir / "outside.mlrun").read_bytes() == outside.read_bytes()


def _escaping_run(path: str) -> object:
    """A run whose every recorded string carries terminal escapes."""
    run = sample_run(path=path, text=f"import x\n\ndef load():  # {ESCAPES}\n    return 1\n")
    sf = run.files[path]
    name = f"load{ESCAPES}"
    sf = replace(
        sf,
        functions=(FunctionStats(name, 3, 4, 40 * MIB, 1200, 30 * MIB, 40 * MIB),),
        lines={3: LineStats(alloc_bytes=MIB, peak_bytes=MIB), **sf.lines},
    )
    nodes = (
        CallNode(0, -1, path, 6, f"<module>{ESCAPES}", 1024, 3, 1024, 1024),
        CallNode(1, 0, path, 4, name, 40 * MIB, 1200, 30 * MIB, 40 * MIB),
    )
    info = replace(run.info, command=("python", f"app{ESCAPES}.py"), mode=f"exact{ESCAPES}")
    return replace(run, info=info, files={path: sf}, call_tree=nodes)


def _no_control_characters(text: str) -> None:
    bad = sorted({c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0})
    assert not bad, bad
    assert "\u202e" not in text


def test_no_escape_sequence_reaches_the_terminal(tmp_path: Path) -> None:
    store = Store(tmp_path)
    path = str(tmp_path / f"dir{ESCAPES}" / "app.py")
    run = _escaping_run(path)
    assert isinstance(run, type(sample_run()))
    a = writer.write(run, store.runs_dir / f"20261122-100000-1{ESCAPES}.mlrun")
    b = writer.write(
        replace(run, files={path: replace(run.files[path], sha256="cd" * 32)}),
        store.runs_dir / "20261122-110000-1.mlrun",
    )
    store.set_pointer("baseline", a)
    store.set_pointer("latest", b)
    (store.runs_dir / f"20261122-120000-1{ESCAPES}.mlrun").write_bytes(b"garbage")
    outputs = []
    for args in [
        ("show",),
        ("show", "--by", "alloc"),
        ("annotate", "app.py"),
        ("runs",),
        ("diff",),
        ("diff", "--by", "alloc"),
        ("flow",),
        ("baseline", "show"),
        ("show", f"20261122-120000-1{ESCAPES}"),
        ("annotate", f"x{ESCAPES}.py"),
    ]:
        code, out, err, _ = _memlens(tmp_path, *args)
        outputs.append((args, code, out, err))
        _no_control_characters(out + err)
    shown = {args[0]: out for args, _, out, _ in outputs if args in (("show",), ("runs",))}
    assert "\\x1b]0;pwned\\x07" in shown["show"]  # visible as an escape, not acted upon
    assert "\\x1b" in shown["runs"]
    assert all(code in (0, 2) for _, code, _, _ in outputs)


def test_rich_report_prints_no_escape_from_a_run(tmp_path: Path) -> None:
    run = _escaping_run(str(tmp_path / "app.py"))
    assert isinstance(run, type(sample_run()))
    out = io.StringIO()  # not a terminal: rich adds no colour, so any ESC came from the run
    render(run, out, rich_output=True)
    _no_control_characters(out.getvalue())
    assert "\\x1b[31mred" in out.getvalue()


def test_source_file_records_are_untouched_by_display(tmp_path: Path) -> None:
    # What is printed is made safe; what is stored and exported stays as recorded.
    path = str(tmp_path / "app.py")
    run = _escaping_run(path)
    assert isinstance(run, type(sample_run()))
    written = writer.write(run, tmp_path / "r.mlrun")
    back = reader.read(written)
    assert back == run
    sf: SourceFile = back.files[path]
    assert ESCAPES in (sf.text or "")


def test_import_of_a_huge_rss_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "huge.log").write_text(
        "SOF\nHEDR: Event dEvent Clock What File Line Function RSS dRSS\n"
        "FRST: 0 +0 1.000 LINE prog.py 1 main 1000000 1000000\n"
        "NEXT: 1 +1 1.500 LINE prog.py 2 main 99999999999999999999999 8000000\nEOF\n"
    )
    _assert_one_line_error(
        tmp_path, ("import", "pymemtrace", "huge.log"), "line 4: RSS out of range"
    )
    assert not Store(tmp_path).runs_dir.exists()
