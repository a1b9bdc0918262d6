"""The MCP server driven as Claude Code drives it: a subprocess on stdio, spoken to by the mcp client.

One server is shared by the module where tests only add to its store; the tests about startup, a
broken store and the process lifecycle start their own, each on its own project folder. All share
one data root, so the servers share one warm embedding process (cairn.warm), stopped at the end.
The lifecycle tests write raw JSON-RPC lines so that they can read every byte of stdout and watch
the process itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cairn import KINDS, Cairn, operations

from tests.conftest import git_init, wait_for


REPO = Path(__file__).resolve().parents[2]
SERVER = REPO / "mcp" / "server.py"
TOOLS = {"memory_remember", "memory_recall", "memory_replace", "memory_keep_both", "memory_forget", "memory_history", "memory_list",
         "memory_status", "memory_review", "memory_search_sessions", "memory_sessions"}
CALL_TIMEOUT = 120  # seconds: the first call may wait for the model, on a busy machine


def server_env(home: Path, project: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CAIRN_STORE"}
    home.mkdir(parents=True, exist_ok=True)
    (home / "empty-config.yaml").touch()  # no settings (a CAIRN_CONFIG naming a missing file is an error)
    env.update(CAIRN_HOME=str(home), CAIRN_CONFIG=str(home / "empty-config.yaml"), CLAUDE_PROJECT_DIR=str(project),
               HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", CAIRN_SERVICE_IDLE_SECONDS="120", **extra)
    return env


class Client:
    """A real ClientSession to a spawned server, usable from synchronous tests.

    The session lives in one task of an event loop on a background thread (anyio task groups must
    be left by the task that entered them); calls are submitted to that loop.
    """

    def __init__(self, env: dict[str, str], stderr_path: Path):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._stderr = open(stderr_path, "w")  # noqa: SIM115 - closed in close()
        self.stderr_path = stderr_path
        self.env = env
        ready: asyncio.Future = self._loop.create_future()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(env, ready), self._loop)
        self.init_seconds, self.init_result = asyncio.run_coroutine_threadsafe(self._wait(ready), self._loop).result(60)

    async def _wait(self, ready: asyncio.Future) -> Any:
        return await ready

    async def _serve(self, env: dict[str, str], ready: asyncio.Future) -> None:
        self._closing = asyncio.Event()
        params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=env, cwd=str(REPO))
        started = time.perf_counter()
        try:
            async with stdio_client(params, errlog=self._stderr) as (read, write), ClientSession(read, write) as session:
                result = await session.initialize()
                self.session = session
                ready.set_result((time.perf_counter() - started, result))
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    def run(self, coro_fn, timeout: float = CALL_TIMEOUT) -> Any:
        async def go():
            return await coro_fn(self.session)

        return asyncio.run_coroutine_threadsafe(go(), self._loop).result(timeout)

    def call(self, tool: str, **arguments: Any):
        return self.run(lambda s: s.call_tool(tool, arguments, read_timeout_seconds=CALL_TIMEOUT))

    def ok(self, tool: str, **arguments: Any) -> Any:
        """Call a tool that must succeed; its compact JSON result, parsed."""
        result = self.call(tool, **arguments)
        text = result.content[0].text
        assert not result.is_error, text
        return json.loads(text)

    def error(self, tool: str, **arguments: Any) -> str:
        """Call a tool that must fail; its error message."""
        result = self.call(tool, **arguments)
        assert result.is_error, result.content[0].text
        return result.content[0].text

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._closing.set)
        self._main.result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._stderr.close()


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """The data root of every server in this module; its warm embedding process is stopped after."""
    path = tmp_path_factory.mktemp("mcp-home")
    yield path
    # A warm process still loading has no socket yet: wait for it, or it would idle on for minutes.
    stop = ("from cairn.adapters.warm import client as warm\n"
            "if warm.is_running():\n    warm.wait_until_ready(90)\n    warm.request({'op': 'shutdown'})\n")
    subprocess.run([sys.executable, "-c", stop], env={**os.environ, "CAIRN_HOME": str(path)}, timeout=120)


@pytest.fixture(scope="module")
def shared(tmp_path_factory, home) -> Client:
    root = tmp_path_factory.mktemp("mcp-shared")
    client = Client(server_env(home, git_init(root / "project")), root / "stderr.txt")
    # Calls made while the model loads are answered keyword-only (test_mcp_robustness.py); the
    # lifecycle tests here are about hybrid recall, so they start once the model is ready.
    client.ok("memory_status")
    wait_for(lambda: client.ok("memory_status")["model_warmup"] == "ready", CALL_TIMEOUT, "the model to load")
    yield client
    client.close()


def count(client: Client) -> int:
    return client.ok("memory_status")["counts"]["total"]


# -- startup and discovery ------------------------------------------------------------------------
def _bare_mcp_import_seconds() -> float:
    """Wall time to start Python and import the MCP SDK alone: the floor under any server's startup."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], check=True, timeout=60)
    return time.perf_counter() - started


def test_initialize_answers_fast_without_waiting_for_the_model(tmp_path, home):
    project = git_init(tmp_path / "project")
    floor = _bare_mcp_import_seconds()
    client = Client(server_env(home, project), tmp_path / "stderr.txt")
    try:
        print(f"initialize answered {client.init_seconds:.2f} s after spawn (bare `import mcp`: {floor:.2f} s)")
        # Under 2 s; on a loaded machine, where `import mcp` alone takes most of that, within 1 s of
        # it. Either way far below the 5-10 s of a model load on the handshake path.
        assert client.init_seconds < max(2.0, floor + 1.0)
        assert client.init_result.server_info.name == "cairn"
        assert "[mem:ID]" in client.init_result.instructions
        status = client.ok("memory_status")
        assert status["model_warmup"] in ("loading", "ready")
        # The store comes from CLAUDE_PROJECT_DIR, not from the working directory (this repository).
        assert status["chosen_by"] == f"git toplevel {project.resolve()}"
    finally:
        client.close()


def test_tools_are_listed_with_constrained_schemas(shared):
    tools = {t.name: t for t in shared.run(lambda s: s.list_tools()).tools}
    assert set(tools) == TOOLS
    remember = tools["memory_remember"].input_schema["properties"]
    assert remember["kind"]["enum"] == list(KINDS)
    assert (remember["importance"]["minimum"], remember["importance"]["maximum"]) == (1, 5)
    assert "minLength" not in remember["text"]  # string lengths are checked, not shown (test_bad_input_...)
    assert remember["scope"]["enum"] == ["project", "global"]
    assert tools["memory_remember"].input_schema["required"] == ["text"]
    recall = tools["memory_recall"].input_schema["properties"]
    # k and scope default to the config (recall.k, recall.scope): optional, never a default of the adapter's
    assert (recall["k"]["type"], recall["k"]["minimum"], recall["k"]["maximum"]) == \
        ("integer", 1, operations.MAX_RECALL_K)
    assert "default" not in recall["k"] and "default" not in recall["scope"] and "k" not in \
        tools["memory_recall"].input_schema["required"]
    assert recall["kinds"]["items"]["enum"] == list(KINDS)
    assert set(recall) >= {"query", "k", "as_of", "kinds", "tags", "scope", "include_superseded"}
    assert "irreversible" in tools["memory_forget"].description.lower()
    assert tools["memory_forget"].annotations.destructive_hint is True
    for name in ("memory_recall", "memory_list", "memory_history", "memory_status", "memory_search_sessions",
                 "memory_sessions"):
        assert tools[name].annotations.read_only_hint is True, name
    review = tools["memory_review"]
    assert "ONLY for /cairn:review-memory" in review.description and "the verdict the user gave" in review.description
    assert "never your own" in review.description and "a dry run unless apply" in review.description
    assert review.annotations.destructive_hint is True
    assert review.input_schema["properties"]["action"]["enum"] == ["queue", "decide", "propose", "maintain",
                                                                   "maintenance_status"]
    assert review.input_schema["properties"]["verdict"]["enum"] == ["approve", "reject", "edit", "promote", "keep"]
    assert review.input_schema["required"] == ["action"]
    assert "title" not in json.dumps(tools["memory_remember"].input_schema)
    assert "null" not in json.dumps(recall)  # an optional argument is one type, left out when not given


def test_the_fixed_cost_of_tools_and_instructions_stays_under_8000_characters():
    """What every Claude Code session pays for the server: tools/list and the instructions, measured
    by bench/mcp_cost.py through a real server (docs/benchmarks.md, "The MCP server's fixed cost")."""
    done = subprocess.run([sys.executable, str(REPO / "bench" / "mcp_cost.py"), "--json"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO / "engine")})
    assert done.returncode == 0, done.stderr
    cost = json.loads(done.stdout)
    print(cost)
    assert set(cost["tools"]) == TOOLS and cost["instructions"] > 0
    assert cost["total"] == sum(cost["tools"].values()) + cost["instructions"]
    assert cost["total"] <= 8000, cost


# -- the memory lifecycle -----------------------------------------------------------------------------
def test_remember_and_replace_take_applies_when_and_tell_claude_how_to_write_them(shared):
    tools = {t.name: t for t in shared.run(lambda s: s.list_tools()).tools}
    remember = tools["memory_remember"].input_schema["properties"]["applies_when"]
    assert "naming the tasks in which it matters" in remember["description"]
    assert remember["maxItems"] == 4 and remember["items"] == {"type": "string"}  # 80 characters: checked
    replace = tools["memory_replace"].input_schema["properties"]["applies_when"]
    assert replace["description"] == "As in memory_remember." and replace["maxItems"] == 4
    made = shared.ok("memory_remember", text="Release notes are written in docs/changes/NEXT.md before merging",
                     kind="convention", applies_when=["opening a pull request", "shipping a user-visible fix"])
    listed = {m["id"]: m for m in shared.ok("memory_list", kinds=["convention"])["memories"]}
    assert listed[made["id"]]["applies_when"] == ["opening a pull request", "shipping a user-visible fix"]
    new = shared.ok("memory_replace", id=made["id"], text="Release notes are written in CHANGELOG.md before merging")
    listed = {m["id"]: m for m in shared.ok("memory_list", kinds=["convention"])["memories"]}
    assert listed[new["id"]]["applies_when"] == ["opening a pull request", "shipping a user-visible fix"]
    assert "applies_when" in shared.error("memory_remember", text="Storybook runs on port 6006",
                                          applies_when=[f"task {i}" for i in range(5)])
    assert "applies_when.0: String should have at most 80 characters" in shared.error(
        "memory_remember", text="Storybook runs on port 6006", applies_when=["x" * 81])


def test_remember_then_recall_finds_it_with_its_id(shared):
    made = shared.ok("memory_remember", text="We deploy with Kamal because Capistrano was too slow",
                     kind="decision", tags=["deploy"], importance=4)
    assert made["status"] == "created"
    hits = shared.ok("memory_recall", query="how do we deploy to production?")["hits"]
    top = hits[0]
    assert top["id"] == made["id"]
    assert top["text"] == "We deploy with Kamal because Capistrano was too slow"
    assert (top["kind"], top["status"], top["tags"], top["importance"]) == ("decision", "current", ["deploy"], 4)
    assert len(top["date"]) == 10 and top["date"][4] == "-"
    assert "vector #" in top["why"] and isinstance(top["score"], float)
    assert not {k for k, v in top.items() if v is None}, "no null-heavy results"
    again = shared.ok("memory_remember", text="We deploy with Kamal because Capistrano was too slow", kind="decision")
    assert (again["id"], again["status"]) == (made["id"], "duplicate")


def test_replace_hides_the_old_version_from_recall_and_history_keeps_both(shared):
    old = shared.ok("memory_remember", text="The staging database runs PostgreSQL 14", kind="fact", tags=["db"])
    new = shared.ok("memory_replace", id=old["id"], text="The staging database runs PostgreSQL 16")
    assert new["status"] == "created" and new["superseded"] == [old["id"]]
    ids = [h["id"] for h in shared.ok("memory_recall", query="staging database PostgreSQL version")["hits"]]
    assert new["id"] in ids and old["id"] not in ids
    listed = [m["id"] for m in shared.ok("memory_list", tags=["db"])["memories"]]
    assert listed == [new["id"]]
    chain = shared.ok("memory_history", id=new["id"])["chain"]
    assert [m["id"] for m in chain] == [old["id"], new["id"]]
    assert chain[0]["status"] == "superseded" and chain[0]["superseded_by"] == new["id"]
    assert {"valid_from", "valid_to", "recorded_at", "retired_at"} <= set(chain[0])
    assert "retired_at" not in chain[1] and "valid_to" not in chain[1]
    with_old = shared.ok("memory_recall", query="staging database PostgreSQL version", include_superseded=True)
    assert old["id"] in [h["id"] for h in with_old["hits"]]
    message = shared.error("memory_replace", id=old["id"], text="The staging database runs PostgreSQL 17")
    assert "already superseded" in message


def test_replacing_with_the_text_of_another_current_memory_says_what_happened(shared):
    older = shared.ok("memory_remember", text="Feature flags live in LaunchDarkly", tags=["flags"])
    newer = shared.ok("memory_remember", text="Feature flags are configured in config/flags.yaml", tags=["flags"])
    assert "superseded" not in newer
    before = count(shared)
    result = shared.ok("memory_replace", id=older["id"], text="Feature flags are configured in config/flags.yaml")
    assert (result["id"], result["status"], result["superseded"]) == (newer["id"], "duplicate", [older["id"]])
    assert f"{older['id']} is now superseded by it" in result["note"] and "nothing new was written" in result["note"]
    assert count(shared) == before
    assert [m["id"] for m in shared.ok("memory_list", tags=["flags"])["memories"]] == [newer["id"]]
    chain = shared.ok("memory_history", id=newer["id"])["chain"]
    assert [m["id"] for m in chain] == [older["id"], newer["id"]] and chain[0]["superseded_by"] == newer["id"]
    same = shared.ok("memory_replace", id=newer["id"], text="Feature flags are configured in config/flags.yaml")
    assert (same["id"], same["status"], "superseded" in same) == (newer["id"], "duplicate", False)
    assert "nothing was changed" in same["note"]


def test_as_of_recalls_what_was_true_then(shared):
    old = shared.ok("memory_remember", text="The release train leaves every Tuesday", valid_from="2025-01-06")
    new = shared.ok("memory_replace", id=f"[mem:{old['id']}]", text="The release train leaves every Thursday",
                    valid_from="2025-06-02")
    then = shared.ok("memory_recall", query="when does the release train leave?", as_of="2025-03-01")["hits"]
    assert then[0]["id"] == old["id"] and then[0]["until"] == "2025-06-02"
    now = shared.ok("memory_recall", query="when does the release train leave?")["hits"]
    assert now[0]["id"] == new["id"] and old["id"] not in [h["id"] for h in now]


def test_forget_removes_it_from_recall_and_list(shared):
    made = shared.ok("memory_remember", text="Our on-call pager rotation changes every Monday at 10:00",
                     kind="convention", tags=["oncall"])
    assert shared.ok("memory_forget", id=made["id"]) == {"id": made["id"], "status": "forgotten"}
    hits = shared.ok("memory_recall", query="on-call pager rotation", include_superseded=True)["hits"]
    assert made["id"] not in [h["id"] for h in hits]
    assert shared.ok("memory_list", tags=["oncall"], include_superseded=True)["memories"] == []
    chain = shared.ok("memory_history", id=made["id"])["chain"]
    assert chain[0]["text"] is None and chain[0]["status"] == "forgotten"
    assert "replace" in shared.error("memory_replace", id=made["id"], text="Pager rotation changes on Fridays")


def test_forget_leaves_the_text_in_no_file_under_the_data_root(shared, home):
    from tests.storage.test_erasure import files_holding

    secret = "The release signing key lives in bucket qxvortal-keys, guarded by Thandiwe"
    needles = (secret.encode(), b"qxvortal", b"Thandiwe", secret.lower().encode())
    made = shared.ok("memory_remember", text=secret, kind="fact", tags=["signing"])
    assert made["id"] in [h["id"] for h in shared.ok("memory_recall", query="release signing key bucket")["hits"]]
    assert files_holding(home, needles), "before the forget, the search must find the text"
    shared.ok("memory_forget", id=made["id"])
    assert files_holding(home, needles) == {}


def test_global_memories_are_recalled_and_can_be_replaced(shared):
    made = shared.ok("memory_remember", text="The user prefers answers in British English", kind="preference",
                     scope="global")
    hits = shared.ok("memory_recall", query="which spelling does the user prefer?")["hits"]
    assert hits[0]["id"] == made["id"] and hits[0]["store"] == "global"
    assert made["id"] not in [h["id"] for h in shared.ok("memory_recall", query="spelling preference",
                                                            scope="project")["hits"]]
    new = shared.ok("memory_replace", id=made["id"], text="The user prefers answers in American English")
    assert new["superseded"] == [made["id"]]
    hits = shared.ok("memory_recall", query="which spelling does the user prefer?", scope="global")["hits"]
    assert [h["id"] for h in hits] == [new["id"]]


def test_conflicts_are_related_and_queued_for_review(shared):
    first = shared.ok("memory_remember", text="The public API rate limit is 100 requests per minute per key",
                      tags=["api"])
    second = shared.ok("memory_remember", text="The public API rate limit might be 100 requests per minute per key",
                       tags=["api"])
    assert second["status"] == "created"
    assert [r["id"] for r in second["related"]] == [first["id"]]
    assert second["related"][0]["text"].startswith("The public API rate limit is 100")
    assert set(second["related"][0]) == {"id", "text", "kind", "date", "why"}
    assert second["instruction"].startswith("If the new memory changes one of these, replace it: memory_replace")
    assert queued(shared, first["id"], second["id"]) == []  # the plugin's server: Claude may still resolve it
    session_ends(shared, first["id"], second["id"])
    (proposal,) = queued(shared, first["id"], second["id"])
    assert proposal["type"] == "conflict" and proposal["reason"] and proposal["after"].startswith("approve:")
    assert [m["id"] for m in proposal["before"]] == [first["id"], second["id"]]
    assert proposal["before"][0]["text"] and proposal["before"][0]["date"]
    assert all(p["type"] == "add" for s in shared.ok("memory_review", action="queue", types=["add"])["subjects"]
               for p in s["proposals"])


# -- /cairn:review-memory verdicts: memory_review decide -------------------------------------------------
def session_ends(client: Client, *ids: str) -> dict:
    """What the plugin's SessionEnd hook does with the session's writes `ids` (claude.capture.settle_session,
    which reads them from the transcript): Cairn.review.settle, in another process as the hook's is."""
    code = ("import json, os, sys\nfrom pathlib import Path\nfrom cairn import Cairn\n"
            "with Cairn.open(cwd=Path(os.environ['CLAUDE_PROJECT_DIR']), embedder=None) as memory:\n"
            "    print(json.dumps(memory.review.settle(sys.argv[1:])))\n")
    done = subprocess.run([sys.executable, "-c", code, *ids], env={**client.env, "PYTHONPATH": str(REPO / "engine")},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def queued(client: Client, *ids: str) -> list[dict]:
    """The pending proposals whose sources are exactly `ids`."""
    subjects = client.ok("memory_review", action="queue", limit=200)["subjects"]
    return [p for s in subjects for p in s["proposals"] if [m["id"] for m in p["before"]] == list(ids)]


def conflict_pair(client: Client, older_text: str, newer_text: str, tag: str) -> tuple[str, str, str]:
    """Two current memories `remember` reported as a possible conflict: (older id, newer id, proposal id)."""
    older = client.ok("memory_remember", text=older_text, tags=[tag], importance=2)
    newer = client.ok("memory_remember", text=newer_text, tags=[tag, "review"], importance=4)
    assert (older["status"], newer["status"], "superseded" in newer) == ("created", "created", False)
    session_ends(client, older["id"], newer["id"])
    (proposal,) = queued(client, older["id"], newer["id"])
    return older["id"], newer["id"], proposal["id"]


def current_ids(client: Client, tag: str) -> set[str]:
    return {m["id"] for m in client.ok("memory_list", tags=[tag])["memories"]}


def test_keep_leaves_both_current_and_the_pair_is_not_proposed_again(shared):
    older, newer, pid = conflict_pair(shared, "The Redis session cache keeps entries for 300 seconds",
                                      "The Redis session cache might keep entries for 300 seconds", "cache")
    before = count(shared)
    kept = shared.ok("memory_review", action="decide", proposal_id=pid, verdict="reject")
    assert kept == {"proposal": pid, "type": "conflict", "state": "rejected", "verdict": "reject"}
    assert current_ids(shared, "cache") == {older, newer} and count(shared) == before
    assert queued(shared, older, newer) == []
    shared.ok("memory_review", action="maintain", apply=True)
    assert queued(shared, older, newer) == []
    message = shared.error("memory_review", action="decide", proposal_id=pid, verdict="approve")
    assert "already rejected by mcp" in message and message.endswith("nothing was changed")


def test_approve_retires_the_older_and_writes_nothing_new(shared):
    older, newer, pid = conflict_pair(shared, "Error reports go to Sentry for the web app",
                                      "Error reports might go to Sentry for the web app", "errors")
    before = count(shared)
    result = shared.ok("memory_review", action="decide", proposal_id=pid, verdict="approve")
    assert result == {"proposal": pid, "type": "conflict", "state": "applied", "verdict": "approve",
                      "superseded": [older], "by": newer}
    assert count(shared) == before and current_ids(shared, "errors") == {newer}
    chain = shared.ok("memory_history", id=newer)["chain"]
    assert [m["id"] for m in chain] == [older, newer] and chain[0]["superseded_by"] == newer
    message = shared.error("memory_review", action="decide", proposal_id=pid, verdict="keep")
    assert "already applied" in message and message.endswith("nothing was changed")


def test_edit_writes_the_agreed_text_over_both(shared):
    older, newer, pid = conflict_pair(shared, "The orders database is backed up every night",
                                      "The orders database might be backed up every night", "backups")
    before = count(shared)
    message = shared.error("memory_review", action="decide", proposal_id=pid, verdict="edit")
    assert "edit needs the text" in message and message.endswith("nothing was changed")
    merged_text = "The orders database is backed up every night and the backups are kept for thirty days"
    result = shared.ok("memory_review", action="decide", proposal_id=pid, verdict="edit", text=merged_text)
    assert result["state"] == "applied" and result["created"] is True and result["superseded"] == [older, newer]
    assert current_ids(shared, "backups") == {result["by"]} and count(shared) == before + 1
    memory = shared.ok("memory_list", tags=["backups"])["memories"][0]
    assert memory["text"] == merged_text and memory["tags"] == ["backups", "review"] and memory["importance"] == 4


def test_proposed_guidance_is_stored_only_when_approved(shared):
    proposed = shared.ok("memory_review", action="propose", text="Database migrations are written with Alembic",
                         kind="convention", applies_when=["editing migrations"], context="Conventions",
                         origin="db/CLAUDE.md", paths=["db/"])
    assert proposed["status"] == "queued"
    (entry,) = [p for s in shared.ok("memory_review", action="queue", types=["add"])["subjects"]
                for p in s["proposals"] if p["id"] == proposed["proposal"]["id"]]
    assert entry["paths"] == ["db/**"] and "scoped to db/**" in entry["after"]  # the scope it will get
    texts = [h["text"] for h in shared.ok("memory_recall", query="Alembic migrations", scope="project")["hits"]]
    assert "Database migrations are written with Alembic" not in texts
    done = shared.ok("memory_review", action="decide", proposal_id=proposed["proposal"]["id"], verdict="approve")
    hits = shared.ok("memory_recall", query="Alembic migrations", scope="project")["hits"]
    assert [h["id"] for h in hits][:1] == [done["created"]]
    again = shared.ok("memory_review", action="propose", text="Database migrations are written with Alembic")
    assert again["status"] == "exists"


def test_maintenance_runs_dry_by_default_and_reports_its_status(shared):
    before = count(shared)
    report = shared.ok("memory_review", action="maintain")
    assert report["dry_run"] is True and report["staged"] == 0 and set(report["counts"]) >= {"near_duplicate"}
    assert count(shared) == before
    status = shared.ok("memory_review", action="maintenance_status")
    assert set(status) >= {"last_run", "stale", "lease", "queue", "pending", "cold"}
    assert "promote needs memory_id" in shared.error("memory_review", action="decide", verdict="promote")
    assert "verdict: Input should be" in shared.error("memory_review", action="decide", proposal_id="x",
                                                      verdict="merge")
    assert "no proposal 'nope'" in shared.error("memory_review", action="decide", proposal_id="nope",
                                                verdict="approve")


def test_memory_status_counts_cold_memories_apart_from_current(tmp_path, home, monkeypatch):
    project = git_init(tmp_path / "project")
    env = server_env(home, project)
    monkeypatch.setenv("CAIRN_HOME", env["CAIRN_HOME"])
    monkeypatch.setenv("CAIRN_CONFIG", env["CAIRN_CONFIG"])
    with Cairn.open(cwd=project, embedder=None) as engine:
        engine.remember("Deploys go through the blue-green pipeline on Fly", kind="decision")
        cold = engine.remember("The old staging box is called bramble", kind="fact", importance=1).memory
        engine.set_cold(cold.id, True)
    client = Client(env, tmp_path / "stderr.txt")
    try:
        status = wait_for(lambda: (s := client.ok("memory_status")).get("counts") and s, CALL_TIMEOUT,
                          "memory_status with counts")
        assert (status["counts"]["current"], status["counts"]["cold"], status["counts"]["total"]) == (1, 1, 2)
    finally:
        client.close()


# -- bad input: a tool error with a clear message, and nothing written ------------------------------------
@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    ("memory_remember", {"text": ""}, "text: String should have at least 1 character"),
    ("memory_remember", {"text": "   "}, "memory text is empty"),
    ("memory_remember", {"text": "Builds use Bazel", "importance": 9}, "importance: Input should be less than or equal to 5"),
    ("memory_remember", {"text": "Builds use Bazel", "kind": "rumour"}, "kind: Input should be 'decision'"),
    ("memory_remember", {"text": "Builds use Bazel", "valid_from": "last tuesday"}, "valid_from: cannot read"),
    ("memory_remember", {"text": "Builds use Bazel", "tags": ["two words"]}, "invalid tag"),
    ("memory_remember", {"kind": "fact"}, "text: Field required"),
    ("memory_replace", {"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "text": "Builds use Buck"}, "no memory '01ARZ3NDEKTSV4RRFFQ69G5FAV'"),
    ("memory_forget", {"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "no memory '01ARZ3NDEKTSV4RRFFQ69G5FAV'"),
    ("memory_history", {"id": "nope"}, "no memory 'nope'"),
    ("memory_recall", {"query": "builds", "k": 0}, "k: Input should be greater than or equal to 1"),
    ("memory_recall", {"query": "builds", "as_of": "yesterday-ish"}, "as_of: cannot read"),
    ("memory_recall", {"query": "builds", "scope": "everywhere"}, "scope: Input should be"),
    ("memory_review", {"action": "queue", "verdict": "approve"}, "action queue takes types, state, limit, not verdict"),
    ("memory_review", {"action": "maintenance_status", "apply": True}, "takes no other argument, not apply"),
    ("memory_review", {"action": "propose", "kind": "fact"}, "action propose needs text"),
    ("memory_review", {"action": "decide", "proposal_id": "x"}, "action decide needs verdict"),
    ("memory_review", {"action": "undo"}, "action: Input should be 'queue'"),
    ("memory_review", {}, "action: Field required"),
    ("memory_sessions", {"offset": 2}, "offset: only when reading a session"),
    ("memory_sessions", {"session_id": "s1", "since": "2025-01-01"}, "since: only when listing sessions"),
])
def test_bad_input_is_a_tool_error_with_a_clear_message_and_writes_nothing(shared, tool, arguments, expected):
    before = count(shared)
    message = shared.error(tool, **arguments)
    assert expected in message
    assert "Error executing tool" not in message and "errors.pydantic.dev" not in message
    if tool in ("memory_remember", "memory_replace", "memory_forget", "memory_review"):
        assert message.endswith("nothing was changed")
    assert count(shared) == before


# -- a store that cannot be opened ---------------------------------------------------------------------------
def test_missing_cairn_store_is_a_tool_error_naming_the_fix(tmp_path, home):
    env = server_env(home, git_init(tmp_path / "project"), CAIRN_STORE="team-notes")
    client = Client(env, tmp_path / "stderr.txt")
    try:
        for tool, arguments in (("memory_remember", {"text": "Builds use Bazel"}), ("memory_recall", {"query": "x"}),
                                ("memory_list", {})):
            message = client.error(tool, **arguments)
            assert "store 'team-notes' does not exist" in message
            assert "`cairn stores create team-notes`" in message
        status = client.ok("memory_status")
        assert status["ok"] is False and "cairn stores create team-notes" in status["error"]
        assert status["CAIRN_STORE"] == "team-notes"
        assert not (home / "stores" / "team-notes.db").exists()
        # Fixing the cause needs no restart.
        subprocess.run([sys.executable, "-m", "cairn", "stores", "create", "team-notes"], env=env, check=True,
                       capture_output=True, timeout=60)
        assert client.ok("memory_remember", text="Builds use Bazel")["status"] == "created"
        assert client.ok("memory_status")["chosen_by"] == "CAIRN_STORE environment variable"
    finally:
        client.close()


def test_corrupted_store_is_a_tool_error_and_status_says_so(tmp_path, home):
    stores = home / "stores"
    stores.mkdir(parents=True, exist_ok=True)
    (stores / "broken.db").write_bytes(b"this is not an SQLite database" * 100)
    client = Client(server_env(home, git_init(tmp_path / "project"), CAIRN_STORE="broken"), tmp_path / "stderr.txt")
    try:
        assert "not a readable" in client.error("memory_recall", query="anything")
        assert client.ok("memory_status")["ok"] is False
    finally:
        client.close()


# -- the process: stdout, imports, exit -------------------------------------------------------------------------
def _rpc(proc: subprocess.Popen, message: dict[str, Any]) -> None:
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _read_until_id(proc: subprocess.Popen, wanted: int, timeout: float, lines: list[bytes]) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
        if not ready:
            break
        # The raw stream, a byte at a time: a buffered readline may pull several answers into its
        # buffer, where select() cannot see them (a burst of answers then waits out the timeout).
        line = proc.stdout.raw.readline()
        if not line:
            break
        lines.append(line)
        message = json.loads(line)
        if message.get("id") == wanted:
            return message
    raise AssertionError(f"no response {wanted} within {timeout} s; stdout so far: {lines!r}")


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _spawn(tmp_path: Path, home: Path) -> subprocess.Popen:
    env = server_env(home, git_init(tmp_path / "project"))
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        return subprocess.Popen([sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=stderr, env=env, cwd=str(tmp_path))


def _children(pid: int) -> list[int]:
    """Child processes, except the warm embedding process: it is shared by design and outlives
    sessions (detached, in its own session) until it has been idle for a while."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    children = []
    for child in map(int, out.stdout.split()):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"cairn.adapters.warm.service" not in command:
            children.append(child)
    return children


def test_stdout_carries_only_protocol_and_the_server_exits_at_stdin_eof(tmp_path, home):
    proc = _spawn(tmp_path, home)
    lines: list[bytes] = []
    try:
        started = time.perf_counter()
        _rpc(proc, INITIALIZE)
        _read_until_id(proc, 1, 30, lines)
        print(f"raw initialize answered {time.perf_counter() - started:.2f} s after spawn")
        _rpc(proc, INITIALIZED)
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "memory_remember", "arguments": {"text": "Lint with ruff, not flake8"}}})
        # One call at a time, as a client waits for a result: concurrent calls may finish in any order.
        assert not _read_until_id(proc, 2, CALL_TIMEOUT, lines)["result"]["isError"]
        _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "memory_recall", "arguments": {"query": "which linter?"}}})
        recalled = _read_until_id(proc, 3, CALL_TIMEOUT, lines)
        assert "ruff" in recalled["result"]["content"][0]["text"]
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        lines += proc.stdout.readlines()
        for line in lines:
            message = json.loads(line)
            assert message["jsonrpc"] == "2.0" and ("result" in message or "error" in message or "method" in message)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail("the server outlived its stdin")


def test_server_exits_promptly_when_stdin_closes_during_model_load(tmp_path, home):
    proc = _spawn(tmp_path, home)
    try:
        _rpc(proc, INITIALIZE)
        _read_until_id(proc, 1, 30, [])
        _rpc(proc, INITIALIZED)  # starts the warm-up thread
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",  # a call that waits for the model
                    "params": {"name": "memory_recall", "arguments": {"query": "anything"}}})
        # A ping sent after it: its answer means the server has taken the call up and the warm-up has
        # started (the server's middleware starts it before answering any request after initialize).
        _rpc(proc, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        _read_until_id(proc, 3, 30, [])
        children = _children(proc.pid)
        started = time.monotonic()
        proc.stdin.close()
        assert proc.wait(timeout=5) == 0
        print(f"exited {time.monotonic() - started:.2f} s after stdin EOF")
        assert all(not Path(f"/proc/{pid}").exists() for pid in children)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail("the server outlived its stdin")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_server_exits_on_signal(tmp_path, home, signum):
    proc = _spawn(tmp_path, home)
    try:
        _rpc(proc, INITIALIZE)
        _read_until_id(proc, 1, 30, [])
        _rpc(proc, INITIALIZED)
        _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "ping"})  # answered once the warm-up has started
        _read_until_id(proc, 2, 30, [])
        proc.send_signal(signum)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail(f"the server ignored signal {signum}")


def test_importing_the_server_loads_no_model_library(tmp_path):
    probe = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('cairn_mcp_server', {str(SERVER)!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "print(sorted(m for m in ('sentence_transformers', 'torch', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": ""}, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


# -- captured sessions ----------------------------------------------------------------------------------
def test_session_tools_search_list_and_read_captured_turns(shared, home, monkeypatch, tmp_path):
    from cairn import Cairn

    from tests.engine.test_sessions import conversation

    project = Path(shared.ok("memory_status")["chosen_by"].split(" ", 2)[2])
    monkeypatch.setenv("CAIRN_HOME", str(home))
    transcript = tmp_path / "s1.jsonl"
    transcript.write_text("".join(conversation()))
    with Cairn.open(cwd=project, embedder=None) as memory:
        assert memory.sessions.ingest(transcript)["turns_added"] == 5
    (result,) = shared.ok("memory_search_sessions", query="\"No module named 'cairn_x'\"", window=1)["results"]
    assert result["session_id"] == "s1" and result["mode"] == "exact"
    assert [(t["position"], t.get("hit", False)) for t in result["turns"]] == [(0, True), (1, False)]
    assert result["turns"][0]["role"] == "user" and "session_id" not in result["turns"][0]
    assert result["turns"][1]["meta"]["tools"] == ["Read", "Edit"]
    found = shared.ok("memory_search_sessions", query="kamal staging", mode="keyword", k=1, window=0)
    (kamal,) = found["results"]
    assert [t["position"] for t in kamal["turns"] if t.get("hit")] == [4] and found["time_window"] is None
    dated = shared.ok("memory_search_sessions", query="kamal staging last week", mode="keyword", k=1, window=0,
                      reference="2026-03-10T12:00:00Z")
    assert dated["time_window"]["expression"] == "last week" and dated["results"][0]["session_id"] == "s1"
    sessions = shared.ok("memory_sessions")["sessions"]
    assert [s["session_id"] for s in sessions] == ["s1"] and sessions[0]["turn_count"] == 5
    page = shared.ok("memory_sessions", session_id="s1", offset=1, limit=2)
    assert [t["position"] for t in page["turns"]] == [1, 2] and page["next_offset"] == 3
    assert "no captured session" in shared.error("memory_sessions", session_id="nope")


# Issue 31: six restatements of one rule, written through MCP, then the session ends and maintenance runs.
RUFF = ["Run ruff check before pushing.", "Always run ruff check before you push.", "Before pushing, run ruff check.",
        "Please run ruff check prior to pushing!", "ruff check must pass before every push",
        "We run ruff check before pushing code."]


def test_six_restatements_from_mcp_make_one_proposal_under_one_heading(tmp_path, home):
    client = Client(server_env(home, git_init(tmp_path / "ruff-project")), tmp_path / "stderr.txt")
    try:
        ids = [client.ok("memory_remember", text=t, kind="convention")["id"] for t in RUFF]
        session_ends(client, *ids)
        client.ok("memory_review", action="maintain", apply=True)
        subjects = [s for s in client.ok("memory_review", action="queue", limit=200)["subjects"] if s["proposals"]]
        assert len(subjects) == 1 and len(subjects[0]["proposals"]) == 1
        (proposal,) = subjects[0]["proposals"]
        assert sorted(m["id"] for m in proposal["before"]) == sorted(ids)
    finally:
        client.close()
