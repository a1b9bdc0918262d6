"""Memory that follows the work (issue 30, items 2 and 4): PreToolUse injects the memories scoped to
what a tool call touches, once per session; PostToolUse of Cairn's own write tool and citations
teach scopes; SubagentStart gives a subagent the memories of its task; a cold tool hook never holds
the call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cairn import Cairn
from cairn.adapters.claude.hooks import handle
from cairn.adapters.claude.session_state import SessionState

from tests.conftest import git_init

ENGINE = Path(__file__).resolve().parents[2] / "engine"
PAYMENTS = "Payment amounts are integer cents, never floats"
DOCS = "Docs pages use sentence case headings"


@pytest.fixture
def repo(tmp_path) -> Path:
    root = git_init(tmp_path / "shop")
    (root / "src" / "payments").mkdir(parents=True)
    (root / "src" / "payments" / "charge.py").write_text("x = 1\n")
    (root / "docs").mkdir()
    (root / "docs" / "index.md").write_text("# Shop\n")
    (root / "README.md").write_text("shop\n")
    return root


def _open(root: Path) -> Cairn:
    return Cairn.open(cwd=root, embedder=None, create=True)


def _context(out) -> str:
    return ((out or {}).get("hookSpecificOutput") or {}).get("additionalContext") or ""


def _tool(root: Path, sid: str, tool: str, *, event: str = "PreToolUse", **tool_input) -> str:
    payload = {"session_id": sid, "cwd": str(root), "tool_name": tool, "tool_input": tool_input}
    return _context(handle(event, payload, {"CLAUDE_PROJECT_DIR": str(root)}))


def _many(root: Path, n: int = 300) -> None:
    """Enough other, more important memories that the brief cannot list them all (the scoped one
    must come at tool time)."""
    from cairn import Draft

    with _open(root) as memory:
        memory.remember_many([Draft(f"Service {i} listens on port {8000 + i} and logs to journald unit svc{i}",
                                    kind="decision", importance=4) for i in range(n)], detect=False)


def test_a_scoped_memory_comes_when_claude_reads_a_file_there_not_before_and_not_twice(repo):
    with _open(repo) as memory:
        m = memory.remember(PAYMENTS, kind="convention", paths=["src/payments/**"]).memory
    _many(repo)
    start = {"session_id": "S", "source": "startup", "cwd": str(repo)}
    brief = "".join(_context(handle(event, start, {"CLAUDE_PROJECT_DIR": str(repo)}))
                    for event in ("SessionStart", "SessionStart:rest"))
    assert f"[mem:{m.id}]" not in brief  # the store is larger than the brief: it is not listed
    assert _tool(repo, "S", "Read", file_path=str(repo / "README.md")) == ""
    first = _tool(repo, "S", "Read", file_path=str(repo / "src" / "payments" / "charge.py"))
    assert f"[mem:{m.id}]" in first and PAYMENTS in first and first.startswith("Cairn memories for src/payments")
    assert _tool(repo, "S", "Edit", file_path=str(repo / "src" / "payments" / "charge.py")) == ""
    # A new session (or a cleared context) gets it again.
    assert f"[mem:{m.id}]" in _tool(repo, "S2", "Edit", file_path=str(repo / "src" / "payments" / "charge.py"))


def test_what_the_brief_listed_is_not_injected_again_at_tool_time(repo):
    with _open(repo) as memory:
        m = memory.remember(PAYMENTS, kind="convention", paths=["src/payments/**"]).memory
    brief = _context(handle("SessionStart", {"session_id": "S", "source": "startup", "cwd": str(repo)},
                            {"CLAUDE_PROJECT_DIR": str(repo)}))
    assert f"[mem:{m.id}]" in brief
    assert _tool(repo, "S", "Read", file_path=str(repo / "src" / "payments" / "charge.py")) == ""


def test_bash_grep_and_glob_reach_scoped_memories(repo):
    with _open(repo) as memory:
        m = memory.remember(PAYMENTS, kind="convention", paths=["src/payments/**"]).memory
        c = memory.remember("Migrations: one alembic revision per PR", kind="convention", paths=["cmd:alembic"]).memory
    assert f"[mem:{m.id}]" in _tool(repo, "B", "Bash", command="python -m pytest src/payments/charge.py -q")
    assert f"[mem:{c.id}]" in _tool(repo, "B", "Bash", command="uv run alembic upgrade head")
    assert f"[mem:{m.id}]" in _tool(repo, "G", "Grep", pattern="cents", path=str(repo / "src" / "payments"))
    assert f"[mem:{m.id}]" in _tool(repo, "L", "Glob", pattern="src/payments/**/*.py")
    assert _tool(repo, "N", "Bash", command="ls -la") == ""


def test_a_rule_learned_in_an_earlier_session_comes_back_for_a_sibling_file(repo):
    (repo / "src" / "payments" / "refund.py").write_text("y = 2\n")
    _open(repo).close()  # the project has a store
    assert _tool(repo, "W", "Read", file_path=str(repo / "src" / "payments" / "charge.py")) == ""
    with _open(repo) as memory:
        m = memory.remember(PAYMENTS, kind="convention", session_id="W").memory  # no scope given
        assert any(s["origin"] == "learned" for s in memory.scopes.of([m.id])[m.id])
    _many(repo)
    assert f"[mem:{m.id}]" in _tool(repo, "T", "Edit", file_path=str(repo / "src" / "payments" / "refund.py"))
    assert _tool(repo, "T2", "Read", file_path=str(repo / "docs" / "index.md")) == ""


def test_post_tool_use_of_the_mcp_write_learns_the_session_files(repo):
    # The project has no store yet when Claude reads the file: the session holds the touch until it has.
    _tool(repo, "W", "Read", file_path=str(repo / "src" / "payments" / "charge.py"))
    with _open(repo) as memory:
        m = memory.remember(PAYMENTS, kind="convention").memory  # as the MCP server writes it: no session
    response = [{"type": "text", "text": json.dumps({"id": m.id, "status": "created", "related": []})}]
    handle("PostToolUse", {"session_id": "W", "cwd": str(repo), "tool_name": "mcp__plugin_cairn_cairn__memory_remember",
                           "tool_input": {"text": PAYMENTS}, "tool_response": response},
           {"CLAUDE_PROJECT_DIR": str(repo)})
    with _open(repo) as memory:
        assert "src/payments/charge.py" in {s["pattern"] for s in memory.scopes.of([m.id])[m.id]}


def test_the_session_budget_bounds_tool_time(repo):
    with _open(repo) as memory:
        for i in range(12):
            memory.remember(f"Payments rule {i}: amounts stay integer cents in module {i}", kind="convention",
                            paths=["src/payments/**"], detect=False)
    _many(repo)
    (repo / ".cairn.yaml").write_text("hooks:\n  tool_k: 3\n  tool_session_chars: 700\n")
    texts = [_tool(repo, "S", "Read", file_path=str(repo / "src" / "payments" / "charge.py")) for _ in range(6)]
    assert len(texts[0].splitlines()) == 4  # a header and tool_k lines
    assert texts[1] and sum(len(t) for t in texts) <= 700
    assert not texts[-1]  # the session's budget is spent


def test_tool_time_can_be_switched_off(repo):
    with _open(repo) as memory:
        memory.remember(PAYMENTS, kind="convention", paths=["src/payments/**"])
    (repo / ".cairn.yaml").write_text("hooks:\n  tools: false\n")
    assert _tool(repo, "S", "Read", file_path=str(repo / "src" / "payments" / "charge.py")) == ""


def test_tool_time_creates_no_store(repo, cairn_home):
    assert _tool(repo, "S", "Read", file_path=str(repo / "src" / "payments" / "charge.py")) == ""
    assert not list(Path(cairn_home).glob("**/*.db"))


def test_a_subagent_gets_the_memories_of_its_task_and_not_the_others(repo):
    with _open(repo) as memory:
        pay = memory.remember(PAYMENTS, kind="convention", paths=["src/payments/**"]).memory
        docs = memory.remember(DOCS, kind="convention", paths=["docs/**"]).memory
    _many(repo)
    env = {"CLAUDE_PROJECT_DIR": str(repo)}
    _tool(repo, "P", "Read", file_path=str(repo / "src" / "payments" / "charge.py"))  # the parent works on payments
    _tool(repo, "P", "Agent", description="Add refunds", subagent_type="general-purpose",
          prompt="Add a refund function next to src/payments/charge.py")
    _tool(repo, "P", "Agent", description="Fix docs", subagent_type="docs-writer",
          prompt="Rewrite the installation page of the documentation in docs/index.md")
    refunds = _context(handle("SubagentStart", {"session_id": "P", "cwd": str(repo), "agent_id": "a1",
                                                "agent_type": "general-purpose"}, env))
    writer = _context(handle("SubagentStart", {"session_id": "P", "cwd": str(repo), "agent_id": "a2",
                                               "agent_type": "docs-writer"}, env))
    assert f"[mem:{pay.id}]" in refunds and f"[mem:{docs.id}]" not in refunds
    assert f"[mem:{docs.id}]" in writer and f"[mem:{pay.id}]" not in writer
    assert len(refunds) < 1500 and "Service 1 " not in refunds  # never the index
    # Inside the subagent, what it was given is not injected again; the parent's state is its own.
    inside = {"session_id": "P", "agent_id": "a1", "cwd": str(repo), "tool_name": "Read",
              "tool_input": {"file_path": str(repo / "src" / "payments" / "charge.py")}}
    assert _context(handle("PreToolUse", inside, env)) == ""
    assert pay.id in SessionState("P-a1").injected


def test_a_rule_claude_code_loads_from_the_folders_claude_md_is_not_injected_again(repo):
    """Claude Code puts src/payments/CLAUDE.md in the context beside the first Read there (seen in
    tests/e2e/test_work.py): a memory imported from it is not injected a second time; the folder's
    other memories still are."""
    (repo / "src" / "payments" / "CLAUDE.md").write_text(f"# Payments\n\n- {PAYMENTS}.\n")
    with _open(repo) as memory:
        pay = memory.remember(PAYMENTS, kind="convention", paths=["src/payments/**"]).memory
        refunds = memory.remember("Refunds are issued within 14 days of the charge", kind="convention",
                                  paths=["src/payments/**"]).memory
    read = _tool(repo, "S", "Read", file_path=str(repo / "src" / "payments" / "charge.py"))
    assert f"[mem:{refunds.id}]" in read and f"[mem:{pay.id}]" not in read
    assert _tool(repo, "S", "Grep", pattern="cents", path=str(repo / "src" / "payments")) == ""
    # Only a Read (or an Edit, which follows one) brings the file: a new session's first Write gets it.
    written = _tool(repo, "S2", "Write", file_path=str(repo / "src" / "payments" / "new.py"), content="")
    assert f"[mem:{pay.id}]" in written


def _subagent_transcript(root: Path, session: Path, agent_id: str, prompt: str) -> None:
    """What Claude Code 2.1 writes once a subagent has started: <session transcript without .jsonl>/
    subagents/agent-<id>.jsonl, opening with the prompt of its Agent call."""
    path = session.with_suffix("") / "subagents" / f"agent-{agent_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"isSidechain": True, "agentId": agent_id, "type": "user",
                                "message": {"role": "user", "content": prompt}}) + "\n")


def test_subagents_of_one_type_started_together_get_their_own_tasks_at_their_first_tool_call(repo, tmp_path):
    """Two Agent calls of one type in one message start together in no set order, and SubagentStart
    names neither the call nor the prompt: the start gives nothing rather than guess (first come,
    first served gave the docs subagent the payments task), and each subagent's first tool call
    finds its prompt in its own transcript."""
    with _open(repo) as memory:
        pay = memory.remember(PAYMENTS, kind="convention", paths=["src/payments/**"]).memory
        docs = memory.remember(DOCS, kind="convention", paths=["docs/**"]).memory
    env = {"CLAUDE_PROJECT_DIR": str(repo)}
    transcript = tmp_path / "projects" / "P.jsonl"
    pay_task, docs_task = "Add a refund function next to src/payments/charge.py", "Rewrite docs/index.md"
    for description, prompt in (("Add refunds", pay_task), ("Fix docs", docs_task)):
        _tool(repo, "P", "Agent", description=description, subagent_type="general-purpose", prompt=prompt)
    # The docs subagent starts first.
    for agent_id in ("a-docs", "a-pay"):
        start = {"session_id": "P", "cwd": str(repo), "agent_id": agent_id, "agent_type": "general-purpose",
                 "transcript_path": str(transcript)}
        assert _context(handle("SubagentStart", start, env)) == ""

    def first_call(agent_id: str) -> str:
        payload = {"session_id": "P", "agent_id": agent_id, "agent_type": "general-purpose", "cwd": str(repo),
                   "transcript_path": str(transcript), "tool_name": "Read",
                   "tool_input": {"file_path": str(repo / "README.md")}}
        return _context(handle("PreToolUse", payload, env))

    # A call before Claude Code has written the subagent's transcript gets nothing, and the next looks again.
    assert first_call("a-docs") == "" and SessionState("P-a-docs").awaiting_task
    _subagent_transcript(repo, transcript, "a-docs", docs_task)
    _subagent_transcript(repo, transcript, "a-pay", pay_task)
    in_docs, in_pay = first_call("a-docs"), first_call("a-pay")
    assert in_docs.startswith("Cairn memories for this task") and in_pay.startswith("Cairn memories for this task")
    assert f"[mem:{docs.id}]" in in_docs and f"[mem:{pay.id}]" not in in_docs
    assert f"[mem:{pay.id}]" in in_pay and f"[mem:{docs.id}]" not in in_pay
    assert first_call("a-pay") == ""  # once
    assert SessionState("P").agents == [] and pay.id in SessionState("P-a-pay").injected
    # A subagent alone of its type is still served at its start.
    _tool(repo, "P", "Agent", description="More refunds", subagent_type="general-purpose", prompt=pay_task)
    alone = {"session_id": "P", "cwd": str(repo), "agent_id": "a-3", "agent_type": "general-purpose",
             "transcript_path": str(transcript)}
    assert f"[mem:{pay.id}]" in _context(handle("SubagentStart", alone, env))


def test_a_cold_tool_hook_answers_at_once_and_starts_the_warm_process(repo, monkeypatch):
    runtime = tempfile.mkdtemp(prefix="cw", dir="/tmp")  # no warm process listens here
    env = {**os.environ, "PYTHONPATH": str(ENGINE), "CLAUDE_PROJECT_DIR": str(repo), "XDG_RUNTIME_DIR": runtime}
    env.pop("CAIRN_NO_WARM", None)
    payload = {"session_id": "S", "cwd": str(repo), "tool_name": "Read",
               "tool_input": {"file_path": str(repo / "README.md")}}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-P", "-c", "import sys; from cairn.adapters.claude.hook_process import "
                          "hook_main; hook_main(sys.argv[1:], hook_process=True)", "PreToolUse"],
                         input=json.dumps(payload), capture_output=True, text=True, env=env, timeout=60)
    took = time.monotonic() - started
    assert out.returncode == 0 and out.stdout == ""
    assert took < 3.0  # its timeout in hooks/hooks.json; it never waits for the engine
    try:
        from tests.conftest import wait_for

        monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
        from cairn.adapters.warm import client as warm

        wait_for(warm.is_running, what="the warm process started by the cold tool hook")
    finally:
        from cairn.adapters.warm import client as warm

        warm.request({"op": "shutdown"}, timeout=5)
        import shutil

        shutil.rmtree(runtime, ignore_errors=True)


def test_a_brief_over_one_hook_output_comes_in_two_parts_each_under_claude_codes_limit(repo):
    from cairn.adapters.claude.hooks import CONTINUED, split_brief

    with _open(repo) as memory:
        for i in range(170):
            memory.remember(f"Service {i} listens on port {8000 + i} and logs to journald unit svc{i} with "
                            f"rotation every {i % 7 + 1} days", kind="decision", detect=False)
    env = {"CLAUDE_PROJECT_DIR": str(repo)}
    start = {"session_id": "S", "source": "startup", "cwd": str(repo)}
    first = _context(handle("SessionStart", start, env))
    rest = _context(handle("SessionStart:rest", start, env))
    assert first and rest.startswith(CONTINUED)
    assert len(first) <= 9500 and len(rest) <= 9500
    ids_first = {line.split("]")[0] for line in first.splitlines() if line.startswith("- [mem:")}
    ids_rest = {line.split("]")[0] for line in rest.splitlines() if line.startswith("- [mem:")}
    assert ids_first and ids_rest and not ids_first & ids_rest
    state = SessionState("S")
    assert len(state.injected) == len(ids_first | ids_rest)  # both parts count as in the context
    assert split_brief("short") == ["short"]
    # A small store needs one part: the second hook says nothing.
    small = git_init(repo.parent / "small")
    with _open(small) as memory:
        memory.remember(PAYMENTS, kind="convention")
    start2 = {"session_id": "S2", "source": "startup", "cwd": str(small)}
    assert _context(handle("SessionStart", start2, {"CLAUDE_PROJECT_DIR": str(small)}))
    assert _context(handle("SessionStart:rest", start2, {"CLAUDE_PROJECT_DIR": str(small)})) == ""


def test_a_large_stores_brief_lists_the_memories_of_the_changed_files_and_the_branch_first(repo):
    import subprocess as sp

    def git(*args):
        sp.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args], check=True,
               capture_output=True)

    with _open(repo) as memory:
        pay = memory.remember(PAYMENTS, kind="fact", importance=1, paths=["src/payments/**"]).memory
        ledger = memory.remember("Ledger entries are append-only and reconciled nightly", kind="decision",
                                 importance=2).memory
    _many(repo)
    start = {"session_id": "S", "source": "startup", "cwd": str(repo)}
    env = {"CLAUDE_PROJECT_DIR": str(repo)}

    def brief() -> str:
        return "".join(_context(handle(e, start, env)) for e in ("SessionStart", "SessionStart:rest"))

    assert f"[mem:{pay.id}]" not in brief() and f"[mem:{ledger.id}]" not in brief()  # low priority, big store
    git("add", "-A")
    git("commit", "-qm", "init")
    git("checkout", "-qb", "fix/ledger-reconciliation")
    (repo / "src" / "payments" / "charge.py").write_text("x = 2\n")  # a change in the work tree
    listed = brief()
    assert f"[mem:{pay.id}]" in listed and f"[mem:{ledger.id}]" in listed


def test_a_large_stores_brief_lists_the_memories_of_the_last_sessions_files_first(repo):
    """Recent work points the brief: a memory learned on src/payments is listed at the start of the
    session after one that edited a file there, and not before any session worked there."""
    with _open(repo) as memory:
        pay = memory.remember(PAYMENTS, kind="fact", importance=2, paths=["src/payments/**"]).memory
    _many(repo)
    env = {"CLAUDE_PROJECT_DIR": str(repo)}

    def brief(sid: str) -> str:
        start = {"session_id": sid, "source": "startup", "cwd": str(repo)}
        return "".join(_context(handle(e, start, env)) for e in ("SessionStart", "SessionStart:rest"))

    assert f"[mem:{pay.id}]" not in brief("S1")
    _tool(repo, "S1", "Edit", file_path=str(repo / "docs" / "index.md"))
    assert f"[mem:{pay.id}]" not in brief("S2")  # the last session worked on docs
    _tool(repo, "S2", "Edit", file_path=str(repo / "src" / "payments" / "charge.py"))
    assert f"[mem:{pay.id}]" in brief("S3")
