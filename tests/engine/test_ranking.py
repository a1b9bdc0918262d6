"""Evidence fusion (ranking.evidence): scores in [0, 1] that mean the same across queries, keyword
hits weighed by how rare the shared words are and by their cosine, and no filler on one common word."""

from __future__ import annotations

import pytest

from cairn.memories.ranking import RankingConfig, evidence, score_floor
from cairn.text import stems

STORE = [
    ("User-facing text uses British English spelling (colour, organisation).", "preference"),
    ("We use PostgreSQL 16 for every service's data.", "decision"),
    ("Use pytest with the -x flag in CI.", "convention"),
    ("Background jobs run on Celery with Redis as the broker.", "decision"),
    ("We use Terraform for all cloud resources.", "decision"),
    ("Use feature flags from LaunchDarkly for risky changes.", "convention"),
    ("The API is versioned in the URL path.", "decision"),
    ("Use structlog for logging; never print.", "convention"),
]


def test_evidence_is_a_unit_score_that_needs_rare_words_or_meaning():
    cfg = RankingConfig()
    weights = {"spell": 3.0, "use": 0.2}
    strong, _ = evidence(weights, "British English spelling everywhere", 0.55, True, cfg)
    one_common, parts = evidence(weights, "We use PostgreSQL", 0.05, True, cfg)
    assert 0.0 <= one_common < score_floor(cfg, True) < strong <= 1.0
    assert parts["lexical"] == 0.0  # one shared word at a cosine below single_word_cos is no evidence
    keyword_only, _ = evidence(weights, "British English spelling everywhere", None, False, cfg)
    assert keyword_only == pytest.approx((1 - cfg.bm25_share) * 3.0 / 3.2)


def test_a_rewording_finds_its_memory_first_and_one_shared_common_word_is_not_a_hit(memory):
    ids = [memory.remember(text, kind=kind, detect=False).memory.id for text, kind in STORE]
    hits = memory.recall("which spelling should I use", k=3)
    assert hits and hits[0].memory.id == ids[0]
    cosines = memory.cosines([h.memory.id for h in hits], memory.embed(["which spelling should I use"],
                                                                         query=True)[0])
    for h in hits:
        shared = stems("which spelling should I use") & stems(h.memory.passage)
        assert len(shared) >= 2 or cosines[h.memory.id] >= 0.2, (h.memory.text, shared, cosines[h.memory.id])
    background = memory.recall("what do we use for background tasks", k=3)
    assert background[0].memory.id == ids[3]
    assert all(0.0 <= h.score <= 1.0 for h in hits + background)
    # The same memory, asked for well and asked for vaguely: the score says which answer is sure.
    assert memory.recall("Celery and Redis broker for background jobs", k=1)[0].score > background[0].score


def test_a_meaning_without_shared_words_is_kept_where_one_word_in_another_sense_is_not():
    cfg = RankingConfig()
    weights = {"page": 2.0, "night": 2.0}
    # "who gets paged at night?" against the on-call memory: no word in common, a modest cosine.
    meaning, _ = evidence(weights, "The on-call rotation lives in PagerDuty", 0.15, True, cfg)
    # The same cosine, one shared word in another sense ("a page of the docs").
    one_word, parts = evidence(weights, "Each docs page has an owner", 0.15, True, cfg)
    assert score_floor(cfg, True) > meaning >= score_floor(cfg, True, near=True) > one_word == 0.0
    assert parts["lexical"] == 0.0


def test_recall_gives_weak_neighbours_only_when_nothing_reaches_the_floor(memory):
    for text, kind in STORE + [("Deploys go to production through the GitHub Actions release workflow.", "fact"),
                               ("I prefer tabs over spaces in Makefiles.", "preference")]:
        memory.remember(text, kind=kind, detect=False)
    question = "how do we deploy to production?"
    hits = memory.recall(question, k=5)
    assert hits and "release workflow" in hits[0].memory.text
    vector = memory.embed([question], query=True)[0]
    cosines = memory.cosines([h.memory.id for h in hits], vector)
    for h in hits:  # no filler beside a real answer: every hit shares words or reaches cosine 0.2
        assert stems(question) & stems(h.memory.passage) or cosines[h.memory.id] >= 0.2, h.memory.text
