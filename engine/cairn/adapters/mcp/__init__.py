"""The MCP server (stdio): the memory tools, as thin wrappers over the engine API."""
