"""The durable review queue: proposals kept in the store until the user decides (approve, reject,
edit; promote for the cold tier), compare-and-set, expiring after 30 days.

Proposals persist in the store (migration m007_review_queue): nothing a proposal names changes
before it is approved. `cairn review list|show|decide|promote`, the MCP tool memory_review (queue,
decide), the REST routes /v1/review/proposals..., the console and /cairn:review-memory are thin
wrappers over these functions, through `memory.review` (review.Review). They read and write the
queue through a ReviewStore (storage.protocol) and memories only through the engine's methods.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, MemoryNotFound, ProposalClosed, ProposalNotFound, StaleProposal
from ..models import DECIDERS, PROPOSAL_STATES, PROPOSAL_TYPES, Memory, Proposal
from ..timeutil import now_ms

if TYPE_CHECKING:
    from ..memories.engine import Engine
    from ..storage.protocol import ReviewStore

QUEUE_TTL_MS = 30 * 86_400_000   # an unreviewed proposal expires after 30 days: silence is never consent
PAIR_TYPES = ("duplicate", "near_duplicate", "conflict")
REVIEW_DECISIONS = ("approve", "reject", "edit", "keep")  # "keep" is the older name of "reject"
MULTI_TYPES = (*("duplicate", "near_duplicate", "conflict"), "summarise")  # proposals where one memory stays


def older_first(a: Memory, b: Memory) -> tuple[Memory, Memory]:
    """The two memories, older first (valid_from, then recorded_at, then id)."""
    return (a, b) if (a.valid_from, a.recorded_at, a.id) <= (b.valid_from, b.recorded_at, b.id) else (b, a)


def stamp(m: Memory) -> str:
    """A memory's version stamp: every field that changes after it is written (retired, forgotten,
    valid_to closed, demoted). A decision compares each source's stamp with the one recorded when
    the proposal was made."""
    return f"{m.retired_at or 0}:{m.forgotten_at or 0}:{m.valid_to or 0}:{m.cold_at or 0}:{m.superseded_by or ''}"


def subject_of(memories: list[Memory]) -> str:
    """What the memories are about, for grouping the review: their most shared tag, else their most
    shared content words, else the first words of the first text."""
    from collections import Counter

    from ..text import content_words

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


def _stale_reason(engine: Engine, proposal: Proposal) -> str | None:
    """Why the proposal can no longer be applied as it was made, or None."""
    for source in proposal.sources:
        try:
            m = engine.get(source["id"])
        except MemoryNotFound:
            return f"memory {source['id']} no longer exists"
        if stamp(m) != source["stamp"] or m.status != "current":
            by = ""
            if m.superseded_by:
                try:
                    by = f" by {m.superseded_by}: \"{engine.get(m.superseded_by).text or '[forgotten]'}\""
                except MemoryNotFound:
                    by = f" by {m.superseded_by}"
            cold = ", demoted to the cold tier" if m.cold_at and m.status == "current" else ""
            return f"memory {m.id} changed since it was proposed (now {m.status}{by}{cold})"
    return None


def expire(engine: Engine, store: ReviewStore, *, now: int | None = None) -> int:
    """Close what can no longer be decided: pending proposals older than 30 days, and those whose
    sources changed (stale). Both become `expired` with the reason in `result`. Returns how many."""
    now = now_ms() if now is None else now
    closed = store.expire_proposals(now)
    for p in store.proposals(states=("pending",)):
        reason = _stale_reason(engine, p)
        if reason is not None and store.close_proposal(p.id, state="expired", at=now, by=None,
                                                       result={"reason": f"stale: {reason}"}):
            closed += 1
    return closed


def queue(engine: Engine, store: ReviewStore, *, states: tuple[str, ...] = ("pending",), types: tuple[str, ...] = (),
          limit: int | None = None) -> list[Proposal]:
    """The review queue, oldest first: proposals in `states` (PROPOSAL_STATES; default pending) of
    `types` (PROPOSAL_TYPES; default all). Expiry is applied first (expire). Raises InvalidInput."""
    for value, allowed, what in ((states, PROPOSAL_STATES, "state"), (types, PROPOSAL_TYPES, "type")):
        for v in value:
            if v not in allowed:
                raise InvalidInput(f"unknown proposal {what} {v!r}; expected one of: {', '.join(allowed)}")
    expire(engine, store)
    return store.proposals(states=states, types=types, limit=limit)


def show(engine: Engine, store: ReviewStore, proposal_id: str) -> dict[str, Any]:
    """One proposal with its evidence: {"proposal", "sources": each source memory as it is now
    (Memory.to_json, or {"id", "missing": true}), "stale": why it can no longer be applied, or
    None, "after": what approving it would do}. Raises ProposalNotFound."""
    store.expire_proposals(now_ms())
    p = store.proposal(proposal_id)
    if p is None:
        raise ProposalNotFound(f"no proposal {proposal_id!r} in store {store.name!r}")
    sources: list[dict[str, Any]] = []
    for s in p.sources:
        try:
            sources.append(engine.get(s["id"]).to_json())
        except MemoryNotFound:
            sources.append({"id": s["id"], "missing": True})
    return {"proposal": p.to_json(), "sources": sources,
            "stale": _stale_reason(engine, p) if p.state == "pending" else None, "after": _after(p)}


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


def _check_verdict(verdict: str, text: str | None, keep_id: str | None, tags: list[str] | tuple[str, ...] | None,
                   by: str) -> str:
    """The verdict as decide applies it ("keep" read as "reject"), once the arguments that go with
    it are checked. Raises InvalidInput."""
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
    return verdict


def _open_proposal(store: ReviewStore, proposal_id: str, verdict: str, keep_id: str | None,
                   tags: list[str] | tuple[str, ...] | None) -> Proposal:
    """The pending proposal a verdict is about, locked for the decision, once the verdict's
    arguments are checked against its type. Raises ProposalNotFound, ProposalClosed, InvalidInput."""
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
    return p


def _reject(store: ReviewStore, p: Proposal, *, now: int, by: str) -> dict[str, Any]:
    """Close a proposal rejected: nothing changes, and a pair is recorded as kept (not proposed again)."""
    ids = p.source_ids
    if p.type in PAIR_TYPES and len(ids) == 2:
        try:
            store.dismiss_pair(ids[0], ids[1], now)
        except MemoryNotFound:
            pass
    if not store.close_proposal(p.id, state="rejected", at=now, by=by, result={"verdict": "reject"}):
        raise ProposalClosed(f"proposal {p.id} was decided meanwhile; nothing was changed")
    return {"proposal": p.id, "type": p.type, "state": "rejected", "verdict": "reject"}


def decide(engine: Engine, store: ReviewStore, proposal_id: str, verdict: str, *, text: str | None = None,
           keep_id: str | None = None, tags: list[str] | tuple[str, ...] | None = None, by: str = "cli"
           ) -> dict[str, Any]:
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
    verdict = _check_verdict(verdict, text, keep_id, tags, by)
    now = now_ms()
    store.expire_proposals(now)
    stale: str | None = None
    # SQLite: BEGIN IMMEDIATE, one decision at a time per store, across processes. Postgres: the
    # proposal's row is locked (SELECT ... FOR UPDATE) until the decision commits; a second reviewer
    # waits, then reads it decided.
    with store.transaction():
        p = _open_proposal(store, proposal_id, verdict, keep_id, tags)
        if verdict == "reject":
            return _reject(store, p, now=now, by=by)
        stale = _stale_reason(engine, p)
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


def _apply(engine: Engine, store: ReviewStore, p: Proposal, text: str | None, keep_id: str | None,
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
    sources = [engine.get(i) for i in ids]
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
    assert text is not None  # the user's, the draft, or a current source's (a current memory has its text)
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
