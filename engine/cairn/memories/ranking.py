"""The recall pipeline, as small named stages a benchmark can switch on and off one at a time.

    query formation -> candidates (BM25, vector) -> fusion -> prior (importance, recency) -> top k

Stages (RankingConfig.STAGES; `cfg.without(stage)` switches one off, as bench/locomo.py --ablate does):
- "stopwords": the keyword query drops function words (text.STOPWORDS) before the OR of its terms.
- "clitics": the keyword query drops English clitics ("Melanie's" -> melanie, "we'll" -> we), as
  Lucene's EnglishPossessiveFilter does for 's; off, such a word is the phrase of both parts.
- "bm25", "vector": the two retrievers, each returning its `candidates` best.
- "evidence": each candidate scored on its own evidence, in [0, 1] and comparable across queries
  (`evidence`): the IDF-weighted share of the query's words it holds, weighed by its cosine, plus its
  calibrated cosine; below `score_floor` it is dropped. Off, fusion is convex:
- convex: a convex combination of per-query min-max normalised scores,
  score = alpha * vector_norm + (1 - alpha) * bm25_norm, a memory absent from one list scoring 0
  there (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS
  2023: more accurate than RRF once alpha is tuned, and tunable on few queries). It keeps the
  magnitudes RRF throws away: a memory far ahead on BM25 stays far ahead. Off, fusion falls back to
  Reciprocal Rank Fusion, score = sum_r w_r / (k + rank_r), k = 60 (Cormack, Clarke & Buettcher,
  "Reciprocal Rank Fusion outperforms Condorcet and individual rank learning methods", SIGIR 2009).
- "prior": a light multiplier for importance and recency (at most a few percent).

Constants and where they come from (figures in docs/benchmarks.md, "Retrieval on LoCoMo" and "Scores
that mean something: evidence fusion"):
- evidence_alpha = 0.4, cos_zero = 0.05, cos_one = 0.6, lexical_cos_full = 0.25, bm25_share = 0.05,
  single_word_cos = 0.2, single_word_cos_full = 0.3, floor_cos = 0.2, near_cos = 0.1: compared on the
  reworded dev questions (tests/data/reworded/dev.yaml) and the six LoCoMo conversations, then scored
  once on the blind tests/data/reworded/holdout2.yaml; 0.4 is where LoCoMo's any@10 peaks (0.35-0.45
  within 0.01) and the reworded set still gains over convex fusion (0.6-0.7 would gain more there
  and lose 0.05 on LoCoMo).
  The cosine ends are all-MiniLM-L6-v2's: unrelated texts sit under 0.1, paraphrases over 0.6.
  single_word_cos_full = 0.5 gave 0.78 first on the reworded dev set but LoCoMo any@10 0.748.
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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from ..models import Hit, Memory
from ..storage.protocol import StoreBackend as Store  # either backend, typed by the storage contract
from ..storage.sql import Filters
from ..text import content_words, fts_query, stem_text, stem_word
from ..timeutil import now_ms

if TYPE_CHECKING:
    import numpy as np

DAY_MS = 86_400_000
IDF_MAX_TERMS = 48  # distinct words of a query whose store frequency is looked up (one index lookup each)


@dataclass(frozen=True)
class RankingConfig:
    """Knobs of the pipeline. Defaults are the shipped method (docs/benchmarks.md has the figures)."""

    STAGES: ClassVar[tuple[str, ...]] = ("stopwords", "clitics", "bm25", "vector", "evidence", "prior")

    candidates: int = 50          # per retriever, before fusion
    stopwords: bool = True        # query formation: drop function words
    clitics: bool = True          # query formation: drop 's, 're, 've, 'll, 'd, 'm
    use_bm25: bool = True
    use_vector: bool = True
    fusion: str = "evidence"      # "evidence" | "convex" | "rrf"
    convex_alpha: float = 0.35    # convex: weight of the vector side (calibrated, see above)
    rrf_k: int = 60               # rrf: Cormack et al. 2009
    bm25_weight: float = 1.0      # rrf: weight of each list
    vector_weight: float = 1.0
    # evidence fusion (see `evidence`): the semantic side's weight, the cosines that map to 0 and 1,
    # the cosines over which a keyword hit's weight rises from 0 to whole, a missing word's weight.
    evidence_alpha: float = 0.4
    cos_zero: float = 0.05
    cos_one: float = 0.60
    lexical_cos_zero: float = 0.0
    lexical_cos_full: float = 0.25
    absent_weight: float = 0.5
    bm25_share: float = 0.05       # of the lexical side: the BM25 order within the query (phrases, tf, length)
    single_word_cos: float = 0.2   # below this cosine, one shared word is no lexical evidence
    single_word_cos_full: float = 0.3  # one shared word counts whole from this cosine (ramp from single_word_cos)
    floor_cos: float = 0.2         # hybrid: the cosine a hit with no lexical evidence needs to be kept
    near_cos: float = 0.1          # ... unless no hit reaches floor_cos: then the nearest down to this one
    keyword_floor: float = 0.1     # keyword-only: the least coverage kept
    prior: bool = True
    importance_weight: float = 0.05   # at most +/-5% for importance 5 / 1
    recency_weight: float = 0.02      # at most +2% for a memory from today
    recency_half_life_days: float = 90.0

    def only(self, retriever: str) -> RankingConfig:
        """One retriever ("bm25" or "vector") in its own order and no prior: for baselines."""
        return replace(self, use_bm25=retriever == "bm25", use_vector=retriever == "vector", prior=False,
                       fusion="convex")  # one list, min-max normalised: its own order

    def has(self, stage: str) -> bool:
        """Whether `stage` (one of STAGES) is switched on."""
        return {
            "stopwords": self.stopwords, "clitics": self.clitics, "bm25": self.use_bm25,
            "vector": self.use_vector, "evidence": self.fusion == "evidence", "prior": self.prior,
        }[stage]

    def without(self, stage: str) -> RankingConfig:
        """The same pipeline with `stage` switched off ("evidence" off means convex fusion)."""
        changes: dict[str, dict[str, Any]] = {
            "stopwords": {"stopwords": False}, "clitics": {"clitics": False}, "bm25": {"use_bm25": False},
            "vector": {"use_vector": False}, "evidence": {"fusion": "convex"}, "prior": {"prior": False},
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


def min_max(cands: Candidates, floor: float = FOUND_FLOOR) -> dict[int, float]:
    """Scores mapped to [floor, 1] within one list: best 1, worst `floor` (a list of equal scores:
    all 1)."""
    if not cands:
        return {}
    scores = [s for _, s in cands]
    low, high = min(scores), max(scores)
    span = 1.0 - floor
    return {seq: (1.0 if high == low else floor + span * (s - low) / (high - low)) for seq, s in cands}


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
    scores = rrf(lists, cfg) if cfg.fusion == "rrf" else convex(lists, cfg)
    return {seq: (scores[seq], why) for seq, why in reasons.items()}


def prior(memory: Memory, cfg: RankingConfig, now: int) -> float:
    """Multiplier for importance (1-5, 3 neutral) and recency (exponential decay of valid_from age)."""
    if not cfg.prior:
        return 1.0
    importance = cfg.importance_weight * (memory.importance - 3) / 2
    age_days = max(0.0, (now - memory.valid_from) / DAY_MS)
    recency = cfg.recency_weight * math.exp(-math.log(2) * age_days / cfg.recency_half_life_days)
    return 1.0 + importance + recency


# multilingual-e5-small puts every pair of texts between ~0.70 and ~0.95, unrelated ones near 0.75
# (docs/benchmarks.md, "Multilingual"): its ends are set from that and from context.py's E5 gate
# (weak 0.86, strong 0.91), not tuned on a ranking set.
E5_MODEL = "intfloat/multilingual-e5-small"
class _Cosines(TypedDict):
    cos_zero: float
    cos_one: float
    lexical_cos_zero: float
    lexical_cos_full: float
    single_word_cos: float
    floor_cos: float
    near_cos: float


E5_COSINES: _Cosines = {"cos_zero": 0.75, "cos_one": 0.90, "lexical_cos_zero": 0.72, "lexical_cos_full": 0.80,
              "single_word_cos": 0.78, "floor_cos": 0.78, "near_cos": 0.78}


def for_model(cfg: RankingConfig, model_name: str | None) -> RankingConfig:
    """`cfg` with the cosine ends of `model_name` (the defaults are all-MiniLM-L6-v2's)."""
    return replace(cfg, **E5_COSINES) if model_name == E5_MODEL else cfg


def stem_frequencies(term_counts: Callable[[list[str]], tuple[int, dict[str, int]]],
                     words: list[str]) -> tuple[int, dict[str, int]]:
    """(N, {stem: df}): how many memories are keyword-indexed and how many hold each word's stem
    (the most of its words), by `term_counts` (a store's or Cairn's: quoted phrases -> counts). Only
    the first IDF_MAX_TERMS words are looked up (one index lookup each); later ones count as held
    by none."""
    phrases = {w: '"' + w.replace('"', '""') + '"' for w in words[:IDF_MAX_TERMS]}
    total, counts = term_counts(list(phrases.values())) if phrases else (0, {})
    df: dict[str, int] = {}
    for word in words:
        stem = stem_word(word)
        df[stem] = max(df.get(stem, 0), counts.get(phrases.get(word, ""), 0))
    return total, df


def bm25_idf(total: int, df: int) -> float:
    """BM25's IDF, ln(1 + (N - df + 0.5) / (df + 0.5)) (Robertson & Zaragoza, "The Probabilistic
    Relevance Framework: BM25 and Beyond", 2009): never negative, highest for a word no memory holds."""
    return math.log(1 + (total - df + 0.5) / (df + 0.5))


def query_weights(store: Store, query: str, cfg: RankingConfig) -> dict[str, float]:
    """{stem: weight} of the query's content words in this store: `bm25_idf`, N the store's
    keyword-indexed memories and df those holding the word; a word no memory holds weighs
    cfg.absent_weight of its IDF (the query is partly about something the store does not hold).
    Only the first IDF_MAX_TERMS distinct words count."""
    words = list(dict.fromkeys(content_words(query)))[:IDF_MAX_TERMS]
    if not words:
        return {}
    total, df = stem_frequencies(store.term_counts, words)
    return {stem: bm25_idf(total, n) * (cfg.absent_weight if n == 0 else 1.0) for stem, n in df.items()}


def _ramp(x: float, zero: float, one: float) -> float:
    """x mapped linearly from [zero, one] onto [0, 1], clamped."""
    return min(1.0, max(0.0, (x - zero) / (one - zero)))


def evidence(weights: dict[str, float], passage: str, cosine: float | None, hybrid: bool,
             cfg: RankingConfig, bm25: float = 0.0) -> tuple[float, dict[str, float]]:
    """A memory's score for a query, in [0, 1] and comparable across queries and stores:

        words    = (1 - bm25_share) * coverage + bm25_share * bm25
        lexical  = words * ramp(cosine, lexical_cos_zero, lexical_cos_full)
        semantic = ramp(cosine, cos_zero, cos_one)
        score    = evidence_alpha * semantic + (1 - evidence_alpha) * lexical

    bm25 is the memory's BM25 score min-max normalised within the query's keyword candidates (0 when
    not among them): a small share that keeps BM25's sense of exact phrases, term frequency and
    length among memories of equal coverage.
    coverage is the IDF-weighted share of the query's content words (stems) the memory's text,
    applies-when phrases and tags hold, weighted by `query_weights`: sharing the query's rare words
    counts, sharing a word common in this store barely does. A keyword hit counts in proportion to its cosine, so a
    memory that shares one word but means something else (cosine near 0) scores near 0, and one
    sharing a single word at a cosine below single_word_cos scores 0: the word is there in another
    sense, which is evidence against the memory, not for it. Keyword-only
    (hybrid False): score = words. A memory still awaiting its vector (cosine None) keeps its
    whole coverage and no semantic part. The ramps' ends are all-MiniLM-L6-v2's: unrelated texts sit
    below cosine 0.1, paraphrases above 0.6 (docs/benchmarks.md, "Scores that mean something")."""
    whole = sum(weights.values())
    shared = weights.keys() & stem_text(passage)
    coverage = sum(weights[t] for t in shared) / whole if whole else 0.0
    words = (1 - cfg.bm25_share) * coverage + cfg.bm25_share * bm25
    if not hybrid:
        return words, {"coverage": round(coverage, 4)}
    if cosine is None:
        return (1 - cfg.evidence_alpha) * words, {"coverage": round(coverage, 4)}
    lexical = words * _ramp(cosine, cfg.lexical_cos_zero, cfg.lexical_cos_full)
    semantic = _ramp(cosine, cfg.cos_zero, cfg.cos_one)
    if len(shared) < 2 and cosine < cfg.single_word_cos:
        lexical = 0.0  # one shared word and another meaning ("which spelling should I use" / "use X")
        if shared:
            semantic = 0.0
    elif len(shared) == 1 and cfg.single_word_cos_full > cfg.single_word_cos:
        lexical *= _ramp(cosine, cfg.single_word_cos, cfg.single_word_cos_full)
    score = cfg.evidence_alpha * semantic + (1 - cfg.evidence_alpha) * lexical
    return score, {"coverage": round(coverage, 4), "lexical": round(lexical, 4), "semantic": round(semantic, 4)}


def score_floor(cfg: RankingConfig, hybrid: bool, near: bool = False) -> float:
    """The least evidence score a hit keeps: hybrid, what a memory with no lexical evidence scores
    at cosine floor_cos (so nothing below that cosine stays without shared words: recall returns
    fewer than k rather than filler); near=True, at near_cos, the floor used when no hit reaches the
    first (a reworded question's memory often sits at cosine 0.1-0.2 with no word in common: the
    nearest answer, with a score that says it is weak, beats none). Keyword-only, keyword_floor of
    the query's IDF weight covered."""
    if not hybrid:
        return cfg.keyword_floor
    return cfg.evidence_alpha * _ramp(cfg.near_cos if near else cfg.floor_cos, cfg.cos_zero, cfg.cos_one)


def rank(
    store: Store, query: str, query_vector: np.ndarray | None, filters: Filters, k: int, cfg: RankingConfig
) -> list[Hit]:
    """Run the pipeline on one store; the k best hits, best first. With evidence fusion, hits
    scoring below `score_floor` are dropped: they share no rare word and mean something else; when
    none reaches it, those above its near floor are kept."""
    if cfg.fusion not in ("evidence", "convex", "rrf"):
        raise ValueError(f"unknown fusion {cfg.fusion!r}; expected 'evidence', 'convex' or 'rrf'")
    lists = {
        "bm25": bm25_candidates(store, query, filters, cfg),
        "vector": vector_candidates(store, query_vector, filters, cfg),
    }
    lists = {name: c for name, c in lists.items() if c}
    fused = fuse(lists, cfg)
    memories = store.by_seqs(list(fused))
    now = now_ms()
    if cfg.fusion == "evidence":
        hybrid = query_vector is not None and cfg.use_vector
        weights = query_weights(store, query, cfg)
        floor = score_floor(cfg, hybrid, near=True)
        bm25_norm = min_max(lists.get("bm25", []), floor=0.0)
        cosines = {seq: why["vector"]["cosine"] for seq, (_, why) in fused.items() if "vector" in why}
        missing = [seq for seq in fused if seq not in cosines]
        if hybrid and missing:
            cosines.update({seq: float(v @ query_vector) for seq, v in store.vectors_of(missing).items()})
        for seq, (_, why) in list(fused.items()):
            memory = memories.get(seq)
            if memory is None:
                continue
            indexed = memory.passage + ("\n" + " ".join(memory.tags).replace("-", " ") if memory.tags else "")
            score, parts = evidence(weights, indexed, cosines.get(seq), hybrid, cfg, bm25_norm.get(seq, 0.0))
            if score < floor:
                del fused[seq]
                continue
            if hybrid and seq in cosines and "vector" not in why:
                parts["cosine"] = round(cosines[seq], 6)
            fused[seq] = (score, {**why, "evidence": parts})
        sure = score_floor(cfg, hybrid)
        if any(score >= sure for score, _ in fused.values()):
            fused = {seq: value for seq, value in fused.items() if value[0] >= sure}
    hits = []
    for seq, (score, why) in fused.items():
        memory = memories.get(seq)
        if memory is None:
            continue
        factor = prior(memory, cfg, now)
        hits.append(Hit(memory, min(1.0, score * factor),
                        {**why, "fused": round(score, 6), "prior": round(factor, 4)}))
    hits.sort(key=lambda h: (-h.score, h.memory.id))
    return hits[:k]
