"""Registering Cairn's MCP server (stdio) with other clients: `cairn config --client NAME`.

Each client's format, as its documentation gives it:
- claude: `claude mcp add --transport stdio NAME -- COMMAND ARGS...` (Claude Code's CLI writes the
  config itself; the Cairn plugin already registers the server, so this is for use without it).
- cursor: `.cursor/mcp.json` in the project, `{"mcpServers": {NAME: {"command", "args"}}}`.
- opencode: `opencode.json` in the project, `{"mcp": {NAME: {"type": "local", "command": [...],
  "enabled": true}}}`.
- codex: `~/.codex/config.toml` ($CODEX_HOME), a `[mcp_servers.NAME]` table with `command`, `args`.
- generic: the `mcpServers` JSON most MCP clients read (Claude Desktop, Windsurf, ...).
examples/ holds the snippet for each (tests/adapters/test_clients.py checks them against this module).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cairn import InvalidInput, process_env

CLIENTS = ("claude", "opencode", "cursor", "codex", "generic")
SERVER_NAME = "cairn"
EXAMPLE_FILES = {"claude": "claude.sh", "opencode": "opencode.json", "cursor": "cursor-mcp.json",
                 "codex": "codex-config.toml", "generic": "mcp-servers.json"}


@dataclass(frozen=True)
class Registration:
    """What registers Cairn with a client: `snippet` (a command to run, or a config file's
    content), and `target`: the file it belongs in (None: a command, run it yourself)."""

    client: str
    snippet: str
    target: Path | None
    kind: str  # "command" | "json" | "toml"


def server_args(store: str | None) -> list[str]:
    return ["serve", "--transport", "stdio", *(["--store", store] if store else [])]


def server_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a client must pass the server so that it uses the data root and store this
    shell uses (`environ`: its environment): CAIRN_HOME when it is set to another folder than the
    default, CAIRN_STORE when set. A client started from a GUI does not inherit the shell's environment."""
    from cairn import user_data_dir

    env = {}
    home = environ.get("CAIRN_HOME")
    if home and os.path.realpath(os.path.expanduser(home)) != os.path.realpath(user_data_dir(environ)):
        env["CAIRN_HOME"] = os.path.abspath(os.path.expanduser(home))
    if environ.get("CAIRN_STORE"):
        env["CAIRN_STORE"] = environ["CAIRN_STORE"]
    return env


def registration(client: str, *, command: str = "cairn", store: str | None = None,
                 project: Path | None = None, env: dict[str, str] | None = None,
                 environ: Mapping[str, str] | None = None) -> Registration:
    """The registration for `client`. command: how the client starts `cairn` (an absolute path is
    safest: a client's PATH may not be your shell's). project: the folder project-level config
    files go in (default: the working directory). env: variables the client passes the server
    (server_env). environ: the shell's environment, whose CODEX_HOME counts (default:
    cairn.process_env()). Raises InvalidInput for an unknown client."""
    args = server_args(store)
    project = project or Path.cwd()
    env = env or {}
    if client == "claude":
        flags = [f for k, v in env.items() for f in ("-e", f"{k}={v}")]
        line = shlex.join(["claude", "mcp", "add", "--transport", "stdio", *flags, SERVER_NAME, "--", command, *args])
        return Registration(client, line + "\n", None, "command")
    if client in ("cursor", "generic"):
        data: dict[str, object] = {
            "mcpServers": {SERVER_NAME: {"command": command, "args": args, **({"env": env} if env else {})}}}
        target = project / ".cursor" / "mcp.json" if client == "cursor" else None
        return Registration(client, json.dumps(data, indent=2) + "\n", target, "json")
    if client == "opencode":
        server = {"type": "local", "command": [command, *args], "enabled": True,
                  **({"environment": env} if env else {})}
        data = {"$schema": "https://opencode.ai/config.json", "mcp": {SERVER_NAME: server}}
        return Registration(client, json.dumps(data, indent=2) + "\n", project / "opencode.json", "json")
    if client == "codex":
        home = Path((process_env() if environ is None else environ).get("CODEX_HOME") or Path.home() / ".codex")
        table = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in env.items())
        text = (f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(command)}\n"
                f"args = [{', '.join(json.dumps(a) for a in args)}]\n" + (f"env = {{ {table} }}\n" if env else ""))
        return Registration(client, text, home / "config.toml", "toml")
    raise InvalidInput(f"unknown client {client!r}; expected one of: {', '.join(CLIENTS)}")


def apply(reg: Registration) -> str:
    """Write the registration into its target file, keeping everything else in it. Returns what
    was done: "written", "updated" or "unchanged". Raises InvalidInput when the file cannot be
    read as its format (it is left as it was), or when the registration is a command."""
    if reg.target is None:
        raise InvalidInput(f"{reg.client}: nothing to write; run the command, or add the snippet by hand")
    path = reg.target
    existing = path.read_text(encoding="utf-8") if path.exists() else None
    if reg.kind == "toml":
        import tomllib

        try:
            current = tomllib.loads(existing or "")
        except tomllib.TOMLDecodeError as exc:
            raise InvalidInput(f"{path} is not valid TOML ({exc}); add the snippet by hand") from None
        wanted = tomllib.loads(reg.snippet)["mcp_servers"][SERVER_NAME]
        have = current.get("mcp_servers", {}).get(SERVER_NAME)
        if have == wanted:
            return "unchanged"
        if have is not None:
            raise InvalidInput(f"{path} already has [mcp_servers.{SERVER_NAME}] with other settings; edit it by hand")
        text = (existing.rstrip("\n") + "\n\n" if existing else "") + reg.snippet
        done = "updated" if existing else "written"
    else:
        try:
            current = json.loads(existing) if existing else {}
        except ValueError as exc:
            raise InvalidInput(f"{path} is not plain JSON ({exc}); add the snippet by hand") from None
        if not isinstance(current, dict):
            raise InvalidInput(f"{path} is not a JSON object; add the snippet by hand")
        wanted = json.loads(reg.snippet)
        section = "mcp" if reg.client == "opencode" else "mcpServers"
        servers = current.setdefault(section, {})
        if servers.get(SERVER_NAME) == wanted[section][SERVER_NAME]:
            return "unchanged"
        servers[SERVER_NAME] = wanted[section][SERVER_NAME]
        for key, value in wanted.items():
            current.setdefault(key, value)
        text = json.dumps(current, indent=2) + "\n"
        done = "updated" if existing else "written"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.cairn.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return done
