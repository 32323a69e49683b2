"""Terminal reports from hand-made runs (no tracer needed)."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
import rich.console

from memlens.annotate import line_label
from memlens.errors import MemlensError
from memlens.model import NAMED_FIGURES, LineStats, LineTable, ProcessInfo, Run, replace
from memlens.report import display_path, find_file, listing, render, top_lines
from memlens.runfile import reader, writer
from tests.runs import new_run, source

MiB = 1024 * 1024
MAIN = "/proj/app/main.py"
UTIL = "/proj/app/util.py"

MAIN_TEXT = """\
import os

def build():
    big = bytearray(40 * 1024 * 1024)
    return big




cache = [build() for _ in range(2)]
print(len(cache))
"""


def make_run(complete: bool = True) -> Run:
    main_lines = {
        4: LineStats(
            alloc_bytes=80 * MiB,
            alloc_count=2,
            live_bytes=80 * MiB,
            live_count=2,
            peak_bytes=80 * MiB,
        ),
        10: LineStats(alloc_bytes=3 * MiB, alloc_count=30, live_bytes=0, peak_bytes=1 * MiB),
    }
    util_lines = {
        1: LineStats(alloc_bytes=90 * MiB, alloc_count=9000, live_bytes=0, peak_bytes=19 * MiB)
    }
    return new_run(
        [
            source(MAIN, MAIN_TEXT, main_lines, sha256="x"),
            source(UTIL, "tmp = [bytes(10_000) for _ in range(9000)]\n", util_lines, sha256="y"),
        ],
        command=("python", MAIN),
        duration_s=2.5,
        exit_code=0 if complete else None,
        peak_traced_bytes=100 * MiB,
        peak_rss_bytes=120 * MiB,
        complete=complete,
    )


def test_top_lines_by_each_figure() -> None:
    run = make_run()
    peak = top_lines(run, "peak", 10)
    assert [(r.rank, r.file, r.line, r.value) for r in peak] == [
        (1, MAIN, 4, 80 * MiB),
        (2, UTIL, 1, 19 * MiB),
        (3, MAIN, 10, 1 * MiB),
    ]
    assert peak[0].share_of_peak == pytest.approx(0.8)
    assert peak[0].source == "big = bytearray(40 * 1024 * 1024)"
    assert [(r.file, r.line) for r in top_lines(run, "alloc", 2)] == [(UTIL, 1), (MAIN, 4)]
    # Lines with nothing live are not listed by "live".
    assert [(r.file, r.line) for r in top_lines(run, "live", 10)] == [(MAIN, 4)]


def test_top_lines_rank_as_defined_with_ties_files_and_zeros() -> None:
    """Largest figure first, then by file and line; lines at 0 left out; for any n, from
    line tables and from plain mappings alike (the ranking keeps a file's n best first)."""
    rnd = random.Random(7)
    files = {}
    for k in range(4):
        lines = {
            ln: LineStats(alloc_bytes=rnd.choice([0, 0, 1, 2, 3, 50]), peak_bytes=rnd.randrange(4))
            for ln in rnd.sample(range(1, 60), 30)
        }
        files[f"/proj/m{k}.py"] = dict(sorted(lines.items()))
    for as_table in (True, False):
        run = new_run(
            [source(f, "", LineTable.of(ls) if as_table else ls) for f, ls in files.items()]
        )
        assert isinstance(run.files["/proj/m0.py"].lines, LineTable) is as_table
        for by, attr in (("alloc", "alloc_bytes"), ("peak", "peak_bytes")):
            want = sorted(
                (-getattr(st, attr), f, ln)
                for f, lines in files.items()
                for ln, st in lines.items()
                if getattr(st, attr) > 0
            )
            for n in (None, 1, 5, 17, 200):
                got = [(-r.value, r.file, r.line) for r in top_lines(run, by, n)]
                assert got == (want if n is None else want[:n]), (as_table, by, n)


def test_listing_keeps_context_and_elides_gaps() -> None:
    run = make_run()
    rows = listing(run, MAIN, "peak", context=1)
    assert [(r.line, r.text) for r in rows] == [
        (3, "def build():"),
        (4, "    big = bytearray(40 * 1024 * 1024)"),
        (5, "    return big"),
        (0, "..."),
        (9, ""),
        (10, "cache = [build() for _ in range(2)]"),
        (11, "print(len(cache))"),
    ]
    assert rows[1].label == line_label(run.files[MAIN].lines[4], "peak")
    assert rows[0].label == ""
    whole = listing(run, MAIN, "peak", whole=True)
    assert [r.line for r in whole] == list(range(1, 12))


def test_plain_report_first_row_and_listing() -> None:
    out = io.StringIO()
    render(make_run(), out, by="peak", top=2, rich_output=False)
    lines = out.getvalue().splitlines()
    label = line_label(make_run().files[MAIN].lines[4], "peak")
    assert lines == [
        "memlens: peak 100.0 MiB traced · peak RSS 120.0 MiB · 2.50 s · exact",
        "",
        "  #  line                     peak  allocs  share of peak  live at exit  code",
        (
            "  1  /proj/app/main.py:4  80.0 MiB       2            80%      80.0 MiB"
            "  big = bytearray(40 * 1024 * 1024)"
        ),
        (
            "  2  /proj/app/util.py:1  19.0 MiB    9.0k            19%           0 B"
            "  tmp = [bytes(10_000) for _ in range(9000)]"
        ),
        "",
        "/proj/app/main.py:",
        "   2",
        "   3  def build():",
        f"   4      big = bytearray(40 * 1024 * 1024)  # {label}",
        "   5      return big",
        "   6",
        "      ...",
        "   8",
        "   9",
        "  10  cache = [build() for _ in range(2)]  # 1.0 MiB at peak · 30 allocs",
        "  11  print(len(cache))",
    ]
    assert label == "80.0 MiB at peak · 2 allocs"


def test_plain_report_marks_incomplete_runs_and_empty_runs() -> None:
    out = io.StringIO()
    render(make_run(complete=False), out, rich_output=False, show_listing=False)
    first = out.getvalue().splitlines()[0]
    assert first.endswith("· INCOMPLETE (the program did not finish)")
    empty = new_run(run_info=make_run().info)
    out = io.StringIO()
    render(empty, out, rich_output=False)
    assert out.getvalue().splitlines()[1] == "memlens: no allocations were attributed to any line"


def test_rich_report_has_the_same_rows() -> None:
    pytest.importorskip("rich")
    out = io.StringIO()
    render(make_run(), out, by="peak", top=2, rich_output=True)  # 80 columns: no code column
    lines = out.getvalue().splitlines()
    assert lines[0] == "memlens: peak 100.0 MiB traced · peak RSS 120.0 MiB · 2.50 s · exact"
    rows = [ln.replace("│", " ").split() for ln in lines if "/proj/app/" in ln and "│" in ln]
    assert rows == [
        ["1", f"{MAIN}:4", "80.0", "MiB", "2", "80%", "80.0", "MiB"],
        ["2", f"{UTIL}:1", "19.0", "MiB", "9.0k", "19%", "0", "B"],
    ]
    assert "   4      big = bytearray(40 * 1024 * 1024)  80.0 MiB at peak · 2 allocs" in lines


def test_rich_report_does_not_read_code_as_markup() -> None:
    pytest.importorskip("rich")

    out = io.StringIO()
    original = rich.console.Console.__init__

    def wide(self: rich.console.Console, *args: object, **kwargs: object) -> None:
        kwargs["width"] = 160
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rich.console.Console, "__init__", wide)
        render(make_run(), out, top=2, rich_output=True, show_listing=False)
    assert "tmp = [bytes(10_000) for _ in range(9000)]" in out.getvalue()


def test_display_path_and_find_file() -> None:
    assert display_path("/proj/app/main.py", cwd="/proj") == "app/main.py"
    assert display_path("/elsewhere/x.py", cwd="/proj") == "/elsewhere/x.py"
    run = make_run()
    assert find_file(run, "main.py") == MAIN
    assert find_file(run, "app/util.py") == UTIL
    with pytest.raises(MemlensError, match=r"the run has no figures for nope\.py"):
        find_file(run, "nope.py")


def kept_after_peak_run() -> Run:
    """50 MiB transient at the peak, then 5 MiB allocated and kept to exit (peak figure 0)."""
    text = "scratch = bytearray(50 << 20)\ndel scratch\nkept = bytearray(5 << 20)\n"
    lines = {
        1: LineStats(alloc_bytes=50 * MiB, alloc_count=1, peak_bytes=50 * MiB),
        3: LineStats(alloc_bytes=5 * MiB, alloc_count=1, live_bytes=5 * MiB, live_count=1),
    }
    return new_run([source(MAIN, text, lines, sha256="z")], run_info=make_run().info)


def test_lines_kept_after_the_peak_get_their_own_table() -> None:
    out = io.StringIO()
    render(kept_after_peak_run(), out, rich_output=False, show_listing=False)
    assert out.getvalue().splitlines()[2:] == [
        "  #  line                     peak  allocs  share of peak  live at exit  code",
        "  1  /proj/app/main.py:1  50.0 MiB       1            50%           0 B  scratch = bytearray(50 << 20)",
        "",
        "live at exit (what the program still held when it ended):",
        "  #  line                 live at exit  allocs  share of peak  code",
        "  1  /proj/app/main.py:3       5.0 MiB       1             0%  kept = bytearray(5 << 20)",
    ]


def test_an_attached_run_says_what_it_does_not_count_and_when_live_was_taken() -> None:
    run = kept_after_peak_run()
    attached = replace(run, info=replace(run.info, attached=True))
    out = io.StringIO()
    render(attached, out, rich_output=False, show_listing=False)
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("· attached: what the process allocated before is not counted")
    assert lines[5] == "live at detach (what the process still held when memlens detached):"


def test_no_leak_table_when_the_first_one_shows_every_live_line() -> None:
    out = io.StringIO()
    render(make_run(), out, rich_output=False, show_listing=False)  # MAIN:4, live, is shown
    assert "live at exit (" not in out.getvalue()
    # ... but with --top 1 and an allocation ranking the live line is missed: it follows.
    out = io.StringIO()
    render(make_run(), out, by="alloc", top=1, rich_output=False, show_listing=False)
    text = out.getvalue().splitlines()
    assert text[3].split()[:2] == ["1", f"{UTIL}:1"]
    assert text[5] == "live at exit (what the program still held when it ended):"
    assert text[7].split()[:4] == ["1", f"{MAIN}:4", "80.0", "MiB"]


def test_ranked_by_live_the_table_has_no_duplicate_column() -> None:
    out = io.StringIO()
    render(make_run(), out, by="live", rich_output=False, show_listing=False)
    assert out.getvalue().splitlines()[2:] == [
        "  #  line                 live at exit  allocs  share of peak  code",
        "  1  /proj/app/main.py:4      80.0 MiB       2            80%  big = bytearray(40 * 1024 * 1024)",
    ]
    assert "live at exit (" not in out.getvalue()  # no second table: this one is it


def test_rich_leak_table() -> None:
    pytest.importorskip("rich")
    out = io.StringIO()
    render(kept_after_peak_run(), out, rich_output=True, show_listing=False)
    lines = out.getvalue().splitlines()
    title = lines.index("live at exit (what the program still held when it ended):")
    rows = [ln.replace("│", " ").split() for ln in lines[title:] if "/proj/app/" in ln]
    assert rows == [["1", f"{MAIN}:3", "5.0", "MiB", "1", "0%"]]


def test_top_none_lists_every_line() -> None:
    run = make_run()
    assert len(top_lines(run, "alloc", None)) == 3
    out = io.StringIO()
    render(run, out, by="alloc", top=None, rich_output=False, show_listing=False)
    assert [ln.split()[0] for ln in out.getvalue().splitlines()[3:]] == ["1", "2", "3"]


def test_imported_runs_say_what_was_not_recorded() -> None:
    run = make_run()
    imported = replace(
        run, info=replace(run.info, mode="imported", source="tracemalloc", duration_s=0.0)
    )
    imported = replace(imported, info=replace(imported.info, peak_rss_bytes=0))
    out = io.StringIO()
    render(imported, out, rich_output=False, show_listing=False)
    assert out.getvalue().splitlines()[0] == (
        "memlens: peak 100.0 MiB traced · peak RSS not recorded · duration not recorded · "
        "imported from tracemalloc"
    )
    # A pymemtrace log knows both.
    logged = replace(run, info=replace(run.info, mode="imported", source="pymemtrace"))
    out = io.StringIO()
    render(logged, out, rich_output=False, show_listing=False)
    assert out.getvalue().splitlines()[0] == (
        "memlens: peak 100.0 MiB traced · peak RSS 120.0 MiB · 2.50 s · imported from pymemtrace"
    )


def _many_lines_run() -> Run:
    text = "".join(f"x{n} = bytearray({n})\n" for n in range(1, 31))
    lines = {
        n: LineStats(alloc_bytes=n * 100, alloc_count=1, peak_bytes=n * 100) for n in range(1, 31)
    }
    lines[31] = LineStats(alloc_bytes=10, alloc_count=1)  # allocated, held nothing at the peak
    return new_run([source(MAIN, text + "del x1\n", lines)], peak_traced_bytes=100_000)


def test_the_listing_labels_the_top_lines_and_can_be_left_out() -> None:
    """A big file's listing labels the --top lines with the largest figure, not every line
    that allocated; --no-listing leaves it out."""
    out = io.StringIO()
    render(_many_lines_run(), out, top=3, rich_output=False)
    listed = out.getvalue().split(f"\n{MAIN}:\n", 1)[1].splitlines()
    labelled = [line.split()[0] for line in listed if "  # " in line]
    assert labelled == ["28", "29", "30"]
    assert listed[0] == "  26  x26 = bytearray(26)"  # (two lines of context before)
    everything = io.StringIO()
    render(_many_lines_run(), everything, top=None, rich_output=False)
    assert everything.getvalue().count(" at peak · ") == 31
    for rich_output in (False, True):
        bare = io.StringIO()
        render(_many_lines_run(), bare, top=3, rich_output=rich_output, show_listing=False)
        assert f"\n{MAIN}:\n" not in bare.getvalue()
        assert "main.py:30" in bare.getvalue()  # the table is there


def test_sampled_figures_are_shown_as_estimates() -> None:
    stats = LineStats(
        alloc_bytes=8 * MiB, alloc_count=1200, peak_bytes=8 * MiB, peak_err=0.4 * MiB,
        live_bytes=4 * MiB, live_err=0.2 * MiB,
    )  # fmt: skip
    run = new_run(
        [source(MAIN, "data = load()\n", {1: stats})],
        mode="sampling",
        sample_interval_bytes=128 * 1024,
        peak_traced_bytes=10 * MiB,
    )
    out = io.StringIO()
    render(run, out, rich_output=False, show_listing=False)
    row = out.getvalue().splitlines()[3]
    assert row.split() == [
        "1", f"{MAIN}:1", "~8.0", "MiB", "±5%", "~1.2k", "80%", "~4.0", "MiB", "±5%", "data",
        "=", "load()",
    ]  # fmt: skip


def test_shares_past_the_peak_of_several_processes_are_explained() -> None:
    each = LineStats(alloc_bytes=60 * MiB, alloc_count=1, peak_bytes=60 * MiB)
    processes = (
        ProcessInfo(10, 1, ("app",), True, 60 * MiB),
        ProcessInfo(11, 10, ("w",), True, 60 * MiB),
    )
    run = new_run(
        [source(MAIN, "a = f()\nb = g()\n", {1: each, 2: each})],
        peak_traced_bytes=80 * MiB,  # the two processes peaked at different moments
        processes=processes,
    )
    for rich_output in (False, True):
        out = io.StringIO()
        render(run, out, rich_output=rich_output, show_listing=False)
        text = " ".join(out.getvalue().split())
        assert "75% " in text
        assert (
            "(share of peak adds up past 100%: each process's lines count at that process's "
            "own peak, and the processes peaked at different moments)"
        ) in text
    alone = new_run([source(MAIN, "a = f()\n", {1: each})], peak_traced_bytes=60 * MiB)
    out = io.StringIO()
    render(alone, out, rich_output=False, show_listing=False)
    assert "adds up past 100%" not in out.getvalue()


@pytest.mark.parametrize("n", [None, 0, 1, 7, 1000])
@pytest.mark.parametrize("by", ["peak", "live", "incl_alloc", "gpu_alloc"])
def test_the_top_rows_of_a_run_file_are_those_of_a_full_sort(
    tmp_path: Path, by: str, n: int | None
) -> None:
    # Ties across files and lines, zeros (left out), GPU figures on some lines only; read
    # back from a file (its lines by column) and ranked as a plain sort of every line would.
    rnd = random.Random(5)

    def figures() -> dict[int, LineStats]:
        out = {}
        for line in rnd.sample(range(1, 400), 120):
            size = rnd.choice([0, 0, 1, 2, 3, 1000])
            gpu = rnd.choice([0, 0, 0, 5, 1000])
            out[line] = LineStats(
                alloc_bytes=size, live_bytes=size // 2, peak_bytes=size,
                incl_alloc_bytes=size * 2, gpu_alloc_bytes=gpu, gpu_peak_bytes=gpu,
            )  # fmt: skip
        return out

    made = new_run([source(MAIN, None, figures()), source(UTIL, None, figures())])
    run = reader.read(writer.write(made, tmp_path / "r.mlrun"))
    keep = None if n == 7 else (lambda f: f == UTIL) if n == 1000 else None
    attr = NAMED_FIGURES[by].line
    expected = sorted(
        (-getattr(st, attr), file, line)
        for file, sf in made.files.items()
        if keep is None or keep(file)
        for line, st in sf.lines.items()
        if getattr(st, attr) > 0
    )[:n]
    got = top_lines(run, by, n, keep)
    assert [(-r.value, r.file, r.line) for r in got] == expected
    assert [r.rank for r in got] == list(range(1, len(expected) + 1))
    assert all(r.stats == made.files[r.file].lines[r.line] for r in got)
    assert got == top_lines(made, by, n, keep)  # the same from the run's own dicts
