"""Maintenance (`maintain`: `cairn maintain`, memory_review maintain, POST /v1/maintain): retires
exact duplicates and fills the review queue with near-duplicates, clusters to summarise, stale
memories to demote and possible conflicts (of any kinds). Dry run by default: reports what it would
do, writes nothing. apply: retires exact duplicates (the provably safe band) and stages everything
that needs judgement as proposals, under the store's maintenance lease. Never deletes.

The plan reads memories through the engine (list, memory_vectors, usage_of) and the queue through a
ReviewStore; memories are retired only through the engine's writer (Engine.retire_into).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import MaintenanceBusy, MemoryNotFound
from ..memories.supersede import SIMILARITY_THRESHOLD, Verdict as Judgement, classify
from ..memories.supersede_words import names_old_value
from ..models import Memory, Proposal, open_key
from .queue import PAIR_TYPES, expire, new_proposal, older_first
from .staging import Sets, fold, pair_key, pending_pairs
from ..timeutil import now_ms

if TYPE_CHECKING:
    from ..memories.engine import Engine
    from ..storage.protocol import ReviewStore

NEIGHBOURS = 3        # possible conflicts kept per memory in one maintenance run
LEASE = "maintenance"
LEASE_TTL_MS = 15 * 60_000       # a crashed run's lease lapses after this

NEAR_DUP_COSINE = 0.85          # a restatement on the vector evidence alone (values kept: _Values)
NEAR_DUP_COSINE_WORDS = 0.75    # ... or this close with NEAR_DUP_JACCARD of its word stems shared (idf-weighted)
NEAR_DUP_JACCARD = 0.45
KEYWORD_NEAR_DUP_JACCARD = 0.6  # keyword-only (no vectors): the stems' weighted Jaccard alone
EDGE_COSINE = 0.6               # pairs checked at all (two kinds: from SIMILARITY_THRESHOLD)
CLUSTER_COSINE = 0.75
KEYWORD_EDGE_JACCARD = 0.3
# ... or, for two memories of different kinds, this Dice overlap of subject words (supersede.
# subject_overlap): the gate at which `remember` relates memories without a model (RELATED_OVERLAP).
KIND_EDGE_OVERLAP = 0.3
CLUSTER_MIN, CLUSTER_MAX = 3, 8
STALE_DAYS = 90                 # demote: not recorded in the last 90 days, ...
DEMOTE_MAX_IMPORTANCE = 2       # ... importance 1-2, never injected by a hook nor cited
MAX_POSTING = 200               # keyword-only: words in more memories than this do not make pairs
BLOCK = 512                     # rows of the cosine matrix computed at once
TOP_K = 20  # nearest neighbours per memory that can make a pair (10 missed paraphrases: benchmarks.md)
PROPOSAL_KEYS = ("duplicate", "near_duplicate", "summarise", "demote", "conflict")
# Proposals of these types one run queues at most, strongest first (the rest wait for a later run,
# counted in "deferred"): a queue of thousands is not one anybody reviews.
RUN_CAPS = {"conflict": 100, "summarise": 50, "demote": 100}


_TOKEN = re.compile(r"[^\W_]+")



class _Values:
    """What a restatement must keep, learnt from the store's own texts (no labels, no model):

    - numbers, and names: a word written capitalised inside a sentence and never in lower case (in
      texts that are not all one case), wherever it stands ("Postgres is where ..." keeps Postgres);
    - slot words: a word w at a position where the store holds the same sentence with another word
      instead ("Pages for the onboarding service go to the {mobile | ml} team"). Such a word is a
      value of a fact the store states several times over; a restatement keeps it, a different fact
      swaps it.
    Two texts can be one statement only when each keeps the other's numbers, names and slot words."""

    def __init__(self, texts: dict[str, str]):
        lower: set[str] = set()
        capital: set[str] = set()
        self.tokens = {i: _TOKEN.findall(t) for i, t in texts.items()}
        fillers: dict[tuple[str, ...], set[str]] = {}
        for i, text in texts.items():
            toks = self.tokens[i]
            if text != text.lower() and text != text.upper():
                lower |= {w for w in toks if w[0].islower()}
                capital |= {w.lower() for w in toks[1:] if w[0].isupper()}
            low = [w.lower() for w in toks]
            for p in range(len(low)):
                fillers.setdefault((*low[:p], "_", *low[p + 1:]), set()).add(low[p])
        self.names = capital - lower
        self.slots = {}
        for i, toks in self.tokens.items():
            low = [w.lower() for w in toks]
            self.slots[i] = {low[p] for p in range(len(low)) if len(fillers[(*low[:p], "_", *low[p + 1:])]) > 1}

    def kept(self, a: str, b: str) -> bool:
        words_a = {w.lower() for w in self.tokens[a]}
        words_b = {w.lower() for w in self.tokens[b]}
        values_a = {w for w in words_a if w.isdigit() or w in self.names}
        values_b = {w for w in words_b if w.isdigit() or w in self.names}
        return values_a == values_b and self.slots[a] <= words_b and self.slots[b] <= words_a


def _weighted_jaccard(words: dict[str, set[str]]) -> Callable[[str, str], float]:
    """The Jaccard of two memories' word stems, each stem weighed by its inverse document frequency
    in the store: a restatement swaps common words (stores / keeps), two different facts of one
    template differ in a rare one (the service's name), which weighs more."""
    import math

    df: dict[str, int] = {}
    for ws in words.values():
        for w in ws:
            df[w] = df.get(w, 0) + 1
    n = max(1, len(words))
    idf = {w: math.log(1 + n / d) for w, d in df.items()}

    def jaccard(a: str, b: str) -> float:
        wa, wb = words[a], words[b]
        union = sum(idf[w] for w in wa | wb)
        return sum(idf[w] for w in wa & wb) / union if union else 0.0

    return jaccard


def _vector_edges(with_vec: list[str], vectors: dict[str, Any], floor: float, jaccard: Callable[[str, str], float]
                  ) -> list[tuple[str, str, float | None, float]]:
    """Pairs of memories with stored vectors whose cosine is at least `floor`, among each one's TOP_K
    nearest (BLOCK rows of the cosine matrix at a time)."""
    import numpy as np

    matrix = np.stack([vectors[i] for i in with_vec]).astype(np.float32)
    k = min(TOP_K, len(with_vec) - 1)
    pairs: dict[tuple[int, int], float] = {}
    for start in range(0, len(with_vec), BLOCK):
        sims = matrix[start : start + BLOCK] @ matrix.T
        sims[np.arange(sims.shape[0]), np.arange(start, start + sims.shape[0])] = -2.0  # not itself
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k] if k < sims.shape[1] else np.argsort(-sims, axis=1)
        for r, row in enumerate(top.tolist()):
            for c in row:
                value = float(sims[r, c])
                if value >= floor:
                    i = start + r
                    pairs[(min(i, c), max(i, c))] = value
    out: list[tuple[str, str, float | None, float]] = []
    for (i, c), value in pairs.items():
        a, b = with_vec[i], with_vec[c]
        out.append((a, b, value, jaccard(a, b)))
    return out


def _keyword_edges(memories: list[Memory], without: list[str], words: dict[str, set[str]],
                   jaccard: Callable[[str, str], float]) -> list[tuple[str, str, float | None, float]]:
    """Pairs of a memory without a vector and another sharing its words: weighted Jaccard at least
    KEYWORD_EDGE_JACCARD, or of two kinds with subject words overlapping by KIND_EDGE_OVERLAP.
    Words in more than MAX_POSTING memories make no pairs."""
    from ..memories.supersede_words import subject_overlap

    out: list[tuple[str, str, float | None, float]] = []
    kinds = {m.id: m.kind for m in memories}
    texts = {m.id: m.text or "" for m in memories}
    postings: dict[str, list[str]] = {}
    for m in memories:
        for w in words[m.id]:
            postings.setdefault(w, []).append(m.id)
    seen: set[tuple[str, str]] = set()
    for a in without:
        shared: dict[str, int] = {}
        for w in words[a]:
            posting = postings[w]
            if len(posting) <= MAX_POSTING:
                for b in posting:
                    if b != a:
                        shared[b] = shared.get(b, 0) + 1
        for b in shared:
            key = (a, b) if a < b else (b, a)
            if key in seen:
                continue
            j = jaccard(a, b)
            if j >= KEYWORD_EDGE_JACCARD or (kinds[a] != kinds[b] and
                                             subject_overlap(texts[a], texts[b]) >= KIND_EDGE_OVERLAP):
                seen.add(key)
                out.append((key[0], key[1], None, j))
    return out


def _edges(memories: list[Memory], vectors: dict[str, Any], words: dict[str, set[str]], floor: float = EDGE_COSINE
           ) -> list[tuple[str, str, float | None, float]]:
    """Candidate pairs (a_id, b_id, cosine or None, weighted Jaccard of their word stems), a < b by
    position: by the cosine of stored vectors (>= floor), and, for memories without a vector,
    by shared words (weighted Jaccard >= KEYWORD_EDGE_JACCARD; of two kinds, or subject words
    overlapping by KIND_EDGE_OVERLAP); _weighted_jaccard says how words weigh."""
    out: list[tuple[str, str, float | None, float]] = []
    jaccard = _weighted_jaccard(words)
    with_vec = [m.id for m in memories if m.id in vectors]
    if len(with_vec) > 1:
        out += _vector_edges(with_vec, vectors, floor, jaccard)
    without = [m.id for m in memories if m.id not in vectors]
    if without:
        out += _keyword_edges(memories, without, words, jaccard)
    return out


def _is_near_duplicate(a: Memory, b: Memory, cosine: float | None, jac: float, values: _Values) -> bool:
    if not values.kept(a.id, b.id):
        return False  # a value changed (a port, a name, a slot): a change to review, not a restatement
    if cosine is None:
        return jac >= KEYWORD_NEAR_DUP_JACCARD
    return cosine >= NEAR_DUP_COSINE or (cosine >= NEAR_DUP_COSINE_WORDS and jac >= NEAR_DUP_JACCARD)


def _classify(engine: Engine, older: Memory, newer: Memory, cosine: float | None) -> Judgement:
    """supersede.classify on (older, newer) as `remember` calls it: when the newer text names the
    value it replaces ("from X to Y"), with the texts of the memories `older` retired (its chain), so
    a chain step naming a value only a retired memory holds reads the same here as at write time."""
    history: list[str] = []
    if names_old_value(newer.text or ""):
        try:
            chain = engine.history(older.id)  # oldest first; `older` is current, so last but for merges
            history = [m.text or "" for m in chain[:[m.id for m in chain].index(older.id)]]
        except MemoryNotFound:
            history = []  # forgotten meanwhile: judged on the two texts alone
    return classify(older.text or "", newer.text or "", cosine, history=history)



Edge = tuple[str, str, float | None, float]  # (a_id, b_id, cosine or None, weighted Jaccard)


class _Plan:
    """A maintenance plan as it is drawn: the proposals staged so far, the keys already queued or
    decided (never proposed again), and what was left out ("already_reviewed") or held back past
    RUN_CAPS ("deferred")."""

    def __init__(self, store: ReviewStore, now: int):
        self._store = store
        self.now = now
        # Pending, kept by the user, or already applied (a demoted memory the user promoted again is
        # not proposed for the cold tier again: the promote was their verdict).
        self.known = store.proposal_keys(("pending", "rejected", "applied"))
        # A pair pending under one type (a conflict `remember` reported) is not queued under another
        # (a near-duplicate): one verdict per pair, not two with opposite defaults.
        self.known |= pending_pairs(store)
        self.proposals: list[tuple[Proposal, str]] = []
        self.reviewed = 0
        self.deferred = 0
        self.staged: dict[str, int] = {}

    def full(self, kind: str) -> bool:
        """Whether this run has staged its RUN_CAPS of `kind`: the candidate waits for a later run."""
        if self.staged.get(kind, 0) >= RUN_CAPS[kind]:
            self.deferred += 1
            return True
        return False

    def stage(self, kind: str, sources: list[Memory], payload: dict[str, Any]) -> None:
        """Propose `kind` about `sources`, unless it (or, for a pair, the pair under any type) is
        already queued, decided, or a pair the user kept both of."""
        key = open_key(kind, [m.id for m in sources])
        ids = [m.id for m in sources]
        pair = kind in PAIR_TYPES and len(ids) == 2
        if key in self.known or (pair and (pair_key(ids) in self.known or self._store.is_dismissed(ids[0], ids[1]))):
            self.reviewed += 1
            return
        self.known.add(key)
        if pair:
            self.known.add(pair_key(ids))
        self.proposals.append((new_proposal(kind, sources, payload, now=self.now), key))
        self.staged[kind] = self.staged.get(kind, 0) + 1


def _exact_duplicates(draft: _Plan, memories: list[Memory]) -> tuple[list[tuple[Memory, list[Memory]]], set[str]]:
    """Step 1, exact duplicates: one punctuation key; the oldest id is canonical. Same kind: retired
    (safe; returned as (canonical, [duplicates])); another kind: a `duplicate` proposal (which kind
    is right is the user's call). Returns them and the ids that leave the later steps."""
    from ..text import duplicate_key

    groups: dict[str, list[Memory]] = {}
    for m in memories:
        groups.setdefault(duplicate_key(m.text or ""), []).append(m)
    exact: list[tuple[Memory, list[Memory]]] = []
    retired: set[str] = set()
    for key, group in groups.items():
        if len(group) < 2 or not key:
            continue
        canonical, rest = group[0], group[1:]
        same = [m for m in rest if m.kind == canonical.kind]
        if same:
            exact.append((canonical, same))
            retired |= {m.id for m in same}
        for m in rest:
            if m.kind != canonical.kind:
                why = f"the same text as a {canonical.kind}, stored as a {m.kind}"
                draft.stage("duplicate", [canonical, m], {"texts": [canonical.text, m.text], "similarity": 1.0,
                                                          "reason": why})
                retired.add(m.id)
    return exact, retired


def _one_cluster(cluster_of: dict[str, str], a: str, b: str) -> bool:
    """Whether a pending cluster proposal holds both: no pair or summary of them is proposed."""
    return a in cluster_of and cluster_of[a] == cluster_of.get(b)


def _near_duplicates(draft: _Plan, live: list[Memory], by_id: dict[str, Memory], edges: list[Edge],
                     vectors: dict[str, Any], cluster_of: dict[str, str]) -> tuple[Sets, set[str]]:
    """Step 3, near-duplicates: grouped; the oldest of a group is canonical, one proposal per group.
    A memory in a pending cluster (one `remember` queued) is not proposed in another. Returns the
    groups and the members absorbed into their canonical memory."""
    near = Sets()
    similarity: dict[tuple[str, str], float] = {}
    values = _Values({m.id: m.text or "" for m in live})
    for a, b, cosine, jac in edges:
        if _is_near_duplicate(by_id[a], by_id[b], cosine, jac, values):
            near.union(a, b)
            similarity[(a, b)] = cosine if cosine is not None else jac
    absorbed: set[str] = set()
    clustered = set(cluster_of)
    for group in near.groups():
        if len(group) < 2:
            continue
        members = [by_id[i] for i in group]  # the oldest id first: the default that stays
        absorbed.update(group[1:])
        if clustered & set(group):
            draft.reviewed += 1
            continue
        sims = [similarity[(a, b)] for a in group for b in group if (a, b) in similarity]
        draft.stage("near_duplicate", members,
                    {"texts": [m.text for m in members], "similarity": round(min(sims), 3) if sims else None,
                     "measure": "cosine" if all(i in vectors for i in group) else "jaccard",
                     "reason": f"{len(members)} memories say the same thing: choose the text that stays and its tags"})
    return near, absorbed


def _conflicts(engine: Engine, draft: _Plan, by_id: dict[str, Memory], edges: list[Edge], near: Sets,
               absorbed: set[str], cluster_of: dict[str, str]) -> None:
    """Step 4, possible conflicts (the classifier `remember` uses): up to NEIGHBOURS strongest per
    memory, of any kinds, as `remember` relates them: a fact contradicting a current decision is as
    stale as a fact."""
    per_memory: dict[str, int] = {}
    for a, b, cosine, _ in sorted(edges, key=lambda e: -(e[2] if e[2] is not None else e[3])):
        if a in absorbed or b in absorbed or (a in near.parent and b in near.parent and near.find(a) == near.find(b)) \
                or _one_cluster(cluster_of, a, b):
            continue
        older, newer = older_first(by_id[a], by_id[b])
        if per_memory.get(a, 0) >= NEIGHBOURS or per_memory.get(b, 0) >= NEIGHBOURS:
            continue
        if draft.full("conflict"):
            continue
        verdict = _classify(engine, older, newer, cosine)
        if verdict.label == "unrelated":
            continue
        per_memory[a] = per_memory.get(a, 0) + 1
        per_memory[b] = per_memory.get(b, 0) + 1
        reason = verdict.reason if older.kind == newer.kind else \
            f"a {newer.kind} that may contradict this {older.kind}: {verdict.reason}"
        payload: dict[str, Any] = {"texts": [older.text, newer.text], "reason": reason, "label": verdict.label,
                   "origin": "maintenance"}
        if cosine is not None:
            payload["similarity"] = round(cosine, 3)
        draft.stage("conflict", [older, newer], payload)


def _clusters(draft: _Plan, by_id: dict[str, Memory], edges: list[Edge], absorbed: set[str],
              cluster_of: dict[str, str]) -> None:
    """Step 5, clusters on one subject (same kind): bounded single linkage; Claude drafts the
    summary in review."""
    clusters = Sets(cap=CLUSTER_MAX)
    strong = [(a, b, c if c is not None else j) for a, b, c, j in edges
              if a not in absorbed and b not in absorbed and by_id[a].kind == by_id[b].kind
              and not _one_cluster(cluster_of, a, b)
              and ((c is not None and c >= CLUSTER_COSINE) or (c is None and j >= 2 * KEYWORD_EDGE_JACCARD))]
    for a, b, _ in sorted(strong, key=lambda e: -e[2]):
        clusters.union(a, b)
    groups = [g for g in clusters.groups() if len(g) >= CLUSTER_MIN]
    for group in sorted(groups, key=lambda g: (-len(g), g[0])):
        if draft.full("summarise"):
            continue
        members = [by_id[i] for i in group]
        draft.stage("summarise", members, {"texts": [m.text for m in members], "draft": None,
                                           "reason": f"{len(members)} {members[0].kind}s on one subject"})


def _stale(engine: Engine, draft: _Plan, live: list[Memory]) -> None:
    """Step 6, stale, never recalled, low importance: to the cold tier."""
    cutoff = draft.now - STALE_DAYS * 86_400_000
    olds = [m for m in live if m.cold_at is None and m.importance <= DEMOTE_MAX_IMPORTANCE and m.recorded_at < cutoff]
    usage = engine.usage_of([m.id for m in olds]) if olds else {}
    for m in olds:
        used = usage.get(m.id)
        if used is None or (not used["injected"] and not used["cited"]):
            if draft.full("demote"):
                continue
            draft.stage("demote", [m], {"texts": [m.text], "importance": m.importance,
                                        "reason": f"importance {m.importance}, recorded more than {STALE_DAYS} days "
                                                  "ago, never injected by a hook nor cited"})


def plan(engine: Engine, store: ReviewStore, *, now: int | None = None) -> dict[str, Any]:
    """What maintenance would do to the project store, reading only: {"scanned", "keyword_only",
    "exact": [(canonical Memory, [duplicate Memory])], "proposals": [(Proposal, open_key)]}.
    Candidates already pending, or kept by the user before (rejected, or a dismissed pair), are
    left out and counted in "already_reviewed"."""
    from ..text import stems

    now = now_ms() if now is None else now
    memories = sorted(engine.list(limit=10**9, scope="project", include_cold=True), key=lambda m: m.id)
    by_id = {m.id: m for m in memories}
    draft = _Plan(store, now)
    exact, retired = _exact_duplicates(draft, memories)
    live = [m for m in memories if m.id not in retired]

    # 2. Pairs by vectors (stored, not recomputed) or shared words.
    vectors = engine.memory_vectors([m.id for m in live])
    words = {m.id: stems(m.text or "") for m in live}
    # A pair of different kinds counts from remember's candidate gate: a decision states a change
    # and its reason, a fact the state, so the two are worded further apart than restatements.
    edges = [e for e in _edges(live, vectors, words, floor=min(EDGE_COSINE, SIMILARITY_THRESHOLD))
             if e[2] is None or e[2] >= EDGE_COSINE or by_id[e[0]].kind != by_id[e[1]].kind]

    cluster_of = {i: p.id for p in store.proposals(states=("pending",), types=("near_duplicate",))
                  for i in p.source_ids}
    near, absorbed = _near_duplicates(draft, live, by_id, edges, vectors, cluster_of)
    _conflicts(engine, draft, by_id, edges, near, absorbed, cluster_of)
    _clusters(draft, by_id, edges, absorbed, cluster_of)
    _stale(engine, draft, live)
    return {"scanned": len(memories), "keyword_only": not vectors, "exact": exact, "proposals": draft.proposals,
            "already_reviewed": draft.reviewed, "deferred": draft.deferred}


def _apply_plan(engine: Engine, store: ReviewStore, found: dict[str, Any], proposals: list[tuple[Proposal, str]],
                now: int) -> tuple[int, int, dict[str, str]]:
    """Carry out a plan: expire what can no longer be decided, retire the exact duplicates still
    current (through the engine's writer), queue the proposals. Returns (retired, expired, {id of
    each proposal queued: itself})."""
    expired = expire(engine, store, now=now)
    retired = 0
    with store.transaction():
        for canonical, duplicates in found["exact"]:
            current = engine.get(canonical.id)
            if current.status != "current":
                continue
            for dup in duplicates:
                if engine.get(dup.id).status == "current":
                    engine.retire_into([dup.id], canonical.id, at=now)
                    retired += 1
    staged_ids: dict[str, str] = {}
    if proposals:
        written = set(store.add_proposals(proposals))
        staged_ids = {p.id: p.id for p, _ in proposals if p.id in written}
        for p, _ in proposals:
            if p.id in written and p.type == "near_duplicate" and len(p.source_ids) > 2:
                fold(store, p, now)  # the write-time pairs of its members: one proposal
    return retired, expired, staged_ids


def maintain(engine: Engine, store: ReviewStore, *, apply: bool = False, safe_only: bool = False) -> dict[str, Any]:
    """One maintenance run over the project store. Dry run (apply False): reports, writes nothing.
    apply: under the store's maintenance lease, retires exact duplicates (superseded_by the oldest,
    valid until now: every earlier as_of reads as before) and, unless safe_only, queues the
    proposals. Returns one object with stable keys: {"store", "dry_run", "safe_only", "scanned",
    "keyword_only", "exact_duplicates": [{"canonical", "duplicates", "text"}], "retired",
    "proposals": [{"type", "subject", "sources", "payload", "id" (None in a dry run)}], "counts":
    {type: n}, "staged", "already_reviewed", "deferred" (past RUN_CAPS: for a later run), "expired",
    "pending" (proposals waiting for the user after the run), "seconds"}.
    Raises MaintenanceBusy (another run holds the lease)."""
    import json
    import os
    import socket
    import time

    from ulid import ULID

    started = time.perf_counter()
    now = now_ms()
    holder = f"{socket.gethostname()}:{os.getpid()}:{ULID()}"
    if apply:
        held: dict[str, Any] | None = store.take_lease(LEASE, holder, now, LEASE_TTL_MS)
        if held is not None:
            from ..timeutil import format_time

            raise MaintenanceBusy(f"another maintenance run ({held['holder']}) holds store {store.name!r} until "
                                  f"{format_time(held['expires_at'])}; try again later")
    try:
        found = plan(engine, store, now=now)
        staged_ids: dict[str, str] = {}
        retired = expired = 0
        proposals = found["proposals"] if not safe_only else []
        if apply:
            retired, expired, staged_ids = _apply_plan(engine, store, found, proposals, now)
        counts = {k: 0 for k in PROPOSAL_KEYS}
        for p, _ in proposals:
            counts[p.type] += 1
        report = {
            "store": store.name, "dry_run": not apply, "safe_only": safe_only, "scanned": found["scanned"],
            "keyword_only": found["keyword_only"],
            "exact_duplicates": [{"canonical": c.id, "duplicates": [d.id for d in ds], "text": c.text}
                                 for c, ds in found["exact"]],
            "retired": retired,
            "proposals": [{"type": p.type, "subject": p.subject, "sources": p.source_ids, "payload": p.payload,
                           "id": staged_ids.get(p.id)} for p, _ in proposals],
            "counts": counts, "staged": len(staged_ids), "already_reviewed": found["already_reviewed"],
            "deferred": found["deferred"],
            "expired": expired, "pending": sum(store.proposal_counts().get("pending", {}).values()),
            "seconds": round(time.perf_counter() - started, 3),
        }
        if apply:
            store.set_meta("maintenance_last_run", json.dumps(
                {"at": now, "retired": retired, "staged": len(staged_ids), "safe_only": safe_only,
                 "seconds": report["seconds"]}))
        return report
    finally:
        if apply:
            store.release_lease(LEASE, holder)


def maintenance_status(engine: Engine, store: ReviewStore) -> dict[str, Any]:
    """{"store", "last_run": {"at", "retired", "staged", "safe_only", "seconds"} or None, "stale": no
    run within config maintenance.stale_days, "background": config maintenance.background, "lease":
    the running maintenance's {"holder", "acquired_at", "expires_at"} or None, "queue": {state:
    {type: n}}, "pending": n, "cold": memories in the cold tier}. Reads only."""
    import json

    now = now_ms()
    raw = store.get_meta("maintenance_last_run")
    last = json.loads(raw) if raw else None
    cfg = engine.config.get("maintenance", {})
    stale_days = cfg.get("stale_days", 7)
    lease: dict[str, Any] | None = store.lease(LEASE)
    counts = store.proposal_counts()
    return {"store": store.name, "last_run": last,
            "stale": last is None or last["at"] < now - stale_days * 86_400_000,
            "background": bool(cfg.get("background", False)),
            "lease": lease if lease is not None and lease["expires_at"] > now else None,
            "queue": counts, "pending": sum(counts.get("pending", {}).values()), "cold": store.cold_count()}
