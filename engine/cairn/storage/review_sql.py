"""The review role of the shared store (protocol.ReviewStore): dismissed pairs, the cold tier, the
durable review queue and the maintenance lease, in SQL both backends run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..models import Proposal
from . import sql

if TYPE_CHECKING:
    pass

from .dialect import SqlBase


class ReviewSql(SqlBase):
    """The review role of the shared store (protocol.ReviewStore): dismissed pairs, the cold tier, the"""

    # -- review dismissals ----------------------------------------------------------------------------
    def dismiss_pair(self, first_id: str, second_id: str, at: int) -> None:
        """Record "keep both" for the unordered pair. Raises MemoryNotFound for an unknown id."""
        self.seq_of(first_id), self.seq_of(second_id)
        pair = tuple(sorted((first_id, second_id)))
        with self._one_write():
            self._q("INSERT INTO review_dismissals(first_id, second_id, dismissed_at) VALUES (?, ?, ?) "
                    "ON CONFLICT DO NOTHING", (*pair, at))

    def is_dismissed(self, first_id: str, second_id: str) -> bool:
        pair = tuple(sorted((first_id, second_id)))
        return self._q("SELECT 1 FROM review_dismissals WHERE first_id = ? AND second_id = ?",
                       pair).fetchone() is not None

    def dismissals(self) -> list[tuple[str, str, int]]:
        """Every recorded "keep both" pair: (first_id, second_id, dismissed_at)."""
        return [(r[0], r[1], r[2]) for r in self._q(
            "SELECT first_id, second_id, dismissed_at FROM review_dismissals ORDER BY first_id, second_id")]

    # -- cold tier ------------------------------------------------------------------------------------
    def set_cold(self, memory_id: str, at: int | None) -> bool:
        """Demote a memory to the cold tier at `at` (epoch ms), or bring it back (None). Returns
        whether it changed. Raises MemoryNotFound."""
        self.seq_of(memory_id)
        was = "cold_at IS NULL" if at is not None else "cold_at IS NOT NULL"
        with self.transaction():
            cur = self._q(f"UPDATE memories SET cold_at = ? WHERE id = ? AND {was} AND text IS NOT NULL",
                          (at, memory_id))
        return bool(cur.rowcount == 1)

    def cold_count(self) -> int:
        """Live memories in the cold tier."""
        return int(self._one("SELECT count(*) FROM memories WHERE cold_at IS NOT NULL AND text IS NOT NULL"))

    # -- review queue ---------------------------------------------------------------------------------
    def add_proposals(self, rows: Sequence[tuple[Proposal, str]]) -> list[str]:
        """Queue pending proposals, each with its open_key, in one transaction. One whose open_key is
        already pending (on any machine sharing the store) is skipped. Returns the ids written."""
        added: list[str] = []
        if not rows:
            return added
        with self.transaction():
            for proposal, open_key in rows:
                cur = self._q(f"INSERT INTO proposals ({sql.PROPOSAL_COLUMNS}, open_key) "
                              f"VALUES ({sql.marks(12)}) ON CONFLICT DO NOTHING",
                              sql.proposal_params(proposal, open_key))
                if cur.rowcount == 1:
                    added.append(proposal.id)
        return added

    def proposal(self, proposal_id: str, *, for_update: bool = False) -> Proposal | None:
        """The proposal, or None. for_update: lock its row until the transaction ends, so that a
        second reviewer's decision waits for this one's and then sees it decided (on SQLite the
        decision's BEGIN IMMEDIATE already keeps every other writer out until it ends)."""
        lock = self.dialect.for_update if for_update else ""
        row = self._q(f"SELECT {sql.PROPOSAL_COLUMNS} FROM proposals WHERE id = ?{lock}", (proposal_id,)).fetchone()
        return None if row is None else sql.proposal_from_row(row)

    def proposals(self, *, states: Sequence[str] = (), types: Sequence[str] = (),
                  limit: int | None = None) -> list[Proposal]:
        """Proposals in those states and of those types (all when empty), oldest first."""
        clauses, params = ["1 = 1"], []
        for column, values in (("state", states), ("type", types)):
            if values:
                clause, values_params = self._in(column, values)
                clauses.append(clause)
                params += values_params
        text = f"SELECT {sql.PROPOSAL_COLUMNS} FROM proposals WHERE {' AND '.join(clauses)} ORDER BY created_at, id"
        if limit is not None:
            text += " LIMIT ?"
            params.append(int(limit))
        return [sql.proposal_from_row(r) for r in self._q(text, params).fetchall()]

    def proposal_keys(self, states: Sequence[str]) -> set[str]:
        """open_key of every proposal in those states."""
        where, params = self._in("state", states)
        return {r[0] for r in self._q(f"SELECT open_key FROM proposals WHERE {where}", params)}

    def close_proposal(self, proposal_id: str, *, state: str, at: int, by: str | None,
                       result: dict[str, object] | None, from_state: str = "pending") -> bool:
        """Compare-and-set: move the proposal from `from_state` to `state`. Returns False (nothing
        written) when it was not in `from_state` (another reviewer got there first: under READ
        COMMITTED a concurrent UPDATE of the row waits for the first to commit, then re-checks)."""
        with self._one_write():
            cur = self._q("UPDATE proposals SET state = ?, decided_at = ?, decided_by = ?, result = ? "
                          "WHERE id = ? AND state = ?",
                          (state, at, by, sql.json_or_null(result), proposal_id, from_state))
        return bool(cur.rowcount == 1)

    def expire_proposals(self, now: int) -> int:
        """Pending proposals past their expires_at become expired (silence is never consent). Returns how many."""
        with self._one_write():
            cur = self._q("UPDATE proposals SET state = 'expired', decided_at = ?, result = ? "
                          "WHERE state = 'pending' AND expires_at <= ?", (now, json.dumps(sql.EXPIRED_RESULT), now))
        return int(cur.rowcount)

    def proposal_counts(self) -> dict[str, dict[str, int]]:
        """{state: {type: count}}."""
        out: dict[str, dict[str, int]] = {}
        for state, kind, n in self._q("SELECT state, type, count(*) FROM proposals GROUP BY state, type"):
            out.setdefault(state, {})[kind] = int(n)
        return out

    # -- maintenance lease ----------------------------------------------------------------------------
    def take_lease(self, name: str, holder: str, now: int, ttl_ms: int) -> dict[str, object] | None:
        """Take the lease `name` for `holder` until now + ttl_ms, unless another holder has it
        unexpired: then nothing is written and that holder's row is returned ({"holder",
        "acquired_at", "expires_at"}). None: taken. One upsert: two machines racing for it serialise
        on the row (or on the primary key)."""
        with self.transaction():
            taken = self._q(
                "INSERT INTO leases (name, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, "
                "expires_at = excluded.expires_at WHERE leases.holder = excluded.holder OR leases.expires_at <= ? "
                "RETURNING holder", (name, holder, now, now + ttl_ms, now)).fetchall()
            if taken:
                return None
            return self.lease(name)

    def release_lease(self, name: str, holder: str) -> None:
        with self._one_write():
            self._q("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))

    def lease(self, name: str) -> dict[str, object] | None:
        row = self._q("SELECT holder, acquired_at, expires_at FROM leases WHERE name = ?", (name,)).fetchone()
        return None if row is None else {"holder": row[0], "acquired_at": row[1], "expires_at": row[2]}
