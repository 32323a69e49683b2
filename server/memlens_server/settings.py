"""Typed settings of the language server (section ``memlens``). No LSP types here.

Settings arrive as JSON from ``initializationOptions`` and ``workspace/configuration``, either
nested (``{"inlayHints": {"figure": "alloc"}}``) or with dotted keys
(``{"inlayHints.figure": "alloc"}``). :func:`parse` never raises: a bad value keeps its
default and yields one human-readable problem, which the server shows once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from memlens.annotate import FIGURE_NAMES

TRACE_LEVELS = ("off", "messages", "verbose")
HINT_STYLES = ("full", "compact")


@dataclass(frozen=True, slots=True)
class Settings:
    inlay_hints_enabled: bool = True
    figure: str = "peak"
    min_bytes: int = 1024
    min_share: float = 0.0
    #: A call line whose own figure is small shows what its callees hold (from this size).
    call_hints: bool = True
    call_min_bytes: int = 1048576
    hint_style: str = "full"
    compare_with_baseline: bool = False
    leak_min_bytes: int = 1048576
    lens_min_bytes: int = 1048576
    interpreter: str = ""
    trace_server: str = "off"


#: Setting key (as documented in docs/lsp.md, without the ``memlens.`` prefix) -> field.
KEYS: dict[str, str] = {
    "inlayHints.enabled": "inlay_hints_enabled",
    "inlayHints.figure": "figure",
    "inlayHints.minBytes": "min_bytes",
    "inlayHints.minShare": "min_share",
    "inlayHints.calls": "call_hints",
    "inlayHints.callMinBytes": "call_min_bytes",
    "inlayHints.style": "hint_style",
    "codeLens.minBytes": "lens_min_bytes",
    "compareWithBaseline": "compare_with_baseline",
    "leakWarning.minBytes": "leak_min_bytes",
    "interpreter": "interpreter",
    "trace.server": "trace_server",
}


def _flatten(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name not in KEYS:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _check(field: str, value: Any) -> Any:
    """The validated value for ``field``, or raise ValueError with a reason."""
    if field in ("inlay_hints_enabled", "compare_with_baseline", "call_hints"):
        if isinstance(value, bool):
            return value
        raise ValueError("expected true or false")
    if field == "figure":
        if value in FIGURE_NAMES:
            return value
        raise ValueError("expected one of " + ", ".join(FIGURE_NAMES))
    if field == "hint_style":
        if value in HINT_STYLES:
            return value
        raise ValueError("expected one of " + ", ".join(HINT_STYLES))
    if field in ("min_bytes", "leak_min_bytes", "call_min_bytes", "lens_min_bytes"):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise ValueError("expected a whole number of bytes >= 0")
    if field == "min_share":
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
            return float(value)
        raise ValueError("expected a number from 0 to 1")
    if field == "interpreter":
        if isinstance(value, str):
            return value
        raise ValueError("expected a string")
    if field == "trace_server":
        if value in TRACE_LEVELS:
            return value
        raise ValueError("expected one of " + ", ".join(TRACE_LEVELS))
    raise AssertionError(field)  # pragma: no cover


def parse(raw: object, base: Settings | None = None) -> tuple[Settings, list[str]]:
    """Settings from a JSON value; returns (settings, problems). Unknown keys are ignored."""
    settings = base or Settings()
    if raw is None:
        return settings, []
    if not isinstance(raw, Mapping):
        return settings, ["memlens settings must be an object; using defaults"]
    flat = _flatten(raw)
    if "memlens" in raw and isinstance(raw["memlens"], Mapping):
        flat = _flatten(raw["memlens"])
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for key, field in KEYS.items():
        if key not in flat or flat[key] is None:
            continue
        try:
            changes[field] = _check(field, flat[key])
        except ValueError as exc:
            problems.append(
                f"memlens.{key}: {exc} (got {flat[key]!r}); using the default "
                f"{getattr(Settings(), field)!r}"
            )
    return replace(settings, **changes), problems
