"""The Python API: `memlens.profile()`, `start()`, `stop()` with real keyword parameters."""

from __future__ import annotations

import inspect

import pytest

import memlens
from memlens.errors import MemlensError
from memlens.tracing import tracer

#: tracer.start's parameters that memlens run (or attach) alone uses (its launcher, the command
#: it ran, pointing the store's `latest` at each checkpoint, a process that was running before).
INTERNAL = {"hidden", "command", "on_checkpoint", "workspace_root", "attached", "sources"}


@pytest.mark.parametrize("function", [memlens.profile, memlens.start])
def test_signature_names_every_option_with_the_tracers_default(function: object) -> None:
    params = inspect.signature(function).parameters  # type: ignore[arg-type]
    start = inspect.signature(tracer.start).parameters
    # Every option of the tracer (a new one too) is a real keyword parameter here.
    assert set(params) == set(start) - INTERNAL
    assert list(params)[:2] == ["mode", "sample_interval"]
    assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in params.values())
    for name, param in params.items():
        assert param.default == start[name].default, name
    stop = inspect.signature(memlens.stop).parameters
    assert {n: p.default for n, p in stop.items()} == {
        n: p.default for n, p in inspect.signature(tracer.stop).parameters.items()
    }


def test_profile_takes_its_options_as_keywords() -> None:
    with memlens.profile("sampling", 4096, seed=3, libraries=True) as p:
        data = [bytearray(10_000) for _ in range(200)]
    assert len(data) == 200
    assert p.run is not None
    assert p.run.info.mode == "sampling"
    assert p.run.info.sample_interval_bytes == 4096
    assert p.run.info.seed == 3
    with pytest.raises(TypeError):
        memlens.profile(sampling=True)  # type: ignore[call-arg]
    with pytest.raises(MemlensError, match="the seed must be an integer from 1 to"):
        memlens.start("sampling", seed=-1)
