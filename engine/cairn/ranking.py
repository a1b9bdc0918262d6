"""The recall pipeline, as small named stages a benchmark can switch on and off one at a time.

    query formation -> candidates (BM25, vector) -> fusion -> prior (importance, recency) -> top k

Stages (RankingConfig.STAGES; `cfg.without(stage)` switches one off, as bench/locomo.py --ablate does):
- "stopwords": the keyword query drops function words (text.STOPWORDS) before the OR of its terms.
- "clitics": the keyword query drops English clitics ("Melanie's" -> melanie, "we'll" -> we), as
  Lucene's EnglishPossessiveFilter does for 's; off, such a word is the phrase of both parts.
- "bm25", "vector": the two retrievers, each returning its `candidates` best.
- "convex": fusion by a convex combination of per-query min-max normalised scores,
  score = alpha * vector_norm + (1 - alpha) * bm25_norm, a memory absent from one list scoring 0
  there (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS
  2023: more accurate than RRF once alpha is tuned, and tunable on few queries). It keeps the
  magnitudes RRF throws away: a memory far ahead on BM25 stays far ahead. Off, fusion falls back to
  Reciprocal Rank Fusion, score = sum_r w_r / (k + rank_r), k = 60 (Cormack, Clarke & Buettcher,
  "Reciprocal Rank Fusion outperforms Condorcet and individual rank learning methods", SIGIR 2009).
- "prior": a light multiplier for importance and recency (at most a few percent).

Constants and where they come from (figures in docs/benchmarks.md, "Retrieval on LoCoMo"):
- convex_alpha = 0.35: calibrated on LoCoMo conversations 26, 30 and 41 (all-MiniLM-L6-v2 vectors,
  FTS5 BM25). Their mean recall_any@{1,5,10,20} is within 0.004 of its maximum for alpha 0.30-0.45
  (maximum at 0.40), and falls off on both sides (BM25 alone at 0, vectors dominating past 0.55);
  0.35 is the middle of that plateau. Conversations 42, 43 and 44 were held out.
- candidates = 50 per retriever (config `recall.candidates`): on LoCoMo 50 vs 30 or 75 changes
  recall_any@10 by under 0.01; the union of both top-50 lists holds an evidence turn for 92% of
  questions, so fusion, not depth, is what limits recall.
- rrf_k = 60: Cormack et al. 2009.
- importance_weight, recency_weight, recency_half_life_days: product choices, deliberately small
  so the prior only breaks near-ties (on LoCoMo all importances are equal and it changes nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from .models import Hit, Memory
from .storage.protocol import StoreBackend as Store  # either backend, typed by the storage contract
from .storage.sql import Filters
from .text import fts_query
from .timeutil import now_ms

if TYPE_CHECKING:
    import numpy as np

DAY_MS = 86_400_000


@dataclass(frozen=True)
class RankingConfig:
    """Knobs of the pipeline. Defaults are the shipped method (docs/benchmarks.md has the figures)."""

    STAGES: ClassVar[tuple[str, ...]] = ("stopwords", "clitics", "bm25", "vector", "convex", "prior")

    candidates: int = 50          # per retriever, before fusion
    stopwords: bool = True        # query formation: drop function words
    clitics: bool = True          # query formation: drop 's, 're, 've, 'll, 'd, 'm
    use_bm25: bool = True
    use_vector: bool = True
    fusion: str = "convex"        # "convex" | "rrf"
    convex_alpha: float = 0.35    # convex: weight of the vector side (calibrated, see above)
    rrf_k: int = 60               # rrf: Cormack et al. 2009
    bm25_weight: float = 1.0      # rrf: weight of each list
    vector_weight: float = 1.0
    prior: bool = True
    importance_weight: float = 0.05   # at most +/-5% for importance 5 / 1
    recency_weight: float = 0.02      # at most +2% for a memory from today
    recency_half_life_days: float = 90.0

    def only(self, retriever: str) -> RankingConfig:
        """The same pipeline with one retriever ("bm25" or "vector") and no prior: for baselines."""
        return replace(self, use_bm25=retriever == "bm25", use_vector=retriever == "vector", prior=False)

    def has(self, stage: str) -> bool:
        """Whether `stage` (one of STAGES) is switched on."""
        return {
            "stopwords": self.stopwords, "clitics": self.clitics, "bm25": self.use_bm25,
            "vector": self.use_vector, "convex": self.fusion == "convex", "prior": self.prior,
        }[stage]

    def without(self, stage: str) -> RankingConfig:
        """The same pipeline with `stage` switched off ("convex" off means RRF)."""
        changes: dict[str, dict[str, Any]] = {
            "stopwords": {"stopwords": False}, "clitics": {"clitics": False}, "bm25": {"use_bm25": False},
            "vector": {"use_vector": False}, "convex": {"fusion": "rrf"}, "prior": {"prior": False},
        }
        if stage not in changes:
            raise ValueError(f"unknown ranking stage {stage!r}; expected one of: {', '.join(self.STAGES)}")
        return replace(self, **changes[stage])


Candidates = list[tuple[int, float]]  # (seq, raw score), best first


def keyword_query(query: str, cfg: RankingConfig) -> str | None:
    """Query formation: the FTS5 MATCH expression for `query` (None: nothing searchable)."""
    return fts_query(query, drop_stopwords=cfg.stopwords, strip_clitics=cfg.clitics)


def bm25_candidates(store: Store, query: str, filters: Filters, cfg: RankingConfig) -> Candidates:
    match = keyword_query(query, cfg) if cfg.use_bm25 else None
    if match is None:
        return []
    return store.keyword_search(match, filters, cfg.candidates)


def vector_candidates(store: Store, query_vector: np.ndarray | None, filters: Filters,
                      cfg: RankingConfig) -> Candidates:
    if not cfg.use_vector or query_vector is None:
        return []
    return store.vector_search(query_vector, filters, cfg.candidates)


FOUND_FLOOR = 0.05
"""The normalised score of the weakest memory a retriever found. Plain min-max gives it 0, which
erases the evidence: a memory that shares a query's rare words but is the weakest BM25 hit would
fuse below memories that share no word at all. Found by a retriever always counts for something."""


def min_max(cands: Candidates) -> dict[int, float]:
    """Scores mapped to [FOUND_FLOOR, 1] within one list: best 1, worst FOUND_FLOOR (a list of equal
    scores: all 1)."""
    if not cands:
        return {}
    scores = [s for _, s in cands]
    low, high = min(scores), max(scores)
    span = 1.0 - FOUND_FLOOR
    return {seq: (1.0 if high == low else FOUND_FLOOR + span * (s - low) / (high - low)) for seq, s in cands}


def convex(lists: dict[str, Candidates], cfg: RankingConfig) -> dict[int, float]:
    """alpha * vector_norm + (1 - alpha) * bm25_norm; absent from a list counts as 0 there."""
    weight = {"vector": cfg.convex_alpha, "bm25": 1.0 - cfg.convex_alpha}
    out: dict[int, float] = {}
    for name, cands in lists.items():
        for seq, norm in min_max(cands).items():
            out[seq] = out.get(seq, 0.0) + weight[name] * norm
    return out


def rrf(lists: dict[str, Candidates], cfg: RankingConfig) -> dict[int, float]:
    """sum over lists of weight / (rrf_k + rank)."""
    weight = {"vector": cfg.vector_weight, "bm25": cfg.bm25_weight}
    out: dict[int, float] = {}
    for name, cands in lists.items():
        for rank, (seq, _) in enumerate(cands, start=1):
            out[seq] = out.get(seq, 0.0) + weight[name] / (cfg.rrf_k + rank)
    return out


def fuse(lists: dict[str, Candidates], cfg: RankingConfig) -> dict[int, tuple[float, dict[str, Any]]]:
    """Combine retriever lists into {seq: (fused score, reasons)}."""
    reasons: dict[int, dict[str, Any]] = {}
    for name, cands in lists.items():
        key = "cosine" if name == "vector" else "score"
        for rank, (seq, raw) in enumerate(cands, start=1):
            reasons.setdefault(seq, {})[name] = {"rank": rank, key: round(raw, 6)}
    scores = convex(lists, cfg) if cfg.fusion == "convex" else rrf(lists, cfg)
    return {seq: (scores[seq], why) for seq, why in reasons.items()}


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
    if cfg.fusion not in ("convex", "rrf"):
        raise ValueError(f"unknown fusion {cfg.fusion!r}; expected 'convex' or 'rrf'")
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
