"""Functions rebuilt from pickles: cloudpickle ships functions by value (Dask, Ray, loky) with
their code's file name replaced by "<dynamic-code>"; the tracer charges them to the file their
globals' ``__file__`` names, on their own lines, as if they had not been shipped."""

from __future__ import annotations

import pickle
import sys
import types
from pathlib import Path
from typing import Any

import cloudpickle

from .conftest import line, profile, tagged

MIB = 1024 * 1024
SRC = Path(__file__).resolve()


def task(i: int) -> int:
    block = bytearray(5 * MIB)  # @task
    return len(block) + i


def rebuilt(fn: Any, globals_: dict[str, Any]) -> Any:
    """``fn`` rebuilt as cloudpickle rebuilds it: its code under the marker file name."""
    code = fn.__code__.replace(co_filename="<dynamic-code>")
    return types.FunctionType(code, {"__builtins__": __builtins__, **globals_})


def test_cloudpickled_function_is_charged_to_its_own_line() -> None:
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    try:
        shipped = pickle.loads(cloudpickle.dumps(task))
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert shipped.__code__ is not task.__code__
    assert shipped.__code__.co_filename == "<dynamic-code>"  # what cloudpickle ships

    run = profile(lambda: shipped(1))  # @caller
    s = line(run, SRC, "task")
    assert abs(s.alloc_bytes - 5 * MIB) < 4096
    caller = run.files[str(SRC)].lines.get(tagged(SRC, "caller"))
    assert caller is not None
    assert caller.alloc_bytes < 4096  # (the call's inclusive figures are the task's)
    assert caller.incl_alloc_bytes >= 5 * MIB
    names = {f.qualname for f in run.files[str(SRC)].functions}
    assert "task" in names


def test_rebuilt_code_without_a_file_stays_with_its_caller() -> None:
    """No ``__file__`` in its globals (a function defined in a notebook): nothing to show, so
    its frames are transparent, as exec'd code's are."""
    fn = rebuilt(task, {"MIB": MIB})
    run = profile(lambda: fn(1))  # @fileless
    assert abs(line(run, SRC, "fileless").alloc_bytes - 5 * MIB) < 4096
    assert tagged(SRC, "task") not in run.files[str(SRC)].lines


def test_only_the_marker_takes_the_file_from_globals() -> None:
    """exec'd code (``<string>``) beside a module's globals stays transparent: only
    cloudpickle's marker says the code is a real file's."""
    code = task.__code__.replace(co_filename="<string>")
    fn = types.FunctionType(code, {"__builtins__": __builtins__, "MIB": MIB, "__file__": str(SRC)})
    run = profile(lambda: fn(1))  # @exec
    assert abs(line(run, SRC, "exec").alloc_bytes - 5 * MIB) < 4096
    assert tagged(SRC, "task") not in run.files[str(SRC)].lines
