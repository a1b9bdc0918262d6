"""Review: what may be wrong with the memories, and the user's verdict on each. Two parts:

1. The durable review queue (below "The durable review queue"): proposals kept in the store until the
   user decides (approve, keep, edit; promote for the cold tier), compare-and-set, expiring after 30
   days. `cairn review list|show|decide|promote`, the MCP tool memory_review (actions
   queue, decide, propose), the REST routes /v1/review/proposals... and the browser
   console, and /cairn:review-memory are thin wrappers over it, through `memory.review` (Review,
   below): queue, show, decide, propose, promote. It works on both store backends
   (storage.protocol.StoreBackend) through the same store methods.
2. Maintenance (`maintain`, `cairn maintain`, memory_review maintain, POST /v1/maintain): retires
   exact duplicates and fills the queue with near-duplicates, clusters to summarise, stale memories
   to demote and possible conflicts (of any kinds). `remember` queues the possible conflicts it
   reports (stage_conflicts), or, for a writer that resolves them itself (Engine.defer_review), its
   session's end queues what it left (settle).

It stands above the engine: memories are written, and retired, only through the engine's writer
(Engine.remember, replace, retire_into).
"""
from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .guidance import import_tree
from .errors import (
    InvalidInput, InvalidMemory, MaintenanceBusy, MemoryNotFound, ProposalClosed, ProposalNotFound,
    StaleProposal,
)
from .models import DECIDERS, PROPOSAL_STATES, PROPOSAL_TYPES, Memory, Proposal, open_key
from .supersede import SIMILARITY_THRESHOLD, Verdict as Judgement, classify
from .supersede_words import names_old_value
from .timeutil import now_ms

if TYPE_CHECKING:
    from .engine import Engine
    from .storage.protocol import StoreBackend


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


NEIGHBOURS = 3        # possible conflicts kept per memory in one maintenance run


def _order(a: Memory, b: Memory) -> tuple[Memory, Memory]:
    return (a, b) if (a.valid_from, a.recorded_at, a.id) <= (b.valid_from, b.recorded_at, b.id) else (b, a)


# == The durable review queue ==========================================================================
# Proposals persist in the store (migration m007_review_queue) until the user decides: nothing a
# proposal names changes before it is approved. `cairn review list|show|decide`, the MCP tool
# memory_review (queue, decide) and /cairn:review-memory are thin wrappers over the
# functions below; `maintain` (cairn maintain, memory_review maintain) fills the queue.

QUEUE_TTL_MS = 30 * 86_400_000   # an unreviewed proposal expires after 30 days: silence is never consent
LEASE = "maintenance"
LEASE_TTL_MS = 15 * 60_000       # a crashed run's lease lapses after this
PAIR_TYPES = ("duplicate", "near_duplicate", "conflict")


def stamp(m: Memory) -> str:
    """A memory's version stamp: every field that changes after it is written (retired, forgotten,
    valid_to closed, demoted). A decision compares each source's stamp with the one recorded when
    the proposal was made."""
    return f"{m.retired_at or 0}:{m.forgotten_at or 0}:{m.valid_to or 0}:{m.cold_at or 0}:{m.superseded_by or ''}"


def subject_of(memories: list[Memory]) -> str:
    """What the memories are about, for grouping the review: their most shared tag, else their most
    shared content words, else the first words of the first text."""
    from collections import Counter

    from .text import content_words

    tags = Counter(t for m in memories for t in set(m.tags))
    if tags and (len(memories) == 1 or tags.most_common(1)[0][1] > 1):
        return tags.most_common(1)[0][0]
    words = Counter(w for m in memories for w in dict.fromkeys(content_words(m.text or "")))
    shared = [w for w, n in words.most_common(3) if n > 1 or len(memories) == 1]
    # In the order the first memory says them, so one subject reads alike whoever proposes it.
    first = {w: i for i, w in reversed(list(enumerate(content_words(memories[0].text or ""))))} if memories else {}
    shared.sort(key=lambda w: first.get(w, len(first)))
    if shared:
        return " ".join(shared)
    return " ".join((memories[0].text or "").split()[:6]) if memories else ""


def new_proposal(kind: str, sources: list[Memory], payload: dict[str, Any], *, subject: str | None = None,
                 now: int) -> Proposal:
    from ulid import ULID

    return Proposal(id=str(ULID()), type=kind, state="pending",
                    subject=subject if subject is not None else subject_of(sources),
                    sources=tuple({"id": m.id, "stamp": stamp(m)} for m in sources), payload=payload,
                    created_at=now, expires_at=now + QUEUE_TTL_MS)


def _queue_store(engine: Engine) -> StoreBackend:
    """The project store, on either backend: both hold the queue."""
    return engine.store


def _stale_reason(store: StoreBackend, proposal: Proposal) -> str | None:
    """Why the proposal can no longer be applied as it was made, or None."""
    for source in proposal.sources:
        try:
            m = store.get(source["id"])
        except MemoryNotFound:
            return f"memory {source['id']} no longer exists"
        if stamp(m) != source["stamp"] or m.status != "current":
            by = ""
            if m.superseded_by:
                try:
                    by = f" by {m.superseded_by}: \"{store.get(m.superseded_by).text or '[forgotten]'}\""
                except MemoryNotFound:
                    by = f" by {m.superseded_by}"
            cold = ", demoted to the cold tier" if m.cold_at and m.status == "current" else ""
            return f"memory {m.id} changed since it was proposed (now {m.status}{by}{cold})"
    return None


def expire(engine: Engine, *, now: int | None = None) -> int:
    """Close what can no longer be decided: pending proposals older than 30 days, and those whose
    sources changed (stale). Both become `expired` with the reason in `result`. Returns how many."""
    store = _queue_store(engine)
    now = now_ms() if now is None else now
    closed = store.expire_proposals(now)
    for p in store.proposals(states=("pending",)):
        reason = _stale_reason(store, p)
        if reason is not None and store.close_proposal(p.id, state="expired", at=now, by=None,
                                                       result={"reason": f"stale: {reason}"}):
            closed += 1
    return closed


def queue(engine: Engine, *, states: tuple[str, ...] = ("pending",), types: tuple[str, ...] = (),
          limit: int | None = None) -> list[Proposal]:
    """The review queue, oldest first: proposals in `states` (PROPOSAL_STATES; default pending) of
    `types` (PROPOSAL_TYPES; default all). Expiry is applied first (expire). Raises InvalidInput."""
    for value, allowed, what in ((states, PROPOSAL_STATES, "state"), (types, PROPOSAL_TYPES, "type")):
        for v in value:
            if v not in allowed:
                raise InvalidInput(f"unknown proposal {what} {v!r}; expected one of: {', '.join(allowed)}")
    store = _queue_store(engine)
    expire(engine)
    return store.proposals(states=states, types=types, limit=limit)


def show(engine: Engine, proposal_id: str) -> dict[str, Any]:
    """One proposal with its evidence: {"proposal", "sources": each source memory as it is now
    (Memory.to_json, or {"id", "missing": true}), "stale": why it can no longer be applied, or
    None, "after": what approving it would do}. Raises ProposalNotFound."""
    store = _queue_store(engine)
    store.expire_proposals(now_ms())
    p = store.proposal(proposal_id)
    if p is None:
        raise ProposalNotFound(f"no proposal {proposal_id!r} in store {store.name!r}")
    sources: list[dict[str, Any]] = []
    for s in p.sources:
        try:
            sources.append(store.get(s["id"]).to_json())
        except MemoryNotFound:
            sources.append({"id": s["id"], "missing": True})
    return {"proposal": p.to_json(), "sources": sources,
            "stale": _stale_reason(store, p) if p.state == "pending" else None, "after": _after(p)}


def _after(p: Proposal) -> str:
    ids = p.source_ids
    tags = "--tags chooses the tags it keeps"
    if p.type in ("duplicate", "near_duplicate"):
        return (f"approve: one memory stays ({ids[0]}, the oldest; --keep-id chooses another, {tags}) and the other "
                f"{len(ids) - 1} are retired into its history; edit: your text replaces all {len(ids)}; "
                "reject: nothing changes")
    if p.type == "conflict":
        return (f"approve: {ids[-1]} (the newer) stays and {ids[0]} is retired (--keep-id chooses which stays, "
                f"{tags}); edit: your text replaces both; reject: both stay current and the pair is not proposed "
                "again")
    if p.type == "summarise":
        return (f"edit: your summary replaces the {len(ids)} memories (or approve with --keep-id: that one stays, "
                f"the others are retired; {tags}); they stay reachable through history and as_of; reject: nothing "
                "changes")
    if p.type == "demote":
        return (f"approve: {ids[0]} moves to the cold tier (out of hooks and default recall; found with "
                "include_cold and as_of; `promote` brings it back); reject: nothing changes")
    scope = p.payload.get("paths") if p.type == "add" else None
    where = f", scoped to {', '.join(scope)}," if scope else ""
    return f"approve: stored as a new memory{where} (edit: with your text); reject: nothing is stored"


def propose(engine: Engine, text: str, *, kind: str = "fact", tags: tuple[str, ...] = (), context: str | None = None,
            applies_when: list[str] | None = None, origin: str | None = None,
            paths: Iterable[str] = (), dry_run: bool = False) -> dict[str, Any]:
    """Queue an `add` proposal: a new memory stored only when the user approves it (import-guidance,
    memory_review propose). context: where it came from (a heading); origin: the file (and line); paths:
    the scope the memory gets when approved (up to scopes.MAX_PATHS globs relative to the project
    root, as `remember`'s; kept in the payload as "paths", normalised). Returns {"status":
    "queued" | "pending" (the same text is already queued) | "exists" (already a current memory) |
    "reviewed" (the user decided on the same text before: kept out, or approved, maybe edited),
    "proposal": its JSON or None, "id": the existing memory's id for "exists"}. dry_run: write
    nothing; "queued" then means it would be, and "proposal" is None. Raises InvalidMemory."""
    from .records import Draft, validate
    from .scopes import normalise_patterns
    from .text import duplicate_key

    now = now_ms()
    scope = normalise_patterns(paths, engine.choice.project_root)  # InvalidMemory for a bad glob, before queueing
    if applies_when is not None and (not isinstance(applies_when, list)
                                     or not all(isinstance(a, str) and a.strip() for a in applies_when)):
        raise InvalidMemory("applies_when must be a list of non-empty strings")
    text, context, origin, applies_when = _scrubbed_for_queue(text, context, origin, applies_when, tuple(tags))
    row = validate(Draft(text=text, kind=kind, tags=tuple(tags), source="import"), recorded_at=now)
    store = _queue_store(engine)
    existing = store.current_by_text_key(duplicate_key(row.text))
    if existing is not None:
        return {"status": "exists", "proposal": None, "id": existing.id}
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
    from .privacy import random_token, scrub_many
    from .text import is_blank

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


def _pair_key(ids: list[str]) -> str:
    """One key for a pair of memories, whatever the type of the proposal about it."""
    return "pair:" + ",".join(sorted(ids))


def _pending_pairs(store: StoreBackend) -> set[str]:
    """_pair_key of every pair with a pending proposal, of any pair type."""
    return {_pair_key(p.source_ids) for p in store.proposals(states=("pending",), types=PAIR_TYPES)
            if len(p.source_ids) == 2}


def stage_conflicts(engine: Engine, store: StoreBackend, new: Memory, conflicts: list[dict[str, Any]]) -> list[str]:
    """Queue what `remember` reported: a `conflict` proposal (older, newer) for each possible
    conflict, and the restatements (conflicts marked "restatement") as one `near_duplicate` proposal
    with every memory that says the same thing (_restatements), unless the user kept the pair before
    or it is already queued. Returns the new proposal ids."""
    if not conflicts:
        return []
    now = now_ms()
    rows = []
    restated: list[Memory] = []
    pending_pairs = _pending_pairs(store)
    for c in conflicts:
        try:
            old = store.get(c["id"])
        except MemoryNotFound:
            continue
        if store.is_dismissed(old.id, new.id) or _pair_key([old.id, new.id]) in pending_pairs:
            continue
        if c.get("restatement"):
            restated.append(old)
            continue
        older, newer = _order(old, new)
        p = new_proposal("conflict", [older, newer], {"texts": [older.text, newer.text], "reason": c["reason"],
                                                      "origin": "remember"}, now=now)
        rows.append((p, open_key("conflict", [older.id, newer.id])))
    if restated:
        cluster = _restatements(store, new, restated, now)
        rows = [*_outside(rows, cluster[0]), cluster]
    return store.add_proposals(rows)


def _outside(rows: list[tuple[Proposal, str]], cluster: Proposal) -> list[tuple[Proposal, str]]:
    """`rows` without the pair proposals about two members of `cluster`: one proposal per subject."""
    members = set(cluster.source_ids)
    return [(p, k) for p, k in rows if not (p.type in PAIR_TYPES and len(p.source_ids) == 2
                                            and set(p.source_ids) <= members)]


def _fold(store: StoreBackend, cluster: Proposal, now: int) -> None:
    """Close (expired) every pending pair proposal about two members of `cluster` (a write-time
    conflict or near-duplicate of two restatements), naming the cluster that replaces it: the review
    shows one proposal, under one heading, for one subject."""
    members = set(cluster.source_ids)
    for p in store.proposals(states=("pending",), types=PAIR_TYPES):
        if p.id != cluster.id and len(p.source_ids) == 2 and set(p.source_ids) <= members:
            store.close_proposal(p.id, state="expired", at=now, by=None,
                                 result={"reason": f"folded into proposal {cluster.id} about the same memories"})


def _restatements(store: StoreBackend, new: Memory, restated: list[Memory], now: int) -> tuple[Proposal, str]:
    """One proposal for a cluster of restatements: `new`, the memories it restates, and every current
    member of a pending near_duplicate proposal holding one of them. Those proposals close (expired),
    naming the one that replaces them, so six wordings of a rule make one proposal, not fifteen."""
    members = {m.id: m for m in [*restated, new]}
    grown = [p for p in store.proposals(states=("pending",), types=("near_duplicate",))
             if set(p.source_ids) & set(members)]
    for p in grown:
        for i in p.source_ids:
            try:
                m = store.get(i)
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
    _fold(store, proposal, now)
    return proposal, open_key("near_duplicate", [m.id for m in ordered])


def settle(engine: Engine, memory_ids: list[str]) -> dict[str, Any]:
    """Queue what the writer of `memory_ids` left unresolved, when its session ends (the writes of a
    session whose engine has defer_review: the plugin's MCP server). For each one still current,
    its possible changes (Engine.possible_changes: current memories recorded before it that it may
    change or restate) that the writer did not resolve (resolving one with memory_replace retires
    it, so it is no longer current) become proposals: a `conflict` per pair, and one
    `near_duplicate` per cluster of restatements (with every current member of a pending cluster
    it grows; see _restatements). Left out: pairs already pending, kept by the user before
    (rejected), or together in a pending or rejected cluster. Idempotent: a second call queues
    nothing new. Returns {"checked": writes still current, "queued": [proposal ids]}."""
    store = _queue_store(engine)
    now = now_ms()
    known = store.proposal_keys(("pending", "rejected", "applied"))
    pairs = _pending_pairs(store)
    together = [set(p.source_ids) for p in store.proposals(states=("pending", "rejected"),
                                                          types=("duplicate", "near_duplicate"))]
    restated = _Sets()
    members: dict[str, Memory] = {}
    rows: list[tuple[Proposal, str]] = []
    checked = 0
    for memory_id in dict.fromkeys(memory_ids):
        try:
            changes = engine.possible_changes(memory_id)
            new = store.get(memory_id)
        except MemoryNotFound:
            continue
        if new.status != "current":
            continue
        checked += 1
        for change in changes:
            try:
                old = store.get(change["id"])
            except MemoryNotFound:
                continue
            ids = [old.id, new.id]
            if (store.is_dismissed(old.id, new.id) or _pair_key(ids) in pairs
                    or any(set(ids) <= group for group in together)):
                continue
            if change.get("restatement"):
                restated.union(old.id, new.id)
                members.update({old.id: old, new.id: new})
                continue
            older, newer = _order(old, new)
            key = open_key("conflict", [older.id, newer.id])
            if key in known:
                continue
            known.add(key)
            pairs.add(_pair_key(ids))
            rows.append((new_proposal("conflict", [older, newer], {
                "texts": [older.text, newer.text], "reason": change["reason"], "origin": "session"}, now=now), key))
    for group in restated.groups():
        ordered = sorted((members[i] for i in group), key=lambda m: (m.valid_from, m.recorded_at, m.id))
        cluster = _restatements(store, ordered[-1], ordered[:-1], now)
        rows = [*_outside(rows, cluster[0]), cluster]
    return {"checked": checked, "queued": store.add_proposals(rows)}


REVIEW_DECISIONS = ("approve", "reject", "edit", "keep")  # "keep" is the older name of "reject"
MULTI_TYPES = (*("duplicate", "near_duplicate", "conflict"), "summarise")  # proposals where one memory stays


def decide(engine: Engine, proposal_id: str, verdict: str, *, text: str | None = None, keep_id: str | None = None,
           tags: list[str] | tuple[str, ...] | None = None, by: str = "cli") -> dict[str, Any]:
    """Apply the user's verdict on one pending proposal, compare-and-set, in one transaction.

    verdict: "approve" (do what the proposal says), "reject" (nothing changes; a pair is not
    proposed again; "keep" is accepted for it), "edit" (approve with `text`, the user's wording: a
    merge, a summary, an edited `add`). keep_id (`--keep-id`): for duplicate, near_duplicate,
    conflict and summarise, which source stays and the others are retired into its history
    (default: the oldest for duplicates, the newer for a conflict; a summarise needs it or edit).
    tags: the tags the memory that stays keeps, or the edited/added one gets (default: the kept
    source's for a conflict, those of every source for restatements). by: cli | mcp | http.
    Returns {"proposal", "type", "state": "applied" | "rejected", "verdict", and what was done:
    "superseded" + "by", "created", "demoted"}.
    Raises InvalidInput (bad verdict, text missing or not allowed, keep_id not a source),
    ProposalNotFound, ProposalClosed (already decided, or expired), StaleProposal (a source changed
    since: refused, and the proposal is marked expired). Two reviewers at once: the second gets
    ProposalClosed and nothing is applied twice."""
    if verdict not in REVIEW_DECISIONS:
        raise InvalidInput(f"unknown verdict {verdict!r}; expected approve, reject or edit "
                           "(promote takes a memory id: cairn review promote ID)")
    verdict = "reject" if verdict == "keep" else verdict
    if by not in DECIDERS:
        raise InvalidInput(f"unknown decider {by!r}; expected one of: {', '.join(DECIDERS)}")
    if verdict == "edit" and (text is None or not text.strip()):
        raise InvalidInput("edit needs the text to store instead (--text)" if text is None
                           else "edit needs the text to store instead (--text is empty)")
    if verdict != "edit" and text is not None:
        raise InvalidInput(f"a text (--text) goes with edit, not with {verdict}")
    if verdict == "reject" and (tags is not None or keep_id is not None):
        raise InvalidInput("reject changes nothing: it takes no --keep-id or --tags")
    store = _queue_store(engine)
    now = now_ms()
    store.expire_proposals(now)
    stale: str | None = None
    # SQLite: BEGIN IMMEDIATE, one decision at a time per store, across processes. Postgres: the
    # proposal's row is locked (SELECT ... FOR UPDATE) until the decision commits; a second reviewer
    # waits, then reads it decided.
    with store.transaction():
        p = store.proposal(proposal_id, for_update=True)
        if p is None:
            raise ProposalNotFound(f"no proposal {proposal_id!r} in store {store.name!r}")
        if p.state != "pending":
            when = f" by {p.decided_by}" if p.decided_by else ""
            raise ProposalClosed(f"proposal {p.id} is already {p.state}{when}; nothing was changed")
        if keep_id is not None and (p.type not in MULTI_TYPES or keep_id not in p.source_ids):
            allowed = f"one of {', '.join(p.source_ids)}" if p.type in MULTI_TYPES else f"not for a {p.type} proposal"
            raise InvalidInput(f"--keep-id names the memory that stays: {allowed}")
        if verdict == "edit" and keep_id is not None:
            raise InvalidInput("edit stores your text; --keep-id goes with approve")
        if verdict == "edit" and p.type == "demote":
            raise InvalidInput("a demote proposal takes approve or reject; to change the memory's text, edit the "
                               "memory itself (cairn remember --replaces ID, memory_replace)")
        if tags is not None and p.type == "demote":
            raise InvalidInput("a demote proposal keeps the memory as it is: no --tags")
        if verdict == "reject":
            ids = p.source_ids
            if p.type in PAIR_TYPES and len(ids) == 2:
                try:
                    store.dismiss_pair(ids[0], ids[1], now)
                except MemoryNotFound:
                    pass
            if not store.close_proposal(p.id, state="rejected", at=now, by=by, result={"verdict": "reject"}):
                raise ProposalClosed(f"proposal {p.id} was decided meanwhile; nothing was changed")
            return {"proposal": p.id, "type": p.type, "state": "rejected", "verdict": verdict}
        stale = _stale_reason(store, p)
        if stale is None:
            # pending -> approved (the compare-and-set) -> applied, in this one transaction.
            if not store.close_proposal(p.id, state="approved", at=now, by=by, result={"verdict": verdict}):
                raise ProposalClosed(f"proposal {p.id} was decided meanwhile; nothing was changed")
            done = _apply(engine, store, p, text, keep_id, None if tags is None else list(tags), now)
            store.close_proposal(p.id, state="applied", at=now, by=by, result={"verdict": verdict, **done},
                                 from_state="approved")
            return {"proposal": p.id, "type": p.type, "state": "applied", "verdict": verdict, **done}
    store.close_proposal(proposal_id, state="expired", at=now, by=by, result={"reason": f"stale: {stale}"})
    raise StaleProposal(f"proposal {proposal_id} is stale: {stale}; nothing was changed")


def _apply(engine: Engine, store: StoreBackend, p: Proposal, text: str | None, keep_id: str | None,
           tags: list[str] | None, now: int) -> dict[str, Any]:
    """Do what an approved proposal says, inside the decision's transaction. Never deletes."""
    ids = p.source_ids
    if p.type == "add":
        fields = {k: p.payload[k] for k in ("kind", "tags") if k in p.payload}
        if tags is not None:
            fields["tags"] = tags
        extra: dict[str, Any] = {}
        if p.payload.get("applies_when") and "applies_when" in inspect.signature(engine.remember).parameters:
            extra["applies_when"] = p.payload["applies_when"]  # the applies_when field (#6), where it exists
        # The scope the proposal carries (imported guidance: its folder or globs); an older proposal has none.
        result = engine.remember(text if text is not None else p.payload["text"], source="import",
                                 paths=tuple(p.payload.get("paths") or ()), **fields, **extra)
        return {"created": result.memory.id, "status": result.status, "superseded": result.superseded}
    if p.type == "demote":
        store.set_cold(ids[0], now)
        return {"demoted": ids[0]}
    if p.type == "summarise" and text is None and keep_id is None:
        text = p.payload.get("draft")
        if not text:
            raise InvalidInput("choose what stays: approve with --keep-id ID (one of these memories), or edit "
                               "with --text and the summary you want")
    sources = [store.get(i) for i in ids]
    if text is None:
        keep = keep_id or (ids[-1] if p.type == "conflict" else ids[0])
        kept = next(m for m in sources if m.id == keep)
        if tags is not None and sorted(set(tags)) != sorted(kept.tags):
            text = kept.text  # the same text with other tags: a new version of it replaces them all
        else:
            retired = [i for i in ids if i != keep]
            engine.retire_into(retired, keep, at=now)
            return {"superseded": retired, "by": keep}
    keep = keep_id or (ids[-1] if p.type == "conflict" else ids[0])
    kept = next(m for m in sources if m.id == keep)
    if tags is None:
        # A change keeps the tags of the memory that stays; restatements, all of theirs.
        tags = list(kept.tags) if p.type == "conflict" else sorted({t for m in sources for t in m.tags})
    result = engine.replace(ids, text, kind=kept.kind, tags=tags,
                            importance=max(m.importance for m in sources))
    return {"superseded": result.superseded, "by": result.memory.id, "created": result.status == "created"}


def promote(engine: Engine, memory_id: str) -> dict[str, Any]:
    """Bring a cold memory back to the warm tier (hooks, default recall and list).
    Returns {"promoted": id}. Raises MemoryNotFound, InvalidInput (the memory is not cold)."""
    memory = engine.get(memory_id)
    if memory.cold_at is None:
        raise InvalidInput(f"memory {memory_id} is not in the cold tier")
    engine.set_cold(memory_id, False)
    return {"promoted": memory_id}


# == Maintenance: `cairn maintain` ======================================================================
# Dry run by default: reports what it would do, writes nothing. apply: retires exact duplicates (the
# provably safe band) and stages everything that needs judgement as proposals. Never deletes.

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
TOP_K = 10                      # nearest neighbours per memory that can make a pair
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


class _Sets:
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


def _edges(memories: list[Memory], vectors: dict[str, Any], words: dict[str, set[str]], floor: float = EDGE_COSINE
           ) -> list[tuple[str, str, float | None, float]]:
    """Candidate pairs (a_id, b_id, cosine or None, weighted Jaccard of their word stems), a < b by
    position: by the cosine of stored vectors (>= floor), and, for memories without a vector,
    by shared words (weighted Jaccard >= KEYWORD_EDGE_JACCARD; of two kinds, or subject words
    overlapping by KIND_EDGE_OVERLAP).

    The Jaccard weighs each stem by its inverse document frequency in the store: a restatement
    swaps common words (stores / keeps), two different facts of one template differ in a rare one
    (the service's name), which weighs more."""
    import math

    out: list[tuple[str, str, float | None, float]] = []
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

    with_vec = [m.id for m in memories if m.id in vectors]
    if len(with_vec) > 1:
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
        for (i, c), value in pairs.items():
            a, b = with_vec[i], with_vec[c]
            out.append((a, b, value, jaccard(a, b)))
    without = [m.id for m in memories if m.id not in vectors]
    if without:
        from .supersede_words import subject_overlap

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


def _is_near_duplicate(a: Memory, b: Memory, cosine: float | None, jac: float, values: _Values) -> bool:
    if not values.kept(a.id, b.id):
        return False  # a value changed (a port, a name, a slot): a change to review, not a restatement
    if cosine is None:
        return jac >= KEYWORD_NEAR_DUP_JACCARD
    return cosine >= NEAR_DUP_COSINE or (cosine >= NEAR_DUP_COSINE_WORDS and jac >= NEAR_DUP_JACCARD)


def plan(engine: Engine, *, now: int | None = None) -> dict[str, Any]:
    """What maintenance would do to the project store, reading only: {"scanned", "keyword_only",
    "exact": [(canonical Memory, [duplicate Memory])], "proposals": [(Proposal, open_key)]}.
    Candidates already pending, or kept by the user before (rejected, or a dismissed pair), are
    left out and counted in "already_reviewed"."""
    from .text import duplicate_key, stems

    store = _queue_store(engine)
    now = now_ms() if now is None else now
    memories = sorted(engine.list(limit=10**9, scope="project", include_cold=True), key=lambda m: m.id)
    by_id = {m.id: m for m in memories}
    # Pending, kept by the user, or already applied (a demoted memory the user promoted again is
    # not proposed for the cold tier again: the promote was their verdict).
    known = store.proposal_keys(("pending", "rejected", "applied"))
    # A pair pending under one type (a conflict `remember` reported) is not queued under another
    # (a near-duplicate): one verdict per pair, not two with opposite defaults.
    known |= _pending_pairs(store)
    proposals: list[tuple[Proposal, str]] = []
    reviewed = deferred = 0
    staged: dict[str, int] = {}

    def staged_of(kind: str) -> int:
        return staged.get(kind, 0)

    def stage(kind: str, sources: list[Memory], payload: dict[str, Any]) -> None:
        nonlocal reviewed
        key = open_key(kind, [m.id for m in sources])
        ids = [m.id for m in sources]
        pair = kind in PAIR_TYPES and len(ids) == 2
        if key in known or (pair and (_pair_key(ids) in known or store.is_dismissed(ids[0], ids[1]))):
            reviewed += 1
            return
        known.add(key)
        if pair:
            known.add(_pair_key(ids))
        proposals.append((new_proposal(kind, sources, payload, now=now), key))
        staged[kind] = staged.get(kind, 0) + 1

    # 1. Exact duplicates: one punctuation key; the oldest id is canonical. Same kind: retired (safe);
    # another kind: a `duplicate` proposal (which kind is right is the user's call).
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
                stage("duplicate", [canonical, m], {"texts": [canonical.text, m.text], "similarity": 1.0,
                                                    "reason": why})
                retired.add(m.id)
    live = [m for m in memories if m.id not in retired]

    # 2. Pairs by vectors (stored, not recomputed) or shared words.
    vectors = engine.memory_vectors([m.id for m in live])
    words = {m.id: stems(m.text or "") for m in live}
    # A pair of different kinds counts from remember's candidate gate: a decision states a change
    # and its reason, a fact the state, so the two are worded further apart than restatements.
    edges = [e for e in _edges(live, vectors, words, floor=min(EDGE_COSINE, SIMILARITY_THRESHOLD))
             if e[2] is None or e[2] >= EDGE_COSINE or by_id[e[0]].kind != by_id[e[1]].kind]

    # 3. Near-duplicates: grouped; the oldest of a group is canonical, one proposal per other member.
    near = _Sets()
    similarity: dict[tuple[str, str], float] = {}
    values = _Values({m.id: m.text or "" for m in live})
    for a, b, cosine, jac in edges:
        if _is_near_duplicate(by_id[a], by_id[b], cosine, jac, values):
            near.union(a, b)
            similarity[(a, b)] = cosine if cosine is not None else jac
    absorbed: set[str] = set()
    # A memory in a pending cluster (one `remember` queued) is not proposed in another.
    cluster_of = {i: p.id for p in store.proposals(states=("pending",), types=("near_duplicate",))
                  for i in p.source_ids}
    clustered = set(cluster_of)

    def one_cluster(a: str, b: str) -> bool:  # already proposed together: no pair or summary of them
        return a in cluster_of and cluster_of[a] == cluster_of.get(b)

    for group in near.groups():
        if len(group) < 2:
            continue
        members = [by_id[i] for i in group]  # the oldest id first: the default that stays
        absorbed.update(group[1:])
        if clustered & set(group):
            reviewed += 1
            continue
        sims = [similarity[(a, b)] for a in group for b in group if (a, b) in similarity]
        stage("near_duplicate", members,
              {"texts": [m.text for m in members], "similarity": round(min(sims), 3) if sims else None,
               "measure": "cosine" if all(i in vectors for i in group) else "jaccard",
               "reason": f"{len(members)} memories say the same thing: choose the text that stays and its tags"})

    # 4. Possible conflicts (the classifier `remember` uses): up to 3 strongest per memory, of any
    # kinds, as `remember` relates them: a fact contradicting a current decision is as stale as a fact.
    per_memory: dict[str, int] = {}
    for a, b, cosine, _ in sorted(edges, key=lambda e: -(e[2] if e[2] is not None else e[3])):
        if a in absorbed or b in absorbed or (a in near.parent and b in near.parent and near.find(a) == near.find(b)) \
                or one_cluster(a, b):
            continue
        older, newer = _order(by_id[a], by_id[b])
        if per_memory.get(a, 0) >= NEIGHBOURS or per_memory.get(b, 0) >= NEIGHBOURS:
            continue
        if staged_of("conflict") >= RUN_CAPS["conflict"]:
            deferred += 1
            continue
        verdict = _classify(engine, older, newer, cosine)
        if verdict.label == "unrelated":
            continue
        per_memory[a] = per_memory.get(a, 0) + 1
        per_memory[b] = per_memory.get(b, 0) + 1
        reason = verdict.reason if older.kind == newer.kind else \
            f"a {newer.kind} that may contradict this {older.kind}: {verdict.reason}"
        payload = {"texts": [older.text, newer.text], "reason": reason, "label": verdict.label,
                   "origin": "maintenance"}
        if cosine is not None:
            payload["similarity"] = round(cosine, 3)
        stage("conflict", [older, newer], payload)

    # 5. Clusters on one subject (same kind): bounded single linkage; Claude drafts the summary in review.
    clusters = _Sets(cap=CLUSTER_MAX)
    strong = [(a, b, c if c is not None else j) for a, b, c, j in edges
              if a not in absorbed and b not in absorbed and by_id[a].kind == by_id[b].kind and not one_cluster(a, b)
              and ((c is not None and c >= CLUSTER_COSINE) or (c is None and j >= 2 * KEYWORD_EDGE_JACCARD))]
    for a, b, _ in sorted(strong, key=lambda e: -e[2]):
        clusters.union(a, b)
    groups = [g for g in clusters.groups() if len(g) >= CLUSTER_MIN]
    for group in sorted(groups, key=lambda g: (-len(g), g[0])):
        if staged_of("summarise") >= RUN_CAPS["summarise"]:
            deferred += 1
            continue
        members = [by_id[i] for i in group]
        stage("summarise", members, {"texts": [m.text for m in members], "draft": None,
                                     "reason": f"{len(members)} {members[0].kind}s on one subject"})

    # 6. Stale, never recalled, low importance: to the cold tier.
    cutoff = now - STALE_DAYS * 86_400_000
    olds = [m for m in live if m.cold_at is None and m.importance <= DEMOTE_MAX_IMPORTANCE and m.recorded_at < cutoff]
    usage = store.usage([m.id for m in olds]) if olds else {}
    for m in olds:
        used = usage.get(m.id)
        if used is None or (not used["injected"] and not used["cited"]):
            if staged_of("demote") >= RUN_CAPS["demote"]:
                deferred += 1
                continue
            stage("demote", [m], {"texts": [m.text], "importance": m.importance,
                                  "reason": f"importance {m.importance}, recorded more than {STALE_DAYS} days ago, "
                                            "never injected by a hook nor cited"})
    return {"scanned": len(memories), "keyword_only": not vectors, "exact": exact, "proposals": proposals,
            "already_reviewed": reviewed, "deferred": deferred}


def maintain(engine: Engine, *, apply: bool = False, safe_only: bool = False) -> dict[str, Any]:
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
    store = _queue_store(engine)
    now = now_ms()
    holder = f"{socket.gethostname()}:{os.getpid()}:{ULID()}"
    if apply:
        held = store.take_lease(LEASE, holder, now, LEASE_TTL_MS)
        if held is not None:
            from .timeutil import format_time

            raise MaintenanceBusy(f"another maintenance run ({held['holder']}) holds store {store.name!r} until "
                                  f"{format_time(held['expires_at'])}; try again later")
    try:
        found = plan(engine, now=now)
        staged_ids: dict[str, str] = {}
        retired = expired = 0
        proposals = found["proposals"] if not safe_only else []
        if apply:
            expired = expire(engine, now=now)
            with store.transaction():
                for canonical, duplicates in found["exact"]:
                    current = store.get(canonical.id)
                    if current.status != "current":
                        continue
                    for dup in duplicates:
                        if store.get(dup.id).status == "current":
                            engine.retire_into([dup.id], canonical.id, at=now)
                            retired += 1
            if proposals:
                written = set(store.add_proposals(proposals))
                staged_ids = {p.id: p.id for p, _ in proposals if p.id in written}
                for p, _ in proposals:
                    if p.id in written and p.type == "near_duplicate" and len(p.source_ids) > 2:
                        _fold(store, p, now)  # the write-time pairs of its members: one proposal
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


def maintenance_status(engine: Engine) -> dict[str, Any]:
    """{"store", "last_run": {"at", "retired", "staged", "safe_only", "seconds"} or None, "stale": no
    run within config maintenance.stale_days, "background": config maintenance.background, "lease":
    the running maintenance's {"holder", "acquired_at", "expires_at"} or None, "queue": {state:
    {type: n}}, "pending": n, "cold": memories in the cold tier}. Reads only."""
    import json

    store = _queue_store(engine)
    now = now_ms()
    raw = store.get_meta("maintenance_last_run")
    last = json.loads(raw) if raw else None
    cfg = engine.config.get("maintenance", {})
    stale_days = cfg.get("stale_days", 7)
    lease = store.lease(LEASE)
    counts = store.proposal_counts()
    return {"store": store.name, "last_run": last,
            "stale": last is None or last["at"] < now - stale_days * 86_400_000,
            "background": bool(cfg.get("background", False)),
            "lease": lease if lease is not None and lease["expires_at"] > now else None,
            "queue": counts, "pending": sum(counts.get("pending", {}).values()), "cold": store.cold_count()}


class Review:
    """The review queue of an engine's project store and its maintenance (`memory.review`): what
    may be wrong with the memories, and the user's verdict on each."""

    def __init__(self, engine: Engine):
        self._engine = engine

    def queue(self, *, states: Iterable[str] = ("pending",), types: Iterable[str] = (),
              limit: int | None = None) -> list[Proposal]:
        """The review queue of the project store, oldest first (review.queue): proposals in `states`
        (PROPOSAL_STATES; default pending) of `types` (PROPOSAL_TYPES; default all). Pending
        proposals older than 30 days, or whose sources changed, become expired first, on either
        backend (SQLite or Postgres). Raises InvalidInput."""
        return queue(self._engine, states=tuple(states), types=tuple(types), limit=limit)

    def show(self, proposal_id: str) -> dict[str, Any]:
        """One proposal with its evidence: {"proposal", "sources" (each memory as it is now), "stale"
        (why it can no longer be applied, or None), "after" (what each verdict would do)}.
        Raises ProposalNotFound."""
        return show(self._engine, proposal_id)

    def decide(self, proposal_id: str, verdict: str, *, text: str | None = None, keep_id: str | None = None,
               tags: Iterable[str] | None = None, by: str = "cli") -> dict[str, Any]:
        """Apply the user's verdict on one proposal (approve | reject | edit; "keep" means reject),
        compare-and-set in one transaction: keep_id chooses the memory that stays, text (edit) the
        one written instead, tags the tags it keeps; see review.decide. Raises InvalidInput,
        ProposalNotFound, ProposalClosed, StaleProposal."""
        return decide(self._engine, proposal_id, verdict, text=text, keep_id=keep_id,
                      tags=None if tags is None else list(tags), by=by)

    def propose(self, text: str, *, kind: str = "fact", tags: Iterable[str] = (), context: str | None = None,
                applies_when: list[str] | None = None, origin: str | None = None,
                paths: Iterable[str] = ()) -> dict[str, Any]:
        """Queue a new memory for the user's approval (an `add` proposal; nothing is stored before),
        with the path scope (`paths`) it gets when approved: see review.propose. Returns {"status":
        "queued" | "pending" | "exists" | "reviewed", "proposal", ...}. Raises InvalidMemory."""
        return propose(self._engine, text, kind=kind, tags=tuple(tags), context=context, applies_when=applies_when,
                       origin=origin, paths=paths)

    def import_guidance(self, path: str | Path | None = None, *, cwd: str | Path | None = None,
                        dry_run: bool = False) -> dict[str, Any]:
        """Split guidance deterministically (guidance.split: headings, bullets, paragraphs) into `add`
        proposals, each with the scope its file gives it (a nested CLAUDE.md / AGENTS.md: its folder;
        Cursor, Claude, Copilot, Windsurf and Cline rules: their globs; guidance.import_tree). path:
        one file, a folder (every guidance file under it: git ls-files inside a repository, vendored
        and build folders left out), or None for the project (the git work tree of `cwd`, default
        the working directory). Nothing is stored before approval. Returns {"root", "files": [per
        file: "file", "format", "paths", "items", "queued", "pending", "exists", "reviewed", "merged",
        "scoped", "skipped", "left_out", "notes", "proposals"], the same counts in total, "private",
        "proposals": [ids], ...; "file" for one file}. dry_run: the same report, nothing queued
        ("queued": what would be). Raises InvalidInput (missing target; one file unreadable, not
        UTF-8 or over 1 MiB)."""
        def propose_(text: str, **options: Any) -> dict[str, Any]:
            return propose(self._engine, text, dry_run=dry_run, **options)

        return {**import_tree(propose_, path, cwd=None if cwd is None else Path(cwd)), "dry_run": dry_run}

    def promote(self, memory_id: str) -> dict[str, Any]:
        """Bring a cold memory back (hooks, default recall and list). Returns {"promoted": id}.
        Raises MemoryNotFound, InvalidInput (not cold)."""
        return promote(self._engine, memory_id)

    def dismiss(self, first_id: str, second_id: str) -> None:
        """Record the user's verdict "keep both" on a pair of memories, so it is not proposed again.
        Raises MemoryNotFound unless both are in one store."""
        self._engine._store_holding(first_id).dismiss_pair(first_id, second_id, now_ms())

    def keep_both(self, memory_id: str, others: Iterable[str]) -> dict[str, Any]:
        """The writer's judgment that the memory `memory_id` changes none of `others` (memories its
        write listed in `related`): both hold, so each pair is recorded as kept (`dismiss`) and the
        session's end (`settle`) and maintenance do not queue it for the user. Nothing is retired.
        Returns {"id", "kept": [the other ids]}. Raises InvalidInput for an id paired with itself,
        MemoryNotFound unless each pair is in one store."""
        kept = []
        for other in dict.fromkeys(others):
            if other == memory_id:
                raise InvalidInput(f"{memory_id} cannot be kept beside itself")
            self.dismiss(memory_id, other)
            kept.append(other)
        return {"id": memory_id, "kept": kept}

    def is_dismissed(self, first_id: str, second_id: str) -> bool:
        """Whether the user kept both memories of this pair (dismiss), in any store."""
        return any(s.is_dismissed(first_id, second_id) for s in self._engine._stores("all"))

    def settle(self, memory_ids: Iterable[str]) -> dict[str, Any]:
        """At the end of the session that wrote `memory_ids` (an engine with defer_review): queue
        for review what their writer left unresolved (review.settle). Returns {"checked": writes
        still current, "queued": [proposal ids]}."""
        return settle(self._engine, list(memory_ids))

    def maintain(self, *, apply: bool = False, safe_only: bool = False) -> dict[str, Any]:
        """One maintenance run over the project store (review.maintain): a dry run unless apply;
        apply retires exact duplicates and, unless safe_only, queues proposals. Never deletes.
        Raises MaintenanceBusy (another run, on any machine, holds the store's lease)."""
        return maintain(self._engine, apply=apply, safe_only=safe_only)

    def status(self) -> dict[str, Any]:
        """The last maintenance run, whether the store is due one, the lease, queue counts by state
        and type, and how many memories are cold (review.maintenance_status). Reads only."""
        return maintenance_status(self._engine)
