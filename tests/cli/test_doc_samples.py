"""The sample outputs in README.md and docs/cli.md are what memlens prints (tools/sample_outputs.py).

Each sample is run again and compared with the documented block, modulo what differs from run
to run (timings, the peak RSS, run file names, figures within a few percent). When memlens's
output changes on purpose, `./dev docs` rewrites the samples.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import sample_outputs  # noqa: E402

pytest.importorskip(
    "memlens.tracing.tracer", reason="needs the native tracer (memlens.tracing.tracer)"
)

#: Runs of a sample before its differences are reported (see below).
SAMPLE_TRIES = 3

SAMPLES = [
    sample
    for doc in sample_outputs.DOCS
    for sample in sample_outputs.samples(doc, (ROOT / doc).read_text(encoding="utf-8"))
]


def test_each_document_has_its_sample() -> None:
    assert {(s.doc, s.command) for s in SAMPLES} == {
        ("README.md", "memlens run examples/leaky_cache.py"),
        ("docs/cli.md", "memlens run examples/peak_then_keep.py"),
    }


@pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="the samples are made with the project's Python (3.11): imports cost other sizes elsewhere",
)
@pytest.mark.parametrize("sample", SAMPLES, ids=[f"{s.doc}: {s.command}" for s in SAMPLES])
def test_documented_output_is_what_memlens_prints(sample: sample_outputs.Sample) -> None:
    # A line's growth verdict (grew, kept) is read from when its memory came, in wall time
    # (memlens.growth): a machine loaded by the other workers that stalls the program in its
    # last moments, after the index is built, stretches the line's life with nothing added and
    # turns "grew" into "kept". Such a run is run again; an output that changed for good differs
    # every time.
    for _ in range(SAMPLE_TRIES):
        printed = sample_outputs.run_sample(sample.command)
        problems = sample_outputs.differences(sample.body, printed)
        if not problems:
            break
    assert not problems, "\n".join([*problems, "(./dev docs regenerates the samples)"])


def _scaled(body: str, figure: str, factor: float) -> str:
    value, unit = figure.split()
    return body.replace(figure, f"{float(value) * factor:.1f} {unit}")


def test_a_changed_figure_or_line_is_noticed() -> None:
    body = SAMPLES[0].body
    first = re.search(r"^\s+1\s+(\S+):(\d+)\s+(\d+\.\d (?:KiB|MiB))", body, re.MULTILINE)
    assert first is not None, body
    where, line, figure = first.groups()
    # Run to run: other timings, RSS and run file, a figure 1% off: in step.
    moved = body.replace("· 0.", "· 9.").replace("peak RSS ", "peak RSS 1")
    assert sample_outputs.differences(body, _scaled(moved, figure, 1.01)) == []
    # A figure 20% off, another line number, a missing line: not in step.
    assert sample_outputs.differences(body, _scaled(body, figure, 1.2))
    assert sample_outputs.differences(
        body, body.replace(f"{where}:{line}", f"{where}:{int(line) + 1}")
    )
    assert sample_outputs.differences(body, "\n".join(body.splitlines()[:-1]))
