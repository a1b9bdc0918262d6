"""What a session's writes leave unresolved goes to the review queue when the session ends: a possible
change the writer resolved (memory_replace) is not queued, one it left is queued once, restatements
as one cluster, and nothing is queued twice (a pair already queued at write time, a second settle,
a pair the user kept)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import cairn
from cairn import Cairn
from cairn.adapters.claude import hook_process as hook
from cairn.adapters.claude.transcripts import session_writes

TOOL = "mcp__plugin_cairn_cairn__{}".format
NPM, PYPI = "The client SDK is published to npm.", "The client SDK is published to PyPI."


@pytest.fixture(params=["model", "keyword"])
def engine(request):
    """An engine as the plugin's MCP server opens it: possible conflicts wait for the session's end."""
    engine = request.getfixturevalue("memory" if request.param == "model" else "kw_memory")
    engine.defer_review = True
    return engine


def test_a_change_the_writer_resolved_is_not_queued(engine):
    npm = engine.remember(NPM)
    pypi = engine.remember(PYPI)
    assert [r["id"] for r in pypi.related] == [npm.memory.id]
    engine.replace(npm.memory.id, PYPI)  # the writer judged it a change
    done = engine.review.settle([pypi.memory.id])
    assert done == {"checked": 1, "queued": []}
    assert engine.review.queue() == []


def test_a_change_left_unresolved_is_queued_once_at_session_end(engine):
    npm = engine.remember(NPM)
    pypi = engine.remember(PYPI)
    assert engine.review.queue() == []  # not at write time: the writer may still resolve it
    done = engine.review.settle([npm.memory.id, pypi.memory.id])
    (proposal,) = engine.review.queue()
    assert done["queued"] == [proposal.id]
    assert proposal.type == "conflict" and proposal.source_ids == [npm.memory.id, pypi.memory.id]
    assert proposal.payload["origin"] == "session"
    assert engine.review.settle([npm.memory.id, pypi.memory.id])["queued"] == []  # a second SessionEnd
    assert [p.id for p in engine.review.queue()] == [proposal.id]


def test_a_pair_the_writer_kept_both_of_is_not_queued(engine):
    npm = engine.remember(NPM)
    pypi = engine.remember(PYPI)
    assert engine.review.keep_both(pypi.memory.id, [npm.memory.id]) == {"id": pypi.memory.id, "kept": [npm.memory.id]}
    assert engine.review.settle([npm.memory.id, pypi.memory.id])["queued"] == []  # the writer judged: an addition
    assert engine.review.queue() == []
    assert {m.id for m in engine.list()} >= {npm.memory.id, pypi.memory.id}  # nothing retired
    with pytest.raises(cairn.InvalidInput):
        engine.review.keep_both(pypi.memory.id, [pypi.memory.id])
    with pytest.raises(cairn.MemoryNotFound):
        engine.review.keep_both(pypi.memory.id, ["01NOSUCHMEMORY0000000000000"])


def test_a_pair_queued_at_write_time_is_not_queued_again(engine):
    engine.defer_review = False  # the CLI and REST queue at once
    engine.remember(NPM)
    pypi = engine.remember(PYPI)
    (queued,) = engine.review.queue()
    assert engine.review.settle([pypi.memory.id])["queued"] == []
    assert [p.id for p in engine.review.queue()] == [queued.id]


def test_a_pair_the_user_kept_is_not_queued_again(engine):
    npm = engine.remember(NPM)
    pypi = engine.remember(PYPI)
    (proposal,) = [engine.review.show(i)["proposal"]["id"] for i in engine.review.settle([pypi.memory.id])["queued"]]
    engine.review.decide(proposal, "reject")
    assert engine.review.settle([pypi.memory.id])["queued"] == []
    assert engine.review.queue() == []
    assert {m.id for m in engine.list()} == {npm.memory.id, pypi.memory.id}


def test_restatements_of_a_session_make_one_proposal(engine):
    texts = ["Run the linter before pushing.", "Always run the linter before pushing.",
             "Run the linter before every push.", "We run the linter before pushing."]
    ids = [engine.remember(t, kind="convention").memory.id for t in texts]
    assert engine.review.queue() == []
    engine.review.settle(ids)
    (proposal,) = engine.review.queue()
    assert proposal.type == "near_duplicate" and proposal.source_ids == ids
    assert engine.review.settle(ids)["queued"] == []


def test_writes_no_longer_current_or_elsewhere_are_skipped(engine):
    engine.remember(NPM)
    pypi = engine.remember(PYPI)
    engine.forget(pypi.memory.id)
    assert engine.review.settle([pypi.memory.id, "01J0000000000000000000NONE"]) == {"checked": 0, "queued": []}


def _transcript(path: Path, calls: list[tuple[str, dict, dict]]) -> Path:
    """A Claude Code transcript in which the model called `calls` (tool, input, the tool's JSON answer)."""
    lines = [{"type": "user", "uuid": "u0", "message": {"role": "user", "content": "Record the SDK registries."}}]
    for n, (tool, params, answer) in enumerate(calls):
        lines.append({"type": "assistant", "uuid": f"a{n}", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": f"toolu_{n}", "name": tool, "input": params}]}})
        wrapped = json.dumps({"result": json.dumps(answer)}) if n % 2 else json.dumps(answer)
        lines.append({"type": "user", "uuid": f"r{n}", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": [{"type": "text", "text": wrapped}]}]}})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "not json\n")
    return path


def test_the_transcript_names_the_sessions_writes(tmp_path):
    path = _transcript(tmp_path / "s.jsonl", [
        (TOOL("memory_remember"), {"text": NPM}, {"id": "A", "status": "created"}),
        (TOOL("memory_remember"), {"text": NPM}, {"id": "A", "status": "duplicate"}),
        ("mcp__other__memory_remember", {"text": PYPI}, {"id": "X", "status": "created"}),
        ("mcp__cairn__memory_replace", {"id": "A", "text": PYPI}, {"id": "B", "status": "created"}),
        (TOOL("memory_recall"), {"query": "sdk"}, {"id": "Y", "status": "created"}),
    ])
    assert session_writes(path) == ["A", "B"]


def test_the_session_end_hook_queues_what_the_session_left(project, tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    with Cairn.open(cwd=project, embedder=None) as engine:
        engine.defer_review = True
        npm = engine.remember(NPM).memory.id
        pypi = engine.remember(PYPI).memory.id
        assert engine.review.queue() == []
    path = _transcript(tmp_path / "s1.jsonl", [
        (TOOL("memory_remember"), {"text": PYPI}, {"id": pypi, "status": "created"})])
    payload = {"session_id": "s1", "transcript_path": str(path), "cwd": str(project), "hook_event_name": "SessionEnd",
               "reason": "exit"}
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))
    assert hook.run("SessionEnd", payload) is None
    with Cairn.open(cwd=project, embedder=None) as engine:
        assert [p.source_ids for p in engine.review.queue()] == [[npm, pypi]]


def test_the_plugins_mcp_server_defers_review_unless_its_hooks_are_off(project):
    from cairn.adapters.mcp.session import Session

    def deferred(**kwargs) -> bool:
        session = Session(project, embedder_for=lambda config: None, **kwargs)
        try:
            return session.call(lambda engine: engine.defer_review)
        finally:
            session.close()

    assert deferred(defer_review=True) is True
    assert deferred() is False  # `cairn serve`: no SessionEnd hook of ours
    (project / ".cairn.yaml").write_text("hooks:\n  enabled: false\n")
    assert deferred(defer_review=True) is False
