"""Smoke tests for the e2e harness, with a throwaway plugin (hooks + a stdio MCP server).

The plugin is written into tmp_path; it is *not* the Cairn plugin. It proves that the harness
installs and drives the real Claude Code CLI: hook context reaches the request body, a plugin MCP
tool call runs and its result comes back, and multi-turn stream-json sessions work.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from fake_api import FakeAnthropicAPI, Text, ToolUse, steps, tool_result_text
from harness import ClaudeHarness, HarnessError

from tests.conftest import WAIT_S, wait_for

pytestmark = pytest.mark.e2e

PLUGIN = "e2e-probe"
MARKETPLACE = "e2e-probe-market"
SERVER = "probe"
ECHO_TOOL = f"mcp__plugin_{PLUGIN}_{SERVER}__echo"

HOOK_SCRIPT = '''\
import json, sys
event = sys.argv[1]
data = json.load(sys.stdin)
context = f"probe-{event}-context prompt={data.get('prompt')}"
print(json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}))
'''

MCP_SERVER = '''\
from mcp.server.mcpserver import MCPServer

server = MCPServer("probe")


@server.tool()
def echo(text: str) -> str:
    """Return the text, prefixed with 'echo: '."""
    return f"echo: {text}"


if __name__ == "__main__":
    server.run()
'''


def write_probe_plugin(root: Path) -> Path:
    """Write the throwaway plugin (and a directory marketplace listing it) into ``root``; return it."""
    (root / ".claude-plugin").mkdir(parents=True)
    (root / "hooks").mkdir()
    py = json.dumps(sys.executable)  # absolute interpreter (with `mcp`), double-quoted
    (root / ".claude-plugin" / "plugin.json").write_text(json.dumps({
        "name": PLUGIN, "version": "0.0.1", "description": "e2e harness probe",
        "author": {"name": "cairn tests"}, "license": "MIT"}))
    (root / ".claude-plugin" / "marketplace.json").write_text(json.dumps({
        "name": MARKETPLACE, "description": "e2e harness probe marketplace", "owner": {"name": "cairn tests"},
        "plugins": [{"name": PLUGIN, "source": "./", "description": "e2e harness probe"}]}))
    (root / "hooks" / "context.py").write_text(HOOK_SCRIPT)
    hook = f'{py} "${{CLAUDE_PLUGIN_ROOT}}/hooks/context.py"'
    (root / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {
        event: [{"hooks": [{"type": "command", "command": f"{hook} {event}", "timeout": 30}]}]
        for event in ("SessionStart", "UserPromptSubmit")}}))
    (root / "mcp_server.py").write_text(MCP_SERVER)
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {
        SERVER: {"command": sys.executable, "args": ["${CLAUDE_PLUGIN_ROOT}/mcp_server.py"]}}}))
    return root


# --------------------------------------------------------------------------- fake API alone


def _post(url: str, body: dict[str, Any]) -> tuple[int, str, str]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.status, resp.headers["content-type"], resp.read().decode()


def test_fake_api_stream_json_and_other_endpoints() -> None:
    call = ToolUse("echo", {"text": "x"})
    with FakeAnthropicAPI(steps(call, Text("done-MARK"))) as api:
        status, ctype, text = _post(api.base_url + "/v1/messages?beta=true",
                                    {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200 and ctype == "text/event-stream"
        assert text.startswith("event: message_start\ndata: ") and "input_json_delta" in text
        assert '"stop_reason": "tool_use"' in text
        assert text.endswith('event: message_stop\ndata: {"type": "message_stop"}\n\n')
        history: list[dict[str, Any]] = [{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": [{"type": "tool_use", "id": call.id, "name": "echo", "input": {}}]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "x"}]}]
        status, ctype, text = _post(api.base_url + "/v1/messages", {"model": "m", "messages": history})
        assert ctype == "application/json"
        assert json.loads(text)["content"] == [{"type": "text", "text": "done-MARK"}]
        _, _, counted = _post(api.base_url + "/v1/messages/count_tokens?beta=true", {"messages": []})
        assert json.loads(counted)["input_tokens"] >= 0
        with urllib.request.urlopen(urllib.request.Request(api.base_url + "/", method="HEAD"), timeout=10) as resp:
            assert resp.status == 200
        assert api.find_tool_result(call.id) == history[2]["content"][0]
        assert len(api.message_bodies()) == 2 and len(api.requests) == 4
    assert api.errors == []


# --------------------------------------------------------------------------- real CLI


def test_plugin_validate(claude_env: ClaudeHarness, tmp_path: Path) -> None:
    plugin = write_probe_plugin(tmp_path / "plugin")
    proc = claude_env.validate_plugin(plugin)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_installed_plugin_hooks_and_mcp_tool(claude_env: ClaudeHarness, tmp_path: Path) -> None:
    plugin = write_probe_plugin(tmp_path / "plugin")
    assert claude_env.install_plugin_from_marketplace(plugin) == f"{PLUGIN}@{MARKETPLACE}"

    call = ToolUse(ECHO_TOOL, {"text": "hello from the fake model"})
    claude_env.api.set_script(steps(call, Text("all done DONE-1")))
    run = claude_env.run_claude("please echo", allowed_tools=[f"mcp__plugin_{PLUGIN}_{SERVER}"])

    assert run.proc.returncode == 0, run.proc.stderr
    assert run.json is not None and run.json["result"] == "all done DONE-1"
    api = claude_env.api
    assert len(api.message_bodies()) == 2
    assert ECHO_TOOL in api.tool_names(0)
    assert api.has_hook_context("SessionStart", "probe-SessionStart-context prompt=None")
    assert api.has_hook_context("UserPromptSubmit", "probe-UserPromptSubmit-context prompt=please echo")
    result = api.find_tool_result(call.id)
    assert result is not None and not result.get("is_error")
    assert json.loads(tool_result_text(result)) == {"result": "echo: hello from the fake model"}
    _assert_nothing_left(claude_env)


def test_plugin_dir_multi_turn(claude_env: ClaudeHarness, tmp_path: Path) -> None:
    plugin = write_probe_plugin(tmp_path / "plugin")
    call = ToolUse(ECHO_TOOL, {"text": "second turn"})
    claude_env.api.set_script(steps(Text("first answer T1"), [Text("let me echo T2a"), call], Text("second answer T2")))

    turns = claude_env.run_claude_turns(["turn one", "turn two"], plugin_dir=plugin,
                                        allowed_tools=[f"mcp__plugin_{PLUGIN}_{SERVER}"])

    assert turns.returncode == 0, turns.stderr
    assert [r["result"] for r in turns.results] == ["first answer T1", "second answer T2"]
    api = claude_env.api
    assert api.hook_context("SessionStart")[0].startswith("probe-SessionStart-context")
    assert api.has_hook_context("UserPromptSubmit", "probe-UserPromptSubmit-context prompt=turn one")
    assert api.has_hook_context("UserPromptSubmit", "probe-UserPromptSubmit-context prompt=turn two")
    result = api.find_tool_result(call.id)
    assert result is not None and "echo: second turn" in tool_result_text(result)
    _assert_nothing_left(claude_env)


def test_timeout_kills_every_process_it_started(claude_env: ClaudeHarness, tmp_path: Path) -> None:
    plugin = tmp_path / "sleepy"
    (plugin / ".claude-plugin").mkdir(parents=True)
    (plugin / "hooks").mkdir()
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": "sleepy"}))
    pid_file = tmp_path / "sleeper.pid"
    (plugin / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": f'echo $$ > "{pid_file}"; exec sleep 120'}]}]}}))

    with pytest.raises(HarnessError, match="timed out"):
        claude_env.run_claude("hi", plugin_dir=plugin, timeout=4)

    pid = int(pid_file.read_text())
    wait_for(lambda: not _alive(pid), WAIT_S, "the hook process to end with the timed-out CLI")
    assert claude_env.leftover_processes() == []


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _assert_nothing_left(claude_env: ClaudeHarness) -> None:
    """Claude Code itself stops its hooks and MCP servers when it exits (allow it a moment)."""
    wait_for(lambda: claude_env.leftover_processes() == [], WAIT_S,
             lambda: f"the CLI's processes to end: {claude_env.leftover_processes()}")
