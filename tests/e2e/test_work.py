"""Memory that follows the work, inside the real Claude Code CLI: PreToolUse, PostToolUse, SubagentStart.

The plugin is installed from this repository's marketplace (test_plugin's `cairn` fixture); the model
is the scripted fake API, the hooks, MCP server and warm process are the real ones. What is checked is
what reaches the model's requests: Claude Code 2.1.328 puts a tool hook's additionalContext in a
`role: "system"` message right after the tool's result, labelled "PreToolUse:Read hook additional
context: ...", and a subagent's SubagentStart context in the subagent's own first system message.

Tool time is answered only by the warm process (cairn.adapters.claude.hook_process: a PreToolUse never waits for an
engine to load), so each test starts it and waits for it before its first session. The SessionStart
brief is off (`hooks.brief_chars: 0`): a memory the brief listed is never injected again, and with a
store this small the brief would list everything.

Every run also checks that Claude Code saw each of Cairn's hooks exit 0 within its timeout (its debug
log), that the hooks wrote nothing but timing lines to their stderr (hook-errors.log, with
CAIRN_HOOK_TIMING=1) and that neither log of Cairn has an error.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fake_api import FakeAnthropicAPI, Reply, Text, ToolUse, hook_contexts_in, iter_texts, steps
from harness import ClaudeResult
from test_plugin import ENGINE_DIR, SERVER, TOOL, CairnSession, cairn, injected, tool_json  # noqa: F401 - cairn: a fixture

pytestmark = pytest.mark.e2e

PAYMENTS = ("Payment charges always send the order's idempotency key to the provider, "
            "and a declined card is never retried automatically.")
DOCS = "Documentation pages are written in British English and each one opens with a one-line summary."
# Written over MCP in a session working on refund.py, with no paths: its scopes are learned.
ROUNDING = "Refund and charge amounts are rounded half-even in integer cents, never as floats."
GUIDANCE = "Amounts are integer cents, never floats; convert at the API edge."  # src/payments/CLAUDE.md
PAY_TASK = "Check that src/payments/charge.py never retries a declined card and report what you find."
DOCS_TASK = "Proofread docs/install.md for spelling and list the typos you find."
FILES = {"README.md": "# Shop\n", "NOTES": "nothing yet\n", "docs/install.md": "# Install\n\nRun make.\n",
         "src/payments/charge.py": "def charge(order):\n    return order\n",
         "src/payments/refund.py": "def refund(order):\n    return order\n"}
TOOL_HEADER = "Cairn memories for {} (cite as [mem:ID]):"
TASK_HEADER = "Cairn memories for this task (cite as [mem:ID]; memory_recall finds more):"
HOOK_TIMEOUT_MS = {"PreToolUse": 3000, "PostToolUse": 3000, "SubagentStart": 5000}  # hooks/hooks.json
HOOK_RUN = re.compile(r"Hooks: (\w+)(?::(\S+))? \[.*?cairn-hook\" [\w:]+\] \(plugin cairn@cairn\) "
                      r"finished with status (-?\d+) \((\d+)ms\)")
TIMING = re.compile(r"cairn hook ([\w:]+): ([\d.]+) ms")  # SessionStart:rest is the brief's second half

WARM_SPAWN = """\
import json, sys
from cairn.adapters.warm import client as warm
process = warm.spawn()
print(json.dumps(warm.wait_until_ready(float(sys.argv[1]), process=process, watch_lock=process is None)))
"""


# --------------------------------------------------------------------------- helpers


def write_files(project: Path) -> None:
    for rel, text in FILES.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)


def cairn_cli(session: CairnSession, *args: str) -> Any:
    """`cairn <args> --json` as a user runs it in the project (the test's data root and TMPDIR)."""
    env = {**session.harness.env(), "PYTHONPATH": str(ENGINE_DIR)}
    out = subprocess.run([sys.executable, "-m", "cairn", *args, "--json"], env=env, cwd=session.project,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def start_warm(session: CairnSession, seconds: float = 120.0) -> None:
    """Start the warm process as a hook would (same data root, TMPDIR and run id) and wait for it."""
    env = {**session.harness.env(), "PYTHONPATH": str(ENGINE_DIR)}
    out = subprocess.run([sys.executable, "-c", WARM_SPAWN, str(seconds)], env=env, cwd=session.project,
                         capture_output=True, text=True, timeout=seconds + 60)
    assert out.returncode == 0 and json.loads(out.stdout) is True, out.stdout + out.stderr + session.service_log()


def line_of(memory_id: str, kind: str, text: str) -> str:
    """The regex of one memory's line in a tool-time or subagent context (context.memory_line)."""
    return rf"- \[mem:{memory_id}\] \d{{4}}-\d{{2}}-\d{{2}} {kind}: {re.escape(text)}"


def assert_context(context: str, header: str, *lines: str) -> None:
    """`context` is exactly `header` then the memory lines (regexes from line_of), in order."""
    got = context.split("\n\n")[0].split("\n")  # a SubagentStart context runs on into Claude Code's text
    assert got[0] == header and len(got) == 1 + len(lines), context
    for want, line in zip(lines, got[1:], strict=True):
        assert re.fullmatch(want, line), (want, line)


def tool_contexts(body: dict[str, Any], event: str = "PreToolUse") -> list[tuple[str, str, str]]:
    """(tool_use id, tool, context) for each tool hook context in a request body: the id is the one
    whose tool_result the context follows (Claude Code puts it right after the result)."""
    messages = body["messages"]
    out = []
    for index, tool, context in hook_contexts_in(body, event):
        before = messages[index - 1].get("content")
        results = [b["tool_use_id"] for b in before if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(before, list) else []
        assert len(results) == 1, (index, messages[index - 1])
        out.append((results[0], tool, context))
    return out


def first_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][0].get("content")
    return content if isinstance(content, str) else " ".join(
        b.get("text", "") for b in content if isinstance(b, dict))


def by_agent(api: FakeAnthropicAPI, prompts: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The request bodies of each thread: a subagent's requests open with its task prompt, the
    parent's ("") with the user's prompt."""
    out: dict[str, list[dict[str, Any]]] = {"": [], **{name: [] for name in prompts}}
    for body in api.message_bodies():
        first = first_user_text(body)
        out[next((name for name, p in prompts.items() if p in first), "")].append(body)
    return out


@dataclass
class HookRun:
    event: str
    matcher: str
    status: int
    ms: int


class Watched:
    """A CLI run with its Claude Code debug log and the hooks' timing lines."""

    def __init__(self, session: CairnSession, tmp: Path):
        self.session, self.debug = session, tmp / "claude-debug.log"
        self.errors = session.harness.home / ".claude" / "plugins" / "data" / "cairn-cairn" / "hook-errors.log"

    def run(self, prompt: str, tools: tuple[str, ...]) -> ClaudeResult:
        self.debug.unlink(missing_ok=True)  # --debug-file appends
        self.errors.unlink(missing_ok=True)
        return self.session.run(prompt, allowed_tools=(SERVER, *tools), env_extra={"CAIRN_HOOK_TIMING": "1"},
                              extra_args=["--debug-file", str(self.debug)])

    def hook_runs(self) -> list[HookRun]:
        return [HookRun(m[1], m[2] or "", int(m[3]), int(m[4])) for m in HOOK_RUN.finditer(self.debug.read_text())]

    def check(self, run: ClaudeResult, expect: dict[str, int]) -> dict[str, list[float]]:
        """Every Cairn hook Claude Code ran exited 0 within its timeout, `expect` {event: count} of
        them ran, nothing but timing went to the hooks' stderr, Cairn logged no error, and the CLI
        said nothing about a hook. Returns {event: [ms as Claude Code measured each run]}."""
        runs = self.hook_runs()
        debug = self.debug.read_text()
        assert runs and all(r.status == 0 for r in runs), [r for r in runs if r.status]
        assert "Hook cancelled" not in debug and not re.search(r"(?i)hook[^\n]*timed out", debug)
        for event, count in expect.items():
            assert sum(r.event == event for r in runs) == count, (event, runs)
        for r in runs:
            assert r.ms < HOOK_TIMEOUT_MS.get(r.event, 10_000), r
        errors = self.errors.read_text().splitlines() if self.errors.exists() else []
        assert errors and all(TIMING.fullmatch(line) for line in errors), errors
        assert not re.search(r"(?i)\bhook", run.proc.stderr), run.proc.stderr
        logs = self.session.data_root / "logs"
        for name in ("hooks.log", "service.log"):
            text = (logs / name).read_text() if (logs / name).exists() else ""
            for bad in ("failed open", "request failed", "Traceback", " ERROR "):
                assert bad not in text, f"{name}: {text[-3000:]}"
        seen: dict[str, list[float]] = {}
        for r in runs:
            seen.setdefault(r.event, []).append(r.ms)
        for event, ms in TIMING.findall("\n".join(errors)):
            seen.setdefault(f"{event} (the hook's own)", []).append(float(ms))
        print({event: f"n={len(ms)} median {statistics.median(ms):.0f} max {max(ms):.0f} ms"
               for event, ms in seen.items()})
        return seen


def routed(parent: Callable[[dict[str, Any]], Reply],
           agents: dict[str, Callable[[dict[str, Any]], Reply]]) -> Callable[[dict[str, Any]], Reply]:
    """A script for a session with subagents: each subagent's requests (they open with its task
    prompt) go to its own script, the rest to the parent's."""

    def script(body: dict[str, Any]) -> Reply:
        first = first_user_text(body)
        return next((s for p, s in agents.items() if p in first), parent)(body)

    return script


def agent_call(description: str, prompt: str) -> ToolUse:
    # run_in_background false: the parent waits for the subagent, so the session ends after both.
    return ToolUse("Agent", {"description": description, "prompt": prompt, "subagent_type": "general-purpose",
                             "run_in_background": False})


@pytest.fixture
def work(request: pytest.FixtureRequest, tmp_path: Path) -> Watched:
    """test_plugin's `cairn` world, with the project's files and no brief."""
    session: CairnSession = request.getfixturevalue("cairn")
    write_files(session.project)
    session.without_brief()
    return Watched(session, tmp_path)


def seed_scoped(session: CairnSession) -> tuple[str, str]:
    """PAYMENTS scoped with the CLI (`cairn remember --paths`), DOCS with the engine (paths=)."""
    from cairn import Cairn

    pay = cairn_cli(session, "remember", PAYMENTS, "--kind", "convention", "--paths", "src/payments/**")
    assert pay["status"] == "created", pay
    pay_id = pay["memory"]["id"]
    with Cairn.open(cwd=session.project, embedder=None) as memory:
        docs = memory.remember(DOCS, kind="convention", paths=["docs/"])
        assert list(memory.scopes.of([pay_id])[pay_id]) == [
            {"pattern": "src/payments/**", "origin": "given", "weight": 1.0}]
    return pay_id, docs.memory.id


# --------------------------------------------------------------------------- 1. given scopes


def test_a_scoped_memory_comes_with_its_file_not_before_and_not_twice(work: Watched) -> None:
    session = work.session
    api, project = session.api, session.project
    pay_id, docs_id = seed_scoped(session)
    start_warm(session)

    charge = str(project / "src/payments/charge.py")
    readme = ToolUse("Read", {"file_path": str(project / "README.md")})
    read = ToolUse("Read", {"file_path": charge})
    read_again = ToolUse("Read", {"file_path": charge})
    edit = ToolUse("Edit", {"file_path": charge, "old_string": "return order", "new_string": "return dict(order)"})
    write = ToolUse("Write", {"file_path": str(project / "src/payments/receipt.py"), "content": "RECEIPT = 1\n"})
    docs = ToolUse("Read", {"file_path": str(project / "docs/install.md")})
    session.script(readme, read, read_again, edit, write, docs, final=Text("done MARK-GIVEN"))
    run = work.run("Go through the files one by one.", ("Read", "Edit", "Write"))
    assert run.result_text == "done MARK-GIVEN"
    assert (project / "src/payments/receipt.py").exists() and "dict(order)" in (project / charge).read_text()

    # The memory came with the Read of charge.py, not with README.md before it, and neither the
    # second Read, the Edit nor a new file in the same folder brought it again. The docs memory came
    # with its own folder.
    last = api.message_bodies()[-1]
    got = tool_contexts(last)
    assert [(i, t) for i, t, _ in got] == [(read.id, "Read"), (docs.id, "Read")], got
    assert_context(got[0][2], TOOL_HEADER.format("src/payments/charge.py"), line_of(pay_id, "convention", PAYMENTS))
    assert_context(got[1][2], TOOL_HEADER.format("docs/install.md"), line_of(docs_id, "convention", DOCS))
    # Each request carries the contexts of the calls before it only (none before the first call).
    counts = [len(tool_contexts(body)) for body in api.message_bodies()]
    assert counts == [0, 0, 1, 1, 1, 1, 2], counts
    assert injected(api, "SessionStart") == [] and injected(api, "UserPromptSubmit") == []

    # Every call was recorded as touched, injected or not.
    from cairn import Cairn

    session_id = (run.json or {})["session_id"]
    with Cairn.open(cwd=project, embedder=None, read_only=True) as memory:
        touched = {(t.path, t.action) for t in memory.scopes.touched(session_id)}
    assert {("README.md", "read"), ("src/payments/charge.py", "read"), ("src/payments/charge.py", "edit"),
            ("src/payments/receipt.py", "edit"), ("docs/install.md", "read")} <= touched, touched

    work.check(run, {"PreToolUse": 6, "SessionStart": 2, "UserPromptSubmit": 1})  # the brief's two hooks


# --------------------------------------------------------------------------- 2. learned scopes


def test_a_memory_written_over_mcp_learns_the_files_of_its_session(work: Watched) -> None:
    session = work.session
    """First use: no store yet. The session Reads refund.py, then the model writes a memory over MCP
    with no paths; PostToolUse associates it with refund.py (held in the session's state until the
    write created the store). A later session gets it when it Reads charge.py, beside refund.py."""
    from cairn import Cairn
    from cairn.context import TOOL_MIN_SCORE

    api, project = session.api, session.project
    start_warm(session)
    refund = ToolUse("Read", {"file_path": str(project / "src/payments/refund.py")})
    remember = ToolUse(TOOL("memory_remember"), {"text": ROUNDING, "kind": "convention"})
    session.script(refund, remember, final=Text("Noted. MARK-LEARN-1"))
    run = work.run("Fix the refund rounding and remember how amounts are rounded.", ("Read",))
    assert run.result_text == "Noted. MARK-LEARN-1"
    stored = tool_json(api, remember)
    assert stored["status"] == "created", stored
    memory_id = stored["id"]
    assert tool_contexts(api.message_bodies()[-1]) == []
    work.check(run, {"PreToolUse": 1, "PostToolUse": 1})
    assert [r.matcher for r in work.hook_runs() if r.event == "PostToolUse"] == [TOOL("memory_remember")]

    with Cairn.open(cwd=project, embedder=None, read_only=True) as memory:
        scopes = memory.scopes.of([memory_id]).get(memory_id, [])
        charge_match = [s for m, s in memory.scopes.matching(["src/payments/charge.py"]) if m.id == memory_id]
    assert scopes and all(s["origin"] == "learned" for s in scopes), scopes
    assert "src/payments/refund.py" in [s["pattern"] for s in scopes], scopes
    assert charge_match and charge_match[0].score >= TOOL_MIN_SCORE, (charge_match, scopes)

    # A later session: nothing for README.md, the memory with charge.py, once.
    readme = ToolUse("Read", {"file_path": str(project / "README.md")})
    charge = ToolUse("Read", {"file_path": str(project / "src/payments/charge.py")})
    again = ToolUse("Read", {"file_path": str(project / "src/payments/refund.py")})
    session.script(readme, charge, again, final=Text("done MARK-LEARN-2"))
    run = work.run("Go through the files one by one.", ("Read",))
    assert run.result_text == "done MARK-LEARN-2"
    got = tool_contexts(api.message_bodies()[-1])
    assert [(i, t) for i, t, _ in got] == [(charge.id, "Read")], got
    assert got[0][2].split("\n")[0].startswith("Cairn memories for src/payments/"), got
    assert_context(got[0][2], got[0][2].split("\n")[0], line_of(memory_id, "convention", ROUNDING))
    assert injected(api, "SessionStart") == [] and injected(api, "UserPromptSubmit") == []
    work.check(run, {"PreToolUse": 3, "PostToolUse": 0})


# --------------------------------------------------------------------------- 3. imported guidance


def test_a_rule_imported_from_a_nested_claude_md_comes_with_its_folder_once(work: Watched) -> None:
    """`cairn import-guidance` reads the project's tree: the rule in src/payments/CLAUDE.md is proposed
    with that folder's scope and approved. While the file is there, Claude Code itself adds it to the
    context beside the first Read in the folder, so Cairn does not add the rule a second time; once the
    file is gone, the rule comes from Cairn with that Read."""
    session = work.session
    api, project = session.api, session.project
    nested = project / "src/payments/CLAUDE.md"
    nested.write_text(f"# Payments\n\n- {GUIDANCE}\n")
    report = cairn_cli(session, "import-guidance")
    assert [(f["file"], f["paths"], f["queued"]) for f in report["files"]] == [
        ("src/payments/CLAUDE.md", ["src/payments/**"], 1)], report
    (proposal,) = report["proposals"]
    decided = cairn_cli(session, "review", "decide", proposal, "approve")
    assert decided["state"] == "applied" and decided["status"] == "created", decided
    memory_id = decided["created"]
    start_warm(session)

    readme = ToolUse("Read", {"file_path": str(project / "README.md")})
    charge = ToolUse("Read", {"file_path": str(project / "src/payments/charge.py")})
    for step, marker in (("file there", "MARK-GUIDANCE-1"), ("file gone", "MARK-GUIDANCE-2")):
        session.script(readme, charge, final=Text(f"done {marker}"))
        run = work.run("Go through the files one by one.", ("Read",))
        assert run.result_text == f"done {marker}"
        last = api.message_bodies()[-1]
        got = tool_contexts(last)
        # Every place the rule reached the model, in the last request: once, whichever way.
        places = [loc for loc, text in iter_texts(last) if GUIDANCE in text]
        assert len(places) == 1, (step, places)
        if step == "file there":
            assert got == [], got
            (place,) = places
            text = dict(iter_texts(last))[place]
            assert text.startswith("<system-reminder>\nContents of ") and str(nested) in text, text
        else:
            assert [(i, t) for i, t, _ in got] == [(charge.id, "Read")], got
            assert_context(got[0][2], TOOL_HEADER.format("src/payments/charge.py"),
                           line_of(memory_id, "convention", GUIDANCE))
        work.check(run, {"PreToolUse": 2})
        nested.unlink(missing_ok=True)


# --------------------------------------------------------------------------- 4. subagents


def test_each_subagent_gets_the_memories_for_its_own_task(work: Watched) -> None:
    session = work.session
    """The parent Reads charge.py (and gets the payments memory), then hands a payments task and a
    docs task to two subagents, one after the other. Each subagent's start carries the memory for its
    task only; a subagent's context is its own: the payments one is not given its memory a second time
    at its Read, the docs one gets the payments memory when it Reads refund.py itself."""
    api, project = session.api, session.project
    pay_id, docs_id = seed_scoped(session)
    start_warm(session)

    parent_read = ToolUse("Read", {"file_path": str(project / "src/payments/charge.py")})
    pay_agent, docs_agent = agent_call("Check payment retries", PAY_TASK), agent_call("Proofread install docs",
                                                                                      DOCS_TASK)
    pay_read = ToolUse("Read", {"file_path": str(project / "src/payments/charge.py")})
    docs_read = ToolUse("Read", {"file_path": str(project / "src/payments/refund.py")})
    session.script()
    api.set_script(routed(steps(parent_read, pay_agent, docs_agent, final=Text("both done MARK-PARENT")), {
        PAY_TASK: steps(pay_read, final=Text("no retries found MARK-SUB-PAY")),
        DOCS_TASK: steps(docs_read, final=Text("no typos found MARK-SUB-DOCS"))}))
    run = work.run("Check the payments code and the install docs.", ("Read", "Agent"))
    assert run.result_text == "both done MARK-PARENT"

    threads = by_agent(api, {"pay": PAY_TASK, "docs": DOCS_TASK})
    assert all(threads.values()), {k: len(v) for k, v in threads.items()}
    # The subagents ran and answered: the parent's last request holds both hand-backs.
    parent_last = json.dumps(threads[""][-1])
    assert "MARK-SUB-PAY" in parent_last and "MARK-SUB-DOCS" in parent_last

    starts = {name: [c for _, _, c in hook_contexts_in(bodies[0], "SubagentStart")] for name, bodies in threads.items()}
    assert starts[""] == [], starts
    (pay_start,), (docs_start,) = starts["pay"], starts["docs"]
    assert_context(pay_start, TASK_HEADER, line_of(pay_id, "convention", PAYMENTS))
    assert_context(docs_start, TASK_HEADER, line_of(docs_id, "convention", DOCS))
    assert not any(hook_contexts_in(b, "SubagentStart") for b in threads[""])

    # Tool time, per thread.
    parent_ctx = tool_contexts(threads[""][-1])
    assert [(i, t) for i, t, _ in parent_ctx] == [(parent_read.id, "Read")], parent_ctx
    assert tool_contexts(threads["pay"][-1]) == []  # its start already holds the payments memory
    docs_ctx = tool_contexts(threads["docs"][-1])
    assert [(i, t) for i, t, _ in docs_ctx] == [(docs_read.id, "Read")], docs_ctx
    assert_context(docs_ctx[0][2], TOOL_HEADER.format("src/payments/refund.py"),
                   line_of(pay_id, "convention", PAYMENTS))

    work.check(run, {"SubagentStart": 2, "PreToolUse": 5})  # 3 Reads and 2 Agent calls
    assert sorted(r.matcher for r in work.hook_runs() if r.event == "SubagentStart") == ["general-purpose"] * 2


def test_subagents_started_together_each_get_their_own_task(work: Watched) -> None:
    """The usual way Claude delegates: both Agent calls in one message. Claude Code starts the two
    subagents together, in no set order, and SubagentStart names neither the call nor the prompt, so
    the start cannot tell which task is whose (guessing by order gave the payments subagent the docs
    memory in one run of two). Neither start guesses; each subagent gets its own task's memories at
    its first tool call, from the prompt its transcript opens with."""
    from cairn.adapters.claude.session_state import SessionState

    session = work.session
    api, project = session.api, session.project
    pay_id, docs_id = seed_scoped(session)
    start_warm(session)
    pay_agent, docs_agent = agent_call("Check payment retries", PAY_TASK), agent_call("Proofread install docs",
                                                                                      DOCS_TASK)
    # Two calls each, on files no memory is scoped to: Claude Code may not have written a subagent's
    # transcript by its first call (2 runs of 9); the next call looks again.
    pay_calls, docs_calls = ([ToolUse("Read", {"file_path": str(project / name)}) for name in ("README.md", "NOTES")]
                             for _ in range(2))
    session.script()
    api.set_script(routed(steps([pay_agent, docs_agent], final=Text("both done MARK-PAR")), {
        PAY_TASK: steps(*pay_calls, final=Text("no retries found MARK-PAR-PAY")),
        DOCS_TASK: steps(*docs_calls, final=Text("no typos found MARK-PAR-DOCS"))}))
    run = work.run("Check the payments code and the install docs.", ("Agent", "Read"))
    assert run.result_text == "both done MARK-PAR"
    threads = by_agent(api, {"pay": PAY_TASK, "docs": DOCS_TASK})
    assert all(threads.values()), {k: len(v) for k, v in threads.items()}
    assert not any(hook_contexts_in(b, "SubagentStart") for bodies in threads.values() for b in bodies)

    pay_ctx, docs_ctx = tool_contexts(threads["pay"][-1]), tool_contexts(threads["docs"][-1])
    assert len(pay_ctx) == 1 and pay_ctx[0][0] in {c.id for c in pay_calls}, pay_ctx
    assert len(docs_ctx) == 1 and docs_ctx[0][0] in {c.id for c in docs_calls}, docs_ctx
    print("task given at call", [c.id for c in pay_calls].index(pay_ctx[0][0]) + 1, "(payments),",
          [c.id for c in docs_calls].index(docs_ctx[0][0]) + 1, "(docs)")
    assert_context(pay_ctx[0][2], TASK_HEADER, line_of(pay_id, "convention", PAYMENTS))
    assert_context(docs_ctx[0][2], TASK_HEADER, line_of(docs_id, "convention", DOCS))
    assert tool_contexts(threads[""][-1]) == []
    assert SessionState((run.json or {})["session_id"]).agents == []  # both tasks were handed over
    work.check(run, {"SubagentStart": 2, "PreToolUse": 6})
