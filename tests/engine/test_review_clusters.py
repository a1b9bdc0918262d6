"""The review queue for people: one proposal per cluster of restatements, the user chooses the text
that stays and its tags; approve / reject / edit; stale proposals say what replaced their memories."""

from __future__ import annotations

import json

import pytest

from cairn import InvalidInput, StaleProposal

from tests.conftest import run_cli

RESTATED = ["Run the linter before pushing.", "Always run the linter before pushing.",
            "Run the linter before every push.", "Please run the linter before pushing!",
            "run the linter before pushing, always", "We run the linter before pushing."]


@pytest.fixture(params=["model", "keyword"])
def engine(request):
    return request.getfixturevalue("memory" if request.param == "model" else "kw_memory")


def _six(engine) -> list[str]:
    return [engine.remember(text, kind="convention", tags=[f"tag{i}", "lint"]).memory.id
            for i, text in enumerate(RESTATED)]


def test_six_restatements_make_one_proposal(engine):
    ids = _six(engine)
    (proposal,) = engine.review.queue()
    assert proposal.type == "near_duplicate" and proposal.source_ids == ids
    assert "6 memories say the same thing" in proposal.payload["reason"]
    # maintenance proposes nothing more about them: no pairwise conflicts, no summary
    report = engine.review.maintain()
    assert report["proposals"] == [] and report["pending"] == 1


def test_approving_a_cluster_leaves_one_memory_with_the_chosen_tags(engine):
    ids = _six(engine)
    (proposal,) = engine.review.queue()
    done = engine.review.decide(proposal.id, "approve", keep_id=ids[2], tags=["lint", "git"])
    (current,) = engine.list()
    assert current.text == RESTATED[2] and sorted(current.tags) == ["git", "lint"]
    assert sorted(done["superseded"]) == sorted(ids) and done["by"] == current.id
    assert [m.id for m in engine.history(ids[0])][-1] == current.id
    assert engine.review.queue() == []


def test_approving_without_tags_keeps_the_memorys_own(engine):
    ids = _six(engine)
    (proposal,) = engine.review.queue()
    done = engine.review.decide(proposal.id, "approve", keep_id=ids[1])
    (current,) = engine.list()
    assert current.id == ids[1] and current.tags == ("lint", "tag1") and done["by"] == ids[1]


def test_edit_writes_the_users_text_with_the_chosen_tags(engine):
    _six(engine)
    (proposal,) = engine.review.queue()
    engine.review.decide(proposal.id, "edit", text="Run `make lint` before every push.", tags=["lint"])
    (current,) = engine.list()
    assert (current.text, current.tags, current.kind) == ("Run `make lint` before every push.", ("lint",), "convention")


def test_a_conflict_merged_by_edit_keeps_the_newer_memorys_tags(kw_memory):
    old = kw_memory.remember("Background jobs run on Celery.", kind="decision", tags=["celery", "jobs"])
    new = kw_memory.remember("Background jobs run on Dramatiq.", kind="decision", tags=["dramatiq", "jobs"])
    (proposal,) = kw_memory.review.queue()
    assert proposal.type == "conflict" and proposal.source_ids == [old.memory.id, new.memory.id]
    kw_memory.review.decide(proposal.id, "edit", text="Background jobs run on Dramatiq since Celery was dropped.")
    (current,) = kw_memory.list()
    assert current.tags == ("dramatiq", "jobs")


def test_reject_changes_nothing_and_keep_means_reject(kw_memory):
    kw_memory.remember("Background jobs run on Celery.")
    kw_memory.remember("Background jobs run on Dramatiq.")
    (proposal,) = kw_memory.review.queue()
    done = kw_memory.review.decide(proposal.id, "reject")
    assert (done["state"], done["verdict"]) == ("rejected", "reject") and len(kw_memory.list()) == 2
    kw_memory.remember("Background jobs run on RQ.")
    later = [p for p in kw_memory.review.queue() if p.type == "conflict"]
    assert later and kw_memory.review.decide(later[0].id, "keep")["verdict"] == "reject"


def test_messages_name_the_flags_a_person_types(kw_memory):
    old = kw_memory.remember("Background jobs run on Celery.")
    kw_memory.remember("Background jobs run on Dramatiq.")
    (proposal,) = kw_memory.review.queue()
    with pytest.raises(InvalidInput, match="--keep-id names the memory that stays: one of"):
        kw_memory.review.decide(proposal.id, "approve", keep_id="01NOTASOURCE")
    with pytest.raises(InvalidInput, match="reject changes nothing: it takes no --keep-id"):
        kw_memory.review.decide(proposal.id, "reject", keep_id=old.memory.id)
    with pytest.raises(InvalidInput, match="edit needs the text to store instead \\(--text\\)"):
        kw_memory.review.decide(proposal.id, "edit")


def test_a_stale_proposal_says_what_replaced_its_memory(kw_memory):
    old = kw_memory.remember("Background jobs run on Celery.")
    kw_memory.remember("Background jobs run on Dramatiq.")
    (proposal,) = kw_memory.review.queue()
    kw_memory.replace(old.memory.id, "Background jobs run on Huey now.")
    with pytest.raises(StaleProposal, match='superseded by .*: "Background jobs run on Huey now."'):
        kw_memory.review.decide(proposal.id, "approve")


def test_a_new_restatement_grows_the_pending_cluster(kw_memory):
    first = [kw_memory.remember(t).memory.id for t in RESTATED[:3]]
    (before,) = kw_memory.review.queue()
    fourth = kw_memory.remember(RESTATED[3]).memory.id
    (after,) = kw_memory.review.queue()
    assert after.source_ids == [*first, fourth] and after.id != before.id
    closed = {p.id: p for p in kw_memory.review.queue(states=["expired"])}[before.id]
    assert f"replaced by proposal {after.id}, which adds {fourth}" in closed.result["reason"]


@pytest.fixture
def cli(project, monkeypatch, capsys):
    monkeypatch.chdir(project)
    monkeypatch.setenv("CAIRN_NO_WARM", "1")
    return lambda *args: run_cli(capsys, args)


def test_cli_review_decide_chooses_the_text_and_the_tags(cli):
    ids = []
    for i, text in enumerate(RESTATED[:3]):
        code, out, _ = cli("remember", text, "--tags", f"tag{i},lint", "--keyword-only", "--json")
        ids.append(json.loads(out)["memory"]["id"])
    code, out, _ = cli("review", "list", "--json")
    (proposal,) = json.loads(out)["proposals"]
    code, out, _ = cli("review", "show", proposal["id"])
    assert "approve: one memory stays" in out and "--keep-id" in out and "reject: nothing changes" in out
    code, out, _ = cli("review", "decide", proposal["id"], "approve", "--keep-id", ids[1], "--tags", "lint",
                       "--keyword-only")
    assert code == 0 and "stays; retired" in out, out
    code, out, _ = cli("list", "--json")
    (current,) = json.loads(out)
    assert current["text"] == RESTATED[1] and current["tags"] == ["lint"]
    code, out, _ = cli("maintain")
    assert "nothing new found" in out and "wait for your verdict" not in out


def test_cli_maintain_says_what_waits_for_review(cli):
    cli("remember", "Background jobs run on Celery.", "--keyword-only")
    cli("remember", "Background jobs run on Dramatiq.", "--keyword-only")
    code, out, _ = cli("maintain")
    assert code == 0 and "1 proposal waits for your verdict" in out, out


@pytest.mark.parametrize("old, new", [("Prefer small PRs.", "Prefer large PRs."),
                                      ("Reviews need one approval.", "Reviews need two approvals.")])
def test_two_values_of_one_thing_are_a_conflict_not_restatements(kw_memory, old, new):
    kw_memory.remember(old, kind="preference")
    kw_memory.remember(new, kind="preference")
    (proposal,) = kw_memory.review.queue()
    assert proposal.type == "conflict"


TEMPLATED = [f"The {c} component is owned by team {n}." for n, c in
             enumerate(["redis", "billing", "auth", "search", "payments", "gateway"], start=1)]


def test_facts_of_one_template_are_not_restatements(engine):
    # Six owners of six components: one near-duplicate proposal would supersede five true facts.
    for text in TEMPLATED:
        engine.remember(text, kind="fact")
    assert [p for p in engine.review.queue() if p.type == "near_duplicate"] == []
    engine.review.maintain(apply=True)
    assert [p for p in engine.review.queue() if p.type in ("near_duplicate", "duplicate")] == []
    assert len(engine.list(limit=20)) == len(TEMPLATED)
