"""Typed settings of the language server (section ``memlens``). No LSP types here.

Settings arrive as JSON from ``initializationOptions`` and ``workspace/configuration``, either
nested (``{"inlayHints": {"figure": "alloc"}}``) or with dotted keys
(``{"inlayHints.figure": "alloc"}``). :func:`parse` never raises: a bad value keeps its
default and yields one human-readable problem, which the server shows once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memlens.annotate import Noise
from memlens.model import NAMED_FIGURES

#: JSON schema types -> the Python values that JSON gives for them.
_TYPES: dict[str, type | tuple[type, ...]] = {
    "boolean": bool,
    "string": str,
    "integer": int,
    "number": (int, float),
}


class Check:
    """A setting's validator: ``check(value)`` is the value to use, or raises ValueError with
    the reason. ``json_type``, ``minimum``, ``maximum`` and ``choices`` say what it accepts,
    as the extension's ``package.json`` declares it."""

    def __init__(
        self,
        json_type: str,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        choices: Sequence[str] | None = None,
    ) -> None:
        self.json_type = json_type
        self.minimum = minimum
        self.maximum = maximum
        self.choices = tuple(choices) if choices is not None else None

    def __call__(self, value: Any) -> Any:
        if self.choices is not None:
            if value in self.choices:
                return value
            raise ValueError("expected one of " + ", ".join(self.choices))
        if not self._accepts(value):
            raise ValueError(self.expected())
        return float(value) if self.json_type == "number" else value

    def _accepts(self, value: Any) -> bool:
        if isinstance(value, bool) != (self.json_type == "boolean"):
            return False
        return _within(value, _TYPES[self.json_type], self.minimum, self.maximum)

    def expected(self) -> str:
        if self.json_type == "boolean":
            return "expected true or false"
        if self.json_type == "string":
            return "expected a string"
        if self.json_type == "integer":
            return f"expected a whole number of bytes >= {self.minimum or 0:g}"
        return f"expected a number from {self.minimum:g} to {self.maximum:g}"


def _within(
    value: Any, kinds: type | tuple[type, ...], low: float | None, high: float | None
) -> bool:
    """Whether ``value`` is of ``kinds`` and within [low, high] (NaN is not)."""
    if not isinstance(value, kinds):
        return False
    number: Any = value
    return not (
        (low is not None and not number >= low) or (high is not None and not number <= high)
    )


_BOOLEAN = Check("boolean")
_BYTES = Check("integer", minimum=0)
_STRING = Check("string")


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its key (as documented, without the ``memlens.`` prefix), the
    :class:`Settings` field it fills, its default and its validator."""

    key: str
    field: str
    default: Any
    check: Check


#: Every setting of the ``memlens`` section: the one table the server parses from, and that
#: tests/unit/test_settings_table.py checks against the extension's package.json and the docs.
TABLE: tuple[Setting, ...] = (
    Setting("inlayHints.enabled", "inlay_hints_enabled", True, _BOOLEAN),
    Setting("inlayHints.figure", "figure", "peak", Check("string", choices=tuple(NAMED_FIGURES))),
    Setting("inlayHints.minBytes", "min_bytes", 1024, _BYTES),
    Setting("inlayHints.minShare", "min_share", 0.0, Check("number", minimum=0, maximum=1)),
    # A call line whose own figure is small shows what its callees hold (from callMinBytes).
    Setting("inlayHints.calls", "call_hints", True, _BOOLEAN),
    Setting("inlayHints.callMinBytes", "call_min_bytes", 1048576, _BYTES),
    Setting("inlayHints.style", "hint_style", "full", Check("string", choices=("full", "compact"))),
    # Import lines (`import json`) hold what the module imported: shown from this size.
    Setting("inlayHints.importMinBytes", "import_min_bytes", 1048576, _BYTES),
    Setting("compareWithBaseline", "compare_with_baseline", False, _BOOLEAN),
    # A change against the baseline below any of these is noise (memlens.annotate.Noise).
    Setting("compare.minBytes", "compare_min_bytes", 4096, _BYTES),
    Setting("compare.minRatio", "compare_min_ratio", 0.01, Check("number", minimum=0, maximum=1)),
    Setting("compare.minShare", "compare_min_share", 0.0001, Check("number", minimum=0, maximum=1)),
    Setting("leakWarning.minBytes", "leak_min_bytes", 1048576, _BYTES),
    Setting("codeLens.minBytes", "lens_min_bytes", 1048576, _BYTES),
    # Read by the clients (the interpreter that runs the server; LSP tracing).
    Setting("interpreter", "interpreter", "", _STRING),
    Setting(
        "trace.server",
        "trace_server",
        "off",
        Check("string", choices=("off", "messages", "verbose")),
    ),
)

_DEFAULTS: dict[str, Any] = {s.field: s.default for s in TABLE}


@dataclass(frozen=True, slots=True)
class Settings:
    """The settings as typed fields, one per row of :data:`TABLE` (defaults from there)."""

    inlay_hints_enabled: bool = _DEFAULTS["inlay_hints_enabled"]
    figure: str = _DEFAULTS["figure"]
    min_bytes: int = _DEFAULTS["min_bytes"]
    min_share: float = _DEFAULTS["min_share"]
    call_hints: bool = _DEFAULTS["call_hints"]
    call_min_bytes: int = _DEFAULTS["call_min_bytes"]
    hint_style: str = _DEFAULTS["hint_style"]
    import_min_bytes: int = _DEFAULTS["import_min_bytes"]
    compare_with_baseline: bool = _DEFAULTS["compare_with_baseline"]
    compare_min_bytes: int = _DEFAULTS["compare_min_bytes"]
    compare_min_ratio: float = _DEFAULTS["compare_min_ratio"]
    compare_min_share: float = _DEFAULTS["compare_min_share"]
    leak_min_bytes: int = _DEFAULTS["leak_min_bytes"]
    lens_min_bytes: int = _DEFAULTS["lens_min_bytes"]
    interpreter: str = _DEFAULTS["interpreter"]
    trace_server: str = _DEFAULTS["trace_server"]

    @property
    def noise(self) -> Noise:
        """What counts as a change against the baseline (the ``compare.*`` settings)."""
        return Noise(self.compare_min_bytes, self.compare_min_ratio, self.compare_min_share)


_BY_KEY: dict[str, Setting] = {s.key: s for s in TABLE}


def _flatten(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and name not in _BY_KEY:
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


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
    for setting in TABLE:
        value = flat.get(setting.key)
        if value is None:
            continue
        try:
            changes[setting.field] = setting.check(value)
        except ValueError as exc:
            problems.append(
                f"memlens.{setting.key}: {exc} (got {value!r}); using the default "
                f"{setting.default!r}"
            )
    return replace(settings, **changes), problems
