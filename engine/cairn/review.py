"""Review: pairs of current memories that may duplicate or contradict each other, and the user's
verdict on each. The CLI (`cairn review`) and the MCP tools (/cairn:review-memory) both call this.

For each current memory, its nearest current neighbours of the same kind (hybrid recall with the
memory's own text as the query) are candidates when their cosine is at least REVIEW_MIN_COSINE, or
when one is the best keyword match. The supersession classifier (cairn.supersede.classify, the rule
the engine applies on each write) labels each pair; "unrelated" pairs are dropped, and so are pairs
the user already chose to keep both of (Cairn.dismiss_pair). Only the engine API is used: list,
embed, recall, is_dismissed.

`review_candidates` changes nothing. `review_decide` applies one verdict the user gave on one pair,
and only while both memories are still current (else NotCurrent, and nothing changes).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from .errors import InvalidMemory, NotCurrent
from .models import Memory
from .supersede import classify

if TYPE_CHECKING:
    from .engine import Cairn


class Verdict(str, Enum):
    """The user's verdict on a pair (older, newer). Its values are models.VERDICTS."""

    KEEP_BOTH = "keep_both"          # both stay current; the pair is not proposed again
    REPLACE_OLDER = "replace_older"  # the older is superseded by the newer; nothing new is written
    REPLACE_NEWER = "replace_newer"  # the newer is superseded by the older
    MERGE = "merge"                  # one new memory with the agreed text supersedes both
    FORGET_OLDER = "forget_older"    # erase the older for good
    FORGET_NEWER = "forget_newer"    # erase the newer for good

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
        """Compact JSON (render.review_pair): the CLI's --json and the MCP tool result."""
        from .render import review_pair

        return review_pair(self)

    def sort_key(self) -> tuple[int, float, str]:
        return (0 if self.label == "supersede" else 1, -(self.cosine or 0.0), self.newer.id)


def _order(a: Memory, b: Memory) -> tuple[Memory, Memory]:
    return (a, b) if (a.valid_from, a.recorded_at, a.id) <= (b.valid_from, b.recorded_at, b.id) else (b, a)


def review_candidates(engine: Cairn, *, kinds: tuple[str, ...] = (), topic: str | None = None,
                      scope: str = "project") -> tuple[list[Pair], int, bool]:
    """(pairs, strongest first; memories scanned; whether vectors were available). Changes nothing."""
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


def review_decide(engine: Cairn, older_id: str, newer_id: str, verdict: Verdict | str,
                  text: str | None = None) -> dict[str, Any]:
    """Apply the user's verdict on the pair (older_id, newer_id), as listed by review_candidates.

    text: the merged statement, for Verdict.MERGE only. Returns what was done: {"verdict", and
    "kept" | "forgotten" | "superseded" + "by" (+ "created" for a merge)}.
    Raises InvalidMemory (bad verdict, same id twice, text missing or not allowed), MemoryNotFound,
    NotCurrent (either memory is no longer current: the pair is out of date; nothing changes)."""
    try:
        verdict = Verdict(verdict)
    except ValueError:
        raise InvalidMemory(f"unknown verdict {verdict!r}; expected one of: "
                            f"{', '.join(v.value for v in Verdict)}") from None
    if older_id == newer_id:
        raise InvalidMemory("older_id and newer_id are the same memory")
    if verdict is Verdict.MERGE and text is None:
        raise InvalidMemory("merge needs text: the merged statement the user agreed to")
    if verdict is not Verdict.MERGE and text is not None:
        raise InvalidMemory(f"text is only for merge, not {verdict.value}")
    pair = {m.id: m for m in (engine.get(older_id), engine.get(newer_id))}
    for m in pair.values():
        if m.status != "current":
            by = f" by {m.superseded_by}" if m.superseded_by else ""
            raise NotCurrent(f"memory {m.id} is already {m.status}{by}; this pair is out of date")
    if verdict is Verdict.KEEP_BOTH:
        engine.dismiss_pair(older_id, newer_id)
        return {"verdict": verdict.value, "kept": [older_id, newer_id],
                "note": "both stay current; this pair will not be proposed again"}
    if verdict in (Verdict.FORGET_OLDER, Verdict.FORGET_NEWER):
        gone = engine.forget(older_id if verdict is Verdict.FORGET_OLDER else newer_id)
        return {"verdict": verdict.value, "forgotten": gone.id}
    if verdict is Verdict.MERGE:
        both = list(pair.values())
        tags = sorted({t for m in both for t in m.tags})
        result = engine.replace([older_id, newer_id], text, tags=tags, importance=max(m.importance for m in both))
        return {"verdict": verdict.value, "superseded": result.superseded, "by": result.memory.id,
                "created": result.status == "created"}
    old, new = (older_id, newer_id) if verdict is Verdict.REPLACE_OLDER else (newer_id, older_id)
    result = engine.replace(old, pair[new].text)
    return {"verdict": verdict.value, "superseded": result.superseded, "by": result.memory.id}

