"""Checking a tool call's arguments against the tool's input schema, with one-line messages in
the CLI's words (the SDK's own validation reports multi-line dumps)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memlens.errors import MemlensError

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _has_type(value: object, kind: str) -> bool:
    actual = _json_type(value)
    if kind == "number":
        return actual in ("integer", "number")
    if kind == "integer" and actual == "number":
        return float(value).is_integer()  # type: ignore[arg-type]  # JSON: 20.0 is an integer
    return actual == kind


def _check_value(name: str, schema: Mapping[str, Any], value: object) -> object:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if not any(_has_type(value, k) for k in kinds):
        wanted = " or ".join(_TYPE_NAMES[k] for k in kinds)
        raise MemlensError(f"{name} must be {wanted}, not {_TYPE_NAMES.get(_json_type(value))}")
    if value is None:
        return None
    if "integer" in kinds and isinstance(value, float):
        value = int(value)
    if "enum" in schema and value not in schema["enum"]:
        raise MemlensError(f"{name} must be one of {', '.join(schema['enum'])}")
    if "minimum" in schema and value < schema["minimum"]:
        raise MemlensError(f"{name} must be at least {schema['minimum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        raise MemlensError(f"{name} must be more than {schema['exclusiveMinimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise MemlensError(f"{name} must be at most {schema['maximum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            raise MemlensError(f"{name} must not be empty")
        if "\0" in value:  # no file name has one; os functions would raise
            raise MemlensError(f"{name} must not contain NUL characters")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise MemlensError(f"{name} must not be empty")
        if len(value) > schema.get("maxItems", len(value)):
            raise MemlensError(f"{name} must have at most {schema['maxItems']} items")
        return [_check_value(f"{name}[{i}]", schema["items"], v) for i, v in enumerate(value)]
    return value


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments of a call checked against a tool's input schema, with defaults filled
    in (null counts as not given), or a MemlensError naming the first bad one.

    Only the parts of JSON Schema that the tools' schemas use are understood: ``type`` (one
    or a list), ``enum``, ``minimum``, ``exclusiveMinimum``, ``maximum``, ``minLength``,
    ``minItems``, ``maxItems``, ``items``, ``required`` and ``additionalProperties: false``.
    Strings never hold NUL characters (no file name can).
    """
    props: Mapping[str, Any] = schema["properties"]
    unknown = sorted(set(arguments) - set(props))
    if unknown:
        known = ", ".join(props) or "none"
        raise MemlensError(f"unknown argument {unknown[0]!r} (arguments: {known})")
    out: dict[str, Any] = {}
    for name, prop in props.items():
        value = arguments.get(name)
        if value is None:
            if name in schema.get("required", ()):
                raise MemlensError(f"missing argument {name!r}")
            out[name] = prop.get("default")
            continue
        out[name] = _check_value(name, prop, value)
    return out
