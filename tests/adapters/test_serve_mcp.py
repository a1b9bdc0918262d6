"""`cairn serve` as an MCP server for any client: stdio and streamable HTTP give the same results.

A real `mcp` ClientSession runs one scripted session against `cairn serve --transport stdio` and
against `cairn serve --transport mcp-http`, each on its own fresh store (keyword-only, so the scores
are deterministic); the results, ids and times replaced by placeholders, must be identical. Then
the guard on /mcp: tokens (read-only, store-limited) and the Host check.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from cairn import create_store
from cairn.adapters import tokens as tokens_mod
from cairn.adapters.mcp.server import READ_ONLY_TOOLS, WRITE_TOOLS
from cairn.adapters.mcp.tools import reads_only

from tests.conftest import git_init
from tests.serving import Server, keyword_only_env

CALL_TIMEOUT = 120
SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("memory_remember", {"text": "We deploy with Kamal to Hetzner", "kind": "decision", "tags": ["deploy"]}),
    ("memory_remember", {"text": "Tests run with pytest -q", "kind": "convention", "tags": ["testing"]}),
    ("memory_recall", {"query": "how do we deploy"}),
    ("memory_list", {}),
    ("memory_replace", {"id": "$0", "text": "We deploy with Docker Compose to Hetzner"}),
    ("memory_history", {"id": "$0"}),
    ("memory_recall", {"query": "deploy Hetzner", "include_superseded": True}),
    ("memory_forget", {"id": "$1"}),
    ("memory_list", {"include_superseded": True}),
    ("memory_replace", {"id": "$1", "text": "nothing"}),  # an error: forgotten
]
ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
TIME = re.compile(r"\d{4}-\d{2}-\d{2}(T[\d:.]+Z)?")


async def run_script(session: ClientSession) -> list[Any]:
    ids: list[str] = []
    out = []
    for tool, args in SCRIPT:
        args = {k: ids[int(v[1:])] if isinstance(v, str) and v.startswith("$") else v for k, v in args.items()}
        result = await session.call_tool(tool, args, read_timeout_seconds=CALL_TIMEOUT)
        text = result.content[0].text
        if tool == "memory_remember" and not result.is_error:
            ids.append(json.loads(text)["id"])
        out.append((tool, result.is_error, text))
    names = {}
    for m in ULID.findall(json.dumps(out)):
        names.setdefault(m, f"<id{len(names)}>")
    normal = json.dumps(out)
    for real, name in names.items():
        normal = normal.replace(real, name)
    return json.loads(TIME.sub("<time>", normal))


def over_stdio(env: dict[str, str], cwd, store: str) -> list[Any]:
    async def go():
        params = StdioServerParameters(command=sys.executable, args=["-m", "cairn", "serve", "--transport", "stdio",
                                                                     "--store", store], env=env, cwd=str(cwd))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await run_script(session)

    return asyncio.run(go())


async def _http_session(port: int, fn, headers: dict[str, str] | None = None):
    async with httpx2.AsyncClient(headers=headers or {}, timeout=CALL_TIMEOUT) as client, \
            streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=client) as streams, \
            ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        return await fn(session)


@pytest.fixture
def env(tmp_path, cairn_home):
    return keyword_only_env(tmp_path)


def test_stdio_and_mcp_http_give_identical_results(tmp_path, env):
    project = git_init(tmp_path / "project")
    for name in ("via-stdio", "via-http"):
        create_store(name)
    stdio = over_stdio(env, project, "via-stdio")
    server = Server(["--transport", "mcp-http", "--store", "via-http"], cwd=project, env=env,
                    log=tmp_path / "server.log")
    try:
        http = asyncio.run(_http_session(server.port, run_script))
    finally:
        server.stop()
    assert stdio == http
    assert [tool for tool, _, _ in http] == [t for t, _ in SCRIPT]
    assert [err for _, err, _ in http] == [False] * 9 + [True]
    recall = json.loads(http[2][2])["hits"]
    assert recall[0]["text"] == "We deploy with Kamal to Hetzner"


def test_every_tool_is_read_only_or_a_write():
    tools = {"memory_remember", "memory_recall", "memory_replace", "memory_keep_both", "memory_forget",
             "memory_history", "memory_list", "memory_status", "memory_review", "memory_search_sessions",
             "memory_sessions"}
    assert READ_ONLY_TOOLS | WRITE_TOOLS == tools and not READ_ONLY_TOOLS & WRITE_TOOLS


def test_a_read_only_token_may_call_memory_review_only_for_what_reads():
    assert reads_only("memory_recall", {"query": "x"}) and reads_only("memory_status", None)
    for arguments in ({"action": "queue"}, {"action": "maintenance_status"}, {"action": "maintain"},
                      {"action": "maintain", "apply": False}):
        assert reads_only("memory_review", arguments), arguments
    for arguments in ({"action": "decide", "proposal_id": "x", "verdict": "approve"}, {"action": "propose"},
                      {"action": "maintain", "apply": True}, {"action": "maintain", "apply": "true"}, {}, None,
                      ["queue"], {"action": ["queue"]}):
        assert not reads_only("memory_review", arguments), arguments
    assert not reads_only("memory_remember", {}) and not reads_only("no_such_tool", {})


def test_mcp_http_tokens(tmp_path, env):
    project = git_init(tmp_path / "project")
    create_store("alpha")
    reader, _ = tokens_mod.create("reader", read_only=True)
    writer, _ = tokens_mod.create("writer")
    elsewhere, _ = tokens_mod.create("beta-only", stores=("beta",))
    server = Server(["--transport", "mcp-http", "--store", "alpha"], cwd=project, env=env,
                    log=tmp_path / "server.log")

    def bearer(token):
        return {"Authorization": f"Bearer {token}"}

    async def remember(session):
        return await session.call_tool("memory_remember", {"text": "Alpha uses Postgres 16"},
                                       read_timeout_seconds=CALL_TIMEOUT)

    async def recall(session):
        result = await session.call_tool("memory_recall", {"query": "postgres"}, read_timeout_seconds=CALL_TIMEOUT)
        return json.loads(result.content[0].text)["hits"]

    async def review_queue(session):
        result = await session.call_tool("memory_review", {"action": "queue"}, read_timeout_seconds=CALL_TIMEOUT)
        assert not result.is_error, result.content[0].text
        return json.loads(result.content[0].text)

    try:
        # no token, or a token for another store: the handshake itself is refused
        code, _, body = server.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert (code, body["error"]) == (401, "unauthorized")
        code, _, body = server.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                       token=elsewhere)
        assert (code, body["error"]) == (403, "forbidden_store")
        with pytest.raises(Exception):  # noqa: B017 - the SDK's error type for a refused handshake varies
            asyncio.run(_http_session(server.port, recall, bearer(elsewhere)))
        # a read-only token reads, and its write is refused before it reaches the tool
        with pytest.raises(Exception):  # noqa: B017
            asyncio.run(_http_session(server.port, remember, bearer(reader)))
        assert asyncio.run(_http_session(server.port, recall, bearer(reader))) == []
        assert not asyncio.run(_http_session(server.port, remember, bearer(writer))).is_error
        assert [h["text"] for h in asyncio.run(_http_session(server.port, recall, bearer(reader)))] == \
            ["Alpha uses Postgres 16"]
        # memory_review: a read-only token lists the queue; its verdict is refused before the tool
        assert asyncio.run(_http_session(server.port, review_queue, bearer(reader))) == {"subjects": [], "count": 0}
        decide = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory_review", "arguments": {"action": "decide", "proposal_id": "x", "verdict": "approve"}}}
        code, _, body = server.request("POST", "/mcp", decide, token=reader)
        assert (code, body["error"]) == (403, "read_only")
        # DNS rebinding: a foreign Host is refused on /mcp too
        code, _, body = server.request("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                       token=writer, headers={"Host": "attacker.example"})
        assert (code, body["error"]) == (421, "host_not_allowed")
    finally:
        server.stop()
