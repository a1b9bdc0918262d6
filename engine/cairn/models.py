"""The records Cairn hands out: memories, recall hits, and what a write did."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from .text import normalise, passage
from .timeutil import END_OF_TIME, format_date, format_time

# Closed sets, documented in docs/cli.md. A new kind is a schema decision, not a free-form string.
KINDS = ("decision", "convention", "preference", "fact", "task", "insight")
SOURCES = ("user", "agent", "capture", "import", "claude-memory")  # claude-memory: a Claude Code auto-memory file
MAX_TEXT_BYTES = 8 * 1024  # UTF-8 bytes of one memory's text
MAX_APPLIES_WHEN = 4  # applies-when phrases of one memory
MAX_APPLIES_CHARS = 80  # characters of one applies-when phrase ("fixing a flaky test in CI")
IMPORTANCE_RANGE = (1, 5)
DEFAULT_IMPORTANCE = 3
# A memory's status, from its times (Memory.status is the one definition; the store's current view,
# store.Filters, is the same rule in SQL):
#   current     not retired, not forgotten, valid_to not yet passed
#   superseded  retired by a newer memory (superseded_by names it)
#   expired     valid_to has passed, nothing replaced it
#   retired     retired without a successor (only from an imported export that says so)
#   forgotten   erased by `forget`: a tombstone without text
STATUSES = ("current", "superseded", "expired", "retired", "forgotten")
SCOPES = ("project", "global", "all")  # which stores a read covers: this project's, the user's global one, both
# The durable review queue (review/queue.py). A proposal's type: what it would do when approved.
#   duplicate       the same text after normalising case, whitespace and punctuation, but another kind
#   near_duplicate  a restatement (both texts and their similarity): one stays, the other is retired
#   summarise       a cluster on one subject: one summary (drafted by Claude in review) supersedes them
#   demote          a stale, never-recalled, low-importance memory: to the cold tier
#   conflict        a possible contradiction `remember` or maintenance found: the newer replaces the older
#   add             a new memory (import-guidance, memory_review propose): stored only when approved
PROPOSAL_TYPES = ("duplicate", "near_duplicate", "summarise", "demote", "conflict", "add")
# pending -> approved -> applied (the verdict, then what it did, in one transaction) | rejected (kept
# as it is) | expired (30 days unreviewed, or its sources changed: stale).
PROPOSAL_STATES = ("pending", "approved", "rejected", "expired", "applied")
# approve; keep (reject: nothing changes); edit (approve with the user's or Claude's text); promote
# (bring a cold memory back to the warm tier).
REVIEW_VERBS = ("approve", "keep", "edit", "promote")
DECIDERS = ("cli", "mcp", "http")


class Order(str, Enum):
    """How `list` orders memories."""

    NEWEST = "newest"          # recorded_at, newest first
    OLDEST = "oldest"          # recorded_at, oldest first
    IMPORTANCE = "importance"  # importance, then newest first


@dataclass(frozen=True)
class Memory:
    """One stored memory, current, superseded or forgotten (a tombstone, whose text is None).

    Times are epoch milliseconds, UTC. valid_to / retired_at are None while open.
    applies_when: up to MAX_APPLIES_WHEN short phrases naming the tasks in which the memory matters
    ("fixing a flaky test"), written with it; () when none. Indexed for recall with the text.
    valid_from/valid_to: valid time, when the fact holds in the world.
    recorded_at/retired_at: transaction time, when the store learned it and when it stopped
    holding it as current (superseded or forgotten).
    """

    id: str
    text: str | None
    kind: str
    tags: tuple[str, ...]
    importance: int
    source: str
    session_id: str | None
    valid_from: int
    valid_to: int | None
    recorded_at: int
    retired_at: int | None
    superseded_by: str | None
    forgotten_at: int | None
    store: str = ""
    cold_at: int | None = None  # demoted to the cold tier then (epoch ms); None: warm
    applies_when: tuple[str, ...] = ()

    @property
    def cold(self) -> bool:
        """In the cold tier: left out of the hooks and of default recall and list (include_cold, as_of find it)."""
        return self.cold_at is not None

    @property
    def passage(self) -> str:
        """What is embedded and matched for this memory: its text, then its applies-when phrases
        (text.passage); "" for a tombstone."""
        return passage(self.text or "", self.applies_when) if self.text is not None else ""

    @property
    def status(self) -> str:
        """One of STATUSES (see there)."""
        if self.forgotten_at is not None:
            return "forgotten"
        if self.superseded_by is not None:
            return "superseded"
        if self.retired_at is not None:
            return "retired"
        if self.valid_to is not None:
            from .timeutil import now_ms

            if self.valid_to <= now_ms():
                return "expired"
        return "current"

    def to_json(self) -> dict[str, Any]:
        """Stable JSON keys (docs/cli.md): times as epoch ms plus ISO 8601 twins (`*_iso`)."""
        data = asdict(self)
        data["tags"] = list(self.tags)
        data["applies_when"] = list(self.applies_when or ())
        data["status"] = self.status
        for key in ("valid_from", "valid_to", "recorded_at", "retired_at", "forgotten_at", "cold_at"):
            data[f"{key}_iso"] = format_time(data[key])
        return data

    @staticmethod
    def open_end(value: int) -> int | None:
        return None if value >= END_OF_TIME else value


@dataclass(frozen=True)
class Hit:
    """A recall result: the memory, its final score, and why it ranked.

    `reasons` maps each retriever that matched ("bm25", "vector") to its rank (1-based) and raw
    score (BM25 as FTS5 reports it, higher is better; cosine similarity in [-1, 1]), plus the
    fused score and the prior applied.
    """

    memory: Memory
    score: float
    reasons: dict[str, Any]

    def why(self) -> str:
        """The reasons in one line: "bm25 #1, vector #2 cos 0.71"."""
        parts = []
        if "bm25" in self.reasons:
            parts.append(f"bm25 #{self.reasons['bm25']['rank']}")
        if "vector" in self.reasons:
            parts.append(f"vector #{self.reasons['vector']['rank']} cos {self.reasons['vector']['cosine']:.2f}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"memory": self.memory.to_json(), "score": round(self.score, 6), "reasons": self.reasons}


@dataclass(frozen=True)
class RememberResult:
    """What a write did.

    status: "created", or "duplicate" (an identical current memory exists; nothing was written and
    `memory` is that one). superseded: ids this write retired (by --replaces or detection).
    conflicts: similar current memories left untouched, each {"id", "reason"} (and "restatement":
    true when the two say the same thing), for review.
    related: at most 3 current memories of any kind most likely about the same subject, most likely
    first, each {"id", "text", "kind", "date" (valid from, YYYY-MM-DD UTC), "why"}: the writer judges
    whether the new memory changes one of them (then replaces it) or both hold (RELATED_INSTRUCTION).
    redacted: what was taken out of the text as written, so the stored text differs from it: each
    {"field": "text" | "applies_when[N]", "kind": the secret's type, or "<private>" for a removed
    private span, "start", "end"}, character offsets of it in that field as written (end
    exclusive). Never the value. queued: ids of the review proposals the write queued.
    """

    memory: Memory
    status: str
    superseded: list[str] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    related: list[dict[str, str]] = field(default_factory=list)
    redacted: list[dict[str, Any]] = field(default_factory=list)
    # Ids of the review proposals this write queued (none while the writer may still resolve them:
    # Engine.defer_review). Not in to_json: what was queued is read from the queue.
    queued: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "memory": self.memory.to_json(),
            "superseded": self.superseded,
            "conflicts": self.conflicts,
            "related": self.related,
            "redacted": self.redacted,
        }
        if self.related:
            out["instruction"] = RELATED_INSTRUCTION
        return out


# What the writer of a memory does with `related`: the one instruction every adapter shows beside it.
MAX_RELATED = 3  # `related` in a write's answer: at most this many memories, so the writer reads them all
RELATED_INSTRUCTION = ("If the new memory changes one of these, replace it: memory_replace with its id and the new "
                       "text (CLI: cairn remember --replaces ID TEXT). If both still hold, say so with "
                       "memory_keep_both (the new id and theirs); left unjudged, a pair goes to the user's "
                       "review when the session ends.")


@dataclass(frozen=True)
class Status:
    """What `Cairn.status()` reports: which store and why, its counts and size, and how recall runs.

    counts: current (warm), cold, superseded, forgotten, total, awaiting_embedding. bytes: database plus WAL.
    keyword_only: recall uses BM25 alone (keyword_only_reason says why)."""

    store: str
    path: str
    chosen_by: str
    project_root: str | None
    schema_version: int
    counts: dict[str, int]
    bytes: int
    vector_backend: str | None
    embedding_model: str | None
    store_embedding_model: str | None
    model_loaded: bool
    keyword_only: bool
    keyword_only_reason: str | None
    sessions: dict[str, Any] = field(default_factory=dict)  # captured sessions: StoreBackend.session_totals()
    # memories injected by hooks and cited in replies: {"injected_memories", "injections",
    # "cited_memories", "citations"}
    usage: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


SESSION_MODES = ("auto", "keyword", "semantic", "exact", "hybrid")  # how search_sessions searches


@dataclass(frozen=True)
class Turn:
    """One captured conversation turn (a user prompt or an assistant's text), already scrubbed.

    position: 0, 1, ... within its session. at: epoch ms, UTC (None when the source had no time).
    meta: {"tools": [tool names], "files": [file paths]} touched by the assistant around it."""

    session_id: str
    uuid: str
    position: int
    role: str
    text: str
    at: int | None = None
    speaker: str | None = None
    git_branch: str | None = None
    cwd: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "at_iso": format_time(self.at)}


@dataclass(frozen=True)
class SessionHit:
    """A search_sessions result: the ranked turn, its score, how it was found (mode: keyword,
    semantic, hybrid or exact; reasons: per-retriever rank and score), and its context window:
    the turns just before and after it in its session (never ranked themselves)."""

    turn: Turn
    score: float
    mode: str
    reasons: dict[str, Any]
    before: tuple[Turn, ...] = ()
    after: tuple[Turn, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn.to_json(), "score": round(self.score, 6), "mode": self.mode,
                "reasons": self.reasons, "before": [t.to_json() for t in self.before],
                "after": [t.to_json() for t in self.after]}


class SessionHits(list[SessionHit]):  # with the window searched
    """search_sessions' hits, best first (a list of SessionHit), and `time_window`: the date
    window the query named ("last week", "in March 2023", ...; a timewindow.TimeWindow), whose turns
    were ranked first, or None when the query named no time."""

    time_window: Any = None

    def window_json(self) -> dict[str, Any] | None:
        """The time window as {"expression", "since", "until"} (ISO 8601 UTC, until exclusive), or None."""
        return None if self.time_window is None else self.time_window.to_json()


@dataclass(frozen=True)
class SessionInfo:
    """A captured session in the catalog. Times: epoch ms, UTC. title: its first user prompt,
    shortened. skipped: transcript lines left out, by reason; redactions: secrets redacted, by type
    (counts only, never a value); private_spans: `<private>` spans removed."""

    session_id: str
    source: str
    title: str | None
    started_at: int | None
    ended_at: int | None
    turn_count: int
    git_branch: str | None
    cwd: str | None
    transcript_path: str | None
    skipped: dict[str, int]
    redactions: dict[str, int]
    private_spans: int

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "started_at_iso": format_time(self.started_at),
                "ended_at_iso": format_time(self.ended_at)}


@dataclass(frozen=True)
class Proposal:
    """One entry of the review queue. Times: epoch ms, UTC.

    type: one of PROPOSAL_TYPES; state: one of PROPOSAL_STATES. sources: [{"id", "stamp"}], each
    source memory's version stamp when it was proposed (a decision is refused as stale when one
    changed). payload: what the reviewer needs: "texts", "similarity", "reason", "draft" (summarise),
    "text"/"kind"/"tags"/"context"/"applies_when" (add). subject: what it is about, for grouping.
    result: what applying it did, or why it closed (None while pending)."""

    id: str
    type: str
    state: str
    subject: str | None
    sources: tuple[dict[str, str], ...]
    payload: dict[str, Any]
    created_at: int
    expires_at: int
    decided_at: int | None = None
    decided_by: str | None = None
    result: dict[str, Any] | None = None

    @property
    def source_ids(self) -> list[str]:
        """The source memories' ids, in the proposal's order (oldest first for a pair)."""
        return [s["id"] for s in self.sources]

    @property
    def open_key(self) -> str:
        """What makes it the same as another proposal (open_key): its type and sources, or its text."""
        return open_key(self.type, self.source_ids, self.payload.get("text"))

    def to_json(self) -> dict[str, Any]:
        """Stable JSON keys (docs/cli.md): times as epoch ms plus ISO 8601 twins (`*_iso`)."""
        data = asdict(self)
        data["sources"] = [dict(s) for s in self.sources]
        for key in ("created_at", "expires_at", "decided_at"):
            data[f"{key}_iso"] = format_time(data[key])
        return data


def open_key(kind: str, ids: list[str], text: str | None = None) -> str:
    """What makes two proposals the same: their type and source ids (an `add`: its normalised text).
    The store keeps one pending proposal per key."""
    return f"add:{normalise(text or '')}" if kind == "add" else f"{kind}:{','.join(sorted(ids))}"


@dataclass(frozen=True)
class NewMemory:
    """A validated memory about to be inserted: times in epoch ms, UTC; valid_to END_OF_TIME while open."""

    id: str
    text: str
    text_key: str
    kind: str
    tags: tuple[str, ...]
    importance: int
    source: str
    session_id: str | None
    valid_from: int
    valid_to: int
    recorded_at: int
    applies_when: tuple[str, ...] = ()


@dataclass
class TurnDraft:
    """A turn read from a source, before scrubbing and storage. at: epoch ms, UTC, or None."""

    uuid: str
    role: str
    text: str
    at: int | None = None
    speaker: str | None = None
    git_branch: str | None = None
    cwd: str | None = None
    meta: dict[str, list[str]] = field(default_factory=dict)


# -- a captured turn's index key ---------------------------------------------------------------------
# Tuned on LoCoMo conversations 26, 30 and 41 (bench/sessions_locomo.py; docs/benchmarks.md).
NEIGHBOURS = 2  # turns before and after a turn that go into its index key
NEIGHBOUR_CHARS = 300  # of each neighbouring turn, in a turn's index key


def turn_key(turn: TurnDraft, before: list[str], after: list[str]) -> str:
    """What a turn is also found by, besides its text (key expansion): its speaker, its date, and
    the start of the NEIGHBOURS turns just before and after it in its session (nearest last/first)."""
    parts = [turn.speaker or "", format_date(turn.at) if turn.at is not None else ""]
    parts += [text[:NEIGHBOUR_CHARS] for text in before[-NEIGHBOURS:] + after[:NEIGHBOURS]]
    return "\n".join(p for p in parts if p)


def session_keys(turns: list[TurnDraft], first: int) -> list[str]:
    """Index keys of turns[first:], each turn's neighbours taken from `turns` (a session's turns in
    order; those before `first` are context only)."""
    texts = [t.text for t in turns]
    return [turn_key(turns[j], texts[max(0, j - NEIGHBOURS):j], texts[j + 1:j + 1 + NEIGHBOURS])
            for j in range(first, len(turns))]
