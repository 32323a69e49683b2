"""What ``memlens attach`` runs in the process it attaches to, through ``sys.remote_exec``.

This file is not imported. The attaching process (:mod:`memlens.attach`) writes its text,
followed by a call ``bootstrap({...})`` with the attachment's settings, into the attachment's
folder, and the target's main thread executes it at its next safe point, in a namespace of its
own. So it uses only what every Python process has loaded (``sys``, ``os``, ``_imp`` and the
import system's frozen modules), and it never lets an exception out: the program's output must
stay the program's. What it cannot do is said in one line in the folder's ``error`` file.

It loads the attaching memlens from the files that process runs (its package folder and its
native module, given in the settings), without touching ``sys.path``: the target needs no
memlens of its own, and the program's own imports are found as before. That needs the same
Python build (``sys.implementation.cache_tag`` and an extension suffix the target accepts); a
target that has memlens loaded already must have the same version. Then
:func:`memlens.tracing.agent.begin` starts tracing.
"""

from __future__ import annotations

import _imp
import os
import sys

TYPE_CHECKING = False  # typing is not imported at start-up (see memlens/__init__.py)
if TYPE_CHECKING:
    from typing import Any


def bootstrap(config: dict[str, Any]) -> None:
    folder = config["folder"]
    if os.path.exists(os.path.join(folder, "withdrawn")):
        _clear(folder)  # the attaching process gave up waiting: nothing to do, nothing left
        return
    try:
        fd = os.open(os.path.join(folder, "lifeline"), os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
    except OSError:
        return  # the folder is gone: so is the attaching process
    before = {n for n in sys.modules if n == "memlens" or n.startswith("memlens.")}
    try:
        problem = _load(config)
        if problem is None:
            from memlens.tracing import agent  # noqa: PLC0415 - memlens is loaded just above

            problem = agent.begin(config, fd, before)
    except Exception as exc:  # noqa: BLE001 - reported in one line, never raised in the program
        problem = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    except BaseException:  # KeyboardInterrupt, SystemExit: the program's, raised on
        _give_up(folder, fd, before, "interrupted while starting")
        raise
    if problem is not None:
        _give_up(folder, fd, before, problem)


def _load(config: dict[str, Any]) -> str | None:
    """Makes ``memlens`` importable here from the attaching process's files; None, or why not."""
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if sys.implementation.cache_tag != config["cache_tag"]:
        return (
            f"the process runs {sys.implementation.name} {python} "
            f"({sys.implementation.cache_tag}); this memlens is for {config['cache_tag']}"
        )
    loaded = sys.modules.get("memlens")
    if loaded is not None:
        version = getattr(loaded, "__version__", "?")
        if version != config["version"]:
            return (
                f"the process has memlens {version} loaded; attach with memlens {version} "
                f"(this is {config['version']})"
            )
        return None  # its own memlens, the same as ours
    extension = config["extension"]
    if not any(extension.endswith(suffix) for suffix in _imp.extension_suffixes()):
        return (
            f"the process's Python ({python}{sys.abiflags}) cannot load this memlens's native "
            f"module ({os.path.basename(extension)})"
        )
    external = sys.modules["_frozen_importlib_external"]
    frozen = sys.modules["_frozen_importlib"]
    package = config["package"]
    spec = external.spec_from_file_location(
        "memlens", os.path.join(package, "__init__.py"), submodule_search_locations=[package]
    )
    module = frozen.module_from_spec(spec)
    sys.modules["memlens"] = module
    spec.loader.exec_module(module)
    spec = external.spec_from_file_location("memlens._tracer", extension)
    native = frozen.module_from_spec(spec)
    sys.modules["memlens._tracer"] = native
    spec.loader.exec_module(native)
    module._tracer = native
    return None


def _give_up(folder: str, fd: int, before: set[str], problem: str) -> None:
    """Say why (the ``error`` file), and leave the process as it was."""
    for name in [n for n in sys.modules if n == "memlens" or n.startswith("memlens.")]:
        if name not in before:
            sys.modules.pop(name, None)
    try:  # noqa: SIM105 - contextlib may not be loaded in the target: nothing is imported here
        os.close(fd)
    except OSError:
        pass
    _say(folder, "error", problem)


def _say(folder: str, name: str, text: str) -> None:
    """Writes the file ``name`` of the folder whole (a temporary renamed over it)."""
    temporary = os.path.join(folder, f".{name}")
    try:
        with open(temporary, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(temporary, os.path.join(folder, name))
    except OSError:
        pass


def _clear(folder: str) -> None:
    try:
        for name in os.listdir(folder):
            os.unlink(os.path.join(folder, name))
        os.rmdir(folder)
    except OSError:
        pass
