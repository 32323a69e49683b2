"""The MCP tools' answers: plain functions from a tool's checked arguments to a JSON-ready dict,
in bytes, under the names of the JSON export. A :class:`memlens.errors.MemlensError` is the
one-line tool error the agent sees."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memlens import query
from memlens.diff import diff_runs, to_json_dict
from memlens.errors import MemlensError
from memlens.launch import ProfiledProgram
from memlens.model import NAMED_FIGURES
from memlens.moment import resolve, run_at
from memlens.report import find_file
from memlens_mcp.workspace import Workspace

#: profile_script's sampling interval when the call names none (as ``memlens run --sample``).
DEFAULT_SAMPLE_INTERVAL = 128 * 1024


def _limit(value: int) -> int | None:
    return value or None


def list_runs(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    return {"workspace": str(ws.root), "runs": query.run_entries(ws.store)}


def top_lines(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    path, run = ws.run(args["run"])
    lines = query.top_lines(run, args["by"], _limit(args["limit"]), args["include_library"])
    return {"run": query.run_ref(path), "by": NAMED_FIGURES[args["by"]].line, "lines": lines}


def line_figures(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    start, end = args["start_line"], args["end_line"]
    if start is not None and end is not None and start > end:
        raise MemlensError("start_line must not be greater than end_line")
    path, run = ws.run(args["run"])
    file = find_file(run, args["path"])
    lines = query.line_figures(run, file, start or 1, end, args["call_paths"])
    return {"run": query.run_ref(path), "path": file, "lines": lines}


def function_figures(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    path, run = ws.run(args["run"])
    functions = query.function_figures(
        run, args["by"], _limit(args["limit"]), args["include_library"]
    )
    return {
        "run": query.run_ref(path),
        "by": NAMED_FIGURES[args["by"]].incl,
        "functions": functions,
    }


def diff(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    path_a = ws.run_path(args["base"], "baseline")
    path_b = ws.run_path(args["run"], "latest")
    d = diff_runs(ws.read(path_a), ws.read(path_b))
    doc = to_json_dict(d, by=f"{args['by']}_bytes", top=_limit(args["limit"]))
    doc["a"], doc["b"] = str(path_a), str(path_b)
    return doc


def lines_at_moment(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    path, run = ws.run(args["run"])
    moment = resolve(run, args["moment"])
    lines = query.lines_at(run, moment, _limit(args["limit"]), args["include_library"])
    return {"run": query.run_ref(path), "moment": moment.as_json(), "lines": lines}


def diff_moments(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    path, run = ws.run(args["run"])
    start = resolve(run, args["from"] or "0%")
    end = resolve(run, args["to"] or "end")
    d = diff_runs(run_at(run, start), run_at(run, end))
    doc = to_json_dict(d, by="live_bytes", top=_limit(args["limit"]))
    doc["a"] = doc["b"] = str(path)
    doc["from"], doc["to"] = start.as_json(), end.as_json()
    return doc


def profile_script(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
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
    sampled = args["mode"] == "sample"
    program = ProfiledProgram(
        ws.root,
        script,
        program_args,
        sample_interval=(args["sample_interval_bytes"] or DEFAULT_SAMPLE_INTERVAL)
        if sampled
        else None,
    )
    program.start()
    code = program.wait(args["timeout_s"])
    timed_out = code is None
    if code is None:
        code = program.stop()
    failure = program.failure(code)
    if failure is not None:
        if timed_out:
            raise MemlensError(f"{script} timed out after {args['timeout_s']:g} s; no run written")
        raise MemlensError(failure)
    run = ws.read(program.run_path)
    return {
        "run": query.run_summary(program.run_path, run),
        "exit_code": code,
        "timed_out": timed_out,
        "stdout": program.stdout,
        "stderr": program.stderr,
        "top_lines": query.top_lines(run, "peak", 10),
    }


#: How long ``memlens attach`` may take beyond the attachment itself (starting in the process,
#: and writing the run of a big program) before attach_process stops it.
ATTACH_GRACE_S = 120.0


def attach_process(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    if not ws.allow_run:
        raise MemlensError(
            "attach_process is off: the server attaches to processes only when started with "
            "`memlens mcp --allow-run`"
        )
    with ws.program_lock:
        sampled = args["mode"] == "sample"
        program = ProfiledProgram.attached(
            ws.root,
            args["pid"],
            args["duration_s"],
            sample_interval=(args["sample_interval_bytes"] or DEFAULT_SAMPLE_INTERVAL)
            if sampled
            else None,
        )
        program.start()
        code = program.wait(args["duration_s"] + ATTACH_GRACE_S)
        if code is None:
            code = program.stop()
        failure = program.failure(code)
        if failure is not None:
            raise MemlensError(failure)
        run = ws.read(program.run_path)
        return {
            "run": query.run_summary(program.run_path, run),
            "messages": program.stderr,
            "top_lines": query.top_lines(run, "peak", 10),
        }


#: The function that answers each tool of :data:`memlens_mcp.schemas.TOOLS`.
CALLS: dict[str, Callable[[Workspace, dict[str, Any]], dict[str, Any]]] = {
    "list_runs": list_runs,
    "top_lines": top_lines,
    "line_figures": line_figures,
    "function_figures": function_figures,
    "diff_runs": diff,
    "lines_at_moment": lines_at_moment,
    "diff_moments": diff_moments,
    "profile_script": profile_script,
    "attach_process": attach_process,
}
