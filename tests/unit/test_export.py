"""The JSON export's exact shape (docs/file-format.md, "Export")."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from memlens import profile
from memlens.cli import main
from memlens.export import to_json_dict, write_json
from memlens.model import FIGURES, NATIVE, LineStats, Run, replace
from memlens.runfile import reader, writer
from memlens.tracing import holders
from tests.runs import MIB, new_run, sample_holders, sample_run, source

FORMATS = Path(__file__).resolve().parents[1] / "data" / "formats"

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


def _written(run: Run) -> Any:
    out = io.StringIO()
    write_json(run, out)
    text = out.getvalue()
    assert text.endswith("}\n")
    return json.loads(text)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_the_written_export_is_the_documents_json(version: int) -> None:
    # The golden files: version 3's has GPU figures, GPU figures per device and what holds
    # its lines; read, their lines are by column (memlens.model.LineTable).
    run = reader.read(FORMATS / f"v{version}.mlrun")
    assert _written(run) == json.loads(json.dumps(to_json_dict(run)))


@pytest.mark.parametrize(
    "run",
    [
        sample_run(),
        sample_run(mode="sampling", sample_interval_bytes=65536),
        new_run([], holders=()),
        replace(sample_run(), holders=sample_holders()),
        new_run(
            [
                source(
                    "/work/a.py",
                    None,
                    {
                        2: LineStats(alloc_bytes=1 << 40),
                        3: LineStats(alloc_bytes=5, alloc_err=1.5, live_err=0.1, peak_err=1e-300),
                        9: LineStats(gpu_alloc_bytes=7, incl_gpu_peak_bytes=3),
                    },
                )
            ],
            mode="sampling",
            gpu_peak_bytes=7,
        ),
    ],
    ids=["exact", "sampling", "empty", "held", "errors-and-gpu"],
)
def test_the_written_export_of_a_run_made_in_memory(run: Run, tmp_path: Path) -> None:
    expected = json.loads(json.dumps(to_json_dict(run)))
    assert _written(run) == expected
    back = reader.read(writer.write(run, tmp_path / "r.mlrun"))
    assert _written(back) == expected


@pytest.mark.usefixtures("allocator_hooks_restored")
def test_the_written_export_of_a_real_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(holders, "MIN_SECONDS", 10.0)  # (see test_export_of_a_real_run)
    with profile() as p:
        keep = _work()
    assert keep
    # The document memlens export wrote before it was written piece by piece: one dict.
    expected = json.loads(json.dumps(to_json_dict(p.run)))
    assert _written(p.run) == expected
    back = reader.read(writer.write(p.run, tmp_path / "real.mlrun"))
    doc = _written(back)
    assert doc == expected
    assert doc["files"][os.path.abspath(__file__)]["lines"]
    assert doc["call_tree"]


def test_memlens_export_writes_the_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = replace(sample_run(), holders=sample_holders())
    path = writer.write(run, tmp_path / "r.mlrun")
    assert main(["export", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(to_json_dict(run)))
