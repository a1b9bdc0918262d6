"""SQL both backends read alike: the filters of a read, the current view, time bounds, column lists
and the mappers from rows to records.

Statements here are written with `?` placeholders; a backend whose driver wants another mark
(psycopg's `%s`) converts them with its dialect (base.Dialect.sql).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..models import Memory, NewMemory, Order, Proposal, SessionInfo, Turn
from ..timeutil import END_OF_TIME, now_ms

# A memory row as the mappers read it: these 15 columns in this order (backends may append theirs).
MEMORY_COLUMNS = ("seq, id, text, kind, importance, source, session_id, valid_from, valid_to, recorded_at, "
                  "retired_at, superseded_by, forgotten_at, cold_at, applies_when")
# What a write of a new memory sets, in the order of new_memory_params.
INSERT_COLUMNS = ("id, text, text_key, kind, importance, source, session_id, valid_from, valid_to, "
                  "asserted_valid_to, recorded_at, applies_when")
# What an import sets, in the order of raw_memory_params.
RAW_COLUMNS = ("id, text, text_key, kind, importance, source, session_id, valid_from, valid_to, asserted_valid_to, "
               "recorded_at, retired_at, superseded_by, forgotten_at, cold_at, applies_when")
PROPOSAL_COLUMNS = ("id, type, state, subject, sources, payload, created_at, expires_at, decided_at, decided_by, "
                    "result")
TURN_COLUMNS = "seq, session_id, uuid, position, role, text, at, speaker, git_branch, cwd, meta"
SESSION_COLUMNS = ("session_id, source, title, started_at, ended_at, turn_count, git_branch, cwd, "
                   "transcript_path, skipped, redactions, private_spans")
LIVE_SEQS = "SELECT seq FROM memories WHERE text IS NOT NULL"
ORDER_SQL = {Order.NEWEST: "recorded_at DESC, seq DESC", Order.OLDEST: "recorded_at ASC, seq ASC",
             Order.IMPORTANCE: "importance DESC, recorded_at DESC, seq DESC"}
EXPIRED_RESULT = {"reason": "not reviewed within 30 days"}


def current_sql(alias: str = "", *, unindexed: str = "") -> str:
    """The one SQL definition of "current" (models.STATUSES), with one `?` for now (epoch ms):
    not forgotten, not retired, valid_to not yet passed. Memory.status is the same rule in Python.
    unindexed: "+" on SQLite, to keep its planner from reading the current rows through
    memories_by_retired (see SqlStore.memories); "" elsewhere."""
    m = f"{alias}." if alias else ""
    return f"{m}forgotten_at IS NULL AND {unindexed}{m}retired_at = {END_OF_TIME} AND {m}valid_to > ?"


def time_bounds(since: int | None, until: int | None, *, start: str, end: str) -> tuple[list[str], list[object]]:
    """SQL clauses keeping the rows whose span [start, end] overlaps [since, until) (a point in time:
    start == end), and their parameters. since/until: epoch ms, UTC, or None (unbounded); start/end:
    SQL expressions."""
    clauses: list[str] = []
    params: list[object] = []
    if since is not None:
        clauses.append(f"{end} >= ?")
        params.append(since)
    if until is not None:
        clauses.append(f"{start} < ?")
        params.append(until)
    return clauses, params


def marks(n: int) -> str:
    """`n` placeholders, comma-separated."""
    return ",".join("?" * n)


@dataclass(frozen=True)
class Filters:
    """Which memories a read considers. Times are epoch ms, UTC.

    as_of: valid time; only memories that held at that moment (superseded ones included, since
        their validity ended when they were superseded). None: what is current now.
    known_at: transaction time; the store as it was then (None: now).
    since/until: bounds on valid_from. kinds/tags: any of. include_superseded: with as_of None,
        also superseded and expired memories. Forgotten memories are never returned.
    include_cold: with as_of None, also memories demoted to the cold tier (an as_of read always
        includes them: demotion is not a change in what was true).
    """

    as_of: int | None = None
    known_at: int | None = None
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    since: int | None = None
    until: int | None = None
    include_superseded: bool = False
    include_cold: bool = False

    @property
    def current_only(self) -> bool:
        """The default view: what is current now, with no other filter."""
        return self == Filters()

    def where(self, *, unindexed: str = "") -> tuple[str, list[object]]:
        """SQL boolean over `memories m` (with `?` placeholders) and its parameters. unindexed: as
        current_sql's."""
        known = self.known_at if self.known_at is not None else now_ms()
        clauses = ["m.forgotten_at IS NULL", "m.recorded_at <= ?"]
        params: list[object] = [known]
        # At transaction time `known`, a memory retired later was still believed with the valid
        # time it was first asserted with; a supersession closes valid_to only from then on.
        valid_to = "(CASE WHEN m.retired_at > ? THEN m.asserted_valid_to ELSE m.valid_to END)"
        if self.as_of is not None:
            clauses.append(f"m.valid_from <= ? AND {valid_to} > ?")
            params += [self.as_of, known, self.as_of]
        elif not self.include_superseded and self.known_at is None:
            clauses.append(current_sql("m", unindexed=unindexed))  # the current view
            params.append(known)
        elif not self.include_superseded:
            # What was current at transaction time `known`: the same rule, as the store believed then.
            clauses.append(f"m.retired_at > ? AND {valid_to} > ?")
            params += [known, known, known]
        if self.as_of is None and not self.include_cold:
            clauses.append("m.cold_at IS NULL")
        if self.kinds:
            clauses.append(f"m.kind IN ({marks(len(self.kinds))})")
            params += list(self.kinds)
        if self.tags:
            clauses.append(f"m.seq IN (SELECT seq FROM memory_tags WHERE tag IN ({marks(len(self.tags))}))")
            params += list(self.tags)
        if self.since is not None:
            clauses.append("m.valid_from >= ?")
            params.append(self.since)
        if self.until is not None:
            clauses.append("m.valid_from < ?")
            params.append(self.until)
        return " AND ".join(clauses), params


# -- row mappers ------------------------------------------------------------------------------------
def memory_from_row(row: Sequence[Any], *, tags: tuple[str, ...], applies_when: tuple[str, ...],
                    store: str) -> Memory:
    """A Memory from a row of MEMORY_COLUMNS; tags and applies_when as the backend stores them, decoded."""
    return Memory(id=row[1], text=row[2], kind=row[3], tags=tags, importance=row[4], source=row[5],
                  session_id=row[6], valid_from=row[7], valid_to=Memory.open_end(row[8]), recorded_at=row[9],
                  retired_at=Memory.open_end(row[10]), superseded_by=row[11], forgotten_at=row[12], store=store,
                  cold_at=row[13], applies_when=applies_when)


def proposal_from_row(row: Sequence[Any]) -> Proposal:
    """A Proposal from a row of PROPOSAL_COLUMNS (sources, payload and result are JSON text)."""
    return Proposal(id=row[0], type=row[1], state=row[2], subject=row[3],
                    sources=tuple(json.loads(row[4])), payload=json.loads(row[5]), created_at=row[6],
                    expires_at=row[7], decided_at=row[8], decided_by=row[9],
                    result=None if row[10] is None else json.loads(row[10]))


def turn_from_row(row: Sequence[Any]) -> Turn:
    """A Turn from a row of TURN_COLUMNS."""
    return Turn(session_id=row[1], uuid=row[2], position=row[3], role=row[4], text=row[5], at=row[6],
                speaker=row[7], git_branch=row[8], cwd=row[9], meta=json.loads(row[10] or "{}"))


def session_from_row(row: Sequence[Any]) -> SessionInfo:
    """A SessionInfo from a row of SESSION_COLUMNS."""
    return SessionInfo(session_id=row[0], source=row[1], title=row[2], started_at=row[3], ended_at=row[4],
                       turn_count=row[5], git_branch=row[6], cwd=row[7], transcript_path=row[8],
                       skipped=json.loads(row[9]), redactions=json.loads(row[10]), private_spans=row[11])


def proposal_params(proposal: Proposal, open_key: str) -> tuple[Any, ...]:
    """Parameters of an INSERT of PROPOSAL_COLUMNS then open_key."""
    return (proposal.id, proposal.type, proposal.state, proposal.subject,
            json.dumps(list(proposal.sources), ensure_ascii=False),
            json.dumps(proposal.payload, ensure_ascii=False), proposal.created_at, proposal.expires_at,
            proposal.decided_at, proposal.decided_by, json_or_null(proposal.result), open_key)


def json_or_null(value: object) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def new_memory_params(new: NewMemory, applies: object) -> tuple[Any, ...]:
    """Parameters of an INSERT of INSERT_COLUMNS; applies: applies_when as the backend stores it."""
    return (new.id, new.text, new.text_key, new.kind, new.importance, new.source, new.session_id,
            new.valid_from, new.valid_to, new.valid_to, new.recorded_at, applies)


def raw_memory_params(memory: Memory, text_key: str | None, asserted_valid_to: int, applies: object
                      ) -> tuple[Any, ...]:
    """Parameters of an INSERT of RAW_COLUMNS (an exported memory as it was)."""
    end = END_OF_TIME
    return (memory.id, memory.text, text_key, memory.kind, memory.importance, memory.source, memory.session_id,
            memory.valid_from, memory.valid_to or end, asserted_valid_to, memory.recorded_at,
            memory.retired_at or end, memory.superseded_by, memory.forgotten_at, memory.cold_at, applies)


def import_key(memory: Memory) -> str | None:
    """The text_key an imported memory is stored with while it is current: text.duplicate_key, the one
    definition of "the same memory" that remember and maintenance use."""
    from ..text import duplicate_key

    return duplicate_key(memory.text) if memory.text is not None and memory.retired_at is None else None
