"""The fixed cost of Cairn's MCP server: the characters every Claude Code session pays for its tools.

Starts the real server (mcp/server.py, the plugin's launcher) over stdio with the `mcp` SDK's
client, as Claude Code does, calls initialize and tools/list, and prints, per tool, the characters
of its JSON as tools/list sends it (name, title, description, inputSchema, annotations, and
outputSchema when sent), the characters of the server's `instructions`, and the total. A tool's
JSON is the server's by-alias, None-free dump (mcp.server.runner), written by json.dumps with its
default ", " and ": " separators and non-ASCII kept (one character each): the measure of issue 30,
about 5% above the compact JSON on the wire, so a bound held here holds there too.

    python bench/mcp_cost.py [--json]

--json prints one JSON object instead ({"tools": {name: chars}, "instructions": chars, "total":
chars}); tests/adapters/test_mcp_server.py reads it to hold the total under its bound. The server
runs on a throwaway data root with embedding disabled, so no model loads and nothing is left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "mcp" / "server.py"


def json_chars(model: Any) -> int:
    """Characters of an SDK model's JSON: the dump the server sends (mcp.server.runner: by_alias=True,
    mode="json", exclude_none=True), written with json.dumps's default separators."""
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return len(json.dumps(data, ensure_ascii=False))


async def _measure(env: dict[str, str]) -> dict[str, Any]:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=env, cwd=str(ROOT))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
    tools = {tool.name: json_chars(tool) for tool in listed.tools}
    instructions = len(init.instructions or "")
    return {"tools": tools, "instructions": instructions, "total": sum(tools.values()) + instructions}


def measure() -> dict[str, Any]:
    """{"tools": {name: characters}, "instructions": characters, "total": characters}, from a
    server started on a temporary data root and project folder (embedding disabled: no model)."""
    with tempfile.TemporaryDirectory(prefix="cairn-mcp-cost-") as tmp:
        home, project = Path(tmp) / "home", Path(tmp) / "project"
        home.mkdir()
        project.mkdir()
        config = home / "config.yaml"
        config.write_text("embedding:\n  enabled: false\n")
        env = {k: v for k, v in os.environ.items() if k != "CAIRN_STORE"}
        env.update(CAIRN_HOME=str(home), CAIRN_CONFIG=str(config), CLAUDE_PROJECT_DIR=str(project),
                   CAIRN_NO_WARM="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT / "engine"))
        return asyncio.run(_measure(env))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    result = measure()
    if args.json:
        print(json.dumps(result))
        return
    width = max(len(name) for name in result["tools"])
    for name, chars in sorted(result["tools"].items(), key=lambda item: -item[1]):
        print(f"{name:<{width}}  {chars:>6,}")
    print(f"{'tools (' + str(len(result['tools'])) + ')':<{width}}  {sum(result['tools'].values()):>6,}")
    print(f"{'instructions':<{width}}  {result['instructions']:>6,}")
    print(f"{'total':<{width}}  {result['total']:>6,}")


if __name__ == "__main__":
    main()
