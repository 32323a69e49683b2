"""The JSON export's exact shape, and diffs that follow moved lines."""

from __future__ import annotations

from dataclasses import replace

from memlens.diff import diff_runs, match_lines
from memlens.export import to_json_dict
from memlens.model import LineStats
from tests.runs import MIB, sample_run


def test_export_shape_is_exactly_the_documented_one() -> None:
    doc = to_json_dict(sample_run())
    assert doc["format"] == "memlens-run"
    assert doc["version"] == 1
    run_keys = {
        "command",
        "python",
        "started",
        "duration_s",
        "exit_code",
        "mode",
        "sample_interval_bytes",
        "peak_traced_bytes",
        "peak_rss_bytes",
        "complete",
    }
    assert run_keys <= set(doc["run"])
    assert doc["run"]["command"] == ["python", "app.py"]
    assert doc["run"]["python"] == "3.11.7"
    assert doc["run"]["started"] == "2026-11-22T10:00:00+00:00"
    assert doc["run"]["duration_s"] == 1.5
    assert doc["run"]["exit_code"] == 0
    assert doc["run"]["mode"] == "exact"
    assert doc["run"]["sample_interval_bytes"] is None
    assert doc["run"]["peak_traced_bytes"] == 48 * MIB
    assert doc["run"]["peak_rss_bytes"] == 80 * MIB
    assert doc["run"]["complete"] is True
    f = doc["files"]["/work/app.py"]
    assert f["sha256"] == "ab" * 32
    assert list(f["lines"]) == ["4", "6"]
    assert f["lines"]["4"] == {
        "alloc_bytes": 40 * MIB,
        "alloc_count": 1200,
        "live_bytes": 30 * MIB,
        "live_count": 10,
        "peak_bytes": 40 * MIB,
        "incl_alloc_bytes": 40 * MIB,
        "incl_live_bytes": 30 * MIB,
        "incl_peak_bytes": 40 * MIB,
    }


def test_export_of_sampling_runs_carries_errors() -> None:
    run = sample_run(mode="sampling", sample_interval_bytes=65536)
    doc = to_json_dict(run)
    assert doc["run"]["sample_interval_bytes"] == 65536
    assert set(doc["files"]["/work/app.py"]["lines"]["4"]) >= {"alloc_err", "live_err", "peak_err"}


def _with_text(text: str, lines: dict[int, LineStats]) -> object:
    run = sample_run(text=text)
    sf = run.files["/work/app.py"]
    return replace(run, files={"/work/app.py": replace(sf, text=text, lines=lines)})


def test_diff_follows_a_line_that_moved() -> None:
    old_text = "a = 1\nbig = make()\nz = 2\n"
    new_text = "# comment\n# another\na = 1\nbig = make()\nz = 2\n"
    a = _with_text(old_text, {2: LineStats(peak_bytes=10 * MIB, alloc_bytes=10 * MIB)})
    b = _with_text(new_text, {4: LineStats(peak_bytes=8 * MIB, alloc_bytes=8 * MIB)})
    d = diff_runs(a, b)  # type: ignore[arg-type]
    assert len(d.lines) == 1
    ld = d.lines[0]
    assert (ld.line_a, ld.line_b) == (2, 4)
    assert ld.change("peak_bytes") == -2 * MIB
    assert ld.relative("peak_bytes") == -0.2


def test_diff_keeps_changed_lines_apart() -> None:
    a = _with_text("x = load(1)\n", {1: LineStats(peak_bytes=MIB)})
    b = _with_text("x = load(2)\n", {1: LineStats(peak_bytes=3 * MIB)})
    d = diff_runs(a, b)  # type: ignore[arg-type]
    sides = {(ld.line_a, ld.line_b) for ld in d.lines}
    assert sides == {(1, None), (None, 1)}
    gone = next(ld for ld in d.lines if ld.line_b is None)
    new = next(ld for ld in d.lines if ld.line_a is None)
    assert gone.change("peak_bytes") == -MIB
    assert new.relative("peak_bytes") is None


def test_match_lines_without_texts_uses_numbers() -> None:
    run = sample_run()
    sf = replace(run.files["/work/app.py"], text=None)
    assert match_lines(sf, sf) == {4: 4, 6: 6}


def test_function_diffs() -> None:
    a = sample_run()
    d = diff_runs(a, a)
    assert [(f.qualname, f.change("peak_bytes")) for f in d.functions] == [("load", 0)]
