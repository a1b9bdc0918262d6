"""Cairn beside Claude Code's own auto memory, in the real CLI: a pre-populated auto-memory folder is
imported by the first session, found by memory_recall and the console, an edit keeps the old text in
memory_history, a deleted file leaves the current memories, and no memory text reaches the context
twice."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from fake_api import Text, ToolUse
from test_plugin import TOOL, CairnSession, cairn, tool_json  # noqa: F401 - the fixture
from cairn.adapters.claude.transcripts import encoded_project
from tests.conftest import wait_for

pytestmark = pytest.mark.e2e

# Written exactly as the pinned CLI's prompt tells Claude to write them (its frontmatter template and
# the MEMORY.md line format `- [Title](file.md) — hook`).
FILES = {
    "deploy_pipeline": ("project", "Deploys go through Kamal from the main branch",
                        "Deploys go through `kamal deploy` from main; staging first.\n\n"
                        "**Why:** the old Fly.io pipeline was dropped in March.\n"
                        "**How to apply:** never deploy from a feature branch."),
    "user_role": ("user", "The user is a data engineer new to the React frontend",
                  "Explain frontend changes in terms of the data flow they already know."),
    "feedback_testing": ("feedback", "Integration tests must hit a real Postgres, not mocks",
                         "**Why:** mocked tests passed while a migration broke production.\n"
                         "**How to apply:** use the docker-compose database in tests/."),
}


def write_native(folder: Path, name: str, type_: str, description: str, body: str) -> Path:
    path = folder / f"{name}.md"
    path.write_text(f"---\nname: {name.replace('_', '-')}\ndescription: {description}\nmetadata:\n"
                    f"  type: {type_}\n---\n\n{body}\n", encoding="utf-8")
    return path


def current_memories(project: Path) -> list:
    from cairn import Cairn

    try:
        with Cairn.open(cwd=project, embedder=None, read_only=True) as memory:
            return memory.list(scope="project", limit=100)
    except Exception:  # noqa: BLE001 - not created yet
        return []


def texts_in(body: dict) -> str:
    """Everything Claude Code sent in one request that reaches the model: system and messages."""
    return json.dumps({"system": body.get("system"), "messages": body.get("messages")}, ensure_ascii=False)


def test_native_memory_is_imported_recalled_versioned_and_never_injected_twice(cairn: CairnSession,  # noqa: F811
                                                                               tmp_path: Path) -> None:
    api, project = cairn.api, cairn.project
    folder = cairn.harness.home / ".claude" / "projects" / encoded_project(project.resolve()) / "memory"
    folder.mkdir(parents=True)
    for name, (type_, description, body) in FILES.items():
        write_native(folder, name, type_, description, body)
    (folder / "MEMORY.md").write_text("".join(
        f"- [{d[1].split(' ')[0]} {name.split('_')[0]}]({name}.md) \u2014 {d[1]}\n" for name, d in FILES.items()))
    # A Cairn memory that CLAUDE.md also states: Claude Code loads CLAUDE.md, so the brief must not repeat it.
    (project / "CLAUDE.md").write_text("# Project\n\n- Run the linter before pushing.\n")
    from cairn import Cairn

    with Cairn.open(cwd=project, embedder=None, create=True) as memory:
        in_claude_md = memory.remember("Run the linter before pushing.", kind="convention").memory.id
        own = memory.remember("Releases are tagged vYYYY.MM.DD by the release script.", kind="convention").memory.id

    # Session 1 starts the import in the background (the hook never writes to the store itself).
    cairn.script(final=Text("ok MARK-N1"))
    cairn.run("hello")
    first = texts_in(api.message_bodies()[0])
    assert "deploy_pipeline.md" in first, "the CLI did not load MEMORY.md from the folder the test wrote"
    imported = wait_for(lambda: [m for m in current_memories(project) if m.source == "claude-memory"] or None,
                        what="the background import")
    wait_for(lambda: len([m for m in current_memories(project) if m.source == "claude-memory"]) == 3,
             what="all three files imported")
    imported = {m.text.split("\n")[0]: m for m in current_memories(project) if m.source == "claude-memory"}
    assert set(imported) == {d[1] for d in FILES.values()}
    deploy = imported[FILES["deploy_pipeline"][1]]
    assert deploy.kind == "fact" and imported[FILES["user_role"][1]].kind == "preference"
    assert imported[FILES["feedback_testing"][1]].kind == "convention"

    # Session 2: memory_recall finds an imported memory; the brief holds Cairn's own memory but
    # neither the one CLAUDE.md states nor those MEMORY.md indexes.
    recall = ToolUse(TOOL("memory_recall"), {"query": "how do we deploy with kamal"})
    cairn.script(recall, final=Text("ok MARK-N2"))
    cairn.run("How do we deploy?")
    hits = tool_json(api, recall)
    found = json.dumps(hits)
    assert deploy.id in found, hits
    brief = "\n".join(api.hook_context("SessionStart"))
    assert own in brief and in_claude_md not in brief and deploy.id not in brief, brief

    # The console (the HTTP API it runs on) finds it too.
    from tests.serving import Server, keyword_only_env

    server = Server(["--transport", "http"], cwd=project, env={**keyword_only_env(tmp_path),
                    "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "engine"), "CAIRN_NO_WARM": "1"},
                    log=tmp_path / "serve.log")
    try:
        status, _, body = server.request("POST", "/v1/recall", {"query": "real Postgres integration tests"})
        assert status == 200 and "real Postgres" in json.dumps(body), body
    finally:
        server.stop()

    # The native side changes: one file edited (as consolidation rewrites it in place), one deleted.
    path = write_native(folder, "deploy_pipeline", "project", "Deploys go through GitHub Actions to ECS",
                        "Kamal was dropped; the deploy workflow runs on every tag.")
    stamp = path.stat().st_mtime_ns + 5_000_000_000
    os.utime(path, ns=(stamp, stamp))
    (folder / "user_role.md").unlink()
    cairn.script(final=Text("ok MARK-N3"))
    cairn.run("hello again")

    def synced() -> bool:
        texts = " ".join(m.text for m in current_memories(project))
        return "GitHub Actions" in texts and "data engineer" not in texts

    wait_for(synced, what="the edit and the deletion synced")

    # Session 4: the old text is in memory_history; no memory text appears twice in what was sent.
    history = ToolUse(TOOL("memory_history"), {"id": deploy.id})
    cairn.script(history, final=Text("ok MARK-N4"))
    cairn.run("What changed about how we deploy and test against Postgres?")
    chain = tool_json(api, history)["chain"]
    assert [c["status"] for c in chain] == ["superseded", "current"], chain
    assert "Kamal from the main branch" in chain[0]["text"] and "GitHub Actions" in chain[1]["text"]
    last = texts_in(api.message_bodies()[-1])
    # CLAUDE.md's line reaches the context once (Claude Code's own), Cairn's own memory once (the brief).
    assert len(re.findall(r"Run the linter before pushing", last)) == 1
    assert len(re.findall(r"Releases are tagged vYYYY\.MM\.DD", last)) == 1
    prompt_context = "\n".join(api.hook_context("UserPromptSubmit"))
    assert not any(m.id in prompt_context for m in current_memories(project) if m.source == "claude-memory")
    for m in current_memories(project):
        first_line = m.text.split("\n")[0]
        # JSON escapes inside a tool result: compare on words alone.
        words = re.escape(" ".join(first_line.split()[:6]))
        count = len(re.findall(words, last))
        assert count <= 1 + (first_line in json.dumps(chain)), (first_line, count)
