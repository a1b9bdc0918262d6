"""Review candidates: pairs of current memories that may duplicate or contradict each other.

For each current memory, its nearest current neighbours of the same kind (hybrid recall with the
memory's own text as the query) are candidates when their cosine is at least REVIEW_MIN_COSINE, or
when one is the best keyword match. The supersession classifier (cairn.supersede.classify, the rule
the engine applies on each write) labels each pair; "unrelated" pairs are dropped, and so are pairs
the user already chose to keep both of (Cairn.dismiss_pair). Only the engine API is used: list,
embed, recall, is_dismissed.

Nothing here changes a memory: the user decides, and memory_review_decide applies the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cairn import Cairn, Memory
from cairn.paths import GLOBAL_STORE
from cairn.supersede import classify
from cairn.timeutil import format_date as day

REVIEW_MIN_COSINE = 0.6
NEIGHBOURS = 3        # nearest memories checked per memory
MAX_SCANNED = 2000    # newest current memories scanned per store
TOPIC_MATCHES = 50    # memories a topic narrows the scan to


@dataclass(frozen=True)
class Pair:
    older: Memory
    newer: Memory
    label: str
    reason: str
    cosine: float | None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "verdict": self.label, "reason": self.reason, "kind": self.newer.kind,
            "older": {"id": self.older.id, "text": self.older.text, "date": day(self.older.valid_from)},
            "newer": {"id": self.newer.id, "text": self.newer.text, "date": day(self.newer.valid_from)},
        }
        if self.cosine is not None:
            out["cosine"] = round(self.cosine, 2)
        if self.newer.store == GLOBAL_STORE:
            out["store"] = GLOBAL_STORE
        return out

    def sort_key(self) -> tuple[int, float, str]:
        return (0 if self.label == "supersede" else 1, -(self.cosine or 0.0), self.newer.id)


def _order(a: Memory, b: Memory) -> tuple[Memory, Memory]:
    return (a, b) if (a.valid_from, a.recorded_at, a.id) <= (b.valid_from, b.recorded_at, b.id) else (b, a)


def candidates(engine: Cairn, *, kinds: tuple[str, ...] = (), topic: str | None = None,
               scope: str = "project") -> tuple[list[Pair], int, bool]:
    """(pairs, strongest first; memories scanned; whether vectors were available)."""
    scopes = ["project", "global"] if scope == "all" else [scope]
    pairs: dict[tuple[str, str], Pair] = {}
    dismissed: dict[tuple[str, str], bool] = {}
    scanned = 0
    with_vectors = True
    for store_scope in scopes:
        memories = engine.list(kinds=kinds, scope=store_scope, limit=MAX_SCANNED)
        if topic:
            near = {h.memory.id for h in engine.recall(topic, k=TOPIC_MATCHES, kinds=kinds, scope=store_scope)}
            memories = [m for m in memories if m.id in near]
        if not memories:
            continue
        scanned += len(memories)
        vectors = engine.embed([m.text or "" for m in memories])
        with_vectors = with_vectors and vectors is not None
        by_id = {m.id: (None if vectors is None else vectors[i]) for i, m in enumerate(memories)}
        for m in memories:
            vector = by_id[m.id]
            hits = engine.recall(m.text or "", k=NEIGHBOURS + 1, kinds=(m.kind,), scope=store_scope,
                                 query_vector=vector, use_vectors=vector is not None)
            others = [h for h in hits if h.memory.id != m.id]
            keyword = [h for h in others if "bm25" in h.reasons]
            best_keyword = min(keyword, key=lambda h: h.reasons["bm25"]["rank"]).memory.id if keyword else None
            for h in others:
                other = h.memory
                key = tuple(sorted((m.id, other.id)))
                if key in pairs:
                    continue
                if key not in dismissed:
                    dismissed[key] = engine.is_dismissed(*key)
                if dismissed[key]:
                    continue
                cosine = h.reasons.get("vector", {}).get("cosine")
                if vector is not None and by_id.get(other.id) is not None:
                    cosine = float(vector @ by_id[other.id])
                if not ((cosine is not None and cosine >= REVIEW_MIN_COSINE) or other.id == best_keyword):
                    continue
                older, newer = _order(m, other)
                verdict = classify(older.text or "", newer.text or "", cosine)
                if verdict.label != "unrelated":
                    pairs[key] = Pair(older, newer, verdict.label, verdict.reason, cosine)
    return sorted(pairs.values(), key=Pair.sort_key), scanned, with_vectors
