"""The run header (meta ``run``): the run's :class:`memlens.model.RunInfo` as JSON, written by
:mod:`memlens.runfile.writer` and checked, value by value, by :mod:`memlens.runfile.reader`
(every key typed, every number and text bounded, per-test figures and processes included).
"""

from __future__ import annotations

import math

from memlens.errors import RunFileError
from memlens.layout import printable
from memlens.model import (
    TEST_FIGURES,
    GpuDevice,
    NotebookCell,
    ProcessInfo,
    RunInfo,
    TestFailure,
    TestStats,
)
from memlens.runfile.jsontext import plain
from memlens.runfile.schema import MAX_NAME_CHARS

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

RUN_KEYS = set(RunInfo.__slots__)
REQUIRED_RUN_KEYS = {
    "command",
    "python",
    "platform",
    "started",
    "ended",
    "duration_s",
    "pid",
    "exit_code",
    "mode",
    "sample_interval_bytes",
    "peak_traced_bytes",
    "peak_rss_bytes",
    "complete",
}


HEADER_TYPES: dict[str, tuple[type, ...]] = {
    "command": (list,),
    "python": (str,),
    "platform": (str,),
    "started": (str,),
    "ended": (str,),
    "duration_s": (int, float),
    "pid": (int,),
    "exit_code": (int, type(None)),
    "mode": (str,),
    "sample_interval_bytes": (int, type(None)),
    "peak_traced_bytes": (int,),
    "peak_rss_bytes": (int,),
    "complete": (bool,),
    "cwd": (str,),
    "memlens_version": (str,),
    "max_depth": (int,),
    "source": (str,),
    "seed": (int, type(None)),
    "workspace_root": (str,),
    "tests": (dict,),
    "processes": (list,),
    "peak_at_s": (int, float, type(None)),
    "checkpoint": (bool,),
    "attached": (bool,),
    "cell": (dict,),
    "gpu_peak_bytes": (int,),
    "gpus": (list,),
}

#: The keys of each entry of the header's ``processes`` list, with their JSON types.
PROCESS_TYPES: dict[str, tuple[type, ...]] = {
    "pid": (int,),
    "parent_pid": (int,),
    "command": (list,),
    "complete": (bool,),
    "peak_traced_bytes": (int,),
}


#: The keys of each entry of the header's ``gpus`` list (a run's GPU devices), with their
#: JSON types.
GPU_TYPES: dict[str, tuple[type, ...]] = {
    "device": (int,),
    "peak_bytes": (int,),
    "alloc_bytes": (int,),
    "alloc_count": (int,),
    "live_bytes": (int,),
    "reserved_peak_bytes": (int,),
    "complete": (bool,),
}
#: Most GPU devices a run header lists.
MAX_GPUS = 4096
_MAX_BYTES = 2**63 - 1
#: The integers a header may hold: 64 bits, as the run file's tables hold figures (JSON has
#: no limit: 10**400 would fail whatever shows it).
_INT64 = range(-(2**63), 2**63)
#: Header keys whose integers are unsigned 64-bit: a sampling seed is 1 to 2**64 - 1.
_UINT64_KEYS = {"seed": range(2**64)}


def is_a(value: object, types: tuple[type, ...], ints: range = _INT64) -> bool:
    if isinstance(value, bool):
        return bool in types  # JSON true/false are not numbers here
    if isinstance(value, int) and value not in ints:
        return False
    return isinstance(value, types)


def header_json(info: RunInfo) -> str:
    """The header of a run file holding a run with ``info``."""
    fields = info.as_dict()
    fields["command"] = list(fields["command"])
    if fields["tests"]:
        fields["tests"] = tests_json(fields["tests"])
    else:
        del fields["tests"]  # headers of runs that are not test sessions stay as they were
    if fields["processes"]:
        fields["processes"] = [
            {**p.as_dict(), "command": list(p.command)} for p in fields["processes"]
        ]
    else:
        del fields["processes"]  # a run of one process: the header is as before
    if fields["peak_at_s"] is None:
        del fields["peak_at_s"]  # unknown (imports): the header is as before
    if not fields["checkpoint"]:
        del fields["checkpoint"]  # final runs: the header is as before
    if not fields["attached"]:
        del fields["attached"]  # a run that started with its program: the header is as before
    if fields["cell"] is not None:
        fields["cell"] = fields["cell"].as_dict()
    else:
        del fields["cell"]  # a program's run: the header is as before
    if fields["gpus"] or fields["gpu_peak_bytes"]:
        fields["gpus"] = [g.as_dict() for g in fields["gpus"]]
    else:  # no GPU memory recorded: the header is as before
        del fields["gpus"], fields["gpu_peak_bytes"]
    return plain(fields)


def parse_header(raw: object, name: str) -> RunInfo:
    """The run header of the file ``name`` (meta ``run``, untrusted, decoded from its JSON by
    the reader: the writer's path never imports ``json``) as a RunInfo; a RunFileError naming
    what is wrong with it."""
    if not isinstance(raw, dict):
        raise RunFileError(name, "bad run header")
    missing = REQUIRED_RUN_KEYS - raw.keys()
    if missing:
        raise RunFileError(name, f"run header lacks {', '.join(sorted(missing))}")
    raw = {k: v for k, v in raw.items() if k in RUN_KEYS}
    for key, value in raw.items():
        expected = HEADER_TYPES.get(key)
        ints = _UINT64_KEYS.get(key, _INT64)
        if expected is not None and not is_a(value, expected, ints):
            out_of_range = type(value) is int and value not in ints
            what = "out of range" if out_of_range else type(value).__name__
            raise RunFileError(name, f"bad run header: {key} is {what}")
    if not all(isinstance(c, str) for c in raw["command"]):
        raise RunFileError(name, "bad run header: command")
    raw["command"] = tuple(raw["command"])
    if "processes" in raw:
        raw["processes"] = processes(name, raw["processes"])
    if "gpus" in raw:
        raw["gpus"] = gpus(name, raw["gpus"])
    if not 0 <= raw.get("gpu_peak_bytes", 0) <= _MAX_BYTES:
        raise RunFileError(name, "bad run header: gpu_peak_bytes out of range")
    raw["duration_s"] = float(raw["duration_s"])
    if not math.isfinite(raw["duration_s"]):  # JSON NaN/Infinity: the export must stay JSON
        raise RunFileError(name, "bad run header: duration_s is not a finite number")
    if raw.get("peak_at_s") is not None:
        raw["peak_at_s"] = float(raw["peak_at_s"])
        if not 0 <= raw["peak_at_s"] < math.inf:
            raise RunFileError(name, "bad run header: peak_at_s is not a finite number >= 0")
    if "tests" in raw:
        raw["tests"] = read_tests(raw["tests"], name)
    if "cell" in raw:
        raw["cell"] = read_cell(raw["cell"], name)
    return RunInfo(**raw)


#: The keys of the header's ``cell`` (a notebook cell's run), with their JSON types.
CELL_TYPES: dict[str, tuple[type, ...]] = {
    "file": (str,),
    "execution_count": (int,),
    "notebook": (str,),
    "cell_id": (str,),
    "sha256": (str,),
}


def read_cell(value: dict[str, object], name: str) -> NotebookCell:
    """The header's ``cell`` (untrusted): every key of :data:`CELL_TYPES`, of its type,
    bounded (unknown keys are ignored), else RunFileError."""
    values = {k: value.get(k) for k in CELL_TYPES}
    for key, types in CELL_TYPES.items():
        found = values[key]
        if not is_a(found, types):
            raise RunFileError(name, f"bad run header: cell: {key} is {type(found).__name__}")
        if isinstance(found, str) and len(found) > MAX_NAME_CHARS:
            raise RunFileError(name, f"bad run header: cell: {key} is too long")
    count = values["execution_count"]
    assert isinstance(count, int)
    if not 0 <= count < 2**63:
        raise RunFileError(name, "bad run header: cell: execution_count is out of range")
    return NotebookCell(**values)  # type: ignore[arg-type]


# -- per-test figures (the header's ``tests``: pytest --memlens) --------------------------------

#: Most tests a run header may hold, and most failures one test may list.
MAX_TESTS = 100_000
MAX_TEST_FAILURES = 16
#: Most lines responsible one failure may list.
MAX_FAILURE_LINES = 16
#: Largest byte figure or limit of a test (figures are 64-bit in the run file's tables too).
_MAX_TEST_BYTES = 2**63 - 1
_MAX_LINE = 2**31 - 1
_MAX_WORD_CHARS = 64  # an outcome, a figure name, a failure kind


def tests_json(tests: Iterable[TestStats]) -> dict[str, dict[str, Any]]:
    """The header's (and the export's) ``tests`` object: node id -> figures and where the test is."""
    out: dict[str, dict[str, Any]] = {}
    for t in tests:
        entry: dict[str, Any] = {
            "outcome": t.outcome,
            "peak_bytes": t.peak_bytes,
            "alloc_bytes": t.alloc_bytes,
            "leaked_bytes": t.leaked_bytes,
            "duration_s": t.duration_s,
            "file": t.file,
            "line": t.line,
            "function": t.function,
            "limits": dict(t.limits),
            "failures": [
                {"figure": f.figure, "value": f.value, "limit": f.limit, "kind": f.kind}
                | ({} if f.baseline is None else {"baseline": f.baseline})
                | ({"lines": [list(row) for row in f.lines]} if f.lines else {})
                for f in t.failures
            ],
        }
        if t.gpu_peak_bytes:  # a test that used no GPU memory is written as before
            entry["gpu_peak_bytes"] = t.gpu_peak_bytes
        out[t.nodeid] = entry
    return out


def read_tests(value: object, name: str) -> tuple[TestStats, ...]:
    """The header's ``tests`` (untrusted): every value typed and bounded, else RunFileError."""

    def bad(what: str) -> RunFileError:
        return RunFileError(name, f"bad run header: tests: {what}")

    def text(entry: dict[str, object], key: str, limit: int, where: str) -> str:
        found = entry.get(key)
        if not isinstance(found, str) or len(found) > limit:
            raise bad(f"{where}: {key} is not a string of at most {limit} characters")
        return found

    def number(entry: dict[str, object], key: str, low: int, high: int, where: str) -> int:
        found = entry.get(key)
        if not is_a(found, (int,)) or not low <= found <= high:  # type: ignore[operator]
            raise bad(f"{where}: {key} is not an integer from {low} to {high}")
        assert isinstance(found, int)
        return found

    assert isinstance(value, dict)  # checked with the header's types
    if len(value) > MAX_TESTS:
        raise bad(f"more than {MAX_TESTS:,} tests")
    out = []
    for nodeid, entry in value.items():
        if len(nodeid) > MAX_NAME_CHARS:
            raise bad(f"a node id longer than {MAX_NAME_CHARS} characters")
        where = clip(nodeid)
        if not isinstance(entry, dict):
            raise bad(f"{where} is not an object")
        duration = entry.get("duration_s")
        if not is_a(duration, (int, float)) or not 0 <= duration < math.inf:  # type: ignore[operator]
            raise bad(f"{where}: duration_s is not a finite number of seconds")
        assert isinstance(duration, (int, float))
        limits = entry.get("limits")
        if not isinstance(limits, dict) or len(limits) > len(TEST_FIGURES):
            raise bad(f"{where}: limits is not an object of test figures")
        for figure in limits:
            if figure not in TEST_FIGURES:
                raise bad(f"{where}: limits names {clip(figure)}, not a test figure")
            number(limits, figure, 0, _MAX_TEST_BYTES, f"{where}: limits")
        failures = entry.get("failures")
        if not isinstance(failures, list) or len(failures) > MAX_TEST_FAILURES:
            raise bad(f"{where}: failures is not a list of at most {MAX_TEST_FAILURES}")
        read_failures = []
        for failure in failures:
            if not isinstance(failure, dict):
                raise bad(f"{where}: a failure is not an object")
            figure = text(failure, "figure", _MAX_WORD_CHARS, f"{where}: failure")
            if figure not in TEST_FIGURES:
                raise bad(f"{where}: a failure names {clip(figure)}, not a test figure")
            baseline = failure.get("baseline")
            lines = failure.get("lines", [])
            if not isinstance(lines, list) or len(lines) > MAX_FAILURE_LINES:
                raise bad(
                    f"{where}: a failure's lines are not a list of at most {MAX_FAILURE_LINES}"
                )
            rows = []
            for row in lines:
                if not (
                    isinstance(row, list)
                    and len(row) == 3
                    and isinstance(row[0], str)
                    and len(row[0]) <= MAX_NAME_CHARS
                    and is_a(row[1], (int,))
                    and 0 < row[1] <= _MAX_LINE
                    and is_a(row[2], (int,))
                    and 0 <= row[2] <= _MAX_TEST_BYTES
                ):
                    raise bad(f"{where}: a failure's line is not [file, line, bytes]")
                rows.append((row[0], row[1], row[2]))
            read_failures.append(
                TestFailure(
                    figure,
                    number(failure, "value", -_MAX_TEST_BYTES, _MAX_TEST_BYTES, where),
                    number(failure, "limit", 0, _MAX_TEST_BYTES, where),
                    text(failure, "kind", _MAX_WORD_CHARS, f"{where}: failure"),
                    None
                    if baseline is None
                    else number(failure, "baseline", 0, _MAX_TEST_BYTES, where),
                    tuple(rows),
                )
            )
        out.append(
            TestStats(
                nodeid,
                text(entry, "outcome", _MAX_WORD_CHARS, where),
                peak_bytes=number(entry, "peak_bytes", 0, _MAX_TEST_BYTES, where),
                alloc_bytes=number(entry, "alloc_bytes", 0, _MAX_TEST_BYTES, where),
                leaked_bytes=number(entry, "leaked_bytes", 0, _MAX_TEST_BYTES, where),
                duration_s=float(duration),
                file=text(entry, "file", MAX_NAME_CHARS, where),
                line=number(entry, "line", 0, _MAX_LINE, where),
                function=text(entry, "function", MAX_NAME_CHARS, where),
                limits=tuple(limits.items()),
                failures=tuple(read_failures),
                gpu_peak_bytes=number(entry, "gpu_peak_bytes", 0, _MAX_TEST_BYTES, where)
                if "gpu_peak_bytes" in entry
                else 0,
            )
        )
    return tuple(out)


def processes(name: str, entries: list[object]) -> tuple[ProcessInfo, ...]:
    """The header's ``processes``: each entry an object with the keys of
    :data:`PROCESS_TYPES`, of their exact types (unknown keys are ignored)."""
    out: list[ProcessInfo] = []
    for entry in entries:
        values = _typed(name, entry, PROCESS_TYPES, "processes")
        if not all(isinstance(c, str) for c in values["command"]):
            raise RunFileError(name, "bad run header: processes")
        if not (0 <= values["pid"] < 2**63 and 0 <= values["parent_pid"] < 2**63):
            raise RunFileError(name, "bad run header: processes (a process id out of range)")
        values["command"] = tuple(values["command"])
        out.append(ProcessInfo(**values))
    return tuple(out)


def _typed(
    name: str, entry: object, types: dict[str, tuple[type, ...]], key: str
) -> dict[str, Any]:
    """The keys of ``types`` of one entry of the header's list ``key``, each of its exact
    types (unknown keys are ignored), else a RunFileError."""
    if not isinstance(entry, dict) or not types.keys() <= entry.keys():
        raise RunFileError(name, f"bad run header: {key}")
    values = {k: entry[k] for k in types}
    if not all(is_a(values[k], t) for k, t in types.items()):
        raise RunFileError(name, f"bad run header: {key}")
    return values


def gpus(name: str, entries: list[object]) -> tuple[GpuDevice, ...]:
    """The header's ``gpus``: each entry an object with the keys of :data:`GPU_TYPES`, of
    their exact types, figures from 0 to 2**63 - 1 (unknown keys are ignored)."""
    if len(entries) > MAX_GPUS:
        raise RunFileError(name, f"bad run header: more than {MAX_GPUS} GPU devices")
    out: list[GpuDevice] = []
    for entry in entries:
        figures = entry.items() if isinstance(entry, dict) else ()
        if any(type(v) is int and not 0 <= v <= _MAX_BYTES for k, v in figures if k in GPU_TYPES):
            raise RunFileError(name, "bad run header: gpus (a figure out of range)")
        values = _typed(name, entry, GPU_TYPES, "gpus")
        out.append(GpuDevice(**values))
    return tuple(out)


def clip(text: str) -> str:
    """A name from the file, as an error message shows it (short, printable)."""
    return printable(text[:60])
