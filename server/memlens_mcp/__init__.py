"""memlens's MCP server (``memlens mcp``): the workspace's runs, for coding agents.

Only :mod:`memlens_mcp.server` imports the MCP SDK, an optional extra (memlens's ``mcp`` extra).
"""
