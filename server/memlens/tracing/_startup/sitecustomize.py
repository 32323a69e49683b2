"""memlens's start-up hook for the Python processes a followed run starts (memlens.tracing.child).

``memlens run`` puts this folder first on ``PYTHONPATH``, so a new interpreter imports this
module while it starts (``site``). It traces the process when ``MEMLENS_FOLLOW`` says so, and
then imports the user's own ``sitecustomize``, if there is one, as if this one did not exist.

Every Python the program starts reads it, whichever its version (a Python 2.7 or 3.6 tool run
by a build script): it is written in the language they all read, without ``from __future__
import annotations`` or f-strings, and says nothing where memlens is not installed.
"""

import os
import sys

_here = os.path.dirname(os.path.realpath(__file__))
# This folder is memlens's: the program sees the module path it would see without memlens.
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != _here]


def _follow():  # type: () -> None
    try:
        from memlens.tracing.child import start_child
    except Exception:  # noqa: BLE001 - another interpreter, or memlens is not installed there
        return
    start_child()


_follow()

_ours = sys.modules.pop(__name__)
try:
    import sitecustomize  # type: ignore[import-not-found]  # noqa: F401 - the user's own, if any
except ImportError as exc:
    name = getattr(exc, "name", None)
    if name is None and str(exc) == "No module named sitecustomize":  # Python 2's only word
        name = "sitecustomize"
    if name != "sitecustomize":
        raise
    sys.modules[__name__] = _ours  # none: the import system expects a module under this name
