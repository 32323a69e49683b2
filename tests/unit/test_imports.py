"""Importing tracemalloc snapshots and pymemtrace logs."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from memlens.errors import MemlensError
from memlens.imports.pymemtrace_import import import_log
from memlens.imports.tracemalloc_import import PICKLE_WARNING, import_snapshot

HERE = str(Path(__file__).resolve())


def _allocate() -> list[bytearray]:
    return [bytearray(1 << 20) for _ in range(4)]  # the line under test


def test_tracemalloc_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tracemalloc.start(10)
    try:
        keep = _allocate()
        snap = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    path = tmp_path / "snap.pickle"
    snap.dump(str(path))
    run = import_snapshot(str(path))
    assert PICKLE_WARNING in capsys.readouterr().err
    assert run.info.mode == "imported"
    assert run.info.source == "tracemalloc"
    lines = run.files[HERE].lines
    line = _allocate.__code__.co_firstlineno + 1
    assert 4 << 20 <= lines[line].live_bytes < (4 << 20) + 8192
    assert lines[line].alloc_bytes == lines[line].live_bytes
    caller = min(ln for ln, s in lines.items() if s.incl_live_bytes >= 4 << 20 and ln > line)
    assert lines[caller].incl_live_bytes >= 4 << 20
    assert keep


def test_not_a_snapshot(tmp_path: Path) -> None:
    bad = tmp_path / "x.pickle"
    bad.write_bytes(b"garbage")
    with pytest.raises(MemlensError, match="not a tracemalloc snapshot"):
        import_snapshot(str(bad))


LOG = """\
Hello World
SOF
HEDR: Event  dEvent  Clock        What     File                Line Function        RSS       dRSS
FRST: 0      +0      3.090020     LINE     {f}  1 main      41463808  41463808
NEXT: 1      +1      3.090202     LINE     {f}  2 main      41472000  4096
MSG:  2      +1      3.090208     # Level 0 __enter__
PREV: 2      +1      3.090208
NEXT: 9      +8      3.090725     LINE     {f}  3 populate_list   42524672  1052672
PREV: 9      +8      3.090725     LINE     {f}  3 populate_list   42524672  1052672
NEXT: 11     +2      3.091224     LINE     {f}  3 populate_list   43577344  1052672
NEXT: 12     +1      3.091300     LINE     {f}  4 main   43573248  -4096
LAST: 675    +274    3.097455     LINE     {f}  2 main      43573248  0
EOF
"""


def test_pymemtrace_log(tmp_path: Path) -> None:
    src = tmp_path / "prog.py"
    src.write_text("def main():\n    x = 1\n    big = [0] * 10\n    del big\n")
    log = tmp_path / "20260227_122119_14_50260_T_2_PY3.12.1.log"
    log.write_text(LOG.format(f="prog.py"))
    run = import_log(str(log))
    assert run.info.source == "pymemtrace"
    assert run.info.python == "3.12.1"
    assert run.info.started.startswith("2026-02-27T12:21:19")
    assert run.info.peak_rss_bytes == 43577344
    sf = run.files["prog.py"]
    assert sf.text == src.read_text()
    assert sf.lines[3].alloc_bytes == 2 * 1052672  # PREV rows are not counted again
    assert sf.lines[3].alloc_count == 2
    assert sf.lines[3].peak_bytes == 2 * 1052672
    assert sf.lines[2].alloc_bytes == 4096
    assert sf.lines[4].alloc_bytes == 0
    assert sf.lines[4].live_bytes == 0  # net -4096 is clamped
    assert len(run.timeline) == 6


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("nothing here\n", "not a pymemtrace log"),
        ("SOF\nHEDR: x\nEOF\n", "the log has no events"),
        ("SOF\nNEXT: 1 +1 zz LINE f.py 3 main 10 10\nEOF\n", "bad event on line 2"),
    ],
)
def test_bad_pymemtrace_logs(tmp_path: Path, text: str, reason: str) -> None:
    log = tmp_path / "bad.log"
    log.write_text(text)
    with pytest.raises(MemlensError, match=reason):
        import_log(str(log))
