"""The Cairn plugin inside the real Claude Code CLI, installed from this repository as a marketplace.

Each test gets its own HOME, project and Cairn data root (CAIRN_HOME from tests/conftest.py), and
installs the plugin as a user would: `claude plugin marketplace add <this repo>` then
`claude plugin install cairn@cairn`. The model is the scripted fake Messages API; every hook, the
MCP server and the warm process (python -m cairn.adapters.warm.service) are the real ones, started by Claude Code.
The runtime is this test venv (CAIRN_RUNTIME_PYTHON): tests/e2e/test_bootstrap.py covers the
installer that real users get.

The hook falls back to keyword-only recall while the warm process loads its model, so prompts and
memories here share enough words to pass the relevance gate on both paths; where a test needs the
hybrid path it waits for the warm process first.

After every CLI run the `cairn` fixture checks that no hook or MCP server process of that run is
left; the warm process outlives sessions by design, and at teardown it is asked to shut down and
must exit.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fake_api import FakeAnthropicAPI, Reply, Text, ToolUse, steps, tool_result_text
from harness import ClaudeHarness, ClaudeResult, ClaudeTurns
from cairn.adapters.claude.hooks import STORE_BROKEN
from tests.conftest import WAIT_S, wait_for

pytestmark = pytest.mark.e2e

REPO_ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = REPO_ROOT / "engine"
SERVER = "mcp__plugin_cairn_cairn"
TOOL = f"{SERVER}__{{}}".format
ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
WARM_LOAD_S = 90.0  # the warm process loads MiniLM in ~6-12 s on an idle machine; 2 shared vCPUs here

DECISION = "Deploys go through blue-green on Fly.io; never restart the primary database during business hours."
NEW_DECISION = ("Deploys now go through Kamal on our own servers; "
                "never restart the primary database during business hours.")
# Shares restart, primary, database, business, hours with both decisions (keyword gate: >= 3 stems).
RELATED = "Is it fine to restart the primary database during business hours today?"
UNRELATED = "Write a haiku about autumn leaves falling in the park."
FLAGS = "Feature flags are read from flags.yaml in the platform-config repository, reloaded every 60 seconds."
FLAGS_RELATED = "Where are the feature flags read from, and how often is flags.yaml reloaded?"
# Issue 6's single-memory case: a direct question about the memory's subject in other words, and a
# prompt that shares one topic word but asks something else.
FLAGS_ISSUE6 = "Both services read feature flags from flags.yaml in the platform-config repo, reloaded every 60 s."
FLAGS_QUESTION = "where do our feature flags come from?"
FLAGS_NEAR_MISS = "add a --verbose flag to the import CLI"

# The plugin's runtime is this venv; the warm process exits on its own after a minute idle as a backstop.
# CAIRN_E2E_RUNTIME_PYTHON: run the plugin on another runtime, e.g. a venv of engine/runtime-requirements.txt
# alone (no PyTorch, no sentence-transformers), as the plugin's bootstrap installs it.
RUNTIME_ENV = {"CAIRN_RUNTIME_PYTHON": os.environ.get("CAIRN_E2E_RUNTIME_PYTHON", sys.executable),
               "HF_HUB_OFFLINE": "1", "CAIRN_SERVICE_IDLE_SECONDS": "60"}

WARM_CLIENT = """\
import json, sys
from cairn.adapters.warm import client as warm
op = sys.argv[1]
if op == "wait":
    print(json.dumps(warm.wait_until_ready(float(sys.argv[2]))))
else:
    print(json.dumps(warm.request(json.loads(op), timeout=float(sys.argv[2]))))
"""


# --------------------------------------------------------------------------- helpers


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def is_warm_service(pid: int) -> bool:
    return "-m cairn.adapters.warm.service" in cmdline(pid)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def tool_json(api: FakeAnthropicAPI, call: ToolUse) -> Any:
    """The JSON a Cairn tool returned for `call` (its tool_result), failing if it was an error."""
    block = api.find_tool_result(call.id)
    assert block is not None, f"no tool_result for {call.name}"
    text = tool_result_text(block)
    assert not block.get("is_error"), f"{call.name} failed: {text}"
    data = json.loads(text)
    if isinstance(data, dict) and set(data) == {"result"} and isinstance(data["result"], str):
        data = json.loads(data["result"])  # an MCP str result may arrive wrapped as {"result": "..."}
    return data


def injected(api: FakeAnthropicAPI, event: str) -> list[str]:
    """Every context Cairn's hook injected for `event`, cut where Claude Code's own system text begins
    (a blank line: Cairn's contexts never contain one)."""
    return [ctx.split("\n\n")[0] for ctx in api.hook_context(event)]


def user_texts(message: dict[str, Any]) -> list[str]:
    """The texts of a user message (a string, or its text blocks)."""
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content or [] if isinstance(b, dict) and isinstance(b.get("text"), str)]


def requests_text(api: FakeAnthropicAPI) -> str:
    return json.dumps(api.message_bodies())


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def store_file(cwd: Path, env: Mapping[str, str] | None = None) -> Path:
    """The store file the engine picks for `cwd` (CAIRN_HOME is the test's, from tests/conftest.py)."""
    from cairn.stores.paths import choose_store

    return choose_store(None, cwd=cwd, env={"CAIRN_HOME": os.environ["CAIRN_HOME"], **(env or {})}).path


class CairnSession:
    """One test's Claude Code + Cairn world: runs the CLI, checks for orphans, talks to the warm process."""

    def __init__(self, harness: ClaudeHarness, data_root: Path) -> None:
        self.harness = harness
        self.api = harness.api
        self.data_root = data_root
        self.project = harness.project
        self.warm_pids: set[int] = set()

    # running -------------------------------------------------------------------------------

    def script(self, *replies: Reply, final: Reply | None = None) -> None:
        """Start a fresh request log and script for the next run."""
        with self.api._lock:
            self.api.requests.clear()
            self.api.replies.clear()
        self.api.set_script(steps(*replies, final=final))

    def run(self, prompt: str, *, cwd: Path | None = None, env_extra: Mapping[str, str] | None = None,
            allowed_tools: Sequence[str] = (SERVER,), check: bool = True,
            extra_args: Sequence[str] = ()) -> ClaudeResult:
        run = self.harness.run_claude(prompt, cwd=cwd, env_extra=env_extra, allowed_tools=allowed_tools,
                                      extra_args=extra_args, timeout=180)
        if check:
            assert run.proc.returncode == 0, f"claude exited {run.proc.returncode}\n{run.proc.stderr[-3000:]}"
        self.assert_no_orphans()
        return run

    def run_turns(self, prompts: Sequence[str], *, cwd: Path | None = None,
                  env_extra: Mapping[str, str] | None = None) -> ClaudeTurns:
        turns = self.harness.run_claude_turns(prompts, cwd=cwd, env_extra=env_extra, allowed_tools=[SERVER],
                                              timeout=180)
        assert turns.returncode == 0, turns.stderr[-3000:]
        self.assert_no_orphans()
        return turns

    def assert_no_orphans(self, grace: float = WAIT_S) -> None:
        """Only the warm process may outlive a CLI run; hooks and the MCP server must be gone."""
        deadline = time.monotonic() + grace
        while True:
            pids = self.harness.leftover_processes()
            warm = {p for p in pids if is_warm_service(p)}
            self.warm_pids |= warm
            others = [p for p in pids if p not in warm]
            if not others or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert others == [], "processes left by the CLI run: " + "; ".join(f"{p}: {cmdline(p)}" for p in others)

    # the warm process ------------------------------------------------------------------------

    def _warm_client(self, op: str, timeout: float, env_extra: Mapping[str, str] | None = None) -> Any:
        # A subprocess with the CLI's environment: the same data root and TMPDIR, so the same socket.
        env = {**self.harness.env(env_extra), "PYTHONPATH": str(ENGINE_DIR)}
        out = subprocess.run([sys.executable, "-c", WARM_CLIENT, op, str(timeout)], env=env, cwd=self.project,
                             capture_output=True, text=True, timeout=timeout + 60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    def wait_warm(self, seconds: float = WARM_LOAD_S) -> None:
        """Wait until the warm process answers (hooks then use hybrid recall)."""
        assert self._warm_client("wait", seconds), f"the warm process was not ready within {seconds} s"

    def warm_request(self, payload: dict[str, Any], timeout: float = 30.0) -> dict[str, Any] | None:
        return self._warm_client(json.dumps(payload), timeout)

    def shutdown_warm(self) -> None:
        """Ask every warm process of this test to stop, and check that it exits."""
        pids = {p for p in self.harness.leftover_processes() if is_warm_service(p)} | self.warm_pids
        pids = {p for p in pids if alive(p)}
        if not pids:
            return
        self.wait_warm()  # one still loading its model has no socket yet
        reply = self.warm_request({"op": "shutdown"})
        # Only the exit is checked here; test_no_orphans_and_warm_process_stops_when_asked checks the reply.
        wait_for(lambda: not any(alive(p) for p in pids), WAIT_S,
                 lambda: (f"the warm process to stop when asked: reply {reply}, still running "
                          f"{[cmdline(p) for p in pids if alive(p)]}\n{self.service_log()}"))

    def service_log(self) -> str:
        path = self.data_root / "logs" / "service.log"
        return path.read_text()[-3000:] if path.exists() else "(no service.log)"

    # seeding -----------------------------------------------------------------------------------

    def without_brief(self) -> None:
        """No SessionStart brief in this project (`hooks.brief_chars: 0`), so that a memory reaches the
        context only through the per-prompt hook: a memory the brief holds is not injected again."""
        (self.project / ".cairn.yaml").write_text("hooks:\n  brief_chars: 0\n")

    def seed(self, embedder: Any, *texts: str, cwd: Path | None = None, kind: str = "decision",
             env: Mapping[str, str] | None = None) -> list[str]:
        """Write memories straight into the store with the engine (real model, so they have vectors)."""
        from cairn import Cairn

        ids = []
        with Cairn.open(cwd=cwd or self.project, embedder=embedder,
                        env={"CAIRN_HOME": os.environ["CAIRN_HOME"], **(env or {})}) as memory:
            for text in texts:
                result = memory.remember(text, kind=kind)
                assert result.status == "created", result
                ids.append(result.memory.id)
        return ids


@pytest.fixture
def cairn(claude_env: ClaudeHarness, cairn_home: Path) -> Iterator[CairnSession]:
    """Claude Code with cairn@cairn installed from this repository's marketplace."""
    claude_env.base_env.update(RUNTIME_ENV)
    assert claude_env.install_plugin_from_marketplace(REPO_ROOT) == "cairn@cairn"
    session = CairnSession(claude_env, cairn_home)
    yield session
    session.shutdown_warm()


# --------------------------------------------------------------------------- 1. remember, restart, brief


def test_remember_over_mcp_then_brief_at_next_session(cairn: CairnSession) -> None:
    api = cairn.api
    remember = ToolUse(TOOL("memory_remember"), {"text": DECISION, "kind": "decision", "tags": ["deploy"]})
    cairn.script(remember, final=Text("Stored it. MARK-S1"))
    run = cairn.run(f"Please remember this decision: {DECISION}")

    assert run.result_text == "Stored it. MARK-S1"
    assert TOOL("memory_remember") in api.tool_names(0)
    first = json.dumps(api.message_bodies()[0])
    assert "Cairn is this project's long-term memory" in first  # the MCP server's instructions
    assert "cairn:cairn-memory" in first  # the skill is listed
    assert injected(api, "SessionStart") == []  # an empty project gets no brief
    stored = tool_json(api, remember)
    assert stored["status"] == "created" and ULID.match(stored["id"]), stored
    memory_id = stored["id"]

    # Session 2, a restart in the same repository: the brief carries the memory.
    cairn.script(final=Text("Hello. MARK-S2"))
    run = cairn.run("Good morning, what are we working on?")
    assert run.result_text == "Hello. MARK-S2"
    briefs = injected(api, "SessionStart")
    assert len(briefs) == 1, briefs
    assert briefs[0].startswith("Cairn project memory, store project-"), briefs[0]
    assert ": 1 current memory, listed here." in briefs[0].split("\n")[0], briefs[0]
    assert f"[mem:{memory_id}]" in briefs[0] and DECISION in briefs[0], briefs[0]
    assert "Decisions:" in briefs[0]


# --------------------------------------------------------------------------- 2. per-prompt recall


def test_related_prompt_gets_the_memory_unrelated_gets_nothing(cairn: CairnSession, minilm) -> None:
    api = cairn.api
    (memory_id,) = cairn.seed(minilm, DECISION)
    cairn.without_brief()
    line = f"[mem:{memory_id}]"

    # First session: the warm process is not loaded yet, so the hook answers keyword-only.
    assert cairn.harness.leftover_processes() == [] and cairn.warm_request({"op": "ping"}) is None
    for path in ("keyword-only (warm process loading)", "hybrid (warm process ready)"):
        cairn.script(final=Text("ok MARK-REL"))
        cairn.run(RELATED)
        contexts = injected(api, "UserPromptSubmit")
        assert len(contexts) == 1, (path, contexts)
        assert contexts[0].startswith("Cairn memories that may be relevant to this prompt"), (path, contexts)
        assert line in contexts[0] and DECISION in contexts[0], (path, contexts)

        cairn.script(final=Text("ok MARK-UNREL"))
        cairn.run(UNRELATED)
        assert UNRELATED in requests_text(api)
        assert api.hook_context("UserPromptSubmit") == [], (path, api.hook_context("UserPromptSubmit"))
        cairn.wait_warm()

    # With the brief on, the brief holds the memory: the related prompt does not get it a second time.
    (cairn.project / ".cairn.yaml").unlink()
    cairn.script(final=Text("ok MARK-REL2"))
    cairn.run(RELATED)
    assert line in injected(api, "SessionStart")[0]
    assert api.hook_context("UserPromptSubmit") == []


def test_direct_question_about_the_only_memory_injects_it_on_both_paths(cairn: CairnSession, minilm) -> None:
    """Issue 6: a store holding the single flags.yaml memory must inject it for "where do our feature
    flags come from?" (other words, the memory's rare words), keyword-only and hybrid, and nothing for
    a prompt sharing only the word "flag"."""
    api = cairn.api
    (memory_id,) = cairn.seed(minilm, FLAGS_ISSUE6, kind="fact")
    cairn.without_brief()
    assert cairn.harness.leftover_processes() == [] and cairn.warm_request({"op": "ping"}) is None
    for path in ("keyword-only (warm process loading)", "hybrid (warm process ready)"):
        cairn.script(final=Text("ok MARK-FLAGS"))
        cairn.run(FLAGS_QUESTION)
        contexts = injected(api, "UserPromptSubmit")
        assert len(contexts) == 1, (path, contexts)
        assert f"[mem:{memory_id}]" in contexts[0] and FLAGS_ISSUE6 in contexts[0], (path, contexts)

        cairn.script(final=Text("ok MARK-FLAG-CLI"))
        cairn.run(FLAGS_NEAR_MISS)
        assert FLAGS_NEAR_MISS in requests_text(api)
        assert api.hook_context("UserPromptSubmit") == [], (path, api.hook_context("UserPromptSubmit"))
        cairn.wait_warm()


# --------------------------------------------------------------------------- 3. replace and history


def test_replaced_memory_leaves_context_and_history_keeps_the_chain(cairn: CairnSession, minilm) -> None:
    api = cairn.api
    (old_id,) = cairn.seed(minilm, DECISION)

    replace = ToolUse(TOOL("memory_replace"), {"id": old_id, "text": NEW_DECISION})
    history = ToolUse(TOOL("memory_history"), {"id": f"[mem:{old_id}]"})
    cairn.script(replace, history, final=Text("Replaced. MARK-R"))
    cairn.run(f"We moved off Fly. {NEW_DECISION}")
    replaced = tool_json(api, replace)
    assert replaced["status"] == "created" and replaced.get("superseded") == [old_id], replaced
    new_id = replaced["id"]
    chain = tool_json(api, history)["chain"]
    assert [(m["id"], m["text"], m["status"]) for m in chain] == [
        (old_id, DECISION, "superseded"), (new_id, NEW_DECISION, "current")], chain
    assert chain[0]["superseded_by"] == new_id
    assert chain[0]["valid_to"] == chain[1]["valid_from"] and "retired_at" in chain[0]
    assert "retired_at" not in chain[1] and "valid_to" not in chain[1]

    # The next session (and the one after, once the warm process serves hybrid recall).
    for _ in range(2):
        cairn.script(final=Text("ok MARK-R2"))
        cairn.run(RELATED)
        (brief,) = injected(api, "SessionStart")
        assert f"[mem:{new_id}]" in brief and NEW_DECISION in brief, brief
        assert old_id not in brief and "Fly.io" not in brief, brief
        assert ": 1 current memory, listed here." in brief
        assert api.hook_context("UserPromptSubmit") == []  # the brief holds it: not injected again
        cairn.wait_warm()


CHAIN = ["We deploy with Heroku.", "We moved deployment from Heroku to Fly.io.",
         "Deployment now runs on Kubernetes (EKS); Fly.io retired."]


def _tool_results(body: dict[str, Any]) -> dict[str, Any]:
    """Every tool result in a request body by tool_use id, parsed as tool_json does."""
    out: dict[str, Any] = {}
    for msg in body.get("messages", []):
        content = msg.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                data = json.loads(tool_result_text(block))
                if isinstance(data, dict) and set(data) == {"result"} and isinstance(data["result"], str):
                    data = json.loads(data["result"])
                out[block["tool_use_id"]] = data
    return out


def _loop_script(body: dict[str, Any]) -> Reply:
    """A model that does what the MCP instructions teach: remember each step of CHAIN, read `related`
    in the answer, and replace every memory listed there with the same text (each is an older
    deploy target). Then recall and the EKS memory's history. Stateless, like `steps`."""
    results = _tool_results(body)
    for k, text in enumerate(CHAIN):
        wrote = f"toolu_e2e_remember_{k}"
        if wrote not in results:
            return ToolUse(TOOL("memory_remember"), {"text": text, "kind": "decision", "tags": ["deploy"]}, id=wrote)
        for n, related in enumerate(results[wrote].get("related", [])):
            replaced = f"toolu_e2e_replace_{k}_{n}"
            if replaced not in results:
                return ToolUse(TOOL("memory_replace"), {"id": related["id"], "text": text}, id=replaced)
    if "toolu_e2e_recall" not in results:
        return ToolUse(TOOL("memory_recall"), {"query": "where do we deploy?"}, id="toolu_e2e_recall")
    if "toolu_e2e_history" not in results:
        return ToolUse(TOOL("memory_history"), {"id": results[f"toolu_e2e_remember_{len(CHAIN) - 1}"]["id"]},
                       id="toolu_e2e_history")
    return Text("Deploy target recorded. MARK-LOOP")


def test_the_model_resolves_related_and_only_the_last_deploy_target_stays(cairn: CairnSession, minilm) -> None:
    """Heroku, then Fly.io, then EKS: after each write the model reads `related` from the tool result
    and would replace what it lists; each write here says in words what it changed, so each retires
    the one before by itself. At the end only the EKS decision is current, in recall and in the next
    session's brief, and its history holds the chain."""
    api = cairn.api
    cairn.script(final=Text("unused"))
    api.set_script(_loop_script)
    run = cairn.run("Record our deploy target history: Heroku, then Fly.io, now EKS.")
    assert run.result_text == "Deploy target recorded. MARK-LOOP"

    results = _tool_results(api.message_bodies()[-1])
    heroku, fly, eks = (results[f"toolu_e2e_remember_{k}"] for k in range(3))
    # "moved deployment from Heroku to Fly.io" names the old value and the change: Heroku is retired
    # by the write itself, so the writer has nothing in `related` to judge (issue 31, item 3).
    assert fly.get("superseded") == [heroku["id"]] and not fly.get("related"), fly
    assert eks.get("superseded") == [fly["id"]], eks  # "Fly.io retired": said in words, retired by itself
    assert not any(k.startswith("toolu_e2e_replace") for k in results)  # nothing left to judge

    hits = results["toolu_e2e_recall"]["hits"]
    assert [h["id"] for h in hits] == [eks["id"]], hits
    chain = results["toolu_e2e_history"]["chain"]
    assert [(m["text"], m["status"]) for m in chain] == [
        (CHAIN[0], "superseded"), (CHAIN[1], "superseded"), (CHAIN[2], "current")], chain

    cairn.script(final=Text("ok MARK-LOOP2"))
    cairn.run("Good morning, what are we working on?")
    (brief,) = injected(api, "SessionStart")
    assert f"[mem:{eks['id']}]" in brief and ": 1 current memory" in brief, brief
    assert "Heroku" not in brief and "We moved deployment" not in brief, brief
    # The first session's end checked its writes: everything was resolved, nothing waits for review.
    wait_for(lambda: "3 writes (1 still current), 0 proposals queued" in _hooks_log(cairn), WAIT_S,
             lambda: f"SessionEnd to settle the session's writes; hooks.log: {_hooks_log(cairn)}")
    assert _queue(cairn) == []


def _hooks_log(cairn: CairnSession) -> str:
    path = cairn.data_root / "logs" / "hooks.log"
    return path.read_text() if path.exists() else ""


def _queue(cairn: CairnSession) -> list[list[str]]:
    from cairn import Cairn

    with Cairn.open(cwd=cairn.project, embedder=None, read_only=True) as memory:
        return [p.source_ids for p in memory.review.queue()]


def test_a_change_the_model_leaves_unresolved_is_queued_when_the_session_ends(cairn: CairnSession, minilm) -> None:
    """The model writes a second registry and leaves the first, which `related` showed it, unjudged:
    the session's end queues the pair for the user."""
    api = cairn.api
    npm = ToolUse(TOOL("memory_remember"), {"text": "The client SDK is published to npm."})
    pypi = ToolUse(TOOL("memory_remember"), {"text": "The client SDK is published to PyPI."})
    cairn.script(npm, pypi, final=Text("Noted. MARK-SETTLE"))
    cairn.run("Record where the client SDK is published.")
    first, second = tool_json(api, npm)["id"], tool_json(api, pypi)["id"]
    assert [r["id"] for r in tool_json(api, pypi)["related"]] == [first]
    wait_for(lambda: _queue(cairn) == [[first, second]], WAIT_S,
             lambda: f"SessionEnd to queue the pair; queue {_queue(cairn)}; hooks.log: {_hooks_log(cairn)}")


def _keep_both_script(body: dict[str, Any]) -> Reply:
    """A model that writes two registries, reads `related` on the second and judges the pair an
    addition: memory_keep_both with the new id and the one `related` showed it."""
    results = _tool_results(body)
    for k, text in enumerate(("The client SDK is published to npm.", "The client SDK is published to PyPI.")):
        if f"toolu_e2e_registry_{k}" not in results:
            return ToolUse(TOOL("memory_remember"), {"text": text}, id=f"toolu_e2e_registry_{k}")
    second = results["toolu_e2e_registry_1"]
    if "toolu_e2e_keep" not in results:
        return ToolUse(TOOL("memory_keep_both"), {"id": second["id"], "others": [r["id"] for r in second["related"]]},
                       id="toolu_e2e_keep")
    return Text("Both registries recorded. MARK-KEEP")


def test_a_pair_the_model_keeps_both_of_is_not_queued_when_the_session_ends(cairn: CairnSession, minilm) -> None:
    """The same two registries, judged by the model: both hold, it says so with memory_keep_both, and
    the session's end queues nothing; both memories stay current."""
    api = cairn.api
    cairn.script(final=Text("unused"))
    api.set_script(_keep_both_script)
    run = cairn.run("Record where the client SDK is published.")
    assert run.result_text == "Both registries recorded. MARK-KEEP"
    results = _tool_results(api.message_bodies()[-1])
    first, second = results["toolu_e2e_registry_0"]["id"], results["toolu_e2e_registry_1"]["id"]
    assert results["toolu_e2e_keep"] == {"id": second, "kept": [first]}, results["toolu_e2e_keep"]
    assert "memory_keep_both" in results["toolu_e2e_registry_1"]["instruction"]
    wait_for(lambda: "2 writes (2 still current), 0 proposals queued" in _hooks_log(cairn), WAIT_S,
             lambda: f"SessionEnd to settle the session's writes; hooks.log: {_hooks_log(cairn)}")
    assert _queue(cairn) == []


# --------------------------------------------------------------------------- 4. which store


def test_same_folder_name_in_two_places_gets_two_stores(cairn: CairnSession, tmp_path: Path) -> None:
    api = cairn.api
    api_a, api_b = git_init(tmp_path / "a" / "api"), git_init(tmp_path / "b" / "api")
    store_a, store_b = store_file(api_a), store_file(api_b)
    assert store_a != store_b and store_a.name.startswith("api-") and store_b.name.startswith("api-")

    remember = ToolUse(TOOL("memory_remember"), {"text": DECISION, "kind": "decision"})
    cairn.script(remember, final=Text("Stored. MARK-A"))
    cairn.run(f"Remember: {DECISION}", cwd=api_a)
    memory_id = tool_json(api, remember)["id"]
    assert store_a.exists()

    cairn.script(final=Text("ok MARK-B"))
    cairn.run(RELATED, cwd=api_b)
    assert RELATED in requests_text(api)
    assert api.hook_context("SessionStart") == [] and api.hook_context("UserPromptSubmit") == []
    assert memory_id not in requests_text(api)

    cairn.script(final=Text("ok MARK-A2"))  # the control: folder a still gets it
    cairn.run(RELATED, cwd=api_a)
    assert f"[mem:{memory_id}]" in injected(api, "SessionStart")[0]


def test_subfolder_and_linked_worktree_use_the_repository_store(cairn: CairnSession, tmp_path: Path) -> None:
    api = cairn.api
    remember = ToolUse(TOOL("memory_remember"), {"text": DECISION, "kind": "decision"})
    cairn.script(remember, final=Text("Stored. MARK-ROOT"))
    cairn.run(f"Remember: {DECISION}")
    memory_id = tool_json(api, remember)["id"]

    subfolder = cairn.project / "services" / "billing"
    subfolder.mkdir(parents=True)
    git = ["git", "-C", str(cairn.project), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    worktree = tmp_path / "elsewhere" / "project-feature"
    subprocess.run([*git, "worktree", "add", "-q", str(worktree)], check=True)
    for where in (subfolder, worktree):
        cairn.script(final=Text(f"ok MARK-{where.name}"))
        cairn.run(RELATED, cwd=where)
        briefs = injected(api, "SessionStart")
        assert len(briefs) == 1 and f"[mem:{memory_id}]" in briefs[0], (where, briefs)


def test_starting_a_session_creates_no_store(cairn: CairnSession) -> None:
    # Capture (Stop) stores the session's turns, which makes a store: switched off here, so that what
    # is tested is that the other hooks and the MCP server never create one.
    (cairn.project / ".cairn.yaml").write_text("sessions:\n  capture: false\n")
    cairn.script(final=Text("ok MARK-EMPTY"))
    cairn.run(RELATED)
    assert cairn.api.hook_context("SessionStart") == []
    # The MCP server warms its model right after the handshake, through the warm process. run() saw
    # the server exit; wait until the warm process it (or a hook) started has loaded the model too:
    # then everything the session set going has got as far as it will.
    assert cairn.harness.leftover_processes() != [], "no warm process was started"
    cairn.wait_warm()
    assert not store_file(cairn.project).exists(), "a session that stored nothing created a store"


def test_a_project_without_a_store_is_briefed_with_the_users_global_preferences(cairn: CairnSession,
                                                                                 minilm) -> None:
    from cairn import Cairn

    (cairn.project / ".cairn.yaml").write_text("sessions:\n  capture: false\n")  # as above: no store made
    with Cairn.open(store="global", embedder=minilm) as glob:
        pref = glob.remember("The user wants commit messages in the imperative mood", kind="preference").memory
    cairn.script(final=Text("ok MARK-GLOBAL"))
    cairn.run("Write the commit message for this change")
    briefs = cairn.api.hook_context("SessionStart")
    assert len(briefs) == 1 and "this project has no store yet" in briefs[0], briefs
    assert f"[mem:{pref.id}]" in briefs[0] and "imperative mood" in briefs[0]
    cairn.wait_warm()
    assert not store_file(cairn.project).exists(), "briefing from the global store created a project store"


def test_cairn_store_points_two_folders_at_one_store(cairn: CairnSession, tmp_path: Path) -> None:
    api = cairn.api
    created = subprocess.run([sys.executable, "-m", "cairn", "stores", "create", "team-notes"],
                             capture_output=True, text=True, env={**cairn.harness.env(), "PYTHONPATH": str(ENGINE_DIR)})
    assert created.returncode == 0, created.stderr
    # As direnv would set it: an environment variable on the Claude Code process, per folder.
    shared = {"CAIRN_STORE": "team-notes"}
    first, second = git_init(tmp_path / "service-one"), tmp_path / "notes" / "service-two"
    second.mkdir(parents=True)  # not even a git repository

    remember = ToolUse(TOOL("memory_remember"), {"text": DECISION, "kind": "decision"})
    status = ToolUse(TOOL("memory_status"))
    cairn.script(remember, status, final=Text("Stored. MARK-ONE"))
    cairn.run(f"Remember: {DECISION}", cwd=first, env_extra=shared)
    memory_id = tool_json(api, remember)["id"]
    state = tool_json(api, status)
    assert state["store"] == "team-notes" and state["chosen_by"] == "CAIRN_STORE environment variable", state
    assert not store_file(first).exists()  # the folder's own store was not used

    cairn.script(final=Text("ok MARK-TWO"))
    cairn.run(RELATED, cwd=second, env_extra=shared)
    (brief,) = injected(api, "SessionStart")
    assert brief.startswith("Cairn project memory, store team-notes: 1 current memory"), brief
    assert f"[mem:{memory_id}]" in brief

    cairn.script(final=Text("ok MARK-THREE"))  # the control: without CAIRN_STORE, the folder's own (empty) store
    cairn.run(RELATED, cwd=second)
    assert api.hook_context("SessionStart") == [] and api.hook_context("UserPromptSubmit") == []


# --------------------------------------------------------------------------- 5. /cairn:review-memory


def test_review_memory_walks_the_queue_and_records_the_users_verdict(cairn: CairnSession, minilm) -> None:
    from cairn import Cairn

    api = cairn.api
    older, newer = cairn.seed(minilm, "Integration tests run against a real PostgreSQL 16 container, never SQLite.",
                              "Integration tests must use a real PostgreSQL 16 container instead of SQLite.",
                              kind="convention")
    with Cairn.open(cwd=cairn.project, embedder=None) as memory:
        (proposal,) = memory.review.queue()  # `remember` reported the restatement: it joined the queue
    assert (proposal.type, proposal.source_ids) == ("near_duplicate", [older, newer])
    queue = ToolUse(TOOL("memory_review"), {"action": "queue", "limit": 30, "types": ["near_duplicate"]})
    # The user chose the newer wording to stay.
    decide = ToolUse(TOOL("memory_review"), {"action": "decide", "proposal_id": proposal.id, "verdict": "approve",
                                             "keep_id": newer})
    cairn.script(queue, decide, final=Text("Applied 1 of 1 MARK-REVIEW"))
    # No --allowedTools: the command's own allowed-tools frontmatter must let its tool calls run.
    run = cairn.run("/cairn:review-memory near_duplicate", allowed_tools=())

    assert run.result_text == "Applied 1 of 1 MARK-REVIEW"
    first = requests_text(api)
    assert "Walk the user through the queue" in first
    assert 'Narrowing requested by the user: \\"near_duplicate\\"' in first
    assert api.hook_context("UserPromptSubmit") == []  # a slash command is not a topic
    listed = tool_json(api, queue)
    assert listed["count"] == 1, listed
    (shown,) = [p for s in listed["subjects"] for p in s["proposals"]]
    assert shown["id"] == proposal.id and [m["id"] for m in shown["before"]] == [older, newer]
    done = tool_json(api, decide)
    assert (done["state"], done["superseded"], done["by"]) == ("applied", [older], newer), done
    # The queue after the verdict: nothing pending, the proposal applied by the MCP reviewer.
    with Cairn.open(cwd=cairn.project, embedder=None) as memory:
        assert memory.review.queue() == []
        (applied,) = memory.review.queue(states=["applied"])
        assert (applied.id, applied.decided_by) == (proposal.id, "mcp")
        assert memory.get(older).superseded_by == newer


# --------------------------------------------------------------------------- 6. fails open


def _garbage(cairn: CairnSession) -> tuple[dict[str, str], str, str]:
    path = store_file(cairn.project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not a database\0" + bytes(range(256)) * 64)
    return {}, "StoreCorrupted", str(path)


def _newer_schema(cairn: CairnSession) -> tuple[dict[str, str], str, str]:
    path = store_file(cairn.project)
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE memories (seq INTEGER PRIMARY KEY)")
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    return {}, "SchemaTooNew", str(path)


def _missing_named_store(cairn: CairnSession) -> tuple[dict[str, str], str, str]:
    return {"CAIRN_STORE": "no-such-store"}, "StoreNotFound", "'no-such-store' does not exist"


@pytest.mark.parametrize("breakage", [_garbage, _newer_schema, _missing_named_store],
                         ids=["garbage-bytes", "newer-schema", "missing-named-store"])
def test_broken_store_fails_open(cairn: CairnSession, breakage) -> None:
    api = cairn.api
    env_extra, error, reason = breakage(cairn)
    status = ToolUse(TOOL("memory_status"))
    cairn.script(status, final=Text("Answered anyway. MARK-BROKEN"))
    run = cairn.run(RELATED, env_extra=env_extra)

    assert run.result_text == "Answered anyway. MARK-BROKEN"
    assert RELATED in requests_text(api)
    # A store that exists but cannot be used is named once, at session start, with `cairn doctor`;
    # a CAIRN_STORE naming no store is a setting, not a broken store: nothing is injected.
    broken = breakage is not _missing_named_store
    start = api.hook_context("SessionStart")
    if broken:
        assert len(start) == 1 and start[0].startswith(STORE_BROKEN), start
    else:
        assert start == []
    assert api.hook_context("UserPromptSubmit") == []
    # The MCP server still runs and says what is wrong.
    state = tool_json(api, status)
    assert state["ok"] is False and reason in state["error"], state
    # The failure went to the log; the user sees no error text or traceback.
    log_file = cairn.data_root / "logs" / "hooks.log"
    log = log_file.read_text() if log_file.exists() else "(no hooks.log)"
    # (A broken store's session start is handled, not failed: its line goes to the log of whichever
    # process answered, this hook's or the warm process's.)
    assert "UserPromptSubmit hook failed open" in log, log
    assert broken or "SessionStart hook failed open" in log, log
    # One line each, naming the store (no traceback, so no exception class).
    named = reason if broken else "store 'no-such-store' does not exist (chosen by CAIRN_STORE"
    assert log.count(named) >= (1 if broken else 2) and "Traceback" not in log, log
    for text in (run.proc.stdout, run.proc.stderr):
        assert error not in text and "Traceback" not in text, text
    hook_errors = cairn.harness.home / ".claude" / "plugins" / "data" / "cairn-cairn" / "hook-errors.log"
    assert not hook_errors.exists() or hook_errors.read_text() == "", hook_errors.read_text()
    assert not (cairn.data_root / "stores" / "no-such-store.db").exists()


# --------------------------------------------------------------------------- 7. manifests, trivial prompts


def test_manifests(claude_env: ClaudeHarness) -> None:
    validated = claude_env.validate_plugin(REPO_ROOT)
    assert validated.returncode == 0, validated.stdout + validated.stderr

    marketplace = json.loads((REPO_ROOT / ".claude-plugin" / "marketplace.json").read_text())
    plugin = json.loads((REPO_ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert marketplace["name"] == "cairn"
    (entry,) = marketplace["plugins"]
    assert entry["name"] == plugin["name"] == "cairn" and entry["source"] == "./"
    assert re.fullmatch(r"\d+\.\d+\.\d+", plugin["version"]), plugin.get("version")
    # The version lives in plugin.json only (Claude Code lets plugin.json win over the marketplace entry).
    assert "version" not in entry and "version" not in marketplace.get("metadata", {})
    manifests = [p.relative_to(REPO_ROOT).as_posix() for p in REPO_ROOT.rglob("plugin.json")
                 if ".cache" not in p.parts and "node_modules" not in p.parts]
    assert manifests == [".claude-plugin/plugin.json"], manifests

    hooks = json.loads((REPO_ROOT / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "SubagentStart", "Stop",
                          "PreCompact", "SessionEnd"}
    # What tool time follows (cairn.adapters.claude.work), and the write tools PostToolUse learns from.
    (pre,), (post,) = hooks["PreToolUse"], hooks["PostToolUse"]
    assert set(pre["matcher"].split("|")) == {"Read", "Edit", "Write", "MultiEdit", "NotebookEdit", "Grep", "Glob",
                                              "Bash", "Agent", "Task"}, pre
    assert set(post["matcher"].split("|")) == {TOOL("memory_remember"), TOOL("memory_replace")}, post
    for event, groups in hooks.items():
        for group in groups:
            for hook in group["hooks"]:
                assert isinstance(hook.get("timeout"), (int, float)) and 0 < hook["timeout"] <= 30, (event, hook)


def test_slash_commands_and_trivial_prompts_inject_nothing(cairn: CairnSession, minilm) -> None:
    api = cairn.api
    (memory_id,) = cairn.seed(minilm, DECISION)
    cairn.without_brief()
    # Each slash prompt names the memory's topic word for word: only the slash keeps it out.
    prompts = ["ok", "thanks", "/help", "/not-a-command restart the primary database during business hours",
               "/cairn:review-memory restart primary database business hours", "continue", RELATED]
    cairn.script(final=Text("fine MARK-TRIVIAL"))
    turns = cairn.run_turns(prompts, env_extra={"CAIRN_HOOK_TIMING": "1"})
    assert len(turns.results) == len(prompts)
    # The hook did run for each of them (Claude Code answers /help itself: no hook, no request) ...
    timing = (cairn.harness.home / ".claude" / "plugins" / "data" / "cairn-cairn" / "hook-errors.log").read_text()
    assert timing.count("cairn hook UserPromptSubmit:") == len(prompts) - 1, timing

    contexts = injected(api, "UserPromptSubmit")
    # ... and only the last, real question got context.
    assert len(contexts) == 1 and f"[mem:{memory_id}]" in contexts[0], contexts
    last = api.message_bodies()[-1]["messages"]
    with_context = [i for i, m in enumerate(last) if "UserPromptSubmit hook additional context" in json.dumps(m)]
    related_at = max(i for i, m in enumerate(last) if m["role"] == "user" and RELATED in user_texts(m))
    assert with_context == [related_at + 1], (with_context, related_at)


# --------------------------------------------------------------------------- 8. processes


def test_no_orphans_and_warm_process_stops_when_asked(cairn: CairnSession) -> None:
    remember = ToolUse(TOOL("memory_remember"), {"text": DECISION, "kind": "decision"})
    cairn.script(remember, final=Text("Stored. MARK-P1"))
    cairn.run(f"Remember: {DECISION}")  # checks that no hook or MCP server process is left
    cairn.script(final=Text("ok MARK-P2"))
    cairn.run(RELATED)

    # What remains is exactly one warm process (hooks and MCP servers may both have started one).
    cairn.wait_warm()
    warm = [p for p in cairn.harness.leftover_processes() if is_warm_service(p)]
    assert len(warm) == 1, [cmdline(p) for p in warm]
    ping = cairn.warm_request({"op": "ping"})
    assert ping is not None and ping["pid"] == warm[0]
    reply = cairn.warm_request({"op": "shutdown"})
    wait_for(lambda: not alive(warm[0]), WAIT_S, lambda: f"the warm process to exit when asked\n{cairn.service_log()}")
    assert cairn.harness.leftover_processes() == []
    assert cairn.warm_request({"op": "ping"}) is None  # its socket is gone
    assert "stopping: asked to" in cairn.service_log()
    assert reply == {"ok": True}


def test_pause_command_stops_injection_for_the_session(cairn: CairnSession, minilm) -> None:
    api = cairn.api
    memory_id, flags_id = cairn.seed(minilm, DECISION, FLAGS)
    cairn.without_brief()
    cairn.script(final=Text("fine MARK-PAUSE"))
    # Each memory reaches a session's context once, so the prompt after the pause asks about the other.
    asked = [RELATED, "/cairn:pause", f"{FLAGS_RELATED} (paused)", "/cairn:pause off", f"{FLAGS_RELATED} (back on)"]
    cairn.run_turns(asked)

    sent = requests_text(api)
    assert "Cairn memory injection is paused for this session." in sent
    assert "Cairn memory injection is back on for this session." in sent
    messages = api.message_bodies()[-1]["messages"]

    def context_after(prompt: str) -> str | None:
        at = max(i for i, m in enumerate(messages) if m["role"] == "user" and prompt in user_texts(m))
        following = messages[at + 1] if at + 1 < len(messages) else {}
        text = json.dumps(following.get("content")) if following.get("role") == "system" else ""
        return text if "UserPromptSubmit hook additional context" in text else None

    assert f"[mem:{memory_id}]" in (context_after(asked[0]) or ""), messages[:2]
    assert context_after(asked[2]) is None
    assert f"[mem:{flags_id}]" in (context_after(asked[4]) or "")
    assert not any((cairn.data_root / "paused").iterdir())


def test_resumed_session_gets_the_brief_again_only_when_it_changed(cairn: CairnSession, minilm) -> None:
    api = cairn.api
    (first_id,) = cairn.seed(minilm, DECISION)
    cairn.script(final=Text("first MARK-RES1"))
    run = cairn.run("Good morning, what is on the list today?")
    session_id = run.json["session_id"] if run.json else ""
    assert len(injected(api, "SessionStart")) == 1

    def briefs_in_last_request() -> list[str]:
        marker = "SessionStart hook additional context: "
        texts = [t for m in api.message_bodies()[-1]["messages"] if m["role"] == "system"
                 for t in user_texts(m) if marker in t]
        return [t.split(marker, 1)[1].split("\n\n")[0] for t in texts]

    # Resumed with nothing new: the transcript already holds the brief, so it is not injected twice.
    cairn.script(final=Text("second MARK-RES2"))
    run = cairn.run("And what else is there?", extra_args=["--resume", session_id])
    assert run.json and run.json["session_id"] == session_id
    briefs = briefs_in_last_request()
    assert len(briefs) == 1 and f"[mem:{first_id}]" in briefs[0], briefs

    # A memory was added since: resuming injects the new brief.
    (second_id,) = cairn.seed(minilm, "Every pull request needs one approving review before merge.",
                              kind="convention")
    cairn.script(final=Text("third MARK-RES3"))
    cairn.run("Anything new since then?", extra_args=["--resume", session_id])
    briefs = briefs_in_last_request()
    assert len(briefs) == 2 and f"[mem:{second_id}]" in briefs[1] and f"[mem:{first_id}]" in briefs[1], briefs


# --------------------------------------------------------------------------- the brief as an index of the store

AREAS = ("billing", "search", "checkout", "ledger", "exports", "auth", "notifications", "reports")


def seed_many(project: Path, n: int, start: int = 0) -> list[str]:
    """n distinct memories straight into the store, keyword-only (no supersession detection: they
    are many facts of one template)."""
    from cairn import Cairn

    kinds = ("fact", "fact", "convention", "decision", "fact")
    with Cairn.open(cwd=project, embedder=None, create=True) as memory:
        return [memory.remember(f"The {AREAS[i % len(AREAS)]} worker {i} retries failed jobs {i % 7 + 2} times "
                                f"and logs to the {AREAS[(i + 3) % len(AREAS)]} channel",
                                kind=kinds[i % len(kinds)], detect=False).memory.id for i in range(start, start + n)]


def test_the_brief_lists_a_store_of_40_whole_and_ranks_what_claude_cited_first_in_a_store_of_400(
        cairn: CairnSession) -> None:
    api = cairn.api
    ids = seed_many(cairn.project, 40)
    cairn.script(final=Text("ok MARK-IDX1"))
    cairn.run("Good morning, what are we working on?")
    (brief,) = injected(api, "SessionStart")
    assert ": 40 current memories, listed here." in brief.split("\n")[0], brief[:300]
    assert all(f"[mem:{i}]" in brief for i in ids) and len(brief) <= 8000

    # 400: the brief lists what fits and maps the rest. A memory it leaves out reaches a session through
    # the prompt's injection, Claude cites it, and the next session's brief lists it first of its kind.
    target_text = "The zeppelin telemetry bridge decodes MAVLink frames from the balloon fleet every 30 seconds"
    from cairn import Cairn

    with Cairn.open(cwd=cairn.project, embedder=None) as memory:
        target = memory.remember(target_text, kind="fact", detect=False).memory.id
    seed_many(cairn.project, 359, start=40)
    cairn.script(final=Text("ok MARK-IDX2"))
    cairn.run("Anything new?")
    brief = injected(api, "SessionStart")[0]
    assert "Not listed: " in brief and f"[mem:{target}]" not in brief, brief[:300]

    cairn.script(final=Text(f"That is the zeppelin bridge [mem:{target}]: it decodes the frames. MARK-IDX3"))
    cairn.run("why does the zeppelin telemetry bridge drop MAVLink frames from the balloon fleet?")
    prompts = injected(api, "UserPromptSubmit")
    assert prompts and f"[mem:{target}]" in prompts[0], prompts
    with Cairn.open(cwd=cairn.project, embedder=None) as memory:  # the Stop hook counted the citation
        wait_for(lambda: memory.usage(target)["cited"] == 1, WAIT_S, "the citation to be counted")

    cairn.script(final=Text("ok MARK-IDX4"))
    cairn.run("Good morning again")
    brief = injected(api, "SessionStart")[0]
    facts = brief.split("Facts:\n", 1)[1].split("\n")
    assert facts[0].startswith(f"- [mem:{target}] The zeppelin telemetry bridge"), brief


# --------------------------------------------------------------------------- session capture and search

CAPTURED_ERROR = ("psycopg.OperationalError: connection to server at 127.0.0.1, port 5433 failed: "
                  "FATAL: password authentication failed for user cairn_app")
CAPTURED_FIX = "The fix: the test database password comes from PGPASSWORD in .env.test; export it. MARK-FIX"
PRIVATE_SPAN = "codename bluebird-7731"
FAKE_KEY = "AKIA4HQ7ZN2XKW3RM5TB"  # made up in an access key id's shape (AWS's documented example is not a secret)


def stored_turns(project: Path) -> list[Any]:
    from cairn import Cairn, StoreNotFound

    try:
        with Cairn.open(cwd=project, embedder=None) as memory:
            return [t for s in memory.sessions.catalog() for t in memory.sessions.read(s.session_id, limit=100)[1]]
    except StoreNotFound:
        return []


def credential_sentences() -> tuple[str, list[str]]:
    """Credentials written in prose, as users paste them (fresh random values each run, so no list of
    known values can catch them): the text, and the secret part of each value."""
    import secrets
    import string

    def alnum(n: int) -> str:
        return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))

    values = [secrets.token_hex(16), alnum(30), alnum(32), alnum(32)]
    text = (f"the key for the sandbox is rk-test-{values[0]}, prod token: tkn_{values[1]}, the webhook signing "
            f"secret is whsec_{values[2]} and billing uses sk-live-{values[3]}.")
    return text, values


def test_a_session_is_captured_and_the_next_one_finds_the_error_and_its_fix(cairn: CairnSession) -> None:
    api = cairn.api
    credentials, values = credential_sentences()
    prompt = (f"pytest fails with {CAPTURED_ERROR} <private>my {PRIVATE_SPAN}</private> "
              f"and my key is {FAKE_KEY}, what now? Also, {credentials}")
    secret_parts = [PRIVATE_SPAN.encode(), b"bluebird", FAKE_KEY.encode(),
                    *(v[:12].encode() for v in values)]  # any 12 characters of a value is a leak

    def assert_no_secret_in(path: Path) -> None:
        data = path.read_bytes()
        leaked = [part for part in secret_parts if part in data]
        assert not leaked, f"{path} holds {leaked}"

    cairn.script(final=Text(CAPTURED_FIX))
    assert cairn.run(prompt).result_text == CAPTURED_FIX
    # The Stop hook handed the capture off; it lands in the store while nothing else happens.
    wait_for(lambda: len(stored_turns(cairn.project)) == 2, WAIT_S,
             lambda: f"the session's two turns to be captured: {stored_turns(cairn.project)}")
    # The session tables: the turn holds a marker where each credential was.
    (user_turn,) = [t for t in stored_turns(cairn.project) if t.role == "user"]
    assert user_turn.text.count("[REDACTED") >= 5, user_turn.text
    assert not any(v[:12] in user_turn.text for v in values), user_turn.text
    # The store's files while the warm process still has it open: the database and its live WAL.
    store = store_file(cairn.project)
    live = [p for p in store.parent.iterdir() if p.name.startswith(store.name)]
    assert store in live
    for path in live:
        assert_no_secret_in(path)

    # Next session: the agent searches the past sessions with the exact error text.
    search = ToolUse(TOOL("memory_search_sessions"), {"query": CAPTURED_ERROR})
    cairn.script(search, final=Text("Found it. MARK-SEARCH"))
    assert cairn.run("Postgres login fails in the tests again; what did we do last time?").result_text \
        == "Found it. MARK-SEARCH"
    results = tool_json(api, search)["results"]
    assert results, "no result for the exact error text"
    top = results[0]
    hit = [t for t in top["turns"] if t.get("hit")][0]
    assert hit["role"] == "user" and CAPTURED_ERROR in hit["text"], top
    # Its window, merged into the session's one result: the reply with the fix.
    assert [t["text"] for t in top["turns"] if t["position"] > hit["position"]] == [CAPTURED_FIX], top
    assert PRIVATE_SPAN not in hit["text"] and FAKE_KEY not in hit["text"] and "[REDACTED" in hit["text"], top

    # No secret in any byte of any file of the data root (store, WAL, shared memory, logs), once the
    # warm process has closed its connections and the WAL is checkpointed.
    cairn.shutdown_warm()
    files = [p for p in cairn.data_root.rglob("*") if p.is_file()]
    assert store in files
    for path in files:
        assert_no_secret_in(path)
    assert CAPTURED_ERROR.encode() in b"".join(p.read_bytes() for p in files if p.name.startswith(store.name))
