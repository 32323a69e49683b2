"""Sampling mode: unbiased estimates with calibrated errors, checked against exact mode.

The documented accuracy statement (docs/how-it-works.md): a line whose allocated bytes B are at
least 400 x the sampling interval is estimated within 10% in at least 95% of runs (one standard
error is sqrt(interval / B) <= 5%). Here the interval is 16 KiB so that the program stays
small; every tagged line allocates at least 1% of the run's bytes and at least 400 intervals.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import memlens
from memlens.model import LineStats, Run
from tests.conftest import own_files_env

from . import sampling_program as prog
from .conftest import PYMALLOC_DEBUG, passes_under_allocator, profile, pymalloc_in_use, tagged

SRC = Path(prog.__file__).resolve()
INTERVAL = 16 * 1024
SEEDS = range(1, 21)
TAGS = ("s_big", "s_churn", "s_keep", "s_small", "s_tiny", "s_tiny_keep")


def line_of(tag: str) -> int:
    return tagged(SRC, tag)


def run_once(**options: Any) -> Run:
    run = profile(prog.main, **options)
    prog.KEPT.clear()
    return run


def line(run: Run, tag: str) -> LineStats:
    return run.files[str(SRC)].lines.get(line_of(tag), LineStats())


@pytest.fixture(scope="module")
def exact() -> Run:
    return run_once()


@pytest.fixture(scope="module")
def sampled() -> list[Run]:
    return [run_once(mode="sampling", sample_interval=INTERVAL, seed=s) for s in SEEDS]


def test_lines_under_test_are_big_enough(exact: Run) -> None:
    total = sum(s.alloc_bytes for f in exact.files.values() for s in f.lines.values())
    for tag in TAGS:
        b = line(exact, tag).alloc_bytes
        assert b >= 0.01 * total, tag
        assert b >= 400 * INTERVAL, tag


def test_alloc_estimates_within_10_percent_in_95_percent_of_runs(
    exact: Run, sampled: list[Run]
) -> None:
    for tag in TAGS:
        truth = line(exact, tag).alloc_bytes
        good = sum(abs(line(r, tag).alloc_bytes - truth) <= 0.10 * truth for r in sampled)
        assert good >= 0.95 * len(sampled), (tag, good, truth)


def test_estimates_are_unbiased(exact: Run, sampled: list[Run]) -> None:
    # The mean of 20 independent estimates is within 3 standard errors of the mean.
    for tag in TAGS:
        truth = line(exact, tag).alloc_bytes
        mean = sum(line(r, tag).alloc_bytes for r in sampled) / len(sampled)
        se_of_mean = math.sqrt(INTERVAL * truth) / math.sqrt(len(sampled))
        assert abs(mean - truth) <= 3 * se_of_mean + 0.01 * truth, (tag, mean, truth)


def test_error_estimates_are_calibrated(exact: Run, sampled: list[Run]) -> None:
    # |estimate - truth| <= 2 reported standard errors in about 95% of cases (>= 85% here).
    # Blocks much larger than the interval are always sampled: their error is ~0, and so is
    # the reported one.
    big = line(sampled[0], "s_big")
    assert big.alloc_err <= 0.01 * big.alloc_bytes
    checks = hits = 0
    for tag in ("s_churn", "s_keep", "s_small"):
        truth = line(exact, tag).alloc_bytes
        for r in sampled:
            s = line(r, tag)
            assert s.alloc_err > 0
            checks += 1
            hits += abs(s.alloc_bytes - truth) <= 2 * s.alloc_err
    assert hits >= 0.85 * checks, (hits, checks)


@pytest.mark.parametrize(
    ("kept", "freed"),
    [("s_keep", "s_churn"), ("s_tiny_keep", "s_tiny")],
    ids=["large-blocks", "pymalloc-blocks"],
)
def test_live_is_estimated_with_errors_and_frees_are_seen(
    exact: Run, sampled: list[Run], kept: str, freed: str
) -> None:
    truth = line(exact, kept).live_bytes
    assert truth >= 10_000_000
    within = 0
    for r in sampled:
        s = line(r, kept)
        assert s.live_err > 0
        within += abs(s.live_bytes - truth) <= 3 * s.live_err
        # Blocks freed at once leave nothing live: every sampled free was seen.
        assert line(r, freed).live_bytes <= 0.05 * truth
        assert line(r, freed).alloc_bytes > 0.5 * truth
    assert within >= 0.9 * len(sampled)


def test_sampling_hooks_suit_the_allocator() -> None:
    run_once(mode="sampling", sample_interval=INTERVAL, seed=1)
    expected = "sampling-pymalloc" if pymalloc_in_use() else "sampling"
    assert memlens._tracer.hook_kind() == expected


@pytest.mark.skipif("PYTHONMALLOC" in os.environ, reason="already under another allocator")
@pytest.mark.parametrize("allocator", ["malloc", PYMALLOC_DEBUG])
def test_same_statements_hold_with_other_allocators(allocator: str) -> None:
    # Without plain pymalloc, sampling mode hooks every free (the general hooks): the same
    # accuracy statements must hold there. This file again, in a process using `allocator`.
    passes_under_allocator(allocator, __file__)


#: The test below, run by itself.
ALONE = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         f"{__file__}::test_same_seed_same_result"]  # fmt: skip


def test_same_seed_same_result() -> None:
    """Two sampling runs of warm code with one seed give the same figures (the first run of
    a line in a process makes a few one-time objects: it warms the code). In a process of its
    own: MEM/OBJ allocations share one countdown, so another thread's allocations
    (pytest-xdist's own thread, in a worker) would move where the samples fall."""
    if os.environ.get("MEMLENS_TEST_ALONE") != "1":
        env = {k: v for k, v in own_files_env().items() if not k.startswith("PYTEST_XDIST")}
        proc = subprocess.run(
            ALONE,
            env={**env, "MEMLENS_TEST_ALONE": "1"},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        assert "1 passed" in proc.stdout, proc.stdout[-2000:]
        return
    run_once(mode="sampling", sample_interval=INTERVAL, seed=7)
    a = run_once(mode="sampling", sample_interval=INTERVAL, seed=7)
    b = run_once(mode="sampling", sample_interval=INTERVAL, seed=7)
    for tag in TAGS:
        assert line(a, tag).alloc_bytes == line(b, tag).alloc_bytes


def test_run_header_says_sampling(sampled: list[Run]) -> None:
    info = sampled[0].info
    assert info.mode == "sampling"
    assert info.sample_interval_bytes == INTERVAL
    assert info.peak_traced_bytes > 15_000_000
