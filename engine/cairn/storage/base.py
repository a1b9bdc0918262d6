"""What both store backends do alike, written once over a `Dialect`.

`SqlStore` holds every method (the memories' here, the other roles' in review_sql, usage_sql,
scope_sql and session_sql) whose SQL is the same on SQLite and Postgres once placeholders
(`?` / `%s`), lists of values (`IN (?, ?)` / `= ANY(%s)`), row locks (`FOR UPDATE` on Postgres,
where a SQLite write transaction already excludes every other writer) and a few functions are
named by the dialect. The backends (sqlite.SqliteStore, postgres.PgStore) add what differs: how
a store is opened, the keyword index (FTS5 / tsvector), the vector index (sqlite-vec or numpy /
pgvector), and the hooks below (`_memories`, `_applies`, `_erase_index`, `_turn_index_insert` ...).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import MemoryNotFound, StoreError
from ..models import Memory, Order
from ..text import forgotten_subject, passage, without_text
from ..timeutil import END_OF_TIME, now_ms
from . import sql
from .review_sql import ReviewSql
from .scope_sql import ScopeSql
from .session_sql import SessionSql
from .sql import Filters
from .usage_sql import UsageSql

if TYPE_CHECKING:
    pass


class SqlStore(ReviewSql, UsageSql, ScopeSql, SessionSql):
    """The methods both backends share: the memories' here, each other role's in its own part
    (review_sql, usage_sql, scope_sql, session_sql), all over dialect.SqlBase. Subclasses set
    `dialect`, `conn`, `name`, `vector_index`, `turn_index` and `vector_unavailable`, and implement
    the hooks that raise NotImplementedError."""

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

    def ids_starting(self, prefix: str, limit: int) -> list[str]:
        """Up to `limit` memory ids (any status) that start with `prefix`, in id order: what a short id
        a user typed may stand for. A scan of the id column (about 10 ms at 100,000 memories)."""
        rows = self._q("SELECT id FROM memories WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT ?",
                       (len(prefix), prefix, limit)).fetchall()
        return [r[0] for r in rows]

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
        # SQLite reads memories_by_recorded (time order) or memories_by_importance backwards and stops
        # at `limit` once its planner is kept off memories_by_retired (which walks every current row,
        # then sorts): 22 -> 1.2 ms for the newest 534 of 10,000, 20 -> 4.5 ms for the most important.
        by_importance = Order(order) == Order.IMPORTANCE
        where, params = filters.where(unindexed=self._UNINDEXED)
        order_by = sql.ORDER_SQL[Order(order)]
        columns = self._memory_columns("m")
        if limit is not None and by_importance:
            # Reading the `limit` seqs first, then their rows, keeps whole memories out of any sort the
            # planner still does (a filter the index cannot serve).
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
