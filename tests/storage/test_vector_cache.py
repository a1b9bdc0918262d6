"""Vectors held in memory by a long-lived process (Cairn.hold_vectors, vectors.VectorCache).

The held k-NN must return what sqlite-vec returns, and must never be stale: whatever another
process (another connection) or this one writes, the next search and lookup see it.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from cairn import Cairn, Draft
from cairn.embedder import HashingEmbedder
from cairn.storage.sql import Filters

DIM = 64


class RandomEmbedder(HashingEmbedder):
    """A random unit vector per text, seeded by the text's CRC-32 (not hash(), which differs in every
    process): the same vectors in every run."""

    def embed(self, texts):
        out = np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(self.dim) for t in texts])
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def embedder():
    return RandomEmbedder(dim=DIM)


@pytest.fixture
def stores(project, embedder):
    """(held, plain, writer): three engines, three connections, one store of 1,100 memories (two
    of sqlite-vec's 1,024-slot chunks)."""
    with Cairn.open(cwd=project, embedder=embedder) as writer:
        writer.remember_many([Draft(f"memory number {i} about topic {i % 37}") for i in range(1100)], detect=False)
        held = Cairn.open(cwd=project, embedder=embedder)
        plain = Cairn.open(cwd=project, embedder=embedder)
        assert held.hold_vectors()
        try:
            yield held, plain, writer
        finally:
            held.close()
            plain.close()


def _search(memory: Cairn, query: np.ndarray, k: int = 20) -> list[tuple[int, float]]:
    return memory.store.vector_search(query, Filters(), k)


def _queries(n: int = 25) -> np.ndarray:
    q = np.random.default_rng(5).standard_normal((n, DIM))
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def _same(held: Cairn, plain: Cairn) -> None:
    """The same hits in the same order; two memories whose scores differ by less than the two
    computations' float error (numpy against sqlite-vec) may trade places."""
    for query in _queries():
        got, want = _search(held, query), _search(plain, query)
        assert np.allclose([c for _, c in got], [c for _, c in want], atol=1e-5)
        for i, ((g, score), (w, _)) in enumerate(zip(got, want)):
            if g != w:  # only a near-tie may differ
                assert abs(score - want[i][1]) < 1e-5, (i, got, want)


def test_held_search_returns_what_sqlite_vec_returns(stores):
    held, plain, _ = stores
    _same(held, plain)
    assert held.store.vector_cache is not None and len(held.store.vector_cache.row_of) == 1100
    seqs = [s for s, _ in _search(plain, _queries(1)[0], 40)]
    got, want = held.store.vectors_of(seqs), plain.store.vectors_of(seqs)
    assert set(got) == set(want) == set(seqs)
    assert all(np.array_equal(got[s], want[s]) for s in seqs)


def test_writes_by_another_connection_are_seen_at_once(stores, embedder):
    held, plain, writer = stores
    _same(held, plain)  # the cache is loaded
    new = writer.remember("a brand new fact about the deploy pipeline").memory
    query = embedder.embed_queries(["a brand new fact about the deploy pipeline"])[0]
    top_id = held.store.by_seqs([_search(held, query, 1)[0][0]])
    assert [m.id for m in top_id.values()] == [new.id]
    victim = held.recall("memory number 7 about topic 7", k=1)[0].memory
    writer.forget(victim.id)
    seq = plain.store.seq_of(victim.id)
    assert held.store.vectors_of([seq]) == {}
    assert seq not in [s for s, _ in _search(held, embedder.embed_queries([victim.text])[0], 50)]
    old = held.recall("memory number 8 about topic 8", k=1)[0].memory
    replaced = writer.replace(old.id, "memory number 8 now says something else").memory
    assert held.recall("memory number 8 now says something else", k=1)[0].memory.id == replaced.id
    _same(held, plain)


def test_own_writes_are_seen(stores, embedder):
    held, plain, _ = stores
    _same(held, plain)
    mine = held.remember("the held engine wrote this itself").memory
    query = embedder.embed_queries(["the held engine wrote this itself"])[0]
    assert held.store.by_seqs([_search(held, query, 1)[0][0]])[held.store.seq_of(mine.id)].id == mine.id
    _same(held, plain)


def test_a_reembedding_elsewhere_replaces_the_held_vectors(project, stores):
    held, plain, _ = stores
    _same(held, plain)
    other = RandomEmbedder(dim=DIM, model_name="test/other")
    with Cairn.open(cwd=project, embedder=other, check_model=False) as writer:
        writer.reembed()  # same seqs, same slots, new vectors and a new fingerprint
    for query in _queries(5):
        got, want = _search(held, query), _search(plain, query)
        assert [s for s, _ in got] == [s for s, _ in want]


def test_an_unreadable_layout_falls_back_to_sqlite_vec(stores, monkeypatch):
    held, plain, _ = stores
    from cairn.storage import vectors

    def broken(self, conn):
        raise ValueError("layout changed")

    monkeypatch.setattr(vectors.VectorCache, "_reload", broken)
    _same(held, plain)
    assert held.store.vector_cache is not None and not held.store.vector_cache.usable
