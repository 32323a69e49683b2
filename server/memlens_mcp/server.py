"""``memlens mcp``: an MCP server over the runs of a workspace, for coding agents.

Built on the official MCP Python SDK's low-level server (stdio, or streamable HTTP on
127.0.0.1), with the tools' schemas written out (:mod:`memlens_mcp.schemas`: they are the
contract, docs/agents.md). Each call's arguments are checked against its input schema
(:mod:`memlens_mcp.arguments`) and answered by a plain function (:mod:`memlens_mcp.tools`) off
the event loop: ``structuredContent`` (with the same JSON as text), and every failure a tool
error with the one line the CLI would print (``memlens: <message>``), never a traceback.

Only this module imports the SDK (tests/unit/test_import_rules.py); ``memlens mcp`` loads it
when it starts, so no other command pays for it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from memlens._version import __version__
from memlens.errors import MemlensError
from memlens.export import to_json_dict
from memlens_mcp.arguments import check_arguments
from memlens_mcp.schemas import TOOLS
from memlens_mcp.tools import CALLS
from memlens_mcp.workspace import Workspace

logger = logging.getLogger("memlens.mcp")

RUN_URI = "memlens://runs/"
#: The one resource template: a run by any id the tools take.
RUN_TEMPLATE = types.ResourceTemplate(
    name="run",
    uri_template=RUN_URI + "{id}",
    description="A run as JSON (memlens export): id, prefix, latest or baseline",
    mime_type="application/json",
)


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
        result = await anyio.to_thread.run_sync(CALLS[name], ws, args)
    except MemlensError as exc:
        return _error(str(exc))
    except Exception as exc:  # a bug: one line to the client, the traceback to our stderr
        logger.exception("memlens mcp: %s failed", name)
        return _error(f"internal error in {name} ({type(exc).__name__}); see the server's log")
    text = json.dumps(result, separators=(",", ":"))
    if "\\ud" in text:  # a surrogate, maybe lone (a file name that is not UTF-8)
        result = _unicode(result)
        text = json.dumps(result, separators=(",", ":"))
    return types.CallToolResult(content=_text(text), structured_content=result)


def _unicode(value: Any) -> Any:
    """``value`` with every string valid Unicode: the undecodable bytes of a file name that is
    not UTF-8 (lone surrogates, as ``os.fsdecode`` gives them) become U+FFFD, which JSON sent
    as UTF-8 can carry."""
    if isinstance(value, str):
        try:
            raw = value.encode("utf-8", "surrogateescape")  # the name's own bytes
        except UnicodeEncodeError:  # other lone surrogates (a JSON escape in a header)
            raw = value.encode("utf-8", "surrogatepass")
        return raw.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_unicode(k): _unicode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unicode(v) for v in value]
    return value


def _run_id(uri: str) -> str:
    run_id = uri.removeprefix(RUN_URI) if uri.startswith(RUN_URI) else ""
    if not run_id or "/" in run_id or "\\" in run_id:
        raise MemlensError(f"no run resource {uri!r} (expected {RUN_URI}ID)")
    return run_id


def _read_resource(ws: Workspace, uri: str) -> str:
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
                if t.read_only or ws.allow_run  # what runs programs only with --allow-run
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
        return types.ListResourceTemplatesResult(resource_templates=[RUN_TEMPLATE])

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
