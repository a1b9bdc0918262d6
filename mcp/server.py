"""Launcher of Cairn's MCP server (stdio) from the plugin folder: the server is
cairn.adapters.mcp.server, run with this plugin's engine first on the path."""

import sys
from pathlib import Path

# Replace this folder (sys.path[0] for a script) with the engine: nothing here shadows a package.
sys.path[0] = str(Path(__file__).resolve().parent.parent / "engine")

from cairn.adapters.mcp.server import main  # noqa: E402

if __name__ == "__main__":
    main(defer_review=True)  # the plugin's SessionEnd hook settles the session's writes
