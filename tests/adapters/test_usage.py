"""Cited-memory tracking: hooks note the memories they inject in the session's state, the Stop
capture counts those injections and the injected memories the assistant then cites as [mem:ID];
`cairn status` and `cairn history` show the counts."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from cairn import Cairn, MemoryNotFound
from cairn.adapters.claude.capture import capture
from cairn.adapters.claude.hooks import handle
from cairn.adapters.cli import main

from tests.engine.test_sessions import line

DEPLOY = "Production deploys go through the release workflow, triggered by a tag"
PROMPT = "how do production deploys and the release workflow work?"


def test_injections_and_citations_are_counted_per_memory(project):
    with Cairn.open(cwd=project, embedder=None) as memory:
        first = memory.remember(DEPLOY, kind="decision").memory.id
        other = memory.remember("The API listens on port 8080 in staging", kind="fact").memory.id
        assert memory.usage(first) == {"injected": 0, "cited": 0, "last_injected_at": None, "last_cited_at": None}
        assert memory.record_injected([first, other, first, "01NOSUCHMEMORY00000000000X"], at=1000) == 2
        assert memory.record_injected([first], at=2000) == 1
        assert memory.record_cited([first], at=2500) == 1
        assert memory.usage(first) == {"injected": 2, "cited": 1, "last_injected_at": 2000, "last_cited_at": 2500}
        assert memory.usage(other) == {"injected": 1, "cited": 0, "last_injected_at": 1000, "last_cited_at": None}
        assert memory.status().usage == {"injected_memories": 2, "injections": 3, "cited_memories": 1,
                                         "citations": 1}
        with pytest.raises(MemoryNotFound):
            memory.usage("01NOSUCHMEMORY00000000000X")


def test_only_the_assistant_citing_an_injected_memory_counts_once_however_often_captured(project, tmp_path):
    with Cairn.open(cwd=project, embedder=None) as memory:
        deploy = memory.remember(DEPLOY, kind="decision").memory.id
        never_injected = memory.remember("The API listens on port 8080 in staging", kind="fact").memory.id
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(project)}  # capture runs in its root's whole environment
    out = handle("UserPromptSubmit", {"prompt": PROMPT, "session_id": "s1"}, env)
    assert f"[mem:{deploy}]" in out["hookSpecificOutput"]["additionalContext"]

    transcript = tmp_path / "s1.jsonl"
    transcript.write_text(
        line("user", "u1", f"{PROMPT} (I saw [mem:{never_injected}] somewhere)")
        + line("assistant", "a1", [{"type": "text", "text": f"Tag a release: the workflow deploys [mem:{deploy}]. "
                                                             f"Staging is on 8080 [mem:{never_injected}]."}]))
    payload = {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(project)}
    with Cairn.open(cwd=project, embedder=None) as memory:
        assert memory.usage(deploy)["injected"] == 0  # a hook never writes to the store; the capture counts
    assert capture(payload, env)["cited"] == [deploy, never_injected]
    assert capture(payload, env)["turns_added"] == 0  # captured again: nothing new, nothing counted
    with Cairn.open(cwd=project, embedder=None) as memory:
        used = memory.usage(deploy)
        assert (used["injected"], used["cited"]) == (1, 1) and used["last_cited_at"] is not None
        # Cited, but never injected into this session (the assistant found it another way): not counted.
        assert memory.usage(never_injected)["cited"] == 0


@pytest.fixture
def cli(project, monkeypatch, capsys):
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    Path(os.environ["CAIRN_CONFIG"]).write_text("embedding:\n  enabled: false\n")

    def run(*args: str) -> str:
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8"))
        try:
            main(list(args))
        except SystemExit as exc:
            assert not exc.code, capsys.readouterr()
        return capsys.readouterr().out

    return run


def test_status_and_history_show_the_counts(cli, project):
    with Cairn.open(cwd=project, embedder=None) as memory:
        deploy = memory.remember(DEPLOY, kind="decision").memory.id
        memory.record_injected([deploy], at=1_772_359_200_000)
        memory.record_cited([deploy], at=1_772_359_200_000)
    assert "usage     1 memory injected 1 time; 1 cited by Claude, 1 citation" in cli("status")
    assert "injected 1 time, cited 1 time, last cited 2026-03-01" in cli("history", deploy)
    rows = json.loads(cli("history", deploy, "--json"))
    assert rows[0]["usage"] == {"injected": 1, "cited": 1, "last_injected_at": 1_772_359_200_000,
                                "last_cited_at": 1_772_359_200_000}
    assert json.loads(cli("status", "--json"))["usage"]["citations"] == 1


def test_list_status_and_the_console_api_show_the_counts_and_reset_usage_clears_them(cli, project):
    with Cairn.open(cwd=project, embedder=None) as memory:
        deploy = memory.remember(DEPLOY, kind="decision").memory.id
        other = memory.remember("CI runs on GitHub Actions", kind="fact").memory.id
        for _ in range(12):
            memory.record_injected([deploy])
        for _ in range(5):
            memory.record_cited([deploy])
    listing = cli("list")
    assert f"{deploy}  [decision]" in listing and "    injected 12×, cited 5×" in listing
    assert listing.count("injected") == 1  # a memory never injected shows no counts
    rows = {r["id"]: r for r in json.loads(cli("list", "--json"))}
    assert rows[deploy]["usage"]["cited"] == 5 and "usage" not in rows[other]
    assert f"          {deploy} injected 12×, cited 5×: {DEPLOY[:40]}" in cli("status")
    assert cli("reset-usage", other).strip() == "usage counts reset for 0 memories"
    assert cli("reset-usage").strip() == "usage counts reset for 1 memory"
    assert "injected" not in cli("list") and "usage " not in cli("status")
