"""`cairn config --client NAME`: each client's snippet is the file in examples/, is valid in its
format, merges into an existing config without losing anything, and starts a working MCP server."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cairn.adapters.clients import CLIENTS, EXAMPLE_FILES, registration

from tests.conftest import WAIT_S, git_init
from tests.serving import keyword_only_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARGS = ["serve", "--transport", "stdio"]


def config(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cairn", "config", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=WAIT_S)


@pytest.fixture
def env(tmp_path, cairn_home):
    return {**keyword_only_env(tmp_path), "CODEX_HOME": str(tmp_path / "codex-home")}


@pytest.mark.parametrize("client", CLIENTS)
def test_each_snippet_is_the_example_file(client, tmp_path, env):
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in env.items() if k != "CAIRN_HOME"}  # the default data root: no env in the snippet
    done = config("--client", client, "--dry-run", "--command", "cairn", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (EXAMPLES / EXAMPLE_FILES[client]).read_text()
    assert list(project.iterdir()) == [] and not Path(env["CODEX_HOME"]).exists()  # --dry-run wrote nothing


def test_the_examples_are_each_clients_format():
    assert shlex.split((EXAMPLES / "claude.sh").read_text()) == [
        "claude", "mcp", "add", "--transport", "stdio", "cairn", "--", "cairn", *ARGS]
    opencode = json.loads((EXAMPLES / "opencode.json").read_text())["mcp"]["cairn"]
    assert opencode == {"type": "local", "command": ["cairn", *ARGS], "enabled": True}
    for name in ("cursor-mcp.json", "mcp-servers.json"):
        assert json.loads((EXAMPLES / name).read_text())["mcpServers"]["cairn"] == {"command": "cairn", "args": ARGS}
    codex = tomllib.loads((EXAMPLES / "codex-config.toml").read_text())["mcp_servers"]["cairn"]
    assert codex == {"command": "cairn", "args": ARGS}


def test_config_merges_into_existing_files(tmp_path, env):
    project = tmp_path / "project"
    (project / ".cursor").mkdir(parents=True)
    other = {"mcpServers": {"github": {"command": "gh-mcp", "args": []}}}
    (project / ".cursor" / "mcp.json").write_text(json.dumps(other))
    done = config("--client", "cursor", "--command", "/opt/cairn/bin/cairn", "--store", "team", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    merged = json.loads((project / ".cursor" / "mcp.json").read_text())["mcpServers"]
    assert merged["github"] == other["mcpServers"]["github"]
    assert merged["cairn"] == {"command": "/opt/cairn/bin/cairn", "args": [*ARGS, "--store", "team"],
                               "env": {"CAIRN_HOME": env["CAIRN_HOME"]}}
    again = config("--client", "cursor", "--command", "/opt/cairn/bin/cairn", "--store", "team", cwd=project, env=env)
    assert again.stdout.startswith("unchanged")

    codex = Path(env["CODEX_HOME"]) / "config.toml"
    codex.parent.mkdir()
    codex.write_text('model = "o4-mini"\n')
    assert config("--client", "codex", "--command", "cairn", cwd=project, env=env).returncode == 0
    parsed = tomllib.loads(codex.read_text())
    assert parsed["model"] == "o4-mini" and parsed["mcp_servers"]["cairn"]["args"] == ARGS

    # a file Cairn cannot read as plain JSON (opencode allows comments) is left alone, with a reason
    (project / "opencode.json").write_text('{\n  // mine\n  "mcp": {}\n}\n')
    refused = config("--client", "opencode", "--command", "cairn", cwd=project, env=env)
    assert refused.returncode == 2 and "add the snippet by hand" in refused.stderr
    assert (project / "opencode.json").read_text() == '{\n  // mine\n  "mcp": {}\n}\n'


def test_the_generic_snippet_starts_a_working_server(tmp_path, env):
    project = git_init(tmp_path / "project")
    cairn_bin = str(Path(sys.executable).with_name("cairn"))
    server = json.loads(registration("generic", command=cairn_bin).snippet)["mcpServers"]["cairn"]

    async def tools():
        params = StdioServerParameters(command=server["command"], args=server["args"], env=env, cwd=str(project))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return {t.name for t in (await session.list_tools()).tools}

    assert "memory_recall" in asyncio.run(tools())


@pytest.mark.parametrize("client", CLIENTS)
def test_a_data_root_and_store_set_in_the_shell_go_into_the_snippets_env(client, tmp_path, env, cairn_home):
    project = tmp_path / "project"
    project.mkdir()
    done = config("--client", client, "--dry-run", "--command", "cairn", cwd=project,
                  env={**env, "CAIRN_STORE": "team-notes"})
    assert done.returncode == 0, done.stderr
    wanted = {"CAIRN_HOME": str(cairn_home), "CAIRN_STORE": "team-notes"}
    if client == "claude":
        words = shlex.split(done.stdout)
        assert [words[i + 1] for i, w in enumerate(words) if w == "-e"] == [f"{k}={v}" for k, v in wanted.items()]
    elif client == "codex":
        assert tomllib.loads(done.stdout)["mcp_servers"]["cairn"]["env"] == wanted
    elif client == "opencode":
        assert json.loads(done.stdout)["mcp"]["cairn"]["environment"] == wanted
    else:
        assert json.loads(done.stdout)["mcpServers"]["cairn"]["env"] == wanted
