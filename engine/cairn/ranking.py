"""The recall pipeline, as small named stages a benchmark can switch on and off one at a time.

    candidates (BM25, vector)  ->  fusion  ->  prior (importance, recency)  ->  top k

Fusion methods:
- "rrf": Reciprocal Rank Fusion, score = sum_r w_r / (k + rank_r), k = 60
  (Cormack, Clarke & Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual rank
  learning methods", SIGIR 2009).
- "convex": a convex combination of per-query min-max normalised scores,
  score = a * vec_norm + (1 - a) * bm25_norm (Bruch, Gai & Ingber, "An Analysis of Fusion Functions
  for Hybrid Retrieval", ACM TOIS 2023, which finds it more accurate than RRF once a is tuned).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .models import Hit, Memory
from .store import Filters, Store
from .text import fts_query
from .timeutil import now_ms

if TYPE_CHECKING:
    import numpy as np

DAY_MS = 86_400_000


@dataclass(frozen=True)
class RankingConfig:
    """Knobs of the pipeline. Defaults are the shipped method (docs/benchmarks.md has the figures)."""

    candidates: int = 50          # per retriever, before fusion
    use_bm25: bool = True
    use_vector: bool = True
    fusion: str = "rrf"           # "rrf" | "convex"
    rrf_k: int = 60               # Cormack et al. 2009
    bm25_weight: float = 1.0      # rrf: weight of each list
    vector_weight: float = 1.0
    convex_alpha: float = 0.5     # convex: weight of the vector side
    prior: bool = True
    importance_weight: float = 0.05   # at most +/-5% for importance 5 / 1
    recency_weight: float = 0.02      # at most +2% for a memory from today
    recency_half_life_days: float = 90.0

    def only(self, retriever: str) -> RankingConfig:
        """The same pipeline with one retriever ("bm25" or "vector") and no prior: for baselines."""
        return replace(self, use_bm25=retriever == "bm25", use_vector=retriever == "vector", prior=False)


Candidates = list[tuple[int, float]]  # (seq, raw score), best first


def bm25_candidates(store: Store, query: str, filters: Filters, cfg: RankingConfig) -> Candidates:
    match = fts_query(query)
    if not cfg.use_bm25 or match is None:
        return []
    return store.keyword_search(match, filters, cfg.candidates)


def vector_candidates(store: Store, query_vector: np.ndarray | None, filters: Filters, cfg: RankingConfig) -> Candidates:
    if not cfg.use_vector or query_vector is None:
        return []
    return store.vector_search(query_vector, filters, cfg.candidates)


def _min_max(cands: Candidates) -> dict[int, float]:
    if not cands:
        return {}
    scores = [s for _, s in cands]
    low, high = min(scores), max(scores)
    return {seq: (1.0 if high == low else (s - low) / (high - low)) for seq, s in cands}


def fuse(lists: dict[str, Candidates], cfg: RankingConfig) -> dict[int, tuple[float, dict[str, Any]]]:
    """Combine retriever lists into {seq: (fused score, reasons)}."""
    reasons: dict[int, dict[str, Any]] = {}
    for name, cands in lists.items():
        for rank, (seq, raw) in enumerate(cands, start=1):
            key = "cosine" if name == "vector" else "score"
            reasons.setdefault(seq, {})[name] = {"rank": rank, key: round(raw, 6)}
    fused: dict[int, tuple[float, dict[str, Any]]] = {}
    if cfg.fusion == "convex":
        norm = {name: _min_max(c) for name, c in lists.items()}
        weight = {"vector": cfg.convex_alpha, "bm25": 1.0 - cfg.convex_alpha}
        for seq, why in reasons.items():
            fused[seq] = (sum(weight[n] * norm[n].get(seq, 0.0) for n in lists), why)
    else:
        weight = {"vector": cfg.vector_weight, "bm25": cfg.bm25_weight}
        for seq, why in reasons.items():
            fused[seq] = (sum(weight[n] / (cfg.rrf_k + why[n]["rank"]) for n in why), why)
    return fused


def prior(memory: Memory, cfg: RankingConfig, now: int) -> float:
    """Multiplier for importance (1-5, 3 neutral) and recency (exponential decay of valid_from age)."""
    if not cfg.prior:
        return 1.0
    importance = cfg.importance_weight * (memory.importance - 3) / 2
    age_days = max(0.0, (now - memory.valid_from) / DAY_MS)
    recency = cfg.recency_weight * math.exp(-math.log(2) * age_days / cfg.recency_half_life_days)
    return 1.0 + importance + recency


def rank(
    store: Store, query: str, query_vector: np.ndarray | None, filters: Filters, k: int, cfg: RankingConfig
) -> list[Hit]:
    """Run the pipeline on one store; the k best hits, best first."""
    lists = {
        "bm25": bm25_candidates(store, query, filters, cfg),
        "vector": vector_candidates(store, query_vector, filters, cfg),
    }
    lists = {name: c for name, c in lists.items() if c}
    fused = fuse(lists, cfg)
    memories = store.by_seqs(list(fused))
    now = now_ms()
    hits = []
    for seq, (score, why) in fused.items():
        memory = memories.get(seq)
        if memory is None:
            continue
        factor = prior(memory, cfg, now)
        hits.append(Hit(memory, score * factor, {**why, "fused": round(score, 6), "prior": round(factor, 4)}))
    hits.sort(key=lambda h: (-h.score, h.memory.id))
    return hits[:k]
