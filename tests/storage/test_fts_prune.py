"""Rare-first BM25 (storage/fts_prune.py): which expressions are run, and that the rows they find
carry FTS5's own scores, on a real SQLite store."""

from __future__ import annotations

import random

import pytest

from cairn import Cairn, Draft
from cairn.sessions.turns import TurnDraft
from cairn.storage import fts_prune
from cairn.storage.fts_prune import phrases_of, rare_first
from cairn.storage.sql import Filters
from cairn.text import fts_query


def test_phrases_of_reads_only_an_or_of_quoted_phrases():
    assert phrases_of('"deploy" OR "fly io" OR "say ""hi"""') == ['"deploy"', '"fly io"', '"say ""hi"""']
    assert phrases_of('"deploy"') == ['"deploy"']
    assert phrases_of('"deploy" AND "fly"') is None
    assert phrases_of("deploy OR fly") is None
    assert phrases_of('"a" OR "b" NOT "c"') is None


def test_rare_first_leaves_small_or_single_queries_alone():
    match = '"a" OR "b" OR "c"'
    assert rare_first(match, 1000, {'"a"': 10, '"b"': 20, '"c"': 30}, 10, budget=60) == [match]
    assert rare_first('"a"', 10**6, {'"a"': 10**5}, 10, budget=10) == ['"a"']
    assert rare_first('"a" AND "b"', 10**6, {}, 10, budget=0) == ['"a" AND "b"']
    assert rare_first(match, 1000, {}, 10, budget=0) == [match]  # no phrase matches anything


def test_rare_first_splits_rarest_from_common_and_drops_clamped_idf():
    counts = {'"rare"': 40, '"mid"': 300, '"common"': 5000, '"everywhere"': 9000}
    match = '"common" OR "rare" OR "everywhere" OR "mid"'
    assert rare_first(match, 10_000, counts, 10, budget=400) == [
        '"rare" OR "mid"', '("rare" OR "mid") AND ("common")']
    # E takes phrases past the budget until it holds at least `limit` postings
    assert rare_first(match, 10_000, counts, 100, budget=10)[0] == '"rare" OR "mid"'
    # nothing left for R once the phrases in more than half the rows are dropped
    assert rare_first('"rare" OR "everywhere"', 10_000, counts, 10, budget=100) == ['"rare"']


WORDS = ["deploy", "billing", "cache", "retry", "queue", "schema", "token", "latency", "backup", "index"]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = rng.sample(WORDS, 4) + ["service"] * rng.randint(1, 3)
        if i % 17 == 0:
            words.append("zeppelin")
        out.append(" ".join(words) + f" note {i}")
    return out


@pytest.fixture
def sqlite_memory(project):
    with Cairn.open(cwd=project, embedder=None) as engine:
        yield engine


def _both(monkeypatch, search):
    """(pruned, every match scored) results of `search()`."""
    monkeypatch.setattr(fts_prune, "PRUNE_POSTINGS", 20)
    pruned = search()
    monkeypatch.setattr(fts_prune, "PRUNE_POSTINGS", 10**12)
    return pruned, search()


@pytest.mark.parametrize("query", ["zeppelin billing service", "zeppelin cache retry queue", "billing cache"])
def test_pruned_memory_search_returns_fts5_scores_and_its_top(sqlite_memory, monkeypatch, query):
    sqlite_memory.remember_many([Draft(text=t, kind="fact") for t in _texts(400, 1)], detect=False)
    store, match = sqlite_memory.store, fts_query(query)
    pruned, full = _both(monkeypatch, lambda: store.keyword_search(match, Filters(), 10))
    assert len(pruned) == 10
    every = dict(store.keyword_search(match, Filters(), 400))
    # Each row scored as the OR of all phrases scores it, less what "service" adds: it is in more
    # than half the rows, so FTS5 weighs it 1e-6 an occurrence and rare_first leaves it out.
    for seq, score in pruned:
        assert score == pytest.approx(every[seq], abs=1e-5)
    # the same top 10 (rows tied to within that 1e-6 may trade places)
    assert [s for _, s in pruned] == pytest.approx([s for _, s in full], abs=1e-5)


def test_pruned_turn_search_returns_fts5_scores_and_its_top(sqlite_memory, monkeypatch):
    texts = _texts(300, 2)
    for first in range(0, len(texts), 30):
        sqlite_memory.sessions.add_turns(
            f"s{first}", [TurnDraft(uuid=f"u{first + i}", role="user", text=t, at=1_700_000_000_000 + first + i)
                          for i, t in enumerate(texts[first:first + 30])], source="test")
    store, match = sqlite_memory.store, fts_query("zeppelin billing service")
    pruned, full = _both(monkeypatch, lambda: store.turn_keyword_search(match, 10, key_weight=0.5))
    assert len(pruned) == 10
    every = dict(store.turn_keyword_search(match, 300, key_weight=0.5))
    for seq, score in pruned:
        assert score == pytest.approx(every[seq], abs=1e-5)
    # the same top 10 (rows tied to within that 1e-6 may trade places)
    assert [s for _, s in pruned] == pytest.approx([s for _, s in full], abs=1e-5)
