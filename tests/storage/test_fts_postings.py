"""BM25 from postings held in process memory (storage/fts_postings.py): FTS5's scores to the bit and
its ranking, on a real SQLite store, as rows are appended, re-indexed, retired and deleted."""

from __future__ import annotations

import random

import pytest

from cairn import Cairn, Draft
from cairn.sessions.turns import TurnDraft
from cairn.storage import fts_postings, fts_prune
from cairn.storage.fts_prune import phrases_of
from cairn.storage.sql import Filters
from cairn.text import fts_query

WORDS = ["deploy", "deploys", "deploying", "billing", "cache", "retry", "retries", "queue", "schema", "token",
         "latency", "backup", "index", "pre-commit", "node:fs", "don't", "café", "Crème", "3.11", "GB/s",
         "東京に行った", "docker compose", "feature flag", "feature", "flag", "the", "and"]
QUERIES = ["deploy billing", "retries of the queue", "pre-commit hook", "node:fs and GB/s", "don't cache",
           "cafe creme", "東京", "docker compose feature flag", "python 3.11 schema", "feature flag flag",
           "zeppelin", "latency backup index token schema queue retry cache billing deploy"]
T0 = 1_700_000_000_000


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 12))) + f" note {i}" + (" zeppelin" * (i % 23 == 0))
            for i in range(n)]


@pytest.fixture
def engine(project):
    with Cairn.open(cwd=project, embedder=None) as memory:
        yield memory


def _add_session(engine: Cairn, session: str, texts: list[str], first: int = 0) -> None:
    engine.sessions.add_turns(session, [
        TurnDraft(uuid=f"{session}-{first + i}", role="user" if i % 2 else "assistant", text=t,
                  at=T0 + 60_000 * (first + i)) for i, t in enumerate(texts)], source="test")


def _filled(engine: Cairn) -> Cairn:
    engine.remember_many([Draft(text=t, kind="fact") for t in _texts(300, 1)], detect=False)
    texts = _texts(240, 2)
    for first in range(0, len(texts), 40):
        _add_session(engine, f"s{first}", texts[first:first + 40])
    return engine


def _fts5(store, fts: str, match: str, weights: tuple[float, ...]) -> dict[int, float]:
    marks = ", ".join("?" * len(weights))
    return {int(r[0]): -float(r[1]) for r in store.conn.execute(
        f"SELECT rowid, bm25({fts}, {marks}) FROM {fts} WHERE {fts} MATCH ?", (*weights, match))}


def _held(store, fts: str, match: str, weights: tuple[float, ...]) -> dict[int, float]:
    held = store.postings[fts]
    held.sync(store.conn)
    rows, scores = held.scores(store.conn, phrases_of(match), weights)
    return dict(zip(rows.tolist(), scores.tolist()))


def _agree(store) -> None:
    """Every query's score of every matching row equals FTS5's, in both tables, for three weightings."""
    for query in QUERIES:
        match = fts_query(query)
        assert _held(store, "memory_fts", match, (1.0, 1.0, 1.0)) == _fts5(store, "memory_fts", match, (1.0, 1.0, 1.0))
        for w in ((1.0, 0.5), (1.0, 0.3), (0.7, 2.0)):
            assert _held(store, "turn_fts", match, w) == _fts5(store, "turn_fts", match, w), (query, w)


def _rankings(store, since: int | None = None, until: int | None = None) -> list[list[tuple[int, float]]]:
    out = []
    for query in QUERIES:
        match = fts_query(query)
        out.append(store.keyword_search(match, Filters(), 20))
        out.append(store.turn_keyword_search(match, 20, key_weight=0.5, since=since, until=until))
    return out


def _same_rankings(store, monkeypatch, **bounds) -> None:
    """The held postings' top 20 equal FTS5's (every match scored), rows and scores."""
    monkeypatch.setattr(fts_prune, "PRUNE_POSTINGS", 10**12)
    held = _rankings(store, **bounds)
    postings, store.postings = store.postings, {}
    try:
        assert held == _rankings(store, **bounds)
    finally:
        store.postings = postings


def test_the_tokenizer_is_fts5s():
    tokens = fts_postings.Tokenizer().tokens
    assert tokens("Deploying retries") == ("deploi", "retri")
    assert tokens("Crème café") == ("creme", "cafe")
    assert tokens("pre-commit") == ("pre", "commit")
    assert tokens("") == ()


def test_varints_read_fts5s_records():
    assert fts_postings.varints(bytes([0x05, 0x81, 0x00, 0x7F])) == [5, 128, 127]


def test_held_scores_are_fts5s_to_the_bit(engine):
    store = _filled(engine).store
    assert engine.hold_vectors() in (True, False)  # postings are held whatever the vector index
    _agree(store)


def test_held_searches_rank_as_fts5_ranks(engine, monkeypatch):
    store = _filled(engine).store
    engine.hold_vectors()
    _same_rankings(store, monkeypatch)
    _same_rankings(store, monkeypatch, since=T0 + 60_000 * 10, until=T0 + 60_000 * 30)


def test_appended_and_rekeyed_turns_are_scored_as_fts5_scores_them(engine, monkeypatch):
    store = _filled(engine).store
    engine.hold_vectors()
    _agree(store)  # words read and held
    held = store.postings["turn_fts"]
    words, start = len(held.words), held.start
    # Appending to a session re-indexes its last turns (their keys name the new ones): rows below
    # the hold's start change, and FTS5 scores them from then on.
    _add_session(engine, "s0", ["deploy billing zeppelin", "retries of the cache"], first=40)
    _add_session(engine, "new", _texts(12, 3))
    _agree(store)
    _same_rankings(store, monkeypatch)
    assert held.start < start and len(held.words) == words  # not started again
    assert held.fresh >= 14


def test_many_new_rows_start_the_hold_again(engine, monkeypatch):
    store = _filled(engine).store
    engine.hold_vectors()
    _agree(store)
    held = store.postings["turn_fts"]
    monkeypatch.setattr(fts_postings, "FRESH_MAX", 5)
    _add_session(engine, "new", _texts(12, 4))
    _agree(store)
    assert held.fresh == 0 and held.start > 240 + 12  # every row held again


def test_forgotten_and_retired_memories(engine, monkeypatch):
    store = _filled(engine).store
    engine.hold_vectors()
    _agree(store)
    zeppelins = [s for s, _ in store.keyword_search(fts_query("zeppelin"), Filters(), 50)]
    assert len(zeppelins) == 14
    first = engine.list(limit=1000)[-1]
    engine.forget(first.id)  # its keyword entry is deleted: the hold starts again
    new = engine.remember_many([Draft(text="zeppelin deploy billing once more", kind="fact")], detect=False)
    old = next(m for m in engine.list(limit=1000) if "zeppelin" in m.text and m.id != new[0].memory.id)
    engine.replace(old.id, "a zeppelin replaced")  # retired: still indexed, no longer current
    _agree(store)
    _same_rankings(store, monkeypatch)
    found = {s for s, _ in store.keyword_search(fts_query("zeppelin"), Filters(), 50)}
    assert _seq(store, old.id) not in found and _seq(store, new[0].memory.id) in found


def _seq(store, memory_id: str) -> int:
    return int(store.conn.execute("SELECT seq FROM memories WHERE id = ?", (memory_id,)).fetchone()[0])


def test_writes_of_another_process_are_seen(engine, project, monkeypatch):
    store = _filled(engine).store
    engine.hold_vectors()
    _agree(store)
    with Cairn.open(cwd=project, embedder=None) as other:
        other.remember_many([Draft(text="zeppelin latency backup", kind="fact")], detect=False)
        _add_session(other, "other", ["zeppelin latency", "backup index"])
    _agree(store)
    _same_rankings(store, monkeypatch)
