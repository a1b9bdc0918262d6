"""One contract for the two runtimes a hook runs on (claude.hooks.HookRuntime): the warm process's
(warm.runtime.WarmRuntime: models loaded, stores kept open, resolutions cached) and the hook
process's own (claude.hooks.InProcessRuntime). Each is held to the same assertions, and `handle`
answers every event alike on both."""

from __future__ import annotations

import pytest

from cairn import Cairn, load_config, resolve
from cairn.adapters.claude.hooks import InProcessRuntime, handle
from cairn.adapters.warm.runtime import WarmRuntime
from cairn.adapters.warm.client import answering_env

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "SubagentStart")


@pytest.fixture(params=["in-process", "warm"])
def runtime(request, minilm):
    if request.param == "in-process":
        yield InProcessRuntime(minilm)
        return
    warm = WarmRuntime(load_config(), minilm)
    yield warm
    warm.close()


@pytest.fixture
def stocked(project, minilm):
    (project / "src" / "payments").mkdir(parents=True)
    with Cairn.open(cwd=project, embedder=minilm) as memory:
        memory.remember("Charges are idempotent: retry with the same key", kind="convention",
                        paths=["src/payments/**"])
        memory.remember("We deploy with Kamal from the main branch", kind="decision")
        memory.remember("The billing service keeps its own Postgres database", kind="fact")
    return project


def _payload(project, session):
    return {"session_id": session, "cwd": str(project), "source": "startup",
            "prompt": "How do we deploy to production with Kamal?", "tool_name": "Read",
            "tool_input": {"file_path": str(project / "src" / "payments" / "charge.py")},
            "agent_type": "general-purpose"}


def test_it_resolves_as_cairn_resolve_does(runtime, stocked, monkeypatch):
    env = {"CLAUDE_PROJECT_DIR": str(stocked)}
    # A hook is answered in the runtime's environment under the hook's variables (its data root).
    whole = answering_env(runtime.environ, env)
    for _ in range(2):  # a cached answer is the same answer
        got, expected = runtime.resolve(None, cwd=stocked, env=env), resolve(None, cwd=stocked, env=whole)
        assert (got.choice, got.config) == (expected.choice, expected.config)
    (stocked / ".cairn.yaml").write_text("hooks:\n  prompt_k: 2\n")  # an edit counts at the next request
    assert runtime.resolve(None, cwd=stocked, env=env).config["hooks"]["prompt_k"] == 2
    assert runtime.resolve(None, cwd=stocked, env={**env, "CAIRN_STORE": "other"}).choice.name == "other"


def test_its_embedder_is_the_loaded_model_unless_the_project_turns_embedding_off(runtime, stocked, minilm):
    config = resolve(None, cwd=stocked).config
    assert runtime.embedder_for(config) is minilm
    config["embedding"]["enabled"] = False
    assert runtime.embedder_for(config) is None


def test_its_memory_is_the_resolved_store_open_and_fresh(runtime, stocked, minilm):
    resolved = runtime.resolve(None, cwd=stocked, env={"CLAUDE_PROJECT_DIR": str(stocked)})
    with runtime.memory(resolved, minilm) as memory:
        assert memory.name == resolved.choice.name and memory.embedder is minilm
        assert "Kamal" in memory.recall("how do we deploy?")[0].memory.text
    with Cairn.open(cwd=stocked, embedder=minilm) as writer:  # another process's write
        new = writer.remember("We deploy with Fly.io now", kind="decision").memory
    with runtime.memory(resolved, minilm) as memory:  # seen at the next request, kept open or not
        assert new.id in [h.memory.id for h in memory.recall("how do we deploy?")]


def test_handle_answers_every_event_alike_on_both_runtimes(stocked, minilm):
    warm = WarmRuntime(load_config(), minilm)
    env = {"CLAUDE_PROJECT_DIR": str(stocked)}
    try:
        for event in EVENTS:
            answers = []
            for name, runtime in (("in-process", InProcessRuntime(minilm)), ("warm", warm)):
                timings: dict[str, float] = {}
                answers.append(handle(event, _payload(stocked, f"{event}-{name}"), env, runtime, timings=timings))
                assert {"resolve", "open"} <= set(timings), (event, name, timings)
            assert answers[0] == answers[1], event
            assert answers[0] is not None or event == "SubagentStart", event
    finally:
        warm.close()
    prompt = handle("UserPromptSubmit", _payload(stocked, "hybrid"), env, InProcessRuntime(minilm))
    assert "Kamal" in prompt["hookSpecificOutput"]["additionalContext"]
