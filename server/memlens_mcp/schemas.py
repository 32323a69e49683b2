"""The MCP tools' JSON schemas, written out: they are the contract with agents (docs/agents.md).

Answers are ``structuredContent`` under the names of the JSON export; :mod:`memlens_mcp.arguments`
checks every call against its tool's input schema.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def _optional_string(description: str) -> dict[str, Any]:
    return {"type": ["string", "null"], "description": description}


_RUN_ARG = _optional_string(
    "The run: a run id (or a unique prefix), `latest`, `baseline`, or the path of a run "
    "file inside the workspace. Default: latest."
)
_BY_ARG = {
    "type": "string",
    "enum": list(model.SELF_FIGURES),
    "default": "peak",
    "description": "The figure that ranks: peak (held at the run's peak), alloc (allocated "
    "over the run) or live (still held at exit); gpu_peak, gpu_alloc, gpu_live: the same of "
    "GPU memory (PyTorch CUDA, runs that recorded it).",
}
_LIMIT_ARG = {
    "type": "integer",
    "minimum": 0,
    "maximum": 100_000,
    "default": 20,
    "description": "At most this many rows; 0 = all.",
}
_LIBRARY_ARG = {
    "type": "boolean",
    "default": False,
    "description": "Also list files of the standard library and installed packages.",
}
_MODE_ARG = {
    "type": "string",
    "enum": ["exact", "sample"],
    "default": "exact",
    "description": "exact: every allocation; sample: near-zero overhead estimates.",
}
_SAMPLE_INTERVAL_ARG = {
    "type": ["integer", "null"],
    "minimum": 1,
    "description": "Mean bytes between samples in sample mode (default 128 KiB).",
}
_RUN_REF = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "path": {"type": "string"}},
    "required": ["id", "path"],
}
_FIGURE_PROPS: dict[str, Any] = {
    **{f: {"type": "integer"} for f in model.FIGURES},
    **{e: {"type": "number"} for e in model.ERRORS},
    # Runs that recorded GPU memory (PyTorch CUDA) only.
    **{f: {"type": "integer"} for f in model.GPU_FIGURES},
    "gpu_devices": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {k: {"type": "integer"} for k in ("device", *model.DEVICE_FIGURES)},
        },
    },
}
_HOP = {
    "type": "object",
    "properties": {
        "kind": {"type": "string"},
        "name": {"type": "string"},
        "type": {"type": "string"},
        "file": {"type": ["string", "null"]},
        "line": {"type": ["integer", "null"]},
    },
    "required": ["kind", "name", "type", "file", "line"],
}
_HELD_BY = {
    "type": "array",
    "description": "What keeps the line's memory alive at exit: reference paths from a root "
    "(module, thread, C code, cycle) to a sample of its objects; `objects` of the sample took "
    "each path; `outcome` says why there is none (budget, unreached). Empty when the run did "
    "not record it (lines not live at exit).",
    "items": {
        "type": "object",
        "properties": {
            "objects": {"type": "integer"},
            "outcome": {"type": "string", "enum": list(model.OUTCOMES)},
            "path": {"type": "string"},
            "hops": {"type": "array", "items": _HOP},
        },
        "required": ["objects", "outcome"],
    },
}
_LINE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "line": {"type": "integer"},
        "code": {"type": "string"},
        "function": {"type": ["string", "null"]},
        **_FIGURE_PROPS,
        "held_by": _HELD_BY,
    },
    "required": ["path", "line", "code", "function", *model.FIGURES, "held_by"],
}
_CALL_PATH = {
    "type": "object",
    "properties": {
        "frames": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "line": {"type": "integer"},
                    "function": {"type": "string"},
                },
                "required": ["path", "line", "function"],
            },
        },
        "frames_left_out": {"type": "integer"},
        "incl_peak_bytes": {"type": "integer"},
        "incl_alloc_bytes": {"type": "integer"},
    },
    "required": ["frames", "frames_left_out", "incl_peak_bytes", "incl_alloc_bytes"],
}
_SUMMARY = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "path": {"type": "string"},
        "command": {"type": "array", "items": {"type": "string"}},
        "started": {"type": "string"},
        "duration_s": {"type": "number"},
        "exit_code": {"type": ["integer", "null"]},
        "mode": {"type": "string"},
        "sample_interval_bytes": {"type": ["integer", "null"]},
        "peak_traced_bytes": {"type": "integer"},
        "peak_rss_bytes": {"type": "integer"},
        "complete": {"type": "boolean"},
        "attached": {"type": "boolean"},
        "gpu_peak_bytes": {"type": "integer"},
    },
    "required": ["id", "path", "command", "mode", "peak_traced_bytes", "complete"],
}
_CHANGE = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "b": {"type": "integer"},
        "delta": {"type": "integer"},
        "ratio": {"type": ["number", "null"]},
    },
    "required": ["a", "b", "delta", "ratio"],
}


def _object(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }


def _output(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(properties)}


_MOMENT_ARG_TEXT = (
    "A moment of the run: `peak` (each line's exact share of the peak), `end` (live at "
    "exit), a time such as `2.5s` or `250ms`, or a share of the run such as `40%`."
)
_MOMENT_INFO = {
    "type": "object",
    "properties": {
        "kind": {"enum": ["peak", "end", "time"]},
        "name": {"type": "string"},
        "spec": {"type": "string"},
        "t": {"type": ["number", "null"]},
        "traced_bytes": {"type": "integer"},
    },
    "required": ["kind", "name", "spec", "t", "traced_bytes"],
}
#: The document `memlens diff --json` prints (diff_runs, diff_moments).
_DIFF_OUTPUT = _output(
    {
        "format": {"const": "memlens-diff"},
        "version": {"type": "integer"},
        "a": {"type": "string"},
        "b": {"type": "string"},
        "by": {"type": "string"},
        "totals": {"type": "object", "additionalProperties": _CHANGE},
        "files": {"type": "object"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "file": {"type": "string"},
                    "line_a": {"type": ["integer", "null"]},
                    "line_b": {"type": ["integer", "null"]},
                    "status": {"enum": ["same-line", "moved", "new", "gone"]},
                    "matched_by": {"type": "string"},
                    "figures": {"type": "object", "additionalProperties": _CHANGE},
                },
                "required": ["file", "line_a", "line_b", "status", "figures"],
            },
        },
        "functions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "file": {"type": "string"},
                    "qualname": {"type": "string"},
                    "figures": {"type": "object", "additionalProperties": _CHANGE},
                },
                "required": ["file", "qualname", "figures"],
            },
        },
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
        _output(
            {
                "workspace": {"type": "string"},
                "runs": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "path": {"type": "string"},
                            "started": {"type": ["string", "null"]},
                            "command": {"type": ["array", "null"], "items": {"type": "string"}},
                            "mode": {"type": ["string", "null"]},
                            "peak_traced_bytes": {"type": ["integer", "null"]},
                            "duration_s": {"type": ["number", "null"]},
                            "complete": {"type": ["boolean", "null"]},
                            "latest": {"type": "boolean"},
                            "baseline": {"type": "boolean"},
                            "error": {"type": ["string", "null"]},
                        },
                        "required": ["id", "path", "latest", "baseline", "error"],
                    },
                },
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
        _output(
            {
                "run": _RUN_REF,
                "by": {"type": "string"},
                "lines": {"type": "array", "items": _LINE},
            }
        ),
    ),
    ToolSchema(
        "line_figures",
        "The figures of the lines of one source file (between start_line and end_line), each "
        "with the heaviest call paths that reached it (root first; incl_* bytes of each path).",
        _object(
            {
                "path": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The source file: absolute, relative to the workspace, or "
                    "a unique end of a profiled file's path (`app/models.py`).",
                },
                "start_line": {"type": ["integer", "null"], "minimum": 1},
                "end_line": {"type": ["integer", "null"], "minimum": 1},
                "run": _RUN_ARG,
                "call_paths": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 100,
                    "default": 3,
                    "description": "Call paths per line.",
                },
            },
            ("path",),
        ),
        _output(
            {
                "run": _RUN_REF,
                "path": {"type": "string"},
                "lines": {
                    "type": "array",
                    "items": {
                        **_LINE,
                        "properties": {
                            **_LINE["properties"],
                            "call_paths": {"type": "array", "items": _CALL_PATH},
                        },
                        "required": [*_LINE["required"], "call_paths"],
                    },
                },
            }
        ),
    ),
    ToolSchema(
        "function_figures",
        "Functions by memory, largest first: incl_* figures include everything the function "
        "called (each stack once); alloc_bytes, alloc_count, live_bytes and peak_bytes are the "
        "function's own lines.",
        _RANKING_ARGS,
        _output(
            {
                "run": _RUN_REF,
                "by": {"type": "string"},
                "functions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "qualname": {"type": "string"},
                            "first_line": {"type": "integer"},
                            "last_line": {"type": "integer"},
                            **{
                                f: {"type": "integer"}
                                for f in (
                                    *(f"incl_{f}" for f in model.FUNCTION_FIGURES),
                                    *model.FUNCTION_FIGURES,
                                    *(f"incl_{f}" for f in model.GPU_FUNCTION_FIGURES),
                                )
                            },
                        },
                        "required": ["path", "qualname", "first_line", "last_line"],
                    },
                },
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
                "moment": {"type": "string", "minLength": 1, "description": _MOMENT_ARG_TEXT},
                "run": _RUN_ARG,
                "limit": _LIMIT_ARG,
                "include_library": _LIBRARY_ARG,
            },
            ("moment",),
        ),
        _output(
            {
                "run": _RUN_REF,
                "moment": _MOMENT_INFO,
                "lines": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "path": {"type": "string"},
                            "line": {"type": "integer"},
                            "code": {"type": "string"},
                            "function": {"type": ["string", "null"]},
                            "live_bytes": {"type": "integer"},
                            "incl_live_bytes": {"type": "integer"},
                        },
                        "required": [
                            "path",
                            "line",
                            "code",
                            "function",
                            "live_bytes",
                            "incl_live_bytes",
                        ],
                    },
                },
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
        {
            **_DIFF_OUTPUT,
            "properties": {**_DIFF_OUTPUT["properties"], "from": _MOMENT_INFO, "to": _MOMENT_INFO},
            "required": [*_DIFF_OUTPUT["required"], "from", "to"],
        },
    ),
    ToolSchema(
        "profile_script",
        "Run a Python script of the workspace under `memlens run` and return the run's "
        "summary and its heaviest lines; the run is saved in the store and becomes latest. "
        "Only when the server was started with --allow-run.",
        _object(
            {
                "argv": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": 1000,
                    "description": "The script (a path inside the workspace) and its arguments.",
                },
                "mode": _MODE_ARG,
                "sample_interval_bytes": _SAMPLE_INTERVAL_ARG,
                "timeout_s": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": 86400,
                    "default": 120,
                    "description": "Stop the program after this long (the run is still saved, "
                    "marked incomplete).",
                },
            },
            ("argv",),
        ),
        _output(
            {
                "run": _SUMMARY,
                "exit_code": {"type": "integer"},
                "timed_out": {"type": "boolean"},
                "stdout": {"type": "string"},
                "stderr": {"type": "string"},
                "top_lines": {"type": "array", "items": _LINE},
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
                "pid": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 2**31 - 1,
                    "description": "The process id (`memlens attach --list` lists them).",
                },
                "duration_s": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "maximum": 3600,
                    "default": 10,
                    "description": "How long to stay attached (the process may end sooner).",
                },
                "mode": _MODE_ARG,
                "sample_interval_bytes": _SAMPLE_INTERVAL_ARG,
            },
            ("pid",),
        ),
        _output(
            {
                "run": _SUMMARY,
                "messages": {"type": "string"},
                "top_lines": {"type": "array", "items": _LINE},
            }
        ),
        read_only=False,
    ),
)
