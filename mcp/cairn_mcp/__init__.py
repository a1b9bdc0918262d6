"""The MCP server's adapter code over the cairn engine: the engine session, compact results, and
review candidates. mcp/server.py wires them to MCP tools."""
