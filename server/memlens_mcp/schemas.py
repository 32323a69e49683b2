"""The MCP tools' JSON schemas, written out: they are the contract with agents (docs/agents.md).

Answers are ``structuredContent`` under the names of the JSON export; :mod:`memlens_mcp.arguments`
checks every call against its tool's input schema.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from memlens import model


class ToolSchema(NamedTuple):
    """One tool as agents see it: its name, what it does, its input and output schemas, and
    whether it only reads (``profile_script`` runs a program)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool = True


#: A JSON schema, or a part of one.
Schema = dict[str, Any]

_STRING: Schema = {"type": "string"}
_INTEGER: Schema = {"type": "integer"}
_NUMBER: Schema = {"type": "number"}
_BOOLEAN: Schema = {"type": "boolean"}


def _of_type(kind: str, **keywords: Any) -> Schema:
    """``{"type": kind}`` followed by ``keywords`` (minimum, default, description...) in the
    order given."""
    return {"type": kind, **keywords}


def _nullable(schema: Schema) -> Schema:
    """``schema`` that also allows null (its type becomes ``[type, "null"]``)."""
    return {**schema, "type": [schema["type"], "null"]}


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def _record(properties: Mapping[str, Schema], required: Iterable[str] | None = None) -> Schema:
    """An object with these properties, all of them required unless ``required`` names some."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties if required is None else required),
    }


def _extended(record: Schema, properties: Mapping[str, Schema]) -> Schema:
    """``record`` with more properties, all of them required."""
    return {
        **record,
        "properties": {**record["properties"], **properties},
        "required": [*record["required"], *properties],
    }


def _object(properties: Mapping[str, Schema], required: tuple[str, ...] = ()) -> Schema:
    """A tool's arguments: these properties and no others."""
    return {**_record(properties, required), "additionalProperties": False}


def _optional_string(description: str) -> Schema:
    return _nullable(_of_type("string", description=description))


_RUN_ARG = _optional_string(
    "The run: a run id (or a unique prefix), `latest`, `baseline`, or the path of a run "
    "file inside the workspace. Default: latest."
)
_BY_ARG = _of_type(
    "string",
    enum=list(model.SELF_FIGURES),
    default="peak",
    description="The figure that ranks: peak (held at the run's peak), alloc (allocated "
    "over the run) or live (still held at exit); gpu_peak, gpu_alloc, gpu_live: the same of "
    "GPU memory (PyTorch CUDA, runs that recorded it).",
)
_LIMIT_ARG = _of_type(
    "integer",
    minimum=0,
    maximum=100_000,
    default=20,
    description="At most this many rows; 0 = all.",
)
_LIBRARY_ARG = _of_type(
    "boolean",
    default=False,
    description="Also list files of the standard library and installed packages.",
)
_MODE_ARG = _of_type(
    "string",
    enum=["exact", "sample"],
    default="exact",
    description="exact: every allocation; sample: near-zero overhead estimates.",
)
_SAMPLE_INTERVAL_ARG = _nullable(
    _of_type(
        "integer",
        minimum=1,
        description="Mean bytes between samples in sample mode (default 128 KiB).",
    )
)
_LINE_NUMBER_ARG = _nullable(_of_type("integer", minimum=1))
_MOMENT_ARG_TEXT = (
    "A moment of the run: `peak` (each line's exact share of the peak), `end` (live at "
    "exit), a time such as `2.5s` or `250ms`, or a share of the run such as `40%`."
)

_RUN_REF = _record({"id": _STRING, "path": _STRING})
_FIGURE_PROPS: Schema = {
    **dict.fromkeys(model.FIGURES, _INTEGER),
    **dict.fromkeys(model.ERRORS, _NUMBER),
    # Runs that recorded GPU memory (PyTorch CUDA) only.
    **dict.fromkeys(model.GPU_FIGURES, _INTEGER),
    "gpu_devices": _array(
        {"type": "object", "properties": dict.fromkeys(("device", *model.DEVICE_FIGURES), _INTEGER)}
    ),
}
_HOP = _record(
    {
        "kind": _STRING,
        "name": _STRING,
        "type": _STRING,
        "file": _nullable(_STRING),
        "line": _nullable(_INTEGER),
    }
)
_HELD_BY = _of_type(
    "array",
    description="What keeps the line's memory alive at exit: reference paths from a root "
    "(module, thread, C code, cycle) to a sample of its objects; `objects` of the sample took "
    "each path; `outcome` says why there is none (budget, unreached). Empty when the run did "
    "not record it (lines not live at exit).",
    items=_record(
        {
            "objects": _INTEGER,
            "outcome": _of_type("string", enum=list(model.OUTCOMES)),
            "path": _STRING,
            "hops": _array(_HOP),
        },
        ("objects", "outcome"),
    ),
)
#: What every kind of line says of its source line.
_SOURCE_LINE = {"path": _STRING, "line": _INTEGER, "code": _STRING, "function": _nullable(_STRING)}
_LINE = _record(
    {**_SOURCE_LINE, **_FIGURE_PROPS, "held_by": _HELD_BY},
    (*_SOURCE_LINE, *model.FIGURES, "held_by"),
)
_CALL_PATH = _record(
    {
        "frames": _array(_record({"path": _STRING, "line": _INTEGER, "function": _STRING})),
        "frames_left_out": _INTEGER,
        "incl_peak_bytes": _INTEGER,
        "incl_alloc_bytes": _INTEGER,
    }
)
_SUMMARY = _record(
    {
        "id": _STRING,
        "path": _STRING,
        "command": _array(_STRING),
        "started": _STRING,
        "duration_s": _NUMBER,
        "exit_code": _nullable(_INTEGER),
        "mode": _STRING,
        "sample_interval_bytes": _nullable(_INTEGER),
        "peak_traced_bytes": _INTEGER,
        "peak_rss_bytes": _INTEGER,
        "complete": _BOOLEAN,
        "attached": _BOOLEAN,
        "gpu_peak_bytes": _INTEGER,
    },
    ("id", "path", "command", "mode", "peak_traced_bytes", "complete"),
)
_MOMENT_INFO = _record(
    {
        "kind": {"enum": ["peak", "end", "time"]},
        "name": _STRING,
        "spec": _STRING,
        "t": _nullable(_NUMBER),
        "traced_bytes": _INTEGER,
    }
)
#: Each figure's change: {figure: {a, b, delta, ratio}}.
_CHANGES = _of_type(
    "object",
    additionalProperties=_record(
        {"a": _INTEGER, "b": _INTEGER, "delta": _INTEGER, "ratio": _nullable(_NUMBER)}
    ),
)
#: The document `memlens diff --json` prints (diff_runs, diff_moments).
_DIFF_OUTPUT = _record(
    {
        "format": {"const": "memlens-diff"},
        "version": _INTEGER,
        "a": _STRING,
        "b": _STRING,
        "by": _STRING,
        "totals": _CHANGES,
        "files": _of_type("object"),
        "lines": _array(
            _record(
                {
                    "file": _STRING,
                    "line_a": _nullable(_INTEGER),
                    "line_b": _nullable(_INTEGER),
                    "status": {"enum": ["same-line", "moved", "new", "gone"]},
                    "matched_by": _STRING,
                    "figures": _CHANGES,
                },
                ("file", "line_a", "line_b", "status", "figures"),
            )
        ),
        "functions": _array(_record({"file": _STRING, "qualname": _STRING, "figures": _CHANGES})),
    }
)

#: The arguments of the tools that rank lines or functions of one run.
_RANKING_ARGS = _object(
    {"run": _RUN_ARG, "by": _BY_ARG, "limit": _LIMIT_ARG, "include_library": _LIBRARY_ARG}
)

#: Every tool, in the order agents see them (:data:`memlens_mcp.tools.CALLS` answers each).
TOOLS: tuple[ToolSchema, ...] = (
    ToolSchema(
        "list_runs",
        "The runs saved in the workspace (.memlens/runs), oldest first: id, start time, "
        "command, mode, peak traced bytes, duration, whether the program finished, and which "
        "run is latest and which the baseline. Unreadable run files are listed with the reason.",
        _object({}),
        _record(
            {
                "workspace": _STRING,
                "runs": _array(
                    _record(
                        {
                            "id": _STRING,
                            "path": _STRING,
                            "started": _nullable(_STRING),
                            "command": _nullable(_array(_STRING)),
                            "mode": _nullable(_STRING),
                            "peak_traced_bytes": _nullable(_INTEGER),
                            "duration_s": _nullable(_NUMBER),
                            "complete": _nullable(_BOOLEAN),
                            "latest": _BOOLEAN,
                            "baseline": _BOOLEAN,
                            "error": _nullable(_STRING),
                        },
                        ("id", "path", "latest", "baseline", "error"),
                    )
                ),
            }
        ),
    ),
    ToolSchema(
        "top_lines",
        "The source lines that used the most memory in a run, largest first, with every "
        "figure in bytes: peak_bytes (held when the program's traced memory peaked), "
        "alloc_bytes/alloc_count (allocated over the run), live_bytes/live_count (still held "
        "at exit: a likely leak), and incl_* (including what the line called); in runs that "
        "recorded GPU memory (PyTorch CUDA), gpu_* figures of the same meaning.",
        _RANKING_ARGS,
        _record({"run": _RUN_REF, "by": _STRING, "lines": _array(_LINE)}),
    ),
    ToolSchema(
        "line_figures",
        "The figures of the lines of one source file (between start_line and end_line), each "
        "with the heaviest call paths that reached it (root first; incl_* bytes of each path).",
        _object(
            {
                "path": _of_type(
                    "string",
                    minLength=1,
                    description="The source file: absolute, relative to the workspace, or "
                    "a unique end of a profiled file's path (`app/models.py`).",
                ),
                "start_line": _LINE_NUMBER_ARG,
                "end_line": _LINE_NUMBER_ARG,
                "run": _RUN_ARG,
                "call_paths": _of_type(
                    "integer", minimum=0, maximum=100, default=3, description="Call paths per line."
                ),
            },
            ("path",),
        ),
        _record(
            {
                "run": _RUN_REF,
                "path": _STRING,
                "lines": _array(_extended(_LINE, {"call_paths": _array(_CALL_PATH)})),
            }
        ),
    ),
    ToolSchema(
        "function_figures",
        "Functions by memory, largest first: incl_* figures include everything the function "
        "called (each stack once); alloc_bytes, alloc_count, live_bytes and peak_bytes are the "
        "function's own lines.",
        _RANKING_ARGS,
        _record(
            {
                "run": _RUN_REF,
                "by": _STRING,
                "functions": _array(
                    _record(
                        {
                            "path": _STRING,
                            "qualname": _STRING,
                            "first_line": _INTEGER,
                            "last_line": _INTEGER,
                            **dict.fromkeys(
                                (
                                    *(f"incl_{f}" for f in model.FUNCTION_FIGURES),
                                    *model.FUNCTION_FIGURES,
                                    *(f"incl_{f}" for f in model.GPU_FUNCTION_FIGURES),
                                ),
                                _INTEGER,
                            ),
                        },
                        ("path", "qualname", "first_line", "last_line"),
                    )
                ),
            }
        ),
    ),
    ToolSchema(
        "diff_runs",
        "What changed per line and per function between two runs (default: baseline -> "
        "latest), biggest absolute change first; lines that moved are followed through the "
        "recorded sources. The document `memlens diff --json` prints.",
        _object(
            {
                "base": _optional_string("The old run (as `run`). Default: baseline."),
                "run": _optional_string("The new run. Default: latest."),
                "by": _BY_ARG,
                "limit": _LIMIT_ARG,
            }
        ),
        _DIFF_OUTPUT,
    ),
    ToolSchema(
        "lines_at_moment",
        "The source lines that held the most memory at one moment of a run, largest first: "
        "live_bytes (the line's own) and incl_live_bytes (including what it called) then, with "
        "the moment's time and traced total. Moments other than peak and end need a run made "
        "by this memlens (runs keep a few hundred moments).",
        _object(
            {
                "moment": _of_type("string", minLength=1, description=_MOMENT_ARG_TEXT),
                "run": _RUN_ARG,
                "limit": _LIMIT_ARG,
                "include_library": _LIBRARY_ARG,
            },
            ("moment",),
        ),
        _record(
            {
                "run": _RUN_REF,
                "moment": _MOMENT_INFO,
                "lines": _array(
                    _record({**_SOURCE_LINE, "live_bytes": _INTEGER, "incl_live_bytes": _INTEGER})
                ),
            }
        ),
    ),
    ToolSchema(
        "diff_moments",
        "What grew or shrank per line and per function between two moments of one run "
        "(default: from the start to the end), biggest absolute change of live bytes first: "
        "the document `memlens diff --from --to --json` prints.",
        _object(
            {
                "from": {**_optional_string(_MOMENT_ARG_TEXT), "default": None},
                "to": {
                    **_optional_string("The later moment (as `from`). Default: end."),
                    "default": None,
                },
                "run": _RUN_ARG,
                "limit": _LIMIT_ARG,
            }
        ),
        _extended(_DIFF_OUTPUT, {"from": _MOMENT_INFO, "to": _MOMENT_INFO}),
    ),
    ToolSchema(
        "profile_script",
        "Run a Python script of the workspace under `memlens run` and return the run's "
        "summary and its heaviest lines; the run is saved in the store and becomes latest. "
        "Only when the server was started with --allow-run.",
        _object(
            {
                "argv": _of_type(
                    "array",
                    items=_STRING,
                    minItems=1,
                    maxItems=1000,
                    description="The script (a path inside the workspace) and its arguments.",
                ),
                "mode": _MODE_ARG,
                "sample_interval_bytes": _SAMPLE_INTERVAL_ARG,
                "timeout_s": _of_type(
                    "number",
                    exclusiveMinimum=0,
                    maximum=86400,
                    default=120,
                    description="Stop the program after this long (the run is still saved, "
                    "marked incomplete).",
                ),
            },
            ("argv",),
        ),
        _record(
            {
                "run": _SUMMARY,
                "exit_code": _INTEGER,
                "timed_out": _BOOLEAN,
                "stdout": _STRING,
                "stderr": _STRING,
                "top_lines": _array(_LINE),
            }
        ),
        read_only=False,
    ),
    ToolSchema(
        "attach_process",
        "Attach to a running Python 3.14+ process (`memlens attach`) for some seconds, without "
        "restarting it, and return the run's summary and its heaviest lines; only what the "
        "process allocated while attached is counted. The run is saved in the store and "
        "becomes latest. Only when the server was started with --allow-run.",
        _object(
            {
                "pid": _of_type(
                    "integer",
                    minimum=1,
                    maximum=2**31 - 1,
                    description="The process id (`memlens attach --list` lists them).",
                ),
                "duration_s": _of_type(
                    "number",
                    exclusiveMinimum=0,
                    maximum=3600,
                    default=10,
                    description="How long to stay attached (the process may end sooner).",
                ),
                "mode": _MODE_ARG,
                "sample_interval_bytes": _SAMPLE_INTERVAL_ARG,
            },
            ("pid",),
        ),
        _record({"run": _SUMMARY, "messages": _STRING, "top_lines": _array(_LINE)}),
        read_only=False,
    ),
)
