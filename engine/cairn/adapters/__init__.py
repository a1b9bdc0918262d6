"""Adapters: the ways in to the engine (CLI, Claude Code hooks, the warm process, the MCP server).

Each uses only the names `cairn` exports (the engine API); none runs SQL or reaches into the store.
tests/test_architecture.py enforces it.
"""
