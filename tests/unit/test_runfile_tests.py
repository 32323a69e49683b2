"""The run header's per-test figures (``tests``, written by ``pytest --memlens``): round trip,
export shape, and the reader's checks (the header is untrusted input: every value typed and
bounded, one line for anything else)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memlens.annotate import failure_text, label_for_test
from memlens.errors import RunFileError
from memlens.export import to_json_dict
from memlens.model import TestFailure, TestStats, replace
from memlens.runfile import header, reader, writer
from tests.runs import MIB, sample_run

LEAKY = TestStats(
    "tests/test_mem.py::test_leaky",
    "failed",
    peak_bytes=10 * MIB + 300,
    alloc_bytes=10 * MIB + 900,
    leaked_bytes=10 * MIB + 57,
    duration_s=0.25,
    file="/work/tests/test_mem.py",
    line=7,
    function="test_leaky",
    limits=(("leaked_bytes", MIB),),
    failures=(
        TestFailure(
            "leaked_bytes",
            10 * MIB + 57,
            MIB,
            "limit",
            lines=(("/work/tests/test_mem.py", 9, 10 * MIB), ("/work/app.py", 3, 57)),
        ),
    ),
)
GROWN = TestStats(
    "tests/test_mem.py::TestCache::test_fill[big]",
    "failed",
    peak_bytes=12 * MIB,
    duration_s=1.0,
    file="/work/tests/test_mem.py",
    line=20,
    function="TestCache.test_fill",
    failures=(TestFailure("peak_bytes", 12 * MIB, 9 * MIB, "increase", baseline=8 * MIB),),
)
PLAIN = TestStats("tests/test_mem.py::test_plain", "passed", 2048, 4096, 0, 0.001)


def _session_run() -> Any:
    run = sample_run()
    return replace(run, info=replace(run.info, tests=(LEAKY, GROWN, PLAIN)))


def test_round_trip_and_header(tmp_path: Path) -> None:
    run = _session_run()
    path = writer.write(run, tmp_path / "r.mlrun")
    assert reader.read(path) == run
    assert reader.read_info(path).tests == (LEAKY, GROWN, PLAIN)
    header = json.loads(_header(path))
    assert list(header["tests"]) == [LEAKY.nodeid, GROWN.nodeid, PLAIN.nodeid]
    assert header["tests"][LEAKY.nodeid] == {
        "outcome": "failed",
        "peak_bytes": 10 * MIB + 300,
        "alloc_bytes": 10 * MIB + 900,
        "leaked_bytes": 10 * MIB + 57,
        "duration_s": 0.25,
        "file": "/work/tests/test_mem.py",
        "line": 7,
        "function": "test_leaky",
        "limits": {"leaked_bytes": MIB},
        "failures": [
            {
                "figure": "leaked_bytes",
                "value": 10 * MIB + 57,
                "limit": MIB,
                "kind": "limit",
                "lines": [["/work/tests/test_mem.py", 9, 10 * MIB], ["/work/app.py", 3, 57]],
            }
        ],
    }
    assert header["tests"][GROWN.nodeid]["failures"] == [
        {
            "figure": "peak_bytes",
            "value": 12 * MIB,
            "limit": 9 * MIB,
            "kind": "increase",
            "baseline": 8 * MIB,
        }
    ]


def test_runs_that_are_not_test_sessions_keep_their_header(tmp_path: Path) -> None:
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    assert "tests" not in json.loads(_header(path))
    assert "checkpoint" not in json.loads(_header(path))
    assert reader.read_info(path).tests == ()


def test_a_checkpoint_says_so_in_its_header(tmp_path: Path) -> None:
    run = sample_run()
    run = replace(run, info=replace(run.info, checkpoint=True, complete=False))
    path = writer.write(run, tmp_path / "r.mlrun")
    assert json.loads(_header(path))["checkpoint"] is True
    assert reader.read_info(path).checkpoint is True
    assert reader.read(path) == run


def test_export_has_the_tests_in_its_run() -> None:
    doc = to_json_dict(_session_run())
    tests = doc["run"]["tests"]
    assert list(tests) == [LEAKY.nodeid, GROWN.nodeid, PLAIN.nodeid]
    assert {k: tests[PLAIN.nodeid][k] for k in ("outcome", "peak_bytes", "alloc_bytes")} == {
        "outcome": "passed",
        "peak_bytes": 2048,
        "alloc_bytes": 4096,
    }
    assert tests[PLAIN.nodeid]["leaked_bytes"] == 0
    assert tests[PLAIN.nodeid]["duration_s"] == 0.001
    assert tests[LEAKY.nodeid]["file"] == "/work/tests/test_mem.py"
    assert tests[LEAKY.nodeid]["line"] == 7
    json.dumps(doc, allow_nan=False)  # strict JSON
    assert to_json_dict(sample_run())["run"]["tests"] == {}


def test_labels_and_failure_texts() -> None:
    assert label_for_test(PLAIN) == "test peak 2.0 KiB · leaked 0 B"
    assert label_for_test(LEAKY) == "test peak 10.0 MiB · leaked 10.0 MiB"
    assert failure_text(LEAKY.failures[0]) == "leaked 10.0 MiB, over its limit of 1.0 MiB"
    assert failure_text(GROWN.failures[0]) == (
        "peak 12.0 MiB, +50% over the baseline's 8.0 MiB (allowed: up to 9.0 MiB)"
    )


def _header(path: Path) -> str:
    con = sqlite3.connect(path)
    try:
        (value,) = con.execute("SELECT value FROM meta WHERE key = 'run'").fetchone()
    finally:
        con.close()
    assert isinstance(value, str)
    return value


def _with_tests(tmp_path: Path, tests: object) -> Path:
    """A run file whose header holds ``tests`` as given (JSON), digest left as written."""
    path = writer.write(sample_run(), tmp_path / "r.mlrun")
    header = json.loads(_header(path))
    header["tests"] = tests
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = ? WHERE key = 'run'", (json.dumps(header),))
    con.commit()
    con.close()
    return path


def _entry(**changes: object) -> dict[str, object]:
    """The leaky test's entry as the writer makes it, with some values changed."""
    entry = header.tests_json((LEAKY,))[LEAKY.nodeid]
    entry.update(changes)
    return entry


def _failure(**changes: object) -> dict[str, object]:
    failure: dict[str, object] = {
        "figure": "peak_bytes",
        "value": 1,
        "limit": 0,
        "kind": "limit",
    }
    failure.update(changes)
    return failure


@pytest.mark.parametrize(
    ("tests", "reason"),
    [
        ([], "bad run header: tests is list"),
        ({"t": []}, "tests: t is not an object"),
        ({"t": _entry(peak_bytes=-1)}, "t: peak_bytes is not an integer from 0 to"),
        ({"t": _entry(peak_bytes=1.5)}, "t: peak_bytes is not an integer"),
        ({"t": _entry(leaked_bytes=True)}, "t: leaked_bytes is not an integer"),
        ({"t": _entry(alloc_bytes=2**63)}, "t: alloc_bytes is not an integer"),
        ({"t": _entry(line=-3)}, "t: line is not an integer"),
        ({"t": _entry(outcome=None)}, "t: outcome is not a string"),
        ({"t": _entry(outcome="x" * 65)}, "t: outcome is not a string of at most 64"),
        ({"t": _entry(file="/" * 4097)}, "t: file is not a string of at most 4096"),
        ({"t": _entry(duration_s="1")}, "t: duration_s is not a finite number"),
        ({"t": _entry(duration_s=float("inf"))}, "t: duration_s is not a finite number"),
        ({"t": _entry(duration_s=float("nan"))}, "t: duration_s is not a finite number"),
        ({"t": _entry(duration_s=-1)}, "t: duration_s is not a finite number"),
        ({"t": _entry(limits=[])}, "t: limits is not an object of test figures"),
        ({"t": _entry(limits={"rss": 1})}, "t: limits names rss, not a test figure"),
        ({"t": _entry(limits={"peak_bytes": "1 MiB"})}, "t: limits: peak_bytes is not an"),
        ({"t": _entry(failures={})}, "t: failures is not a list of at most 16"),
        ({"t": _entry(failures=[_failure()] * 17)}, "t: failures is not a list of at most 16"),
        ({"t": _entry(failures=["x"])}, "t: a failure is not an object"),
        ({"t": _entry(failures=[_failure(figure="rss")])}, "t: a failure names rss"),
        ({"t": _entry(failures=[_failure(value=None)])}, "t: value is not an integer"),
        ({"t": _entry(failures=[_failure(kind=7)])}, "t: failure: kind is not a string"),
        ({"t": _entry(failures=[_failure(baseline=-1)])}, "t: baseline is not an integer"),
        ({"t": _entry(failures=[_failure(lines={})])}, "t: a failure's lines are not a list"),
        ({"t": _entry(failures=[_failure(lines=[["/a", 1, 2]] * 17)])}, "at most 16"),
        ({"t": _entry(failures=[_failure(lines=[["/a", 0, 2]])])}, "is not [file, line, bytes]"),
        ({"t": _entry(failures=[_failure(lines=[["/a", 1, -2]])])}, "is not [file, line, bytes]"),
        ({"t": _entry(failures=[_failure(lines=[[7, 1, 2]])])}, "is not [file, line, bytes]"),
        ({"t": _entry(failures=[_failure(lines=[["/a", 1]])])}, "is not [file, line, bytes]"),
        ({"\x1b[2J" + "t" * 4097: _entry()}, "tests: a node id longer than 4096 characters"),
    ],
)
def test_bad_tests_are_one_line_errors(tmp_path: Path, tests: object, reason: str) -> None:
    path = _with_tests(tmp_path, tests)
    for read in (reader.read_info, reader.read):
        with pytest.raises(RunFileError) as err:
            read(path)
        message = str(err.value)
        assert message.startswith(f"cannot read {path}: bad run header")
        assert reason in message
        assert "\n" not in message
        assert "\x1b" not in message


def test_node_ids_are_shown_safely_in_errors(tmp_path: Path) -> None:
    path = _with_tests(tmp_path, {"evil\x1b[2J\n": _entry(peak_bytes=-1)})
    with pytest.raises(RunFileError) as err:
        reader.read_info(path)
    assert "evil\\x1b[2J\\x0a: peak_bytes is not an integer" in str(err.value)


def test_too_many_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = _entry()
    path = _with_tests(tmp_path, {f"t{i}": entry for i in range(3)})
    monkeypatch.setattr(header, "MAX_TESTS", 2)
    with pytest.raises(RunFileError, match="bad run header: tests: more than 2 tests"):
        reader.read_info(path)
    monkeypatch.setattr(header, "MAX_TESTS", 3)
    assert [t.nodeid for t in reader.read_info(path).tests] == ["t0", "t1", "t2"]


def test_unknown_keys_of_a_test_are_ignored(tmp_path: Path) -> None:
    """A newer writer may add keys to a test's entry; readers ignore them (format versioning)."""
    path = _with_tests(tmp_path, {LEAKY.nodeid: _entry(rss_bytes=5, note="x")})
    assert reader.read_info(path).tests == (LEAKY,)
