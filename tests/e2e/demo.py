"""`make demo`: Cairn at work inside the real Claude Code CLI, end to end, on real input.

What it does, all on this machine (the model is a scripted fake Messages API on 127.0.0.1; every
hook, the MCP server and the warm process are the real ones, started by Claude Code):
1. installs the pinned Claude Code from npm (once, into .cache/claude-code) and installs this
   repository as a plugin marketplace: `claude plugin marketplace add`, `claude plugin install cairn@cairn`;
2. gives the project this repository's contributor guide as its AGENTS.md and imports it with
   import-guidance (each statement approved, as a user would in /cairn:review-memory), then this
   repository's own git history (one memory per commit) into the project's store;
3. session 1: the user states a decision and a fact about src/payments/; the model stores them with
   memory_remember (MCP), the fact with the paths it governs;
4. session 2 (a restart): prints the SessionStart brief Claude Code injected (the guide's rules
   first, the decision, the commits mapped), then what a prompt about the decision gets (nothing
   more: the brief holds it, and each memory reaches a session's context once); then, in new
   sessions, the memory injected for a question about an older commit (one the brief does not
   hold), nothing for an unrelated prompt, and the payments fact arriving with the model's Read of
   src/payments/charge.py (PreToolUse), which the brief did not list;
5. session 3: the decision changes; the model calls memory_replace; the brief and recall now carry
   only the new text, and memory_history shows both, with their valid and transaction times.
The runtime is this checkout's virtualenv (CAIRN_RUNTIME_PYTHON); hooks/bootstrap.py, which
installs it for real users, is tested separately.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(HERE), str(REPO / "engine")]

from fake_api import FakeAnthropicAPI, Text, ToolUse, steps, tool_result_text  # noqa: E402
from harness import ClaudeHarness, claude_code_dir, ensure_claude_code, npm_executable  # noqa: E402

TOOL = "mcp__plugin_cairn_cairn__{}".format
DECISION = "Deploys go through blue-green on Fly.io; never restart the primary database during business hours."
NEW_DECISION = ("Deploys now go through Kamal on our own servers; "
                "never restart the primary database during business hours.")
RELATED = "Can I restart the primary database now to apply the migration?"
# A fact about one folder: the brief of a store this large has no room for it; the Read brings it.
PAYMENTS = "Amounts in src/payments are integer cents; the provider's API takes them as strings."
PAYMENTS_TASK = "Tidy up the charge function."
WARM_SPAWN = ("import json, sys\n"
              "from cairn.adapters.warm import client as warm\n"
              "process = warm.spawn()\n"
              "print(json.dumps(warm.wait_until_ready(120.0, process=process, watch_lock=process is None)))\n")
# About an older commit of this repository (imported below), which the brief has no room for.
HISTORY = "Does the supersession detector let an additive marker like 'as well' replace a memory?"


def show(title: str, text: str | None) -> None:
    print(f"\n--- {title} ---")
    print(textwrap.indent(text.strip(), "  ") if text else "  (nothing injected)")


def injected(api: FakeAnthropicAPI, event: str) -> str | None:
    """What Cairn's hook injected for `event`: Claude Code puts it in a system message, followed by a
    blank line and other context (the environment block, skills), so cut at the first blank line."""
    found = api.hook_context(event)
    return found[0].split("\n\n")[0] if found else None


def brief_of(api: FakeAnthropicAPI) -> tuple[str, str]:
    """The brief's two parts as Claude Code injected them: (the first, with the header and the rules;
    the continuation, "" when one hook carried it all). Claude Code runs the two SessionStart hooks
    at once and joins their outputs in the order they finished, one per line."""
    segments: list[list[str]] = []
    for chunk in api.hook_context("SessionStart"):
        for line in chunk.split("\n\n")[0].split("\n"):
            if line.startswith("Cairn project memory") or not segments:
                segments.append([])
            segments[-1].append(line)
    texts = ["\n".join(lines) for lines in segments]
    rest = [t for t in texts if t.startswith("Cairn project memory, continued:")]
    main = [t for t in texts if t not in rest]
    return (main[0] if main else ""), (rest[0] if rest else "")


def import_git_history(env: dict[str, str], project: Path) -> int:
    """One memory per commit of this repository (merges carry no knowledge of their own): subject
    line, dated by the commit."""
    log = subprocess.run(["git", "-C", str(REPO), "log", "--reverse", "--no-merges", "--format=%ct%x09%s"],
                         capture_output=True, text=True, check=True).stdout
    lines = []
    for row in log.splitlines():
        stamp, subject = row.split("\t", 1)
        lines.append(json.dumps({"text": subject, "valid_from": int(stamp) * 1000}))
    code = (
        "import json, sys\n"
        "from cairn import Cairn, Draft\n"
        "rows = [json.loads(l) for l in sys.stdin]\n"
        "with Cairn.open() as m:\n"
        "    res = m.remember_many([Draft(r['text'], kind='insight', source='import', valid_from=r['valid_from'])"
        " for r in rows], detect=False)\n"
        "print(sum(r.status == 'created' for r in res))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], input="\n".join(lines), capture_output=True, text=True,
                         env={**env, "PYTHONPATH": str(REPO / "engine")}, cwd=project, check=True)
    return int(out.stdout.strip())


def import_guidance(env: dict[str, str], project: Path) -> int:
    """This repository's CONTRIBUTING.md as the project's AGENTS.md (real guidance people wrote;
    Claude Code does not load AGENTS.md itself), split by import-guidance and every proposal approved."""
    (project / "AGENTS.md").write_text((REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"), encoding="utf-8")
    code = (
        "from cairn import Cairn\n"
        "with Cairn.open(create=True) as m:\n"
        "    m.review.import_guidance()\n"
        "    done = [m.review.decide(p.id, 'approve') for p in m.review.queue(types=['add'])]\n"
        "print(len(done))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**env, "PYTHONPATH": str(REPO / "engine")}, cwd=project, check=True)
    return int(out.stdout.strip().splitlines()[-1])


def start_warm(env: dict[str, str], project: Path) -> None:
    """Start the warm process as a hook would and wait for it: a tool hook never waits for the model
    to load (a cold one starts the warm process and answers nothing)."""
    subprocess.run([sys.executable, "-c", WARM_SPAWN], env={**env, "PYTHONPATH": str(REPO / "engine")}, cwd=project,
                   capture_output=True, text=True, timeout=180, check=True)


def main() -> int:
    npm = npm_executable()
    if npm is None:
        sys.exit("the demo needs npm (Node.js) to install Claude Code")
    print("installing Claude Code (pinned) ...", flush=True)
    claude = ensure_claude_code(claude_code_dir(REPO), npm)
    work = Path(tempfile.mkdtemp(prefix="cairn-demo-"))
    home, project, tmp = work / "home", work / "my-service", work / "tmp"
    for folder in (home, project, tmp):
        folder.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "src" / "payments").mkdir(parents=True)
    (project / "src" / "payments" / "charge.py").write_text("def charge(order):\n    return order.total * 100\n")
    cairn_home = work / "cairn-data"
    (work / "empty-config.yaml").touch()  # no user settings (a CAIRN_CONFIG naming a missing file is an error)
    base_env = {"CAIRN_HOME": str(cairn_home), "CAIRN_RUNTIME_PYTHON": sys.executable, "HF_HUB_OFFLINE": "1",
                "CAIRN_CONFIG": str(work / "empty-config.yaml")}

    with FakeAnthropicAPI() as api:
        harness = ClaudeHarness(claude_bin=claude, home=home, project=project, tmp=tmp, api=api, base_env=base_env)
        try:
            ref = harness.install_plugin_from_marketplace(REPO)
            print(f"installed plugin {ref} from the marketplace in {REPO}")
            rules = import_guidance({**os.environ, **base_env}, project)
            print(f"imported and approved {rules} statements of this repository's CONTRIBUTING.md (as AGENTS.md)")
            count = import_git_history({**os.environ, **base_env}, project)
            print(f"imported {count} memories from this repository's git history into {project.name}'s store")
            allow = [TOOL("memory_remember"), TOOL("memory_replace"), TOOL("memory_history"), TOOL("memory_recall"),
                     "Read"]

            # Session 1: the user states a decision; the (scripted) model remembers it over MCP.
            remember = ToolUse(TOOL("memory_remember"), {"text": DECISION, "kind": "decision", "tags": ["deploy"],
                                                          "importance": 4})
            fact = ToolUse(TOOL("memory_remember"), {"text": PAYMENTS, "kind": "fact", "importance": 2,
                                                      "paths": ["src/payments/**"]})
            api.set_script(steps(remember, fact, final=Text("Noted; I stored both.")))
            harness.run_claude(f"Remember this decision: {DECISION} And that {PAYMENTS}", allowed_tools=allow)
            result = api.find_tool_result(remember.id)
            stored = json.loads(tool_result_text(result)) if result else {}
            stored = json.loads(stored["result"]) if isinstance(stored.get("result"), str) else stored
            print(f"\nsession 1: memory_remember answered: {json.dumps(stored)[:300]}")

            # Session 2, after a restart: the brief, a related prompt, an unrelated prompt.
            api.requests.clear()
            api.set_script(steps(final=Text("(fake model reply)")))
            harness.run_claude(RELATED, allowed_tools=allow)
            first, rest = brief_of(api)
            show("session 2: SessionStart brief injected by Cairn", first)
            if rest:
                print(f"  ({rest.count(chr(10))} more lines in the second SessionStart hook's part)")
            show(f"session 2: injected for {RELATED!r} (the brief already holds the decision)",
                 injected(api, "UserPromptSubmit"))
            api.requests.clear()
            harness.run_claude(HISTORY, allowed_tools=allow)
            show(f"session 2b: injected for {HISTORY!r}", injected(api, "UserPromptSubmit"))
            api.requests.clear()
            harness.run_claude("Write a haiku about autumn leaves.", allowed_tools=allow)
            show("session 2c: injected for 'Write a haiku about autumn leaves.'",
                 injected(api, "UserPromptSubmit"))
            start_warm(harness.env(), project)
            api.requests.clear()
            read = ToolUse("Read", {"file_path": str(project / "src" / "payments" / "charge.py")})
            api.set_script(steps(read, final=Text("(fake model reply)")))
            harness.run_claude(PAYMENTS_TASK, allowed_tools=allow)
            brief = "\n".join(brief_of(api))
            show(f"session 2d: injected for {PAYMENTS_TASK!r}", injected(api, "UserPromptSubmit"))
            show(f"session 2d: injected when the model reads src/payments/charge.py (the payments fact in the "
                 f"brief: {PAYMENTS in brief})", injected(api, "PreToolUse"))
            api.set_script(steps(final=Text("(fake model reply)")))

            # Session 3: the decision changes; the model supersedes the old memory.
            old_id = (stored.get("id") or "")
            replace = ToolUse(TOOL("memory_replace"), {"id": old_id, "text": NEW_DECISION})
            history = ToolUse(TOOL("memory_history"), {"id": old_id})
            api.requests.clear()
            api.set_script(steps(replace, history, final=Text("Updated.")))
            harness.run_claude(f"We moved off Fly. {NEW_DECISION}", allowed_tools=allow)
            hist = api.find_tool_result(history.id)
            show("session 3: memory_history after memory_replace", tool_result_text(hist) if hist else None)
            api.requests.clear()
            api.set_script(steps(final=Text("(fake model reply)")))
            harness.run_claude(RELATED, allowed_tools=allow)
            brief = "\n".join(brief_of(api))
            show("session 4: the decisions in the brief", "\n".join(
                line for line in brief.splitlines() if "decision" in line.lower() or "Kamal" in line))
            show(f"session 4: injected for {RELATED!r} (the brief already holds the new decision)",
                 injected(api, "UserPromptSubmit"))
            print("\nold decision still in the brief:", "Fly.io" in brief)
        finally:
            harness.kill_leftovers()
    print(f"\ndemo data left in {work} (delete it when done)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
