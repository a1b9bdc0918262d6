"""What both store backends do alike, written once over a `Dialect`.

`SqlStore` holds every method whose SQL is the same on SQLite and Postgres once placeholders
(`?` / `%s`), lists of values (`IN (?, ?)` / `= ANY(%s)`), row locks (`FOR UPDATE` on Postgres,
where a SQLite write transaction already excludes every other writer) and a few functions are
named by the dialect. The backends (sqlite.SqliteStore, postgres.PgStore) add what differs: how
a store is opened, the keyword index (FTS5 / tsvector), the vector index (sqlite-vec or numpy /
pgvector), and the hooks below (`_memories`, `_applies`, `_erase_index`, `_turn_index_insert` ...).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import MemoryNotFound, StoreError
from ..models import Memory, Order, Proposal, SessionInfo, Turn
from ..text import forgotten_subject, passage, without_text
from ..timeutil import END_OF_TIME, now_ms
from . import sql
from .sql import Filters

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")


@dataclass(frozen=True)
class Dialect:
    """What tells one backend's SQL from the other's.

    mark: the driver's placeholder. chunk: how many values one `IN (...)` list may hold (SQLite's
    default variable limit was 999); None: a whole list is one array parameter. for_update: the
    row-lock clause of a read inside a write. least/greatest: the two-argument min/max functions.
    defer: the statement that checks references (superseded_by) at commit until the transaction ends.
    """

    name: str
    mark: str
    chunk: int | None
    for_update: str
    least: str
    greatest: str
    instr: str  # position of a substring: instr(hay, needle) / strpos(hay, needle)
    defer: str

    def sql(self, text: str) -> str:
        """`text` written with `?` placeholders, in this dialect's (the shared SQL has no literal `?` or `%`)."""
        if self.mark == "?":
            return text
        assert "%" not in text, text
        return text.replace("?", self.mark)

    def in_list(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """`column` is one of `values`: (SQL with `?`, its parameters)."""
        if self.chunk is None:
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({sql.marks(len(values))})", list(values)


SQLITE = Dialect(name="sqlite", mark="?", chunk=500, for_update="", least="min", greatest="max", instr="instr",
                 defer="PRAGMA defer_foreign_keys = ON")  # reset by SQLite at commit
POSTGRES = Dialect(name="postgres", mark="%s", chunk=None, for_update=" FOR UPDATE", least="least",
                   greatest="greatest", instr="strpos",
                   defer="SET CONSTRAINTS ALL DEFERRED")  # superseded_by is DEFERRABLE; lasts to commit


class SqlStore:
    """The methods both backends share. Subclasses set `dialect`, `conn`, `name`, `vector_index`,
    `turn_index` and `vector_unavailable`, and implement the hooks that raise NotImplementedError."""

    dialect: ClassVar[Dialect]
    conn: Any
    name: str
    vector_index: Any
    turn_index: Any
    vector_unavailable: str | None

    # -- plumbing -------------------------------------------------------------------------------------
    def _q(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run `text` (written with `?`) with `params`; the driver's cursor."""
        return self.conn.execute(self.dialect.sql(text), params)

    def _one(self, text: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row of `text`."""
        return self._q(text, params).fetchone()[0]

    def _chunks(self, values: Sequence[T]) -> Iterator[list[T]]:
        """`values` in lists short enough for one `in_list` each (one list on Postgres)."""
        step = self.dialect.chunk or max(len(values), 1)
        for start in range(0, len(values), step):
            yield list(values[start : start + step])

    def _in(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        return self.dialect.in_list(column, values)

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _one_write(self) -> contextlib.AbstractContextManager[Any]:
        """Around a write of one statement: SQLite takes its write lock up front (BEGIN IMMEDIATE);
        on Postgres the statement is its own transaction."""
        raise NotImplementedError

    # -- hooks a backend implements -------------------------------------------------------------------
    def _memory_columns(self, alias: str = "memories") -> str:
        """The select list `_memories` reads (sql.MEMORY_COLUMNS, and what the backend adds)."""
        raise NotImplementedError

    def _memories(self, rows: Sequence[Sequence[Any]]) -> list[Memory]:
        raise NotImplementedError

    def _applies(self, value: Any) -> tuple[str, ...]:
        """applies_when as the backend stores it, decoded (none: ())."""
        raise NotImplementedError

    def put_vector(self, seq: int, vector: np.ndarray | None, *, fresh: bool = False, wait: bool = False) -> None:
        raise NotImplementedError

    def insert_raw(self, memory: Memory, text_key: str | None, asserted_valid_to: int) -> int:
        raise NotImplementedError

    def _erase_index(self, seq: int) -> None:
        """Remove memory `seq`'s keyword index entry (inside the forget's transaction)."""
        raise NotImplementedError

    def _erased(self, table: str) -> None:
        """A forget removed rows of `table` (Postgres vacuums those at flush_to_disk)."""

    def _ensure_vector_table(self, index: Any, dim: int) -> None:
        """Create `index`'s table for vectors of `dim` floats unless it exists."""
        raise NotImplementedError

    def _vectors_dropped(self, index: Any) -> None:
        """`index`'s table was dropped (inside a transaction that recreates it or not)."""

    def _turn_index_insert(self, text: str, key: str) -> tuple[str, str, tuple[Any, ...]]:
        """What a new turn's INSERT adds for its keyword entry: (", columns", ", values", parameters)."""
        raise NotImplementedError

    def _index_turn(self, seq: int, text: str, key: str, *, new: bool) -> None:
        """Write turn `seq`'s keyword entry after its INSERT (new) or when its index key changes."""
        raise NotImplementedError

    # -- meta -----------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self._q("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _put_meta(self, key: str, value: str) -> None:
        self._q("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value))

    def set_meta(self, key: str, value: str) -> None:
        with self._one_write():
            self._put_meta(key, value)

    def _record_meta(self, meta: dict[str, str]) -> None:
        """Record created_at, name and `meta`, each unless the store holds it already."""
        with self.transaction():
            for key, value in {"created_at": str(now_ms()), "name": self.name, **meta}.items():
                self._q("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT DO NOTHING", (key, value))

    # -- reads ----------------------------------------------------------------------------------------
    def _memory_where(self, where: str, params: Sequence[Any], *, lock: bool = False) -> Memory | None:
        lock_sql = self.dialect.for_update if lock else ""
        row = self._q(f"SELECT {self._memory_columns()} FROM memories WHERE {where}{lock_sql}", params).fetchone()
        return self._memories([row])[0] if row else None

    def _not_found(self, memory_id: str) -> MemoryNotFound:
        return MemoryNotFound(f"no memory {memory_id!r} in store {self.name!r}")

    def get(self, memory_id: str) -> Memory:
        """The memory with that id (tombstones included). Raises MemoryNotFound."""
        found = self._memory_where("id = ?", (memory_id,))
        if found is None:
            raise self._not_found(memory_id)
        return found

    def get_for_update(self, memory_id: str) -> Memory:
        """As get, inside a write transaction, so that the row cannot change before it commits: on
        Postgres its row is locked (another writer's supersession or forget of it waits, then sees
        this one's); on SQLite the write transaction already holds the file's write lock. Raises
        MemoryNotFound."""
        found = self._memory_where("id = ?", (memory_id,), lock=True)
        if found is None:
            raise self._not_found(memory_id)
        return found

    def seq_of(self, memory_id: str) -> int:
        row = self._q("SELECT seq FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            raise self._not_found(memory_id)
        return int(row[0])

    def seqs_of(self, memory_ids: Sequence[str]) -> dict[str, int]:
        """{id: seq} for those of `memory_ids` the store holds."""
        out: dict[str, int] = {}
        for chunk in self._chunks(memory_ids):
            where, params = self._in("id", chunk)
            out.update(self._q(f"SELECT id, seq FROM memories WHERE {where}", params).fetchall())
        return out

    def by_seqs(self, seqs: Sequence[int]) -> dict[int, Memory]:
        out: dict[int, Memory] = {}
        for chunk in self._chunks(seqs):
            where, params = self._in("seq", chunk)
            rows = self._q(f"SELECT {self._memory_columns()} FROM memories WHERE {where}", params).fetchall()
            out.update({row[0]: memory for row, memory in zip(rows, self._memories(rows))})
        return out

    def current_by_text_key(self, text_key: str) -> Memory | None:
        return self._memory_where("text_key = ? AND retired_at = ?", (text_key, END_OF_TIME))

    def memories(self, filters: Filters, *, limit: int | None = None, order: Order = Order.NEWEST) -> list[Memory]:
        """The memories `filters` keeps, in `order`, at most `limit` (None: all)."""
        # In time order, SQLite reads memories_by_recorded backwards and stops at `limit` once
        # its planner is kept off memories_by_retired (which walks every current row, then sorts):
        # 22 -> 1.2 ms for the newest 534 of 10,000, what a session brief reads.
        by_importance = Order(order) == Order.IMPORTANCE
        where, params = filters.where(unindexed="" if by_importance else self._UNINDEXED)
        order_by = sql.ORDER_SQL[Order(order)]
        columns = self._memory_columns("m")
        if limit is not None and by_importance:
            # No index serves this order, so every row the filters keep is sorted: sorting their seqs
            # and then reading the `limit` rows carries a few integers a row through the sorter
            # rather than the whole memory (25 -> 10 ms for the top 534 of 10,000 on SQLite).
            text = (f"SELECT {columns} FROM memories m WHERE m.seq IN (SELECT m.seq FROM memories m WHERE {where} "
                    f"ORDER BY {order_by} LIMIT ?) ORDER BY {order_by}")
            return self._memories(self._q(text, [*params, int(limit)]).fetchall())
        text = f"SELECT {columns} FROM memories m WHERE {where} ORDER BY {order_by}"
        if limit is not None:
            text += " LIMIT ?"
            params.append(int(limit))
        return self._memories(self._q(text, params).fetchall())

    # `+retired_at` on SQLite: else its planner walks every current row through memories_by_retired
    # (24 ms at 100k) to count the expired ones.
    _NOT_RETIRED = "retired_at"
    _UNINDEXED = ""  # "+" on SQLite: sql.current_sql's `unindexed`

    def not_current_count(self) -> int:
        """Live memories (with text) outside the current view: superseded, expired or cold (an upper
        bound when a cold one is also superseded). Three index range scans."""
        end = END_OF_TIME
        return int(self._one(
            f"SELECT (SELECT count(*) FROM memories WHERE retired_at < {end} AND text IS NOT NULL)"
            f" + (SELECT count(*) FROM memories WHERE valid_to <= ? AND {self._NOT_RETIRED} = {end} "
            "AND text IS NOT NULL)"
            # Cold memories are outside the default view too (memories_cold; one counted twice only widens the search).
            " + (SELECT count(*) FROM memories WHERE cold_at IS NOT NULL AND text IS NOT NULL)", (now_ms(),)))

    def chain_ids(self, memory_id: str) -> list[str]:
        """Ids of the supersession chain through `memory_id`, oldest first."""
        self.seq_of(memory_id)
        back = self._q(
            """WITH RECURSIVE up(id, depth) AS (
                   SELECT CAST(? AS TEXT), 0
                   UNION SELECT m.id, up.depth + 1 FROM memories m JOIN up ON m.superseded_by = up.id
                   WHERE up.depth < 10000)
               SELECT id FROM up ORDER BY depth DESC""", (memory_id,)).fetchall()
        forward = self._q(
            """WITH RECURSIVE down(id, depth) AS (
                   SELECT superseded_by, 1 FROM memories WHERE id = ? AND superseded_by IS NOT NULL
                   UNION SELECT m.superseded_by, down.depth + 1 FROM memories m JOIN down ON m.id = down.id
                   WHERE m.superseded_by IS NOT NULL AND down.depth < 10000)
               SELECT id FROM down ORDER BY depth""", (memory_id,)).fetchall()
        # A memory may have several predecessors (two facts merged into one); keep all, in order.
        return list(dict.fromkeys([r[0] for r in back] + [r[0] for r in forward]))

    def counts(self) -> dict[str, int]:
        """{"current": current and warm (what the hooks and default recall see), "cold": current but
        demoted to the cold tier, "superseded", "forgotten", "total" (every row), "awaiting_embedding"}."""
        now = now_ms()
        row = self._q(
            f"""SELECT count(*) FILTER (WHERE {sql.current_sql()} AND cold_at IS NULL),
                       count(*) FILTER (WHERE {sql.current_sql()} AND cold_at IS NOT NULL),
                       count(*) FILTER (WHERE superseded_by IS NOT NULL AND forgotten_at IS NULL),
                       count(*) FILTER (WHERE forgotten_at IS NOT NULL),
                       count(*)
                FROM memories""", (now, now)).fetchone()
        backlog = self._one("SELECT count(*) FROM vector_backlog")
        return {"current": int(row[0]), "cold": int(row[1]), "superseded": int(row[2]), "forgotten": int(row[3]),
                "total": int(row[4]), "awaiting_embedding": int(backlog)}

    def current_kinds_and_tags(self, tag_limit: int) -> tuple[dict[str, int], list[tuple[str, int]]]:
        """Current (warm) memories per kind, and the `tag_limit` most used tags of current memories
        with their counts (most used first, then by name). Cold memories are left out, as the hooks do."""
        now = now_ms()
        kinds = dict(self._q(
            f"SELECT kind, count(*) FROM memories m WHERE {sql.current_sql('m')} AND m.cold_at IS NULL GROUP BY kind",
            (now,)).fetchall())
        # CROSS JOIN: from the tags to their memories. Without statistics SQLite's planner starts
        # from memories_by_retired, which at 10,000 memories walks every current row (4 ms; 0.04 ms
        # this way round). Postgres plans it as the inner join it is.
        tags = self._q(
            f"SELECT t.tag, count(*) AS n FROM memory_tags t CROSS JOIN memories m WHERE m.seq = t.seq "
            f"AND {sql.current_sql('m')} AND m.cold_at IS NULL GROUP BY t.tag ORDER BY n DESC, t.tag LIMIT ?",
            (now, int(tag_limit))).fetchall()
        return kinds, [(tag, n) for tag, n in tags]

    def backlog(self, limit: int) -> list[tuple[int, str]]:
        """(seq, passage) of memories awaiting a vector, oldest first: the passage (Memory.passage)
        is what is embedded."""
        rows = self._q("SELECT b.seq, m.text, m.applies_when FROM vector_backlog b JOIN memories m ON m.seq = b.seq "
                       "WHERE m.text IS NOT NULL ORDER BY b.seq LIMIT ?", (int(limit),)).fetchall()
        return [(seq, passage(text, self._applies(applies))) for seq, text, applies in rows]

    def all_text_seqs(self) -> list[tuple[int, str]]:
        """(seq, passage) of every live memory: what is embedded."""
        rows = self._q("SELECT seq, text, applies_when FROM memories WHERE text IS NOT NULL ORDER BY seq").fetchall()
        return [(seq, passage(text, self._applies(applies))) for seq, text, applies in rows]

    def asserted_valid_to(self, seq: int) -> int:
        return int(self._one("SELECT asserted_valid_to FROM memories WHERE seq = ?", (seq,)))

    # -- writes (inside transaction()) ----------------------------------------------------------------
    def defer_references(self) -> None:
        """Check references (superseded_by) at commit, not per statement, until this transaction
        ends: a memory may then be retired by one inserted after it."""
        self._q(self.dialect.defer, ())

    def supersede(self, old_seq: int, new_id: str | None, at: int, valid_until: int) -> bool:
        """Retire `old_seq` at transaction time `at`, its validity ending at `valid_until`, superseded
        by `new_id` (None: retired with no successor). The row
        is read under the write's lock first; returns False (and changes nothing) when another
        writer retired or forgot it meanwhile."""
        row = self._q(f"SELECT retired_at, forgotten_at FROM memories WHERE seq = ?{self.dialect.for_update}",
                      (old_seq,)).fetchone()
        if row is None or row[0] != END_OF_TIME or row[1] is not None:
            return False
        d = self.dialect
        self._q(f"UPDATE memories SET retired_at = ?, superseded_by = ?, "
                f"valid_to = {d.greatest}(valid_from + 1, {d.least}(valid_to, ?)) WHERE seq = ?",
                (at, new_id, valid_until, old_seq))
        return True

    def erase(self, seq: int, at: int) -> None:
        """Forget: text, tags, keyword entry and vector gone; the row stays as a tombstone. Review
        proposals that carry the text lose it too (_forget_in_proposals)."""
        row = self._q(f"SELECT id, text FROM memories WHERE seq = ?{self.dialect.for_update}", (seq,)).fetchone()
        if row is not None and row[1] is not None and self._forget_in_proposals(row[0], row[1], at):
            self._erased("proposals")
        self._erase_index(seq)
        self._q(f"UPDATE memories SET text = NULL, text_key = NULL, applies_when = NULL, forgotten_at = ?, "
                f"retired_at = {self.dialect.least}(retired_at, ?) WHERE seq = ?", (at, at, seq))
        self._erased("memories")
        if self._q("DELETE FROM memory_tags WHERE seq = ?", (seq,)).rowcount:
            self._erased("memory_tags")
        if row is not None:
            self._q("DELETE FROM memory_scopes WHERE memory_id = ?", (row[0],))
        self._q("DELETE FROM vector_backlog WHERE seq = ?", (seq,))
        index = self.vector_index
        if index is not None and self._vectors_exist(index) and index.delete(self.conn, seq):
            self._erased(index.table)

    def _vectors_exist(self, index: Any) -> bool:
        """Whether `index`'s table exists."""
        return bool(index.exists(self.conn))

    def _forget_in_proposals(self, memory_id: str, text: str, at: int) -> int:
        """Every proposal with `memory_id` among its sources loses the memory's `text` (replaced by
        "[forgotten]" in its subject, payload and result), and a pending one expires: nothing is left
        to decide on. Inside the forget's transaction. Returns how many changed."""
        changed = 0
        rows = self._q(f"SELECT {sql.PROPOSAL_COLUMNS} FROM proposals WHERE sources LIKE ?",
                       (f'%"{memory_id}"%',)).fetchall()
        for p in map(sql.proposal_from_row, rows):
            if memory_id not in p.source_ids:
                continue
            pending = p.state == "pending"
            result = {"reason": "a source memory was forgotten"} if pending else without_text(p.result, text)
            self._q("UPDATE proposals SET subject = ?, payload = ?, result = ?, state = ?, decided_at = ? WHERE id = ?",
                    (forgotten_subject(p.subject, text), json.dumps(without_text(p.payload, text), ensure_ascii=False),
                     sql.json_or_null(result), "expired" if pending else p.state, at if pending else p.decided_at,
                     p.id))
            changed += 1
        return changed

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

    # -- bulk: export, import, embedding --------------------------------------------------------------
    def iter_rows(self, batch: int = 500) -> Iterator[tuple[Memory, int]]:
        """Every memory, tombstones included, oldest first, with its asserted_valid_to (epoch ms)."""
        seqs = [r[0] for r in self._q("SELECT seq FROM memories ORDER BY seq")]
        for start in range(0, len(seqs), batch):
            chunk = seqs[start : start + batch]
            by_seq = self.by_seqs(chunk)
            where, params = self._in("seq", chunk)
            asserted = dict(self._q(f"SELECT seq, asserted_valid_to FROM memories WHERE {where}", params).fetchall())
            for seq in chunk:
                yield by_seq[seq], asserted[seq]

    def _import_each(self, records: Sequence[tuple[Memory, int]]) -> tuple[int, int]:
        """import_rows one record at a time, inside the caller's transaction: (imported, skipped).
        A memory whose id exists, or a live one whose text is already current, is skipped."""
        imported = skipped = 0
        for memory, asserted in records:
            key = sql.import_key(memory)
            if self._q("SELECT 1 FROM memories WHERE id = ?", (memory.id,)).fetchone() or (
                    key is not None and self.current_by_text_key(key) is not None):
                skipped += 1
                continue
            self._insert_imported(memory, key, asserted)
            imported += 1
        return imported, skipped

    def _insert_imported(self, memory: Memory, key: str | None, asserted: int) -> None:
        """insert_raw for an import. Raises InvalidImport naming the memory when it breaks a constraint."""
        raise NotImplementedError

    def _fill_backlog_each(self, vectors: dict[int, Any]) -> int:
        """Store vectors for memories still in the backlog (locked on Postgres, so one forgotten
        meanwhile on another machine is never given a vector back). Returns how many were stored."""
        stored = 0
        with self.transaction():
            alive = {s for (s,) in self._q(f"SELECT seq FROM vector_backlog{self.dialect.for_update}")}
            for seq, vector in vectors.items():
                if seq in alive:
                    self.put_vector(seq, vector, wait=True)
                    stored += 1
        return stored

    def replace_vectors(self, vectors: dict[int, Any], *, model_name: str, fingerprint: str) -> None:
        """Drop the vector index and rebuild it from `vectors` (seq -> float32[dim]); live memories
        missing from it (written meanwhile by another process) wait in the backlog. Records the model.
        Raises StoreError when this store has no vector index."""
        index = self.vector_index
        if index is None:
            raise StoreError(self.vector_unavailable or "no vector index available")
        with self.transaction():
            index.drop(self.conn)
            self._vectors_dropped(index)
            self._q("DELETE FROM vector_backlog")
            for seq, vector in vectors.items():
                self.put_vector(seq, vector, wait=True)
            for (seq,) in self._q(sql.LIVE_SEQS).fetchall():
                if seq not in vectors:
                    self.put_vector(seq, None)
            self._put_meta("embedding_model", model_name)
            self._put_meta("embedding_fingerprint", fingerprint)

    # -- memory usage (injections by hooks, citations in replies) -------------------------------------
    def record_usage(self, memory_ids: Sequence[str], *, column: str, at: int) -> int:
        """Add one injection (column "injected") or citation ("cited") at `at` (epoch ms) to each of
        `memory_ids` that names a memory of this store; returns how many were counted."""
        if column not in ("injected", "cited"):
            raise ValueError(column)
        counted = 0
        with self.transaction():
            for memory_id in dict.fromkeys(memory_ids):
                if self._q("SELECT 1 FROM memories WHERE id = ?", (memory_id,)).fetchone() is None:
                    continue
                self._q(f"INSERT INTO memory_usage (memory_id, {column}, last_{column}_at) VALUES (?, 1, ?) "
                        f"ON CONFLICT (memory_id) DO UPDATE SET {column} = memory_usage.{column} + 1, "
                        f"last_{column}_at = excluded.last_{column}_at", (memory_id, at))
                counted += 1
        return counted

    def usage(self, memory_ids: Sequence[str]) -> dict[str, dict[str, int | None]]:
        """{memory_id: {"injected", "cited", "last_injected_at", "last_cited_at"}} for the ids that
        were ever injected or cited."""
        out: dict[str, dict[str, int | None]] = {}
        for chunk in self._chunks(memory_ids):
            where, params = self._in("memory_id", chunk)
            for r in self._q("SELECT memory_id, injected, cited, last_injected_at, last_cited_at FROM memory_usage "
                             f"WHERE {where}", params):
                out[r[0]] = {"injected": r[1], "cited": r[2], "last_injected_at": r[3], "last_cited_at": r[4]}
        return out

    def usage_totals(self) -> dict[str, int]:
        """{"injected_memories", "injections", "cited_memories", "citations"} over the store."""
        row = self._q("SELECT count(*) FILTER (WHERE injected > 0), coalesce(sum(injected), 0), "
                      "count(*) FILTER (WHERE cited > 0), coalesce(sum(cited), 0) FROM memory_usage").fetchone()
        return {"injected_memories": int(row[0]), "injections": int(row[1]), "cited_memories": int(row[2]),
                "citations": int(row[3])}

    def most_cited(self, limit: int) -> list[str]:
        """Ids of the `limit` memories cited most often (then most recently), any status."""
        return [r[0] for r in self._q(
            "SELECT memory_id FROM memory_usage WHERE cited > 0 ORDER BY cited DESC, last_cited_at DESC LIMIT ?",
            (int(limit),)).fetchall()]

    def reset_usage(self, memory_ids: Sequence[str] | None) -> int:
        """Forget the injection and citation counts of `memory_ids` (None: of every memory); returns
        how many memories had counts."""
        with self.transaction():
            if memory_ids is None:
                return int(self._q("DELETE FROM memory_usage").rowcount)
            return sum(int(self._q("DELETE FROM memory_usage WHERE memory_id = ?", (i,)).rowcount)
                       for i in dict.fromkeys(memory_ids))

    # -- path and command scopes, and what sessions touched (scopes.py) -----------------------------
    def put_scopes(self, memory_id: str, rows: Sequence[tuple[str, str, str, float]], at: int) -> int:
        """Add or update scopes of `memory_id`: rows of (pattern, prefix, origin, weight); an existing
        (memory_id, pattern) takes the row's origin, weight and `at` (epoch ms). Returns how many."""
        with self.transaction():
            for pattern, prefix, origin, weight in rows:
                self._q("INSERT INTO memory_scopes (memory_id, pattern, prefix, origin, weight, updated_at) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (memory_id, pattern) DO UPDATE SET "
                        "prefix = excluded.prefix, origin = excluded.origin, weight = excluded.weight, "
                        "updated_at = excluded.updated_at", (memory_id, pattern, prefix, origin, float(weight), at))
        return len(rows)

    def delete_scopes(self, memory_ids: Sequence[str] | None, *, origin: str | None = None,
                      patterns: Sequence[str] = ()) -> int:
        """Remove scopes: of `memory_ids` (None: of every memory), only of `origin` when given, only
        `patterns` when given. Returns how many rows went."""
        where, params = [], []  # type: list[str], list[object]
        if origin is not None:
            where.append("origin = ?")
            params.append(origin)
        if patterns:
            clause, values = self._in("pattern", list(patterns))
            where.append(clause)
            params += values
        removed = 0
        with self.transaction():
            if memory_ids is None:
                sql_text = "DELETE FROM memory_scopes" + (" WHERE " + " AND ".join(where) if where else "")
                return int(self._q(sql_text, params).rowcount)
            for chunk in self._chunks(list(dict.fromkeys(memory_ids))):
                clause, values = self._in("memory_id", chunk)
                removed += int(self._q("DELETE FROM memory_scopes WHERE " + " AND ".join([clause, *where]),
                                       [*values, *params]).rowcount)
        return removed

    def scopes_of(self, memory_ids: Sequence[str]) -> dict[str, list[tuple[str, str, float, int]]]:
        """{memory_id: [(pattern, origin, weight, updated_at), ...]} for the ids with scopes,
        given ones first, then by weight."""
        out: dict[str, list[tuple[str, str, float, int]]] = {}
        for chunk in self._chunks(list(dict.fromkeys(memory_ids))):
            clause, values = self._in("memory_id", chunk)
            for r in self._q("SELECT memory_id, pattern, origin, weight, updated_at FROM memory_scopes "
                             f"WHERE {clause} ORDER BY memory_id, origin, weight DESC, pattern", values):
                out.setdefault(r[0], []).append((r[1], r[2], float(r[3]), int(r[4])))
        return out

    def scoped_candidates(self, prefixes: Sequence[str]) -> list[tuple[str, str, str, float, int]]:
        """Scopes whose literal prefix is one of `prefixes` (a path's ancestors, "" for the root's
        globs, "cmd:NAME" for a command), of current warm memories only: rows of (memory_id,
        pattern, origin, weight, updated_at)."""
        if not prefixes:
            return []
        clause, values = self._in("s.prefix", list(dict.fromkeys(prefixes)))
        # CROSS JOIN: from memory_scopes_by_prefix to each row's memory. Left to itself SQLite's
        # planner (no statistics) walks every current memory and looks up its scopes: 11 ms a tool
        # call at 10,000 memories against 0.1 ms this way round. Postgres plans it as an inner join.
        return [(r[0], r[1], r[2], float(r[3]), int(r[4])) for r in self._q(
            "SELECT s.memory_id, s.pattern, s.origin, s.weight, s.updated_at FROM memory_scopes s CROSS JOIN "
            f"memories m WHERE m.id = s.memory_id AND {clause} AND m.cold_at IS NULL AND {sql.current_sql('m')}",
            [*values, now_ms()])]

    def scoped_count(self) -> int:
        """How many current memories have at least one scope."""
        # CROSS JOIN, as in scoped_candidates: the scopes' rows, each with its memory (5.8 -> 3.7 ms
        # at 10,000 memories, a third of them scoped, on SQLite).
        return int(self._one("SELECT count(DISTINCT s.memory_id) FROM memory_scopes s CROSS JOIN memories m "
                             f"WHERE m.id = s.memory_id AND {sql.current_sql('m')}", (now_ms(),)))

    def scope_counts(self) -> dict[str, int]:
        """{origin: rows} over the store's scopes."""
        return {str(r[0]): int(r[1]) for r in self._q("SELECT origin, count(*) FROM memory_scopes GROUP BY origin")}

    def record_touches(self, session_id: str, touches: Sequence[tuple[str, str]], at: int, *, keep: int) -> int:
        """Count each (path, action) as touched by `session_id` at `at` (epoch ms); the session keeps
        its `keep` most recent rows. Returns how many rows were written."""
        with self.transaction():
            for path, action in touches:
                self._q("INSERT INTO session_touches (session_id, path, action, n, first_at, last_at) "
                        "VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT (session_id, path, action) DO UPDATE SET "
                        "n = session_touches.n + 1, last_at = excluded.last_at", (session_id, path, action, at, at))
            if self._one("SELECT count(*) FROM session_touches WHERE session_id = ?", (session_id,)) > keep:
                cutoff = self._q("SELECT last_at FROM session_touches WHERE session_id = ? ORDER BY last_at DESC "
                                 "LIMIT 1 OFFSET ?", (session_id, keep)).fetchone()
                if cutoff is not None:
                    self._q("DELETE FROM session_touches WHERE session_id = ? AND last_at <= ?",
                            (session_id, cutoff[0]))
        return len(touches)

    def session_touches(self, session_id: str, limit: int) -> list[tuple[str, str, int, int, int]]:
        """What `session_id` touched, most recent first: rows of (path, action, n, first_at, last_at)."""
        return [(r[0], r[1], int(r[2]), int(r[3]), int(r[4])) for r in self._q(
            "SELECT path, action, n, first_at, last_at FROM session_touches WHERE session_id = ? "
            "ORDER BY last_at DESC, path LIMIT ?", (session_id, int(limit)))]

    def recent_touches(self, limit: int, *, exclude_session: str = "") -> list[tuple[str, str, int]]:
        """The paths the store's sessions touched most recently, other than `exclude_session`'s:
        rows of (path, action, last_at), one per (path, action), newest first, at most `limit`."""
        out: dict[tuple[str, str], int] = {}
        # Newest rows first by the last_at index (m013); a path touched in several sessions has a row
        # in each, so read a few times `limit` rows to find `limit` distinct ones.
        for path, action, at in self._q("SELECT path, action, last_at FROM session_touches WHERE session_id <> ? "
                                        "ORDER BY last_at DESC LIMIT ?", (exclude_session, int(limit) * 4)):
            out.setdefault((path, action), int(at))
        return [(path, action, at) for (path, action), at in list(out.items())[:limit]]

    def prune_touches(self, before: int) -> int:
        """Drop touches last seen before `before` (epoch ms); returns how many rows went."""
        with self.transaction():
            return int(self._q("DELETE FROM session_touches WHERE last_at < ?", (before,)).rowcount)

    # -- captured sessions (turns, their keyword entries and vectors, the session catalog) ------------
    def session_progress(self, session_id: str) -> tuple[str | None, int, str | None]:
        """(transcript_path, bytes read so far, last uuid) of a captured session; (None, 0, None) if unknown."""
        row = self._q("SELECT transcript_path, read_bytes, last_uuid FROM sessions WHERE session_id = ?",
                      (session_id,)).fetchone()
        return (row[0], int(row[1]), row[2]) if row else (None, 0, None)

    def known_uuids(self, session_id: str, uuids: Sequence[str]) -> set[str]:
        """Which of `uuids` the session already holds."""
        out: set[str] = set()
        for chunk in self._chunks(uuids):
            where, params = self._in("uuid", chunk)
            out |= {r[0] for r in self._q(f"SELECT uuid FROM turns WHERE session_id = ? AND {where}",
                                          (session_id, *params))}
        return out

    def last_turns(self, session_id: str, n: int) -> list[Turn]:
        """The session's last `n` turns, in order."""
        rows = self._q(f"SELECT {sql.TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY position DESC LIMIT ?",
                       (session_id, int(n))).fetchall()
        return [sql.turn_from_row(r) for r in reversed(rows)]

    def add_turns(self, session_id: str, *, source: str, transcript_path: str | None, title: str | None,
                  turns: Sequence[dict[str, Any]], read_bytes: int | None, last_uuid: str | None,
                  skipped: dict[str, int], redactions: dict[str, int], private_spans: int,
                  trailing_meta: dict[str, list[str]], rekey: dict[str, str]) -> list[int]:
        """Append turns to a session in one transaction, creating its catalog row; returns the seqs of
        the turns inserted (a turn whose uuid the session already holds is skipped: idempotent). The
        catalog row is locked first, so two processes (or machines) capturing the same session
        append one after the other.

        turns: dicts with the Turn fields but position, plus "key" (index key) and "vector" (or None).
        read_bytes/last_uuid: how far the transcript has been read (None: unchanged). skipped,
        redactions (counts only), private_spans: added to the session's tallies. trailing_meta:
        tool metadata for the session's last stored turn. rekey: {uuid: new index key} for turns
        already stored (a turn's key names the turn after it, known only now)."""
        now = now_ms()
        inserted: list[int] = []
        with self.transaction():
            self._q("INSERT INTO sessions (session_id, source, transcript_path, title, updated_at) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING",
                    (session_id, source, transcript_path, title, now))
            row = self._q(f"SELECT skipped, redactions FROM sessions WHERE session_id = ?{self.dialect.for_update}",
                          (session_id,)).fetchone()
            tallies = [json.loads(row[0]), json.loads(row[1])]
            for tally, extra in zip(tallies, (skipped, redactions)):
                for k, v in extra.items():
                    tally[k] = tally.get(k, 0) + int(v)
            if trailing_meta:
                last = self._q("SELECT seq, meta FROM turns WHERE session_id = ? ORDER BY position DESC LIMIT 1",
                               (session_id,)).fetchone()
                if last is not None:
                    meta = json.loads(last[1] or "{}")
                    for k, values in trailing_meta.items():
                        meta[k] = meta.get(k, []) + [v for v in values if v not in meta.get(k, [])]
                    self._q("UPDATE turns SET meta = ? WHERE seq = ?", (json.dumps(meta), last[0]))
            for uuid, key in rekey.items():
                hit = self._q("SELECT seq, text FROM turns WHERE session_id = ? AND uuid = ?",
                              (session_id, uuid)).fetchone()
                if hit is not None:
                    self._index_turn(hit[0], hit[1], key, new=False)
            position = self._one("SELECT coalesce(max(position) + 1, 0) FROM turns WHERE session_id = ?",
                                 (session_id,))
            for t in turns:
                index_columns, index_values, index_params = self._turn_index_insert(t["text"], t.get("key") or "")
                added = self._q(
                    f"INSERT INTO turns (session_id, uuid, position, role, text, at, speaker, git_branch, cwd, "
                    f"meta{index_columns}) VALUES ({sql.marks(10)}{index_values}) "
                    "ON CONFLICT (session_id, uuid) DO NOTHING RETURNING seq",
                    (session_id, t["uuid"], position, t["role"], t["text"], t["at"], t.get("speaker"),
                     t.get("git_branch"), t.get("cwd"), json.dumps(t.get("meta") or {}), *index_params)).fetchall()
                if not added:
                    continue
                position += 1
                seq = int(added[0][0])
                inserted.append(seq)
                self._index_turn(seq, t["text"], t.get("key") or "", new=True)
                self.put_turn_vector(seq, t.get("vector"))
            self._q(
                """UPDATE sessions SET
                     title = coalesce(title, ?),
                     started_at = (SELECT min(at) FROM turns WHERE session_id = ?),
                     ended_at = (SELECT max(at) FROM turns WHERE session_id = ?),
                     turn_count = (SELECT count(*) FROM turns WHERE session_id = ?),
                     git_branch = coalesce((SELECT git_branch FROM turns WHERE session_id = ? AND git_branch
                                            IS NOT NULL ORDER BY position DESC LIMIT 1), git_branch),
                     cwd = coalesce((SELECT cwd FROM turns WHERE session_id = ? AND cwd IS NOT NULL
                                     ORDER BY position LIMIT 1), cwd),
                     transcript_path = coalesce(?, transcript_path),
                     read_bytes = coalesce(?, read_bytes), last_uuid = coalesce(?, last_uuid),
                     skipped = ?, redactions = ?, private_spans = private_spans + ?, updated_at = ?
                   WHERE session_id = ?""",
                (title, session_id, session_id, session_id, session_id, session_id, transcript_path, read_bytes,
                 last_uuid, json.dumps(tallies[0]), json.dumps(tallies[1]), int(private_spans), now, session_id))
        return inserted

    def put_turn_vector(self, seq: int, vector: np.ndarray | None) -> None:
        """Store a turn's vector, or queue the turn for embedding (inside a transaction)."""
        if vector is not None and self.turn_index is not None:
            self._ensure_vector_table(self.turn_index, len(vector))
            self.turn_index.upsert(self.conn, seq, vector)
            self._q("DELETE FROM turn_vector_backlog WHERE seq = ?", (seq,))
        else:
            self._q("INSERT INTO turn_vector_backlog(seq) VALUES (?) ON CONFLICT DO NOTHING", (seq,))

    def turn_backlog(self, limit: int) -> list[tuple[int, str | None, str, str | None, str | None]]:
        """(seq, speaker, text, speaker and text of the turn before it in its session or None) of turns
        awaiting a vector, oldest first."""
        return [(r[0], r[1], r[2], r[3], r[4]) for r in self._q(
            "SELECT b.seq, t.speaker, t.text, p.speaker, p.text FROM turn_vector_backlog b "
            "JOIN turns t ON t.seq = b.seq "
            "LEFT JOIN turns p ON p.session_id = t.session_id AND p.position = t.position - 1 "
            "ORDER BY b.seq LIMIT ?", (int(limit),)).fetchall()]

    def drop_turn_vectors(self, before: int, seqs: Sequence[int] = ()) -> int:
        """Vector retention: drop the vectors of turns older than `before` (epoch ms) and take them
        out of the embedding queue; their text and keyword entries stay. The turns visited are those
        at or after the last call's `before` (recorded in meta), and `seqs` (turns just captured,
        which may be older). Returns how many vectors were dropped."""
        done = self.get_meta("turn_vectors_dropped_before")
        start = int(done) if done else None
        ranges: list[tuple[str, tuple[Any, ...]]] = []
        if start is None or start < before:
            ranges.append(("SELECT seq FROM turns WHERE at < ?" + ("" if start is None else " AND at >= ?"),
                           (int(before),) if start is None else (int(before), start)))
        for chunk in self._chunks(seqs):
            where, params = self._in("seq", chunk)
            ranges.append((f"SELECT seq FROM turns WHERE at < ? AND {where}", (int(before), *params)))
        dropped = 0
        index = self.turn_index
        with self.transaction():
            for range_sql, values in ranges:
                self._q(f"DELETE FROM turn_vector_backlog WHERE seq IN ({range_sql})", values)
                if index is not None and index.exists(self.conn):
                    dropped += int(self._q(f"DELETE FROM {index.table} WHERE seq IN ({range_sql})", values).rowcount)
            if start is None or start < before:
                self._put_meta("turn_vectors_dropped_before", str(int(before)))
        return dropped

    def fill_turn_backlog(self, vectors: dict[int, Any]) -> None:
        with self.transaction():
            for seq, vector in vectors.items():
                self.put_turn_vector(seq, vector)

    def requeue_turn_vectors(self) -> int:
        """Drop every captured turn's vector and queue all turns for embedding (a re-embedding with
        another model: vectors of two models are never searched together). Returns how many."""
        with self.transaction():
            if self.turn_index is not None:
                self.turn_index.drop(self.conn)
                self._vectors_dropped(self.turn_index)
            self._q("INSERT INTO turn_vector_backlog(seq) SELECT seq FROM turns WHERE true ON CONFLICT DO NOTHING")
            return int(self._one("SELECT count(*) FROM turn_vector_backlog"))

    @staticmethod
    def _turn_time(since: int | None, until: int | None) -> tuple[list[str], list[object]]:
        """Clauses over `turns t` keeping the turns at or after `since` and before `until`."""
        return sql.time_bounds(since, until, start="t.at", end="t.at")

    def turn_exact_search(self, needle: str, limit: int, *, since: int | None = None,
                          until: int | None = None) -> list[tuple[int, float]]:
        """Turns containing `needle` (case-insensitive, for ASCII on SQLite), newest first: [(seq, 1.0)].
        A scan of the turns' text: no index serves a substring (on Postgres that takes pg_trgm,
        which not every server has, pgserver's included)."""
        clauses, params = self._turn_time(since, until)
        rows = self._q(
            f"SELECT t.seq FROM turns t WHERE {self.dialect.instr}(lower(t.text), lower(?)) > 0 "
            f"{''.join(' AND ' + c for c in clauses)} ORDER BY t.at DESC, t.seq DESC LIMIT ?",
            (needle, *params, int(limit))).fetchall()
        return [(int(r[0]), 1.0) for r in rows]

    def turns_by_seqs(self, seqs: Sequence[int]) -> dict[int, Turn]:
        out: dict[int, Turn] = {}
        for chunk in self._chunks(seqs):
            where, params = self._in("seq", chunk)
            rows = self._q(f"SELECT {sql.TURN_COLUMNS} FROM turns WHERE {where}", params).fetchall()
            out.update({int(r[0]): sql.turn_from_row(r) for r in rows})
        return out

    def session_turns(self, session_id: str, offset: int, limit: int) -> list[Turn]:
        """Turns of a session by position: positions offset .. offset + limit - 1."""
        rows = self._q(f"SELECT {sql.TURN_COLUMNS} FROM turns WHERE session_id = ? AND position >= ? "
                       "ORDER BY position LIMIT ?", (session_id, int(offset), int(limit))).fetchall()
        return [sql.turn_from_row(r) for r in rows]

    def session(self, session_id: str) -> SessionInfo | None:
        row = self._q(f"SELECT {sql.SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        return sql.session_from_row(row) if row else None

    def sessions(self, limit: int, *, since: int | None = None, until: int | None = None) -> list[SessionInfo]:
        """Captured sessions, most recently active first."""
        clauses, params = sql.time_bounds(since, until, start="coalesce(started_at, updated_at)",
                                          end="coalesce(ended_at, updated_at)")
        rows = self._q(
            f"SELECT {sql.SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(['1 = 1', *clauses])} "
            "ORDER BY coalesce(ended_at, updated_at) DESC, session_id LIMIT ?", (*params, int(limit))).fetchall()
        return [sql.session_from_row(r) for r in rows]

    def session_totals(self) -> dict[str, object]:
        """{"sessions", "turns", "awaiting_embedding", "skipped": {reason: n}, "redactions": {type: n},
        "private_spans"} over every captured session."""
        sessions, turns, backlog = self._q(
            "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM turns), "
            "(SELECT count(*) FROM turn_vector_backlog)").fetchone()
        skipped: dict[str, int] = {}
        redactions: dict[str, int] = {}
        private = 0
        for s, r, p in self._q("SELECT skipped, redactions, private_spans FROM sessions"):
            for tally, extra in ((skipped, json.loads(s)), (redactions, json.loads(r))):
                for k, v in extra.items():
                    tally[k] = tally.get(k, 0) + v
            private += p
        return {"sessions": int(sessions), "turns": int(turns), "awaiting_embedding": int(backlog),
                "skipped": skipped, "redactions": redactions, "private_spans": int(private)}
