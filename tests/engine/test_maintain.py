"""`cairn maintain` (review.maintain) and the cold tier: a dry run writes nothing; --apply retires
exact duplicates by supersession (never deletes) and stages the judgement calls in the review queue;
a lease keeps two runs apart; cold memories leave the hooks and default reads. The invariants of
issue #8 are property tests here: recall as of any earlier time is unchanged by a run, and approving
a merge or a summary loses no text. The engine-level tests run on both store backends (SQLite, and
Postgres: marked `postgres`); the property tests on SQLite stores of their own."""

from __future__ import annotations

import os
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cairn.review.review_api as review_api
import cairn.review.maintenance as review  # the maintenance run: RUN_CAPS, STALE_DAYS, LEASE, its clock
import cairn.review.queue as review_queue
import cairn.review.staging as review_staging
from cairn import Cairn, InvalidInput, MaintenanceBusy, prompt_context, session_brief
from cairn.embedder import HashingEmbedder

from tests.conftest import BACKENDS, legacy

DAY = 86_400_000


def _later(monkeypatch, days: int) -> int:
    """Make the review modules' clock `days` ahead; returns that time (epoch ms)."""
    at = review.now_ms() + days * DAY
    for module in (review_api, review, review_queue, review_staging):
        monkeypatch.setattr(module, "now_ms", lambda: at)
    return at


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def hashed(project, hashing, use_backend):
    """The engine with the hashing embedder: vectors without the model (bag of words, 64 dims)."""
    with Cairn.open(cwd=project, embedder=hashing) as engine:
        yield engine


def _writes(engine: Cairn) -> tuple:
    """What any write to the store would change: SQLite's total_changes() on the connection; on
    Postgres each table's row count and newest row version (xmin: an insert or update makes one)."""
    store = engine.store
    if getattr(store, "backend", "sqlite") == "postgres":
        return tuple(store.conn.execute(f"SELECT count(*), coalesce(max(xmin::text::bigint), 0) FROM {table}"
                                        ).fetchone()
                     for table in ("memories", "proposals", "leases", "meta", "review_dismissals", "vector_backlog"))
    return store.conn.execute("SELECT count(*), total_changes() FROM proposals").fetchone()


def test_a_dry_run_reports_and_writes_nothing(hashed):
    a = hashed.remember("Run the linter before pushing.", kind="convention", detect=False).memory
    b = legacy(hashed, "run the linter before pushing", "convention")
    before = _writes(hashed)
    report = hashed.review.maintain()
    assert report["dry_run"] is True and report["retired"] == 0 and report["staged"] == 0
    assert report["exact_duplicates"] == [{"canonical": a.id, "duplicates": [b.id], "text": a.text}]
    assert set(report) == {"store", "dry_run", "safe_only", "scanned", "keyword_only", "exact_duplicates", "retired",
                           "proposals", "counts", "staged", "already_reviewed", "deferred", "expired", "pending",
                           "seconds"}
    assert set(report["counts"]) == {"duplicate", "near_duplicate", "summarise", "demote", "conflict"}
    assert hashed.get(b.id).status == "current"
    assert _writes(hashed) == before
    assert hashed.store.get_meta("maintenance_last_run") is None


def test_apply_retires_punctuation_duplicates_by_supersession_oldest_first(hashed):
    a = hashed.remember("Run the linter before pushing.", kind="convention", detect=False).memory
    b = legacy(hashed, "Run the  LINTER before pushing!", "convention")
    c = legacy(hashed, "run the linter, before pushing", "convention")
    other_kind = legacy(hashed, "Run the linter before pushing?", "decision")
    report = hashed.review.maintain(apply=True)
    assert report["retired"] == 2
    assert [hashed.get(i).superseded_by for i in (b.id, c.id)] == [a.id, a.id]
    assert hashed.get(b.id).text == b.text  # retired, never deleted
    # The same text under another kind is the user's call: a `duplicate` proposal, not a retirement.
    (dup,) = hashed.review.queue(types=["duplicate"])
    assert dup.source_ids == [a.id, other_kind.id] and hashed.get(other_kind.id).status == "current"
    # A second run finds nothing new to do and queues nothing twice.
    again = hashed.review.maintain(apply=True)
    assert again["retired"] == 0 and again["staged"] == 0 and again["already_reviewed"] >= 1


def test_near_duplicates_are_proposed_with_both_texts_and_their_similarity(hashed):
    a = hashed.remember("We deploy the web app with Kamal to the Hetzner boxes", kind="decision", detect=False).memory
    b = hashed.remember("The web app is deployed to the Hetzner boxes with Kamal", kind="decision",
                        detect=False).memory
    hashed.remember("Postgres backups run nightly at 02:00 UTC", kind="fact", detect=False)
    report = hashed.review.maintain(apply=True)
    (near,) = hashed.review.queue(types=["near_duplicate"])
    assert near.source_ids == [a.id, b.id] and near.payload["texts"] == [a.text, b.text]
    assert near.payload["similarity"] >= review.NEAR_DUP_COSINE_WORDS and near.payload["measure"] == "cosine"
    assert report["counts"]["near_duplicate"] == 1 and hashed.get(b.id).status == "current"
    done = hashed.review.decide(near.id, "approve")
    assert done["superseded"] == [b.id] and hashed.get(b.id).superseded_by == a.id


def test_a_pair_already_queued_as_a_conflict_is_not_queued_again_as_a_near_duplicate(hashed):
    a = hashed.remember("We deploy the web app with Kamal to the Hetzner boxes", kind="decision", detect=False).memory
    b = hashed.remember("The web app is deployed to the Hetzner boxes with Kamal", kind="decision",
                        detect=False).memory
    review_staging.stage_conflicts(hashed, hashed.store, b, [{"id": a.id, "reason": "similar texts"}])
    report = hashed.review.maintain(apply=True)
    assert report["counts"]["near_duplicate"] == 0 and report["already_reviewed"] >= 1
    assert [p.type for p in hashed.review.queue()] == ["conflict"]


def test_a_swapped_slot_value_is_a_different_fact_not_a_restatement(hashed):
    # The store says "Pages for the onboarding service go to the X team" for three X: X is a value, and
    # a text that swaps it states another fact, however close the vectors (hashed cosine 0.9).
    ids = [hashed.remember(f"Pages for the onboarding service go to the {team} team", kind="fact",
                           detect=False).memory.id for team in ("mobile", "infra", "support")]
    same = hashed.remember("The mobile team gets the pages for the onboarding service", kind="fact",
                           detect=False).memory.id
    report = hashed.review.maintain()
    pairs = [p["sources"] for p in report["proposals"] if p["type"] == "near_duplicate"]
    assert all(not (a in ids and b in ids) for a, b in pairs), pairs
    assert [ids[0], same] in pairs and len(pairs) == 1


def test_a_changed_value_is_not_a_near_duplicate(kw_memory):
    kw_memory.remember("The API listens on port 8080 in staging", kind="fact", detect=False)
    kw_memory.remember("The API listens on port 9090 in staging", kind="fact", detect=False)
    report = kw_memory.review.maintain()
    assert report["keyword_only"] and report["counts"]["near_duplicate"] == 0
    assert report["counts"]["conflict"] == 1  # the classifier's possible change, for the user to judge


def test_keyword_only_near_duplicates_by_shared_words(kw_memory):
    a = kw_memory.remember("Always squash commits before merging a pull request", kind="convention",
                           detect=False).memory
    b = kw_memory.remember("Before merging a pull request, always squash the commits", kind="convention",
                           detect=False).memory
    report = kw_memory.review.maintain()
    assert [(p["type"], p["sources"]) for p in report["proposals"] if p["type"] == "near_duplicate"] == [
        ("near_duplicate", [a.id, b.id])]


def test_a_cluster_on_one_subject_is_proposed_for_a_summary_without_a_draft(hashed):
    # Hashed bag-of-words cosines 0.82-0.85: one subject, but no restatement (review.NEAR_DUP_COSINE).
    texts = ["Release checklist for the mobile app: bump the build number in the release branch",
             "Release checklist for the mobile app: upload the symbols from the release branch",
             "Release checklist for the mobile app: write the store listing notes in the release branch"]
    ids = [hashed.remember(t, kind="convention", detect=False).memory.id for t in texts]
    hashed.remember("The office plants are watered on Mondays", kind="fact", detect=False)
    report = hashed.review.maintain(apply=True)
    (summary,) = hashed.review.queue(types=["summarise"])
    assert sorted(summary.source_ids) == sorted(ids) and summary.payload["draft"] is None
    assert summary.subject and report["counts"]["summarise"] == 1
    merged = "Mobile release checklist (on the release branch): bump the build number, upload the symbols, " \
             "write the store listing notes."
    done = hashed.review.decide(summary.id, "edit", text=merged)
    # Approving a summary never loses text: every source stays reachable through history and as_of.
    for memory_id, text in zip(ids, texts):
        assert hashed.get(memory_id).superseded_by == done["by"]
        assert text in [m.text for m in hashed.history(memory_id)]
        source = hashed.get(memory_id)
        assert memory_id in [m.id for m in hashed.list(as_of=source.valid_from, limit=100)]


def test_stale_never_used_low_importance_memories_are_proposed_for_the_cold_tier(kw_memory, monkeypatch):
    old = kw_memory.remember("The wiki moved to Notion in 2019", importance=1).memory
    used = kw_memory.remember("The build box is called hopper", importance=1).memory
    important = kw_memory.remember("Never force-push to main", kind="convention", importance=4).memory
    kw_memory.record_injected([used.id])
    _later(monkeypatch, review.STALE_DAYS + 1)
    report = kw_memory.review.maintain(apply=True)
    demotes = [p for p in report["proposals"] if p["type"] == "demote"]
    assert [p["sources"] for p in demotes] == [[old.id]], (used.id, important.id)
    (proposal,) = kw_memory.review.queue(types=["demote"])
    with pytest.raises(InvalidInput, match="a demote proposal takes approve or reject"):
        kw_memory.review.decide(proposal.id, "edit", text="The wiki is on Notion")  # the text would be lost
    assert kw_memory.review.decide(proposal.id, "approve")["demoted"] == old.id
    assert kw_memory.get(old.id).cold and kw_memory.get(old.id).status == "current"
    # The user brings it back: that is their verdict, and the next runs do not propose it again.
    kw_memory.review.promote(old.id)
    for _ in range(2):
        again = kw_memory.review.maintain(apply=True)
        assert [p for p in again["proposals"] if p["type"] == "demote"] == []
    assert not kw_memory.get(old.id).cold


def test_demotions_are_capped_per_run_and_the_rest_deferred(kw_memory, monkeypatch):
    monkeypatch.setitem(review.RUN_CAPS, "demote", 3)
    for i in range(5):
        kw_memory.remember(f"Old note {i} about the retired build box number {i}", importance=1, detect=False)
    _later(monkeypatch, review.STALE_DAYS + 1)
    report = kw_memory.review.maintain(apply=True)
    assert report["counts"]["demote"] == 3 and report["deferred"] == 2
    assert len(kw_memory.review.queue(types=["demote"])) == 3


def test_the_lease_keeps_two_runs_off_one_store(kw_memory, backend):
    kw_memory.remember("a fact worth keeping", detect=False)
    now = review.now_ms()
    assert kw_memory.store.take_lease(review.LEASE, "other-host:1:x", now, 60_000) is None
    with pytest.raises(MaintenanceBusy, match="other-host:1:x"):
        kw_memory.review.maintain(apply=True)
    assert kw_memory.review.maintain()["dry_run"]  # a dry run needs no lease
    assert kw_memory.review.status()["lease"]["holder"] == "other-host:1:x"
    kw_memory.store.release_lease(review.LEASE, "other-host:1:x")
    assert kw_memory.review.maintain(apply=True)["dry_run"] is False
    status = kw_memory.review.status()
    assert status["lease"] is None and status["last_run"]["retired"] == 0 and status["stale"] is False


def test_two_runs_racing_for_the_lease_one_wins(kw_memory, project, backend):
    import threading

    kw_memory.remember("a fact worth keeping", detect=False)
    barrier = threading.Barrier(4)
    won: list[str] = []
    now = review.now_ms()

    def race(holder: str) -> None:
        with Cairn.open(cwd=project, embedder=None) as mine:
            barrier.wait()
            if mine.store.take_lease(review.LEASE, holder, now, 60_000) is None:
                won.append(holder)

    threads = [threading.Thread(target=race, args=(f"host-{i}:1:x",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and kw_memory.review.status()["lease"]["holder"] == won[0]
    with pytest.raises(MaintenanceBusy, match=won[0]):
        kw_memory.review.maintain(apply=True)


def test_a_lapsed_lease_does_not_block_forever(kw_memory):
    kw_memory.store.take_lease(review.LEASE, "crashed:1:x", review.now_ms() - review.LEASE_TTL_MS - 1,
                               review.LEASE_TTL_MS)
    assert kw_memory.review.maintain(apply=True)["dry_run"] is False


def test_rejected_proposals_are_not_proposed_again(kw_memory):
    kw_memory.remember("Always squash commits before merging a pull request", kind="convention", detect=False)
    kw_memory.remember("Before merging a pull request, always squash the commits", kind="convention", detect=False)
    kw_memory.review.maintain(apply=True)
    for p in kw_memory.review.queue():
        kw_memory.review.decide(p.id, "keep")
    again = kw_memory.review.maintain(apply=True)
    assert again["staged"] == 0 and kw_memory.review.queue() == []


def test_safe_only_retires_duplicates_and_stages_nothing(kw_memory):
    kw_memory.remember("Always squash commits before merging a pull request", kind="convention", detect=False)
    kw_memory.remember("Before merging a pull request, always squash the commits", kind="convention", detect=False)
    kw_memory.remember("Tabs, not spaces.", kind="preference", detect=False)
    legacy(kw_memory, "tabs not spaces", "preference")
    report = kw_memory.review.maintain(apply=True, safe_only=True)
    assert report["retired"] == 1 and report["staged"] == 0 and report["proposals"] == []
    assert kw_memory.review.queue() == []


# -- the cold tier -----------------------------------------------------------------------------------
def test_cold_memories_leave_hooks_and_default_reads_but_not_include_cold_or_as_of(kw_memory):
    warm = kw_memory.remember("Deploys go through the blue-green pipeline on Fly", kind="decision").memory
    cold = kw_memory.remember("Deploys used to be copied by hand with rsync to the Fly box", kind="decision",
                              importance=1).memory
    assert kw_memory.set_cold(cold.id, True)
    assert [m.id for m in kw_memory.list()] == [warm.id]
    assert [h.memory.id for h in kw_memory.recall("deploys Fly")] == [warm.id]
    assert cold.id in [h.memory.id for h in kw_memory.recall("deploys Fly", include_cold=True)]
    assert cold.id in [m.id for m in kw_memory.list(include_cold=True)]
    assert cold.id in [h.memory.id for h in kw_memory.recall("deploys Fly rsync", as_of=review.now_ms())]
    brief = session_brief(kw_memory) or ""
    context = prompt_context(kw_memory, "how do deploys to the Fly box work with rsync?") or ""
    assert warm.id in brief and cold.id not in brief and cold.id not in context
    assert kw_memory.review.status()["cold"] == 1


# -- invariants (property tests) ---------------------------------------------------------------------
@contextmanager
def _fresh(embedder):
    with tempfile.TemporaryDirectory() as home:
        old = os.environ.get("CAIRN_HOME")
        os.environ["CAIRN_HOME"] = home
        try:
            with Cairn.open(f"inv-{uuid.uuid4().hex[:10]}", create=True, embedder=embedder) as memory:
                yield memory
        finally:
            os.environ["CAIRN_HOME"] = old


SENTENCES = ["Run the linter before pushing", "We deploy with Kamal", "The API listens on port 8080",
             "Tabs, not spaces", "Backups run nightly", "Use uv for Python environments"]
VARIANTS = ["{}", "{}.", "{}!", "  {}  ", "{}?"]
histories = st.lists(st.tuples(st.integers(0, len(SENTENCES) - 1), st.integers(0, len(VARIANTS) - 1),
                               st.sampled_from(["fact", "decision"]), st.integers(0, 200),
                               st.booleans()), min_size=1, max_size=10)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(history=histories, case=st.booleans())
def test_recall_as_of_any_earlier_time_is_unchanged_by_a_maintenance_run(history, case):
    base = review.now_ms() - 300 * DAY
    with _fresh(HashingEmbedder()) as memory:
        for sentence, variant, kind, days, replace_one in history:
            text = VARIANTS[variant].format(SENTENCES[sentence])
            text = text.upper() if case and days % 2 else text
            current = memory.list(limit=100)
            if replace_one and current:
                memory.replace(current[days % len(current)].id, text)
            else:
                memory.remember(text, kind=kind, valid_from=base + days * DAY, detect=False)
        every = memory.list(include_superseded=True, limit=1000)
        times = sorted({m.valid_from for m in every} | {m.valid_from - 1 for m in every}
                       | {m.recorded_at for m in every} | {review.now_ms() - 1})

        def snapshot():
            return {t: ([h.memory.id for h in memory.recall("linter Kamal API tabs backups uv", as_of=t, k=20)],
                        sorted(m.id for m in memory.list(as_of=t, limit=1000)))
                    for t in times}

        before = snapshot()
        memory.review.maintain(apply=True)
        assert snapshot() == before


def test_background_maintenance_is_opt_in_and_starts_only_when_the_store_is_due(kw_memory, monkeypatch):
    from cairn import load_config
    from cairn.adapters.claude.hooks import start_background_maintenance

    assert load_config()["maintenance"] == {"background": False, "stale_days": 7}
    started: list[list[str]] = []
    envs: list[dict[str, str]] = []
    monkeypatch.setattr("subprocess.Popen", lambda args, **kwargs: (started.append(args), envs.append(kwargs["env"])))
    environ = {"PATH": "/usr/bin", "CAIRN_HOME": "/the/hook/process/data/root"}  # the hook's process's
    assert start_background_maintenance(kw_memory, environ) is True
    assert started[0][1:] == ["-P", "-m", "cairn", "maintain", "--apply", "--safe-only", "--store", kw_memory.name]
    assert (Path(envs[0]["PYTHONPATH"]) / "cairn" / "__init__.py").is_file()  # `-P -m cairn` finds this package
    assert envs[0]["CAIRN_HOME"] == environ["CAIRN_HOME"] and envs[0]["CAIRN_NO_WARM"] == "1"  # inherited, and no warm
    kw_memory.review.maintain(apply=True, safe_only=True)
    assert start_background_maintenance(kw_memory, environ) is False and len(started) == 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.sampled_from(SENTENCES), min_size=2, max_size=5, unique=True),
       kind=st.sampled_from(["summarise", "near_duplicate", "conflict"]), days=st.integers(1, 200))
def test_approving_a_merge_or_summary_never_loses_text(texts, kind, days):
    base = review.now_ms() - days * DAY
    with _fresh(None) as memory:
        stored = [memory.remember(t, kind="fact", valid_from=base + i, detect=False).memory
                  for i, t in enumerate(texts)]
        sources = stored if kind == "summarise" else stored[:2]
        p = review_queue.new_proposal(kind, sources, {"texts": [m.text for m in sources]}, now=review.now_ms())
        memory.store.add_proposals([(p, p.open_key)])
        done = memory.review.decide(p.id, "edit", text="One statement that replaces them all.")
        assert sorted(done["superseded"]) == sorted(m.id for m in sources)
        for m in sources:
            assert memory.get(m.id).text == m.text and memory.get(m.id).superseded_by == done["by"]
            assert m.text in [h.text for h in memory.history(m.id)]
            assert m.id in [x.id for x in memory.list(as_of=m.valid_from, limit=100)]
        assert sorted(x.id for x in memory.list()) == sorted([done["by"], *(m.id for m in stored[len(sources):])])
