"""Per-test figures leave out what pytest keeps about a test: the reports of its subtests
(pytest's ``subtests`` fixture, unittest's ``subTest``), which pytest holds to the end of the
session, and its captured output and log records."""

from __future__ import annotations

from pathlib import Path

from tests.pytest_plugin.session import export, project, pytest_session, summary

KiB = 1024

SUBTESTS = """\
import logging
import unittest

import pytest

HELD = []


def test_warm_up(subtests):
    # The first test of a session pays for some of pytest's first-time work (a few KiB; a
    # first log record: some tens). This one does, so that the others measure what they keep.
    with subtests.test(msg="first"):
        print("first")
        logging.getLogger("t").warning("first")


class TestPrimes(unittest.TestCase):
    def test_many_subtests(self):
        for n in range(2000):
            with self.subTest(n=n):
                self.assertGreaterEqual(n, 0)

    def test_subtests_that_leak(self):
        for n in range(2000):
            with self.subTest(n=n):
                HELD.append(bytearray(1000))


def test_subtests_fixture(subtests):
    for n in range(2000):
        with subtests.test(msg="each", n=n):
            assert n >= 0


def test_output_and_logs():
    for n in range(2000):
        print("line", n, "of what the test prints" * 4)
        logging.getLogger("t").warning("record %d", n)


def test_a_failed_subtest(subtests):
    with subtests.test(msg="fails"):
        assert 1 + 1 == 3
"""


def test_what_pytest_keeps_is_not_the_tests(tmp_path: Path) -> None:
    cwd = project(tmp_path, **{"test_subtests.py": SUBTESTS})
    proc = pytest_session(cwd, "--memlens")
    assert proc.returncode == 1, proc.stdout
    # (pytest counts the failed subtest, and the test that contains it, as failed)
    assert summary(proc) == "2 failed, 5 passed", summary(proc)
    tests = export(cwd)["run"]["tests"]
    leaked = {nodeid.split("::")[-1]: t["leaked_bytes"] for nodeid, t in tests.items()}
    # The 2000 reports pytest keeps (about 1.1 KiB apiece, 2.2 MiB, before they were left
    # out) are not the test's. What is left, 0.2-0.3 KiB a subtest, is CPython's free lists:
    # objects the test freed (its timings, arguments) that the reports, made untraced, reuse.
    assert leaked["test_many_subtests"] < 2000 * 300, leaked
    assert leaked["test_subtests_fixture"] < 2000 * 300, leaked
    # Captured output and log records: pytest keeps them as text, made outside the test
    # (what is left is the logging machinery's first use by a test, as many records or few).
    assert leaked["test_output_and_logs"] < 160 * KiB, leaked
    assert leaked["test_a_failed_subtest"] < 16 * KiB, leaked
    # What a test keeps itself, subtests or not, is its leak.
    assert 2000 * 1000 <= leaked["test_subtests_that_leak"] < 2000 * (1000 + 400), leaked
    # A subtest's report is not the test's: its outcome and duration are its own call's.
    outcomes = {nodeid.split("::")[-1]: t["outcome"] for nodeid, t in tests.items()}
    assert outcomes == {
        "test_warm_up": "passed",
        "test_many_subtests": "passed",
        "test_subtests_that_leak": "passed",
        "test_subtests_fixture": "passed",
        "test_output_and_logs": "passed",
        "test_a_failed_subtest": "failed",
    }
