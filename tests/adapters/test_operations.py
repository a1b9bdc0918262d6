"""One catalogue of operations: the CLI, the MCP tools and the HTTP API take the same arguments
within the same limits, because all three derive them from cairn.operations.

Each adapter is asked the way its users ask it (the CLI's argv, an MCP tool call, an HTTP request)
with values on either side of the limits the other adapters had; what each accepts must be the same.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from cairn import Cairn

from tests.conftest import git_init, run_cli

# Values on both sides of every bound any adapter has had (MCP 50, HTTP 200, CLI 1000).
K_PROBES = (0, 1, 50, 51, 200, 201, 1000, 1001)
LIMIT_PROBES = (0, 1, 200, 201, 1000, 1001, 10_001)


@pytest.fixture
def project(tmp_path, cairn_home, monkeypatch) -> Any:
    config = tmp_path / "keyword-only.yaml"
    config.write_text("embedding:\n  enabled: false\n")
    monkeypatch.setenv("CAIRN_CONFIG", str(config))
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    project = git_init(tmp_path / "project")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))
    monkeypatch.chdir(project)
    with Cairn.open(cwd=project, embedder=None) as memory:
        memory.remember("We deploy with Kamal on Fridays")
    return project


class Adapters:
    """recall and list through each adapter, in-process: (accepted?, what it answered)."""

    def __init__(self, project, capsys):
        from starlette.testclient import TestClient

        from cairn.adapters.http import Stores, rest_app
        from cairn.adapters.mcp.server import build_server
        from cairn.adapters.mcp.session import Session

        self.capsys = capsys
        self.session = Session(project, embedder_for=lambda config: None)
        self.mcp = build_server(self.session)
        self.stores = Stores(project, None)
        self.http = TestClient(rest_app(self.stores))

    def close(self) -> None:
        self.http.close()
        self.stores.close()
        self.session.close()

    def cli(self, command: str, *args: str) -> tuple[bool, str]:
        code, out, err = run_cli(self.capsys, [command, *args, "--json"])
        assert code in (0, 2), err
        return code == 0, out + err

    def mcp_call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        from mcp.server.mcpserver.exceptions import ToolError

        async def go():
            return await self.mcp.call_tool(tool, arguments)

        try:
            result = anyio.run(go)
        except ToolError as exc:
            return False, str(exc)
        if hasattr(result, "content"):
            return not result.is_error, result.content[0].text
        content = result[0] if isinstance(result, tuple) else result
        return True, content[0].text

    def post(self, path: str, body: dict[str, Any]) -> tuple[bool, str]:
        response = self.http.post(path, json=body)
        assert response.status_code in (200, 201, 400), response.text
        return response.status_code in (200, 201), response.text

    def get(self, path: str, params: dict[str, Any]) -> tuple[bool, str]:
        response = self.http.get(path, params=params)
        assert response.status_code in (200, 400), response.text
        return response.status_code == 200, response.text


@pytest.fixture
def adapters(project, capsys):
    a = Adapters(project, capsys)
    yield a
    a.close()


def test_the_same_recall_limits_hold_in_cli_mcp_and_http(adapters):
    accepted: dict[str, set[int]] = {"cli": set(), "mcp": set(), "http": set()}
    for k in K_PROBES:
        for name, (ok, said) in {
            "cli": adapters.cli("recall", "deploy", "--keyword-only", "-k", str(k)),
            "mcp": adapters.mcp_call("memory_recall", {"query": "deploy", "k": k}),
            "http": adapters.post("/v1/recall", {"query": "deploy", "k": k}),
        }.items():
            if ok:
                accepted[name].add(k)
                assert "Kamal" in said, (name, k, said)
            else:
                assert "k" in said, (name, k, said)  # the refusal names the argument
    assert accepted["cli"] == accepted["mcp"] == accepted["http"], accepted

    from cairn import operations

    k = operations.RECALL.arg("k")
    assert accepted["cli"] == {p for p in K_PROBES if k.low <= p <= k.high}
    # The query's length, and the cold tier, alike everywhere.
    longest = "deploy " + "x" * (operations.RECALL.arg("query").high - 7)
    for query, ok in ((longest, True), (longest + "x", False)):
        assert adapters.cli("recall", query, "--keyword-only")[0] is ok
        assert adapters.mcp_call("memory_recall", {"query": query})[0] is ok
        assert adapters.post("/v1/recall", {"query": query})[0] is ok
    assert adapters.cli("recall", "deploy", "--keyword-only", "--include-cold")[0]
    assert adapters.mcp_call("memory_recall", {"query": "deploy", "include_cold": True})[0]
    assert adapters.post("/v1/recall", {"query": "deploy", "include_cold": True})[0]


def test_the_same_list_limits_hold_in_cli_mcp_and_http(adapters):
    accepted: dict[str, set[int]] = {"cli": set(), "mcp": set(), "http": set()}
    for limit in LIMIT_PROBES:
        for name, (ok, _) in {
            "cli": adapters.cli("list", "--limit", str(limit)),
            "mcp": adapters.mcp_call("memory_list", {"limit": limit}),
            "http": adapters.get("/v1/memories", {"limit": limit}),
        }.items():
            if ok:
                accepted[name].add(limit)
    assert accepted["cli"] == accepted["mcp"] == accepted["http"], accepted
    ok, said = adapters.get("/v1/memories", {"include_cold": "true"})
    assert ok and "Kamal" in said
    assert adapters.mcp_call("memory_list", {"include_cold": True})[0]
    assert adapters.cli("list", "--include-cold")[0]


def test_http_remember_takes_the_catalogues_default_importance(adapters):
    from cairn import DEFAULT_IMPORTANCE

    ok, said = adapters.post("/v1/memories", {"text": "Releases are tagged vMAJOR.MINOR"})
    assert ok and json.loads(said)["memory"]["importance"] == DEFAULT_IMPORTANCE
    ok, said = adapters.post("/v1/memories", {"text": "Hotfixes skip the release train", "importance": 5})
    assert ok and json.loads(said)["memory"]["importance"] == 5


def test_every_catalogue_argument_reaches_its_engine_call(kw_memory):
    """Each operation, called on the engine (its `call`: memory.recall, memory.review.queue ...) with
    every argument of the catalogue (at its default), is understood: a renamed keyword would break
    every adapter at once. Domain errors (no such session, a memory that is not cold) are fine
    here; a TypeError is not."""
    import cairn
    from cairn import operations

    given = {"query": "deploy", "text": "The catalogue test writes this", "session_id": "no-such-session",
             "proposal_id": "no-such-proposal", "verdict": "reject", "others": ["no-such-memory"]}
    for op in operations.CATALOGUE:
        kwargs = {a.name: given.get(a.name, list(a.default) if a.many and a.default is not None else a.default)
                  for a in op.args if a.name != "id"}
        args = [kw_memory.remember(f"A memory for {op.name}").memory.id] if "id" in op.by_name else []
        if op.name == "replace":
            kwargs["text"] = "The catalogue test replaced this"
        method = kw_memory
        for part in op.call.split("."):  # "review.queue": memory.review.queue
            method = getattr(method, part)
        try:
            method(*args, **kwargs)
        except cairn.CairnError:
            pass


def test_what_reads_and_writes_is_the_catalogues_word_in_every_adapter():
    """A read-only token may call an MCP tool or HTTP route only when its operation never writes."""
    from cairn.adapters.http import ROUTES
    from cairn.adapters.mcp.tools import READ_ONLY_TOOLS, TOOLS

    for tool in TOOLS:
        writes = any(op.writes for op in tool.ops)  # a tool with several operations: writes if any does
        assert (tool.name in READ_ONLY_TOOLS) is (not writes), tool.name
        assert tool.annotations.read_only_hint is (None if writes else True), tool.name  # None: MCP's false
        for arg in tool.args:  # a tool may take fewer arguments, never looser ones
            for op in tool.ops:
                declared = op.by_name.get(arg.name)
                if declared is not None:
                    assert (arg.low, arg.high, arg.items) == (declared.low, declared.high, declared.items), \
                        (tool.name, op.name, arg.name)
    for route in ROUTES:
        assert route.write is route.op.writes
    from cairn import operations

    # Every operation is offered somewhere, and nothing is offered that the catalogue does not declare.
    assert {op.name for t in TOOLS for op in t.ops} | {r.op.name for r in ROUTES} == \
        {op.name for op in operations.CATALOGUE}
