"""The JSON export's exact shape (docs/file-format.md, "Export")."""

from __future__ import annotations

import json
import os

import pytest

from memlens import profile
from memlens.export import to_json_dict
from memlens.model import FIGURES, NATIVE
from memlens.tracing import holders
from tests.runs import MIB, sample_run

RUN_KEYS = {
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


def test_export_shape_is_exactly_the_documented_one() -> None:
    doc = to_json_dict(sample_run())
    assert {"format", "version", "run", "files"} <= set(doc)
    assert doc["format"] == "memlens-run"
    assert doc["version"] == 1
    assert set(doc["run"]) >= RUN_KEYS
    assert {k: doc["run"][k] for k in RUN_KEYS} == {
        "command": ["python", "app.py"],
        "python": "3.11.7",
        "started": "2026-11-22T10:00:00+00:00",
        "duration_s": 1.5,
        "exit_code": 0,
        "mode": "exact",
        "sample_interval_bytes": None,
        "peak_traced_bytes": 48 * MIB,
        "peak_rss_bytes": 80 * MIB,
        "complete": True,
    }
    assert list(doc["files"]) == ["/work/app.py"]
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
        "native_alloc_bytes": 0,
        "native_live_bytes": 0,
        "native_peak_bytes": 0,
    }
    # Exact runs carry exactly the eight figures per line, in the documented order, and the
    # native part of the self figures.
    assert list(f["lines"]["6"]) == [*FIGURES, *NATIVE]
    # It is JSON (strictly: no NaN) and survives a round trip unchanged.
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc


def test_export_extras() -> None:
    doc = to_json_dict(sample_run())
    assert doc["files"]["/work/app.py"]["functions"] == [
        {
            "qualname": "load",
            "first_line": 3,
            "last_line": 4,
            "incl_alloc_bytes": 40 * MIB,
            "incl_alloc_count": 1200,
            "incl_live_bytes": 30 * MIB,
            "incl_peak_bytes": 40 * MIB,
        }
    ]
    assert doc["call_tree"][1] == {
        "id": 1,
        "parent": 0,
        "file": "/work/app.py",
        "line": 4,
        "function": "load",
        "alloc_bytes": 40 * MIB,
        "alloc_count": 1200,
        "live_bytes": 30 * MIB,
        "peak_bytes": 40 * MIB,
    }
    assert doc["timeline"] == [[0.0, 0, 10 * MIB], [1.5, 48 * MIB, 80 * MIB]]


def test_export_of_sampling_runs_carries_errors() -> None:
    run = sample_run(mode="sampling", sample_interval_bytes=65536)
    doc = to_json_dict(run)
    assert doc["run"]["mode"] == "sampling"
    assert doc["run"]["sample_interval_bytes"] == 65536
    line = doc["files"]["/work/app.py"]["lines"]["4"]
    assert set(line) == set(FIGURES) | set(NATIVE) | {"alloc_err", "live_err", "peak_err"}


def _work() -> list[bytes]:
    return [bytes(256 * 1024) for _ in range(4)]  # tagged: 1 MiB kept


@pytest.mark.usefixtures("allocator_hooks_restored")
def test_export_of_a_real_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # A run this short gets the holders search's floor of time, which the whole suite's heap on
    # a loaded machine can use up before the test's frame is reached (see test_holders.py).
    monkeypatch.setattr(holders, "MIN_SECONDS", 10.0)
    with profile() as p:
        keep = _work()
    doc = json.loads(json.dumps(to_json_dict(p.run)))
    here = os.path.abspath(__file__)
    assert doc["run"]["mode"] == "exact"
    assert doc["run"]["complete"] is True
    assert doc["run"]["peak_traced_bytes"] >= 1 << 20
    line = str(_work.__code__.co_firstlineno + 1)
    stats = doc["files"][here]["lines"][line]
    # What holds the line: the local variable `keep` of this test, which holds the bytes.
    held_by = stats.pop("held_by")
    assert held_by[0]["outcome"] == "found"
    assert [h["kind"] for h in held_by[0]["hops"][:2]] == ["thread", "local"]
    assert held_by[0]["hops"][1]["name"] == "keep"
    assert set(stats) == set(FIGURES) | set(NATIVE)
    assert all(isinstance(v, int) for v in stats.values())
    assert stats["native_live_bytes"] == 0  # bytes objects are Python's
    assert 1 << 20 <= stats["live_bytes"] < (1 << 20) + 4096
    assert stats["alloc_count"] >= 4
    assert keep
