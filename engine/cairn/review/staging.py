"""Proposals staged from writes and imports, before any maintenance run: an `add` proposed for the
user's approval (propose: import-guidance, memory_review propose), the possible conflicts a
`remember` reported (stage_conflicts), and what a session's writer left unresolved when the
session ends (settle). Restatements of one thing become one `near_duplicate` proposal for the
cluster, not one per pair. The queue is reached through a ReviewStore, memories through the engine.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..errors import InvalidMemory, MemoryNotFound
from ..models import Memory, Proposal, open_key
from .queue import PAIR_TYPES, new_proposal, older_first
from ..timeutil import now_ms

if TYPE_CHECKING:
    from ..memories.engine import Engine
    from ..storage.protocol import ReviewStore


class Sets:
    """Union-find with a size cap (single linkage that stops growing a group past `cap`)."""

    def __init__(self, cap: int | None = None):
        self.parent: dict[str, str] = {}
        self.size: dict[str, int] = {}
        self.cap = cap

    def find(self, x: str) -> str:
        self.parent.setdefault(x, x)
        self.size.setdefault(x, 1)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: str, b: str) -> bool:
        ra, rb = self.find(a), self.find(b)
        if ra == rb or (self.cap is not None and self.size[ra] + self.size[rb] > self.cap):
            return False
        if ra > rb:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return True

    def groups(self) -> list[list[str]]:
        out: dict[str, list[str]] = {}
        for x in self.parent:
            out.setdefault(self.find(x), []).append(x)
        return [sorted(g) for g in out.values()]


def propose(engine: Engine, store: ReviewStore, text: str, *, kind: str = "fact", tags: tuple[str, ...] = (),
            context: str | None = None, applies_when: list[str] | None = None, origin: str | None = None,
            paths: Iterable[str] = (), dry_run: bool = False) -> dict[str, Any]:
    """Queue an `add` proposal: a new memory stored only when the user approves it (import-guidance,
    memory_review propose). context: where it came from (a heading); origin: the file (and line); paths:
    the scope the memory gets when approved (up to scopes.MAX_PATHS globs relative to the project
    root, as `remember`'s; kept in the payload as "paths", normalised). Returns {"status":
    "queued" | "pending" (the same text is already queued) | "exists" (already a current memory) |
    "reviewed" (the user decided on the same text before: kept out, or approved, maybe edited),
    "proposal": its JSON or None, "id": the existing memory's id for "exists"}. dry_run: write
    nothing; "queued" then means it would be, and "proposal" is None. Raises InvalidMemory."""
    from ..memories.records import Draft, validate
    from ..memories.scopes import normalise_patterns

    now = now_ms()
    scope = normalise_patterns(paths, engine.choice.project_root)  # InvalidMemory for a bad glob, before queueing
    if applies_when is not None and (not isinstance(applies_when, list)
                                     or not all(isinstance(a, str) and a.strip() for a in applies_when)):
        raise InvalidMemory("applies_when must be a list of non-empty strings")
    text, context, origin, applies_when = _scrubbed_for_queue(text, context, origin, applies_when, tuple(tags))
    row = validate(Draft(text=text, kind=kind, tags=tuple(tags), source="import"), recorded_at=now)
    existing = engine.current_by_texts([row.text], scope="project")  # the same text key as the store's
    if existing:
        return {"status": "exists", "proposal": None, "id": existing[0].id}
    if open_key("add", [], row.text) in store.proposal_keys(("rejected", "applied")):
        return {"status": "reviewed", "proposal": None}  # the user kept it out, or approved it (maybe edited)
    payload: dict[str, Any] = {"text": row.text, "kind": row.kind, "tags": list(row.tags)}
    for key, value in (("context", context), ("applies_when", applies_when), ("origin", origin),
                       ("paths", list(scope))):
        if value:
            payload[key] = value
    if dry_run:
        pending = open_key("add", [], row.text) in store.proposal_keys(("pending",))
        return {"status": "pending" if pending else "queued", "proposal": None}
    subject = context or (list(row.tags)[0] if row.tags else None)
    p = new_proposal("add", [], payload, subject=subject or " ".join(row.text.split()[:6]), now=now)
    if not store.add_proposals([(p, open_key("add", [], row.text))]):  # the same text is pending
        return {"status": "pending", "proposal": None}
    return {"status": "queued", "proposal": p.to_json()}


def _scrubbed_for_queue(text: str, context: str | None, origin: str | None, applies_when: list[str] | None,
                        tags: tuple[str, ...]) -> tuple[str, str | None, str | None, list[str] | None]:
    """What a proposed memory may carry into the queue: `<private>` spans and secrets scrubbed from
    its text, context (a heading), origin (a path) and applies-when phrases, as `remember` scrubs a
    memory (the queue is in the same store file, and goes where the store goes). Raises
    InvalidMemory for a text that is all private, or a tag that holds a secret."""
    from ..privacy.scrub import random_token, scrub_many
    from ..text import is_blank

    strings = [text, context or "", origin or "", *(applies_when or []), *tags]
    clean = scrub_many([s if isinstance(s, str) else "" for s in strings])
    if isinstance(text, str) and not is_blank(text) and is_blank(clean[0].text):
        raise InvalidMemory("the text is all <private> content: nothing of it may be proposed")
    for j, (tag, done) in enumerate(zip(tags, clean[3 + len(applies_when or []):])):
        if isinstance(tag, str) and (done.text != tag or random_token(tag.strip())):
            raise InvalidMemory(f"tag {j + 1} holds a secret or private text; tags are not redacted, so leave it out")
    phrases = [c.text.strip() for c in clean[3:3 + len(applies_when or [])]]
    return (clean[0].text.strip() if isinstance(text, str) else text, clean[1].text.strip() or None,
            clean[2].text.strip() or None, [p for p in phrases if p] if applies_when is not None else None)


def pair_key(ids: list[str]) -> str:
    """One key for a pair of memories, whatever the type of the proposal about it."""
    return "pair:" + ",".join(sorted(ids))


def pending_pairs(store: ReviewStore) -> set[str]:
    """pair_key of every pair with a pending proposal, of any pair type."""
    return {pair_key(p.source_ids) for p in store.proposals(states=("pending",), types=PAIR_TYPES)
            if len(p.source_ids) == 2}


def stage_conflicts(engine: Engine, store: ReviewStore, new: Memory, conflicts: list[dict[str, Any]]) -> list[str]:
    """Queue what `remember` reported: a `conflict` proposal (older, newer) for each possible
    conflict, and the restatements (conflicts marked "restatement") as one `near_duplicate` proposal
    with every memory that says the same thing (_restatements), unless the user kept the pair before
    or it is already queued. Returns the new proposal ids."""
    if not conflicts:
        return []
    now = now_ms()
    rows = []
    restated: list[Memory] = []
    pending = pending_pairs(store)
    for c in conflicts:
        try:
            old = engine.get(c["id"])
        except MemoryNotFound:
            continue
        if store.is_dismissed(old.id, new.id) or pair_key([old.id, new.id]) in pending:
            continue
        if c.get("restatement"):
            restated.append(old)
            continue
        older, newer = older_first(old, new)
        p = new_proposal("conflict", [older, newer], {"texts": [older.text, newer.text], "reason": c["reason"],
                                                      "origin": "remember"}, now=now)
        rows.append((p, open_key("conflict", [older.id, newer.id])))
    if restated:
        cluster = _restatements(engine, store, new, restated, now)
        rows = [*_outside(rows, cluster[0]), cluster]
    return store.add_proposals(rows)


def _outside(rows: list[tuple[Proposal, str]], cluster: Proposal) -> list[tuple[Proposal, str]]:
    """`rows` without the pair proposals about two members of `cluster`: one proposal per subject."""
    members = set(cluster.source_ids)
    return [(p, k) for p, k in rows if not (p.type in PAIR_TYPES and len(p.source_ids) == 2
                                            and set(p.source_ids) <= members)]


def fold(store: ReviewStore, cluster: Proposal, now: int) -> None:
    """Close (expired) every pending pair proposal about two members of `cluster` (a write-time
    conflict or near-duplicate of two restatements), naming the cluster that replaces it: the review
    shows one proposal, under one heading, for one subject."""
    members = set(cluster.source_ids)
    for p in store.proposals(states=("pending",), types=PAIR_TYPES):
        if p.id != cluster.id and len(p.source_ids) == 2 and set(p.source_ids) <= members:
            store.close_proposal(p.id, state="expired", at=now, by=None,
                                 result={"reason": f"folded into proposal {cluster.id} about the same memories"})


def _restatements(engine: Engine, store: ReviewStore, new: Memory, restated: list[Memory], now: int
                  ) -> tuple[Proposal, str]:
    """One proposal for a cluster of restatements: `new`, the memories it restates, and every current
    member of a pending near_duplicate proposal holding one of them. Those proposals close (expired),
    naming the one that replaces them, so six wordings of a rule make one proposal, not fifteen."""
    members = {m.id: m for m in [*restated, new]}
    grown = [p for p in store.proposals(states=("pending",), types=("near_duplicate",))
             if set(p.source_ids) & set(members)]
    for p in grown:
        for i in p.source_ids:
            try:
                m = engine.get(i)
            except MemoryNotFound:
                continue
            if m.status == "current":
                members.setdefault(i, m)
    ordered = sorted(members.values(), key=lambda m: (m.valid_from, m.recorded_at, m.id))
    proposal = new_proposal("near_duplicate", ordered, {
        "texts": [m.text for m in ordered], "origin": "remember",
        "reason": f"{len(ordered)} memories say the same thing: choose the text that stays and its tags"}, now=now)
    for p in grown:
        store.close_proposal(p.id, state="expired", at=now, by=None,
                             result={"reason": f"replaced by proposal {proposal.id}, which adds {new.id}"})
    fold(store, proposal, now)
    return proposal, open_key("near_duplicate", [m.id for m in ordered])


def settle(engine: Engine, store: ReviewStore, memory_ids: list[str]) -> dict[str, Any]:
    """Queue what the writer of `memory_ids` left unresolved, when its session ends (the writes of a
    session whose engine has defer_review: the plugin's MCP server). For each one still current,
    its possible changes (Engine.possible_changes: current memories recorded before it that it may
    change or restate) that the writer did not resolve (resolving one with memory_replace retires
    it, so it is no longer current) become proposals: a `conflict` per pair, and one
    `near_duplicate` per cluster of restatements (with every current member of a pending cluster
    it grows; see _restatements). Left out: pairs already pending, kept by the user before
    (rejected), or together in a pending or rejected cluster. Idempotent: a second call queues
    nothing new. Returns {"checked": writes still current, "queued": [proposal ids]}."""
    now = now_ms()
    known = store.proposal_keys(("pending", "rejected", "applied"))
    pairs = pending_pairs(store)
    together = [set(p.source_ids) for p in store.proposals(states=("pending", "rejected"),
                                                          types=("duplicate", "near_duplicate"))]
    restated = Sets()
    members: dict[str, Memory] = {}
    rows: list[tuple[Proposal, str]] = []
    checked = 0
    for memory_id in dict.fromkeys(memory_ids):
        try:
            changes = engine.possible_changes(memory_id)
            new = engine.get(memory_id)
        except MemoryNotFound:
            continue
        if new.status != "current":
            continue
        checked += 1
        for change in changes:
            try:
                old = engine.get(change["id"])
            except MemoryNotFound:
                continue
            ids = [old.id, new.id]
            if (store.is_dismissed(old.id, new.id) or pair_key(ids) in pairs
                    or any(set(ids) <= group for group in together)):
                continue
            if change.get("restatement"):
                restated.union(old.id, new.id)
                members.update({old.id: old, new.id: new})
                continue
            older, newer = older_first(old, new)
            key = open_key("conflict", [older.id, newer.id])
            if key in known:
                continue
            known.add(key)
            pairs.add(pair_key(ids))
            rows.append((new_proposal("conflict", [older, newer], {
                "texts": [older.text, newer.text], "reason": change["reason"], "origin": "session"}, now=now), key))
    for group in restated.groups():
        ordered = sorted((members[i] for i in group), key=lambda m: (m.valid_from, m.recorded_at, m.id))
        cluster = _restatements(engine, store, ordered[-1], ordered[:-1], now)
        rows = [*_outside(rows, cluster[0]), cluster]
    return {"checked": checked, "queued": store.add_proposals(rows)}
