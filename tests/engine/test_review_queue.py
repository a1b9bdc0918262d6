"""The durable review queue (review/queue.py, migration m007_review_queue): proposals persist, decisions
are compare-and-set, stale and expired proposals are refused, and two reviewers never apply one
proposal twice. Every test runs on both store backends (SQLite, and Postgres: marked `postgres`)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from cairn import (
    Cairn, InvalidInput, InvalidMemory, ProposalClosed, ProposalNotFound, StaleProposal, create_store,
)
from tests.conftest import BACKENDS, WAIT_S, wait_for

DAY = 86_400_000


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


def _conflict(memory: Cairn) -> tuple[str, str, str]:
    """Two memories `remember` reports as a possible conflict; (older id, newer id, proposal id)."""
    a = memory.remember("Run the linter before pushing.", kind="convention")
    b = memory.remember("We might run the linter before pushing.", kind="convention")
    assert b.status == "created" and [c["id"] for c in b.conflicts] == [a.memory.id]
    queued = memory.review.queue()
    assert [(p.type, p.source_ids) for p in queued] == [("conflict", [a.memory.id, b.memory.id])]
    return a.memory.id, b.memory.id, queued[0].id


def test_remember_conflicts_join_the_queue_once_and_survive_a_reopen(kw_memory, project):
    older, newer, pid = _conflict(kw_memory)
    p = kw_memory.review.queue()[0]
    assert p.state == "pending" and p.payload["texts"] == ["Run the linter before pushing.",
                                                           "We might run the linter before pushing."]
    assert p.expires_at - p.created_at == 30 * DAY
    assert [s["stamp"] for s in p.sources] and all(s["stamp"] for s in p.sources)
    # The same pair reported again is not queued twice.
    from cairn.review.staging import stage_conflicts

    assert stage_conflicts(kw_memory, kw_memory.store, kw_memory.get(newer), [{"id": older, "reason": "again"}]) == []
    assert [q.id for q in kw_memory.review.queue()] == [pid]
    kw_memory.close()
    with Cairn.open(cwd=project, embedder=None) as again:
        assert pid in [q.id for q in again.review.queue()]


def test_approving_a_conflict_retires_the_older_and_records_the_decision(kw_memory):
    older, newer, pid = _conflict(kw_memory)
    done = kw_memory.review.decide(pid, "approve", by="mcp")
    assert done == {"proposal": pid, "type": "conflict", "state": "applied", "verdict": "approve",
                    "superseded": [older], "by": newer}
    assert kw_memory.get(older).superseded_by == newer and kw_memory.get(newer).status == "current"
    p = kw_memory.review.queue(states=["applied"])[0]
    assert (p.id, p.decided_by, p.result["by"]) == (pid, "mcp", newer) and p.decided_at >= p.created_at
    assert kw_memory.review.queue() == []


def test_keep_rejects_changes_nothing_and_the_pair_is_not_proposed_again(kw_memory):
    older, newer, pid = _conflict(kw_memory)
    assert kw_memory.review.decide(pid, "keep")["state"] == "rejected"
    assert kw_memory.get(older).status == kw_memory.get(newer).status == "current"
    assert kw_memory.review.is_dismissed(older, newer)
    with pytest.raises(ProposalClosed, match="already rejected"):
        kw_memory.review.decide(pid, "approve")


def test_edit_then_approve_stores_the_agreed_text_and_keeps_the_sources_in_history(kw_memory):
    older, newer, pid = _conflict(kw_memory)
    done = kw_memory.review.decide(pid, "edit", text="Run `make lint` before every push.")
    merged = kw_memory.get(done["by"])
    assert merged.text == "Run `make lint` before every push." and sorted(done["superseded"]) == sorted([older, newer])
    assert {m.id for m in kw_memory.history(older)} >= {older, merged.id}
    assert kw_memory.get(older).text == "Run the linter before pushing."  # superseded, never deleted


def test_keep_id_chooses_which_source_stays(kw_memory):
    older, newer, pid = _conflict(kw_memory)
    done = kw_memory.review.decide(pid, "approve", keep_id=older)
    assert done["by"] == older and kw_memory.get(newer).superseded_by == older


def test_a_decision_on_changed_sources_is_refused_as_stale(kw_memory):
    older, newer, pid = _conflict(kw_memory)
    kw_memory.replace(older, "Run the linter and the type checker before pushing.")
    with pytest.raises(StaleProposal, match=f"memory {older} changed since it was proposed"):
        kw_memory.review.decide(pid, "approve")
    assert kw_memory.get(newer).status == "current"
    (p,) = kw_memory.review.queue(states=["expired"])
    assert p.id == pid and p.result["reason"].startswith("stale: ")


def test_unreviewed_proposals_expire_after_30_days_when_the_queue_is_read(kw_memory, monkeypatch):
    import cairn.review.queue as review_queue

    older, newer, pid = _conflict(kw_memory)
    start = review_queue.now_ms()
    monkeypatch.setattr(review_queue, "now_ms", lambda: start + 30 * DAY + 1)
    assert kw_memory.review.queue() == []
    (p,) = kw_memory.review.queue(states=["expired"])
    assert p.id == pid and p.result == {"reason": "not reviewed within 30 days"}
    with pytest.raises(ProposalClosed, match="already expired"):
        kw_memory.review.decide(pid, "approve")
    assert kw_memory.get(older).status == "current"  # silence is never consent


def test_bad_verdicts_are_refused_with_one_line_and_change_nothing(kw_memory):
    older, newer, pid = _conflict(kw_memory)
    with pytest.raises(InvalidInput, match="unknown verdict 'merge'"):
        kw_memory.review.decide(pid, "merge")
    with pytest.raises(InvalidInput, match="edit needs the text"):
        kw_memory.review.decide(pid, "edit")
    with pytest.raises(InvalidInput, match="--text is empty"):
        kw_memory.review.decide(pid, "edit", text="  ")
    with pytest.raises(InvalidInput, match="a text \\(--text\\) goes with edit"):
        kw_memory.review.decide(pid, "approve", text="x")
    with pytest.raises(InvalidInput, match="--keep-id names the memory that stays"):
        kw_memory.review.decide(pid, "approve", keep_id="01NOPE")
    with pytest.raises(InvalidInput, match="unknown decider"):
        kw_memory.review.decide(pid, "approve", by="cron")
    with pytest.raises(ProposalNotFound):
        kw_memory.review.decide("01NOPE", "approve")
    assert [p.id for p in kw_memory.review.queue()] == [pid]
    assert kw_memory.get(older).status == kw_memory.get(newer).status == "current"


def test_add_proposals_store_nothing_before_approval(kw_memory):
    queued = kw_memory.review.propose("Use uv for Python environments.", kind="convention", tags=["python"],
                               context="Tooling", applies_when=["setting up Python"])
    assert queued["status"] == "queued"
    assert kw_memory.list() == []
    assert kw_memory.review.propose("Use uv for Python environments.", kind="convention")["status"] == "pending"
    pid = queued["proposal"]["id"]
    done = kw_memory.review.decide(pid, "approve")
    stored = kw_memory.get(done["created"])
    assert (stored.text, stored.kind, stored.tags, stored.source) == (
        "Use uv for Python environments.", "convention", ("python",), "import")
    assert kw_memory.review.propose("use uv for python environments.")["status"] == "exists"
    with pytest.raises(InvalidMemory):
        kw_memory.review.propose("   ")


def test_a_failing_application_rolls_the_whole_decision_back(kw_memory):
    a = kw_memory.remember("Deploys run on Fridays.", kind="fact")
    b = kw_memory.remember("Deploys never run on Mondays.", kind="fact")
    c = kw_memory.remember("Deploys need two approvals.", kind="fact")
    from cairn.models import open_key
    from cairn.review.queue import new_proposal

    p = new_proposal("summarise", [a.memory, b.memory, c.memory], {"texts": [], "draft": None},
                     now=a.memory.recorded_at)
    kw_memory.store.add_proposals([(p, open_key("summarise", p.source_ids))])
    with pytest.raises(InvalidInput, match="choose what stays: approve with --keep-id ID"):
        kw_memory.review.decide(p.id, "approve")
    assert [q.id for q in kw_memory.review.queue()] == [p.id]
    assert all(kw_memory.get(m.memory.id).status == "current" for m in (a, b, c))
    done = kw_memory.review.decide(p.id, "edit", text="Deploys: Fridays, never Mondays, two approvals.")
    assert sorted(done["superseded"]) == sorted(m.memory.id for m in (a, b, c))


def test_promote_brings_a_cold_memory_back(kw_memory):
    m = kw_memory.remember("The old staging box is called bramble.", importance=1).memory
    with pytest.raises(InvalidInput, match="not in the cold tier"):
        kw_memory.review.promote(m.id)
    assert kw_memory.set_cold(m.id, True)
    assert kw_memory.get(m.id).cold and kw_memory.list() == []
    assert kw_memory.review.promote(m.id) == {"promoted": m.id}
    assert [x.id for x in kw_memory.list()] == [m.id]


def test_reviewers_in_threads_never_apply_one_proposal_twice(kw_memory, project, backend):
    older, newer, pid = _conflict(kw_memory)
    assert getattr(kw_memory.store, "backend", "sqlite") == backend
    outcomes: list[str] = []
    barrier = threading.Barrier(6)

    def review(verdict: str) -> None:
        with Cairn.open(cwd=project, embedder=None) as mine:
            barrier.wait()
            try:
                outcomes.append(mine.review.decide(pid, verdict, text="Lint before every push." if verdict == "edit"
                                                   else None)["state"])
            except ProposalClosed:
                outcomes.append("closed")

    threads = [threading.Thread(target=review, args=(v,)) for v in ("approve", "edit", "keep") * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes).count("closed") == 5 and len(outcomes) == 6
    history = kw_memory.history(older)
    assert len([m for m in history if m.status == "current"]) == 1
    # At most one new memory (an edit), never two.
    assert len(kw_memory.list(include_superseded=True)) <= 3


def test_a_second_reviewer_waits_for_the_first_then_sees_it_decided(kw_memory, project, backend, monkeypatch):
    # Reviewer A's decision holds the proposal (SQLite: the write lock; Postgres: its row, SELECT ...
    # FOR UPDATE) while it applies; reviewer B's "keep" waits, then reads it applied: refused, and
    # nothing of B's (no "keep both" dismissal) is written.
    import cairn.review.queue as review_queue

    older, newer, pid = _conflict(kw_memory)
    applying, release = threading.Event(), threading.Event()
    apply = review_queue._apply

    def slow_apply(*args, **kwargs):
        applying.set()
        assert release.wait(WAIT_S)
        return apply(*args, **kwargs)

    monkeypatch.setattr(review_queue, "_apply", slow_apply)
    outcomes: dict[str, str] = {}

    def decide(who: str, verdict: str) -> None:
        with Cairn.open(cwd=project, embedder=None) as mine:
            try:
                outcomes[who] = mine.review.decide(pid, verdict, by="cli" if who == "a" else "mcp")["state"]
            except ProposalClosed as exc:
                outcomes[who] = str(exc)

    a = threading.Thread(target=decide, args=("a", "approve"))
    a.start()
    wait_for(applying.is_set, what="reviewer A applying")
    b = threading.Thread(target=decide, args=("b", "keep"))
    b.start()
    b.join(0.5)
    assert b.is_alive() and "b" not in outcomes  # B waits for A's decision
    release.set()
    a.join(WAIT_S)
    b.join(WAIT_S)
    assert outcomes["a"] == "applied" and "already applied by cli" in outcomes["b"], outcomes
    assert not kw_memory.review.is_dismissed(older, newer)
    assert kw_memory.get(older).superseded_by == newer


def _decide_in_process(name: str, pid: str, by: str) -> list[str]:
    return [sys.executable, "-c",
            "from cairn import Cairn, ProposalClosed\n"
            f"with Cairn.open({name!r}, embedder=None) as m:\n"
            "    try:\n"
            f"        print(m.review.decide({pid!r}, 'approve', by={by!r})['state'])\n"
            "    except ProposalClosed as e:\n"
            "        print('closed')\n"]


def test_reviewers_in_separate_processes_apply_once(cairn_home, use_backend, backend):
    # Two reviewers at once (the CLI and the MCP server are separate processes) on one store: on
    # Postgres, as on two machines sharing the team store.
    name = f"shared-{uuid.uuid4().hex[:8]}"
    create_store(name, postgres=os.environ["CAIRN_POSTGRES_URL"] if backend == "postgres" else None)
    with Cairn.open(name, embedder=None) as memory:
        assert getattr(memory.store, "backend", "sqlite") == backend
        older, newer, pid = _conflict(memory)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "engine"), "CAIRN_NO_WARM": "1"}
    procs = [subprocess.Popen(_decide_in_process(name, pid, by), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for by in ("cli", "mcp", "cli", "mcp")]
    results = [p.communicate(timeout=120) for p in procs]
    assert sorted(out.strip() for out, _ in results) == ["applied", "closed", "closed", "closed"], results
    with Cairn.open(name, embedder=None) as memory:
        assert memory.get(older).superseded_by == newer
        (p,) = memory.review.queue(states=["applied"])
        assert p.decided_by in ("cli", "mcp")
