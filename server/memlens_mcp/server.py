"""``memlens mcp``: an MCP server over the runs of a workspace, for coding agents.

Built on the official MCP Python SDK's low-level server, with the tools' JSON schemas written
out here: they are the contract (docs/agents.md). Arguments are checked against the input
schema by :func:`check_arguments`; answers are ``structuredContent`` (with the same JSON as
text) under the names of the JSON export, and every failure is a tool error with the one line
the CLI would print (``memlens: <message>``), never a traceback.

Only this module imports the SDK (tests/unit/test_import_rules.py); ``memlens mcp`` loads it
when it starts, so no other command pays for it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from memlens import query, runfile
from memlens._version import __version__
from memlens.errors import MemlensError, os_error_reason
from memlens.model import ERRORS, FIGURES, NAMED_FIGURES, SELF_FIGURES, Run
from memlens.store import Store

logger = logging.getLogger("memlens.mcp")

RUN_URI = "memlens://runs/"
#: Bytes of a profiled program's stdout and stderr that profile_script returns (the end).
OUTPUT_TAIL = 4000
#: After a timeout, how long the program has to save its run after SIGTERM before SIGKILL.
TERM_GRACE_S = 10.0
DEFAULT_SAMPLE_INTERVAL = 128 * 1024
#: Parsed runs kept in memory (by file, inode, modification time and size): follow-up calls
#: about the same run do not read it again.
RUN_CACHE_SIZE = 4


# -- the workspace -----------------------------------------------------------------------------
class Workspace:
    """The directory the server serves: its store, and the only place it reads or runs files."""

    def __init__(self, root: str | os.PathLike[str], allow_run: bool = False) -> None:
        self.root = Path(os.path.realpath(root))
        self.store = Store(self.root)
        self.allow_run = allow_run
        #: One profiled program at a time: they would share the machine (and skew each
        #: other's timings), and each takes the store's next run name.
        self.program_lock = threading.Lock()
        self._runs: dict[tuple[str, int, int, int], Run] = {}
        self._cache_lock = threading.Lock()

    def check_inside(self, path: str | os.PathLike[str], what: str) -> None:
        """A MemlensError unless ``path`` (symlinks resolved) is inside the workspace."""
        real = Path(os.path.realpath(path))
        if real != self.root and self.root not in real.parents:
            raise MemlensError(f"{what}: outside the workspace {self.root}")

    def run_path(self, spec: str | None, default: str = "latest") -> Path:
        """A run spec (as on the command line: path, id, prefix, latest, baseline) -> its file,
        as the CLI would name it in messages."""
        try:
            path = self.store.resolve(spec, default)
        except OSError as exc:  # e.g. a name too long for the file system
            raise MemlensError(f"cannot read {spec}: {os_error_reason(exc)}") from None
        self.check_inside(path, spec or default)
        return path

    def read(self, path: Path) -> Run:
        """The run in ``path``; unreadable files raise the reader's one-line RunFileError."""
        try:
            st = path.stat()
        except OSError:
            return runfile.read(path)  # the reader words the error
        key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
        with self._cache_lock:
            run = self._runs.get(key)
        if run is None:
            run = runfile.read(path)
            with self._cache_lock:
                while len(self._runs) >= RUN_CACHE_SIZE:
                    self._runs.pop(next(iter(self._runs)))
                self._runs[key] = run
        return run

    def run(self, spec: str | None, default: str = "latest") -> tuple[Path, Run]:
        path = self.run_path(spec, default)
        return path, self.read(path)


# -- schemas -----------------------------------------------------------------------------------
def _optional_string(description: str) -> dict[str, Any]:
    return {"type": ["string", "null"], "description": description}


_RUN_ARG = _optional_string(
    "The run: a run id (or a unique prefix), `latest`, `baseline`, or the path of a run "
    "file inside the workspace. Default: latest."
)
_BY_ARG = {
    "type": "string",
    "enum": list(SELF_FIGURES),
    "default": "peak",
    "description": "The figure that ranks: peak (held at the run's peak), alloc (allocated "
    "over the run) or live (still held at exit).",
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
_RUN_REF = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "path": {"type": "string"}},
    "required": ["id", "path"],
}
_FIGURE_PROPS: dict[str, Any] = {
    **{f: {"type": "integer"} for f in FIGURES},
    **{e: {"type": "number"} for e in ERRORS},
}
_LINE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "line": {"type": "integer"},
        "code": {"type": "string"},
        "function": {"type": ["string", "null"]},
        **_FIGURE_PROPS,
    },
    "required": ["path", "line", "code", "function", *FIGURES],
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
        "incl_peak_bytes": {"type": "integer"},
        "incl_alloc_bytes": {"type": "integer"},
    },
    "required": ["frames", "incl_peak_bytes", "incl_alloc_bytes"],
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


#: The arguments of the tools that rank lines or functions of one run.
_RANKING_ARGS = _object(
    {"run": _RUN_ARG, "by": _BY_ARG, "limit": _LIMIT_ARG, "include_library": _LIBRARY_ARG}
)


# -- checking arguments --------------------------------------------------------------------------
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


# -- the tools -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolSpec:
    """One tool: its schemas, and the function that answers (checked arguments -> result)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    call: Callable[[Workspace, dict[str, Any]], dict[str, Any]]
    read_only: bool = True


def _limit(value: int) -> int | None:
    return value or None


def _list_runs(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    return {"workspace": str(ws.root), "runs": query.run_entries(ws.store)}


def _top_lines(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    path, run = ws.run(args["run"])
    lines = query.top_lines(run, args["by"], _limit(args["limit"]), args["include_library"])
    return {"run": query.run_ref(path), "by": NAMED_FIGURES[args["by"]].line, "lines": lines}


def _line_figures(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    from memlens.report import find_file

    start, end = args["start_line"], args["end_line"]
    if start is not None and end is not None and start > end:
        raise MemlensError("start_line must not be greater than end_line")
    path, run = ws.run(args["run"])
    file = find_file(run, args["path"])
    lines = query.line_figures(run, file, start or 1, end, args["call_paths"])
    return {"run": query.run_ref(path), "path": file, "lines": lines}


def _function_figures(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    path, run = ws.run(args["run"])
    functions = query.function_figures(
        run, args["by"], _limit(args["limit"]), args["include_library"]
    )
    return {
        "run": query.run_ref(path),
        "by": NAMED_FIGURES[args["by"]].incl,
        "functions": functions,
    }


def _diff_runs(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    from memlens.diff import diff_runs, to_json_dict

    path_a = ws.run_path(args["base"], "baseline")
    path_b = ws.run_path(args["run"], "latest")
    d = diff_runs(ws.read(path_a), ws.read(path_b))
    doc = to_json_dict(d, by=f"{args['by']}_bytes", top=_limit(args["limit"]))
    doc["a"], doc["b"] = str(path_a), str(path_b)
    return doc


def _profile_script(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    if not ws.allow_run:
        raise MemlensError(
            "profile_script is off: the server runs programs only when started with "
            "`memlens mcp --allow-run`"
        )
    script, *program_args = args["argv"]
    if script.startswith("-"):
        raise MemlensError(f"argv[0] must be a script in the workspace, not {script!r}")
    ws.check_inside(ws.root / script, script)  # memlens run itself says if it cannot run it
    with ws.program_lock:
        return _profile(ws, args, script, program_args)


def _profile(
    ws: Workspace, args: dict[str, Any], script: str, program_args: list[str]
) -> dict[str, Any]:
    out = ws.store.new_run_path()
    command = [sys.executable, "-m", "memlens", "run", "--no-report", "--dir", str(ws.root)]
    command += ["-o", str(out)]
    if args["mode"] == "sample":
        command += ["--sample", str(args["sample_interval_bytes"] or DEFAULT_SAMPLE_INTERVAL)]
    command += [script, *program_args]
    exit_code, timed_out, stdout, stderr = _run_program(command, ws.root, args["timeout_s"])
    if not out.is_file():
        if timed_out:
            raise MemlensError(f"{script} timed out after {args['timeout_s']:g} s; no run written")
        said = [line for line in stderr.splitlines() if line.startswith("memlens: ")]
        if said:
            raise MemlensError(said[-1].removeprefix("memlens: "))
        raise MemlensError(f"{script} exited with {exit_code} and no run was written")
    run = ws.read(out)
    return {
        "run": query.run_summary(out, run),
        "exit_code": exit_code,
        "timed_out": timed_out,
        "stdout": stdout,
        "stderr": stderr,
        "top_lines": query.top_lines(run, "peak", 10),
    }


def _run_program(command: list[str], cwd: Path, timeout_s: float) -> tuple[int, bool, str, str]:
    """Run ``command`` with no input; after ``timeout_s`` stop it (SIGTERM: memlens saves the
    run, incomplete; SIGKILL if it is still there after :data:`TERM_GRACE_S`). Returns the
    exit code (negative: ended by that signal), whether it timed out, and the ends of its
    stdout and stderr."""
    posix = os.name == "posix"
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                command,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=posix,  # its own process group: a timeout stops all of it
            )
        except (OSError, ValueError) as exc:
            raise MemlensError(f"cannot start {command[0]}: {exc}") from None
        timed_out = False
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _signal(proc, signal.SIGTERM if posix else None)
            try:
                proc.wait(TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL if posix else None)
                proc.wait()
        return proc.returncode, timed_out, _tail(out), _tail(err)


def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals | None) -> None:
    if sig is None:
        proc.kill()
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _tail(stream: IO[bytes]) -> str:
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(max(0, size - OUTPUT_TAIL))
    return stream.read().decode("utf-8", "replace")


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
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
        _list_runs,
    ),
    ToolSpec(
        "top_lines",
        "The source lines that used the most memory in a run, largest first, with every "
        "figure in bytes: peak_bytes (held when the program's traced memory peaked), "
        "alloc_bytes/alloc_count (allocated over the run), live_bytes/live_count (still held "
        "at exit: a likely leak), and incl_* (including what the line called).",
        _RANKING_ARGS,
        _output(
            {
                "run": _RUN_REF,
                "by": {"type": "string"},
                "lines": {"type": "array", "items": _LINE},
            }
        ),
        _top_lines,
    ),
    ToolSpec(
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
        _line_figures,
    ),
    ToolSpec(
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
                                    "incl_alloc_bytes",
                                    "incl_alloc_count",
                                    "incl_live_bytes",
                                    "incl_peak_bytes",
                                    "alloc_bytes",
                                    "alloc_count",
                                    "live_bytes",
                                    "peak_bytes",
                                )
                            },
                        },
                        "required": ["path", "qualname", "first_line", "last_line"],
                    },
                },
            }
        ),
        _function_figures,
    ),
    ToolSpec(
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
        _output(
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
        ),
        _diff_runs,
    ),
    ToolSpec(
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
                "mode": {
                    "type": "string",
                    "enum": ["exact", "sample"],
                    "default": "exact",
                    "description": "exact: every allocation; sample: near-zero overhead estimates.",
                },
                "sample_interval_bytes": {
                    "type": ["integer", "null"],
                    "minimum": 1,
                    "description": "Mean bytes between samples in sample mode (default 128 KiB).",
                },
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
        _profile_script,
        read_only=False,
    ),
)


# -- the server ----------------------------------------------------------------------------------
def _text(text: str) -> list[types.ContentBlock]:
    return [types.TextContent(type="text", text=text)]


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=_text(f"memlens: {message}"), is_error=True)


async def call_tool(ws: Workspace, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
    """Answer one tool call; every failure is a tool error of one line."""
    tool = next((t for t in TOOLS if t.name == name), None)
    if tool is None:
        return _error(f"no tool {name!r} (tools: {', '.join(t.name for t in TOOLS)})")
    try:
        args = check_arguments(tool.input_schema, arguments)
        # Reading runs and running programs block: off the event loop.
        result = await anyio.to_thread.run_sync(tool.call, ws, args)
    except MemlensError as exc:
        return _error(str(exc))
    except Exception as exc:  # a bug: one line to the client, the traceback to our stderr
        logger.exception("memlens mcp: %s failed", name)
        return _error(f"internal error in {name} ({type(exc).__name__}); see the server's log")
    return types.CallToolResult(
        content=_text(json.dumps(result, separators=(",", ":"))), structured_content=result
    )


def _run_id(uri: str) -> str:
    run_id = uri.removeprefix(RUN_URI) if uri.startswith(RUN_URI) else ""
    if not run_id or "/" in run_id or "\\" in run_id:
        raise MemlensError(f"no run resource {uri!r} (expected {RUN_URI}ID)")
    return run_id


def _read_resource(ws: Workspace, uri: str) -> str:
    from memlens.export import to_json_dict

    _, run = ws.run(_run_id(uri))
    return json.dumps(to_json_dict(run), separators=(",", ":"))


def create_server(ws: Workspace) -> Server[Any]:
    """The low-level SDK server answering for ``ws``."""

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.input_schema,
                    output_schema=t.output_schema,
                    annotations=types.ToolAnnotations(
                        read_only_hint=t.read_only, open_world_hint=not t.read_only
                    ),
                )
                for t in TOOLS
            ]
        )

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await call_tool(ws, params.name, params.arguments or {})

    async def list_resources(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        files = await anyio.to_thread.run_sync(ws.store.run_files)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    name=p.stem,
                    uri=RUN_URI + p.stem,
                    description=f"run {p.stem} as JSON (memlens export)",
                    mime_type="application/json",
                )
                for p in files
            ]
        )

    async def list_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    name="run",
                    uri_template=RUN_URI + "{id}",
                    description="A run as JSON (memlens export): id, prefix, latest or baseline",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        try:
            text = await anyio.to_thread.run_sync(_read_resource, ws, params.uri)
        except MemlensError as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=f"memlens: {exc}") from None
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=params.uri, text=text, mime_type="application/json")
            ]
        )

    return Server(
        "memlens",
        version=__version__,
        instructions="Memory profiles of this workspace's Python programs, per line and per "
        "function, in bytes. Start with list_runs, then top_lines.",
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def serve_stdio(ws: Workspace) -> None:
    server = create_server(ws)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def serve_http(ws: Workspace, port: int) -> None:
    """Streamable HTTP on 127.0.0.1:``port`` (0: any free port), at ``/mcp``."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    except OSError as exc:
        sock.close()
        raise MemlensError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    app = create_server(ws).streamable_http_app(host="127.0.0.1")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    print(f"memlens: MCP server for {ws.root} at {url}", file=sys.stderr, flush=True)
    server.run(sockets=[sock])


def serve(root: str, *, allow_run: bool = False, http: bool = False, port: int = 8765) -> None:
    """Serve the workspace ``root``: relative paths in calls are taken from it."""
    ws = Workspace(root, allow_run)
    if not ws.root.is_dir():
        raise MemlensError(f"cannot serve {root}: not a directory")
    os.chdir(ws.root)
    if http:
        serve_http(ws, port)
    else:
        serve_stdio(ws)
