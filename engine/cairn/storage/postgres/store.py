"""The team store: one Cairn store in a PostgreSQL database, with pgvector for the vector arm.

`PgStore` is a `StoreBackend` (protocol.py) with the semantics of the SQLite backend, and shares
its code where the SQL is the same (base.SqlStore): bitemporal valid time / transaction time
filtered inside the query (`sql.Filters`), supersession, exact duplicates refused by a partial
unique index, forget erasing text, tags, keyword entry and vector (then VACUUM), tombstones. Each
store is one schema of the database (`cairn_<name>`), so one server holds many stores; several
machines share a store by connecting to the same database.

- Keyword arm: a `tsvector` per memory, ranked BM25-like (search.py).
- Vector arm: `memory_vectors` (vector(dim)) with an HNSW index (cosine; vectors.py). The default
  view walks the index (HNSW_EF_SEARCH candidates, the view's filter applied to them); any other
  filter runs an exact scan over the filtered rows, so filters apply before the k cut.
- Writers: each write is one short transaction; supersession and forget lock the rows they change
  (SELECT ... FOR UPDATE), so two machines superseding the same memory cannot both do it, and an
  exact duplicate written at the same moment on two machines is stored once (ON CONFLICT).

The review queue and the maintenance lease as on SQLite (the review area runs unchanged on both): a
decision locks its proposal's row (SELECT ... FOR UPDATE) and moves its state compare-and-set, so
two reviewers on two machines never apply one proposal twice; the lease is taken by one upsert.

Captured sessions as on SQLite: `turns` with a tsvector per turn (its text weighted A, its index
key B) for keyword search, `turn_vectors` (HNSW) for semantic search, a substring scan for exact
search (no pg_trgm: see turn_exact_search). The connection URL is never stored, logged or shown (an
error naming it is redacted: `redact`); `path` names only the schema.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import InvalidImport, StoreError, StoreNotFound
from ...models import Memory, NewMemory
from .. import sql
from ..base import SqlStore
from ..dialect import POSTGRES
from ..migrations import lock_key, migrate_postgres, postgres_version
from .connection import LANGUAGES, connect, scalar, schema_for
from .search import phrases, postings_sql, ranked_sql, tokens
from .vector_tables import HNSW_EF_SEARCH, VECTOR_LOCK_WAIT_MS, PgVectorIndex, maintenance_mem_mb, vector_text
from ..sql import Filters
from ...timeutil import END_OF_TIME

if TYPE_CHECKING:
    import numpy as np
    import psycopg

log = logging.getLogger(__name__)

BULK_MIN = 200  # import_rows / fill_backlog with at least this many rows go through COPY


class PgStore(SqlStore):
    """One store in a Postgres schema. One object per thread; many processes and machines may share
    the store. Attributes as SqliteStore's: name, path (a display name without the URL), vector_index,
    turn_index (captured turns' vectors), vector_unavailable."""

    dialect = POSTGRES
    backend = "postgres"

    def __init__(self, conn: psycopg.Connection, schema: str, name: str):
        self.conn = conn
        self.schema = schema
        self.name = name
        self.path = f"postgres:{schema}"
        self.vector_index: PgVectorIndex | None = PgVectorIndex()
        self.turn_index: PgVectorIndex | None = PgVectorIndex("turn_vectors")
        self.vector_unavailable: str | None = None
        self._ts = "cairn_text"
        self._ready_tables: set[str] = set()  # vector tables known to exist (they are never dropped but by reembed)
        self._bulk_vectors = False  # inside bulk_vectors(): the vector table is created without its index
        self._unflushed: set[str] = set()  # tables erase() removed rows from since the last flush_to_disk
        self.flush_ms: dict[str, float] = {}  # how long the last flush_to_disk took per table (ms)

    # -- lifecycle -------------------------------------------------------------------------------
    @staticmethod
    def exists(url: str, name: str) -> bool:
        """Whether store `name` exists in the database at `url`. Raises StoreError (no connection)."""
        conn = connect(url)
        try:
            return PgStore._schema_exists(conn, schema_for(name))
        finally:
            conn.close()

    @staticmethod
    def inspect(url: str, schema: str) -> dict[str, Any]:
        """What the server holds for a store's schema, read without migrating or changing anything
        (for `cairn doctor`): {"server": "PostgreSQL <version>", "vector": pgvector's version in this
        database or None, "exists": whether the schema holds a store, "schema_version" (0 when it
        does not exist)}. Raises StoreError (no connection; the message never names the URL)."""
        conn = connect(url)
        try:
            server = scalar(conn, "SHOW server_version")
            vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            exists = PgStore._schema_exists(conn, schema)
            version = postgres_version(conn, schema) if exists else 0
        finally:
            conn.close()
        return {"server": f"PostgreSQL {server.split()[0]}", "vector": vector[0] if vector else None,
                "exists": exists, "schema_version": int(version)}

    @staticmethod
    def _schema_exists(conn: psycopg.Connection, schema: str) -> bool:
        return bool(scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}".meta',)))

    @classmethod
    def open(cls, url: str, *, name: str, create: bool, meta: dict[str, str] | None = None,
             language: str = "english", schema: str | None = None) -> PgStore:
        """Open (and migrate) store `name` in the database at `url`. create: make its schema if
        missing (else raise StoreNotFound). language: the text search language of a new store
        (LANGUAGES); an existing store keeps its own. schema: the store's schema (default
        schema_for(name); a store renamed on this machine keeps its own).
        Raises StoreNotFound, SchemaTooNew, StoreError."""
        if language not in LANGUAGES:
            raise StoreError(f"unknown text search language {language!r}; expected one of: {', '.join(LANGUAGES)}")
        conn = connect(url)
        try:
            schema = schema or schema_for(name)
            if not create and not cls._schema_exists(conn, schema):
                raise StoreNotFound(f"store {name!r} does not exist on the Postgres server (schema {schema})")
            migrate_postgres(conn, schema, language)
            conn.execute(f'SET search_path TO "{schema}", public')
            conn.execute(f"SET hnsw.ef_search = {HNSW_EF_SEARCH}")
            store = cls(conn, schema, name)
            store._init_meta(meta or {})
            store._has_vectors()  # known once here, not asked again on every write
        except BaseException:
            conn.close()
            raise
        return store

    def schema_version(self) -> int:
        return postgres_version(self.conn)

    def close(self) -> None:
        self.conn.close()

    def hold_vectors(self) -> bool:
        """As SqliteStore.hold_vectors: never here; the HNSW index answers on the server."""
        return False

    def replaced(self) -> bool:
        """Whether this connection is no longer usable (closed, or lost with the server): a
        long-lived process then opens the store again (Cairn.stale). No round trip."""
        return bool(self.conn.closed or self.conn.broken)

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A short write transaction (a savepoint when nested), rolled back on any exception."""
        return self.conn.transaction()

    def _one_write(self) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read-only repeatable-read transaction: every read inside sees the store as it was at
        its first statement, whatever other machines commit meanwhile (a backup)."""
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield

    def _init_meta(self, meta: dict[str, str]) -> None:
        self._record_meta({"vector_backend": "pgvector", **meta})

    # -- reads ---------------------------------------------------------------------------------------
    def _memory_columns(self, alias: str = "memories") -> str:
        """sql.MEMORY_COLUMNS over `alias`, then its tags (sorted): one query per read, not one more for the tags."""
        a = alias
        return (", ".join(f"{a}.{c}" for c in sql.MEMORY_COLUMNS.split(", "))
                + f", ARRAY(SELECT t.tag FROM memory_tags t WHERE t.seq = {a}.seq ORDER BY t.tag)")

    def _memories(self, rows: Sequence[Sequence[Any]]) -> list[Memory]:
        return [sql.memory_from_row(r, tags=tuple(r[15]), applies_when=self._applies(r[14]), store=self.name)
                for r in rows]

    def _applies(self, value: Any) -> tuple[str, ...]:
        return tuple(value or ())

    def _tags(self, seqs: list[int]) -> dict[int, tuple[str, ...]]:
        out: dict[int, list[str]] = {}
        for seq, tag in self.conn.execute("SELECT seq, tag FROM memory_tags WHERE seq = ANY(%s) ORDER BY tag",
                                          (list(seqs),)):
            out.setdefault(seq, []).append(tag)
        return {k: tuple(v) for k, v in out.items()}

    def keyword_search(self, match: str, filters: Filters, limit: int, *,
                       postings: bool = True) -> list[tuple[int, float]]:
        """BM25-like scores over text and tags for an FTS5 MATCH expression (text.fts_query):
        [(seq, score)], best first, higher is better. score = sum over the query's phrases found in
        the memory of idf(phrase) * ts_rank(tsv, phrase, 1), idf as BM25's (Lucene's form) from the
        number of memories holding the phrase (counted from the same scan that finds them) and the
        number of memories (the planner's estimate from 1,000 on; an exact count costs a scan per
        query). The filters apply in the same query. One round trip. postings: one-word phrases
        from memory_postings (search.postings_sql, the default); False ranks every phrase from the
        tsv (search.ranked_sql), the same scores read the slow way (the reference the tests compare with)."""
        found = phrases(match)
        if not found:
            return []
        where, params = filters.where()
        where = self.dialect.sql(where)
        if postings:
            import psycopg

            try:
                with self._lock_wait():
                    rows = self.conn.execute(postings_sql(where),
                                             [self._ts, self._ts, found, *params, int(limit)]).fetchall()
                return [(int(seq), float(score)) for seq, score in rows]
            except psycopg.errors.LockNotAvailable:
                log.info("keyword search from the tsv: a forget is rewriting the postings")
        rows = self.conn.execute(ranked_sql("memories", "m", "ts_rank(m.tsv, q.tq, 1)", where),
                                 [self._ts, found, *params, int(limit)]).fetchall()
        return [(int(seq), float(score)) for seq, score in rows]

    def term_counts(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """As SqliteStore.term_counts: live memories, and how many of them match each term (one phrase of
        an FTS5 MATCH expression, text.fts_query)."""
        total = self.conn.execute("SELECT count(*) FROM memories WHERE tsv IS NOT NULL").fetchone()[0]
        out: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            words = phrases(term)
            out[term] = self.conn.execute(
                "SELECT count(*) FROM memories WHERE tsv @@ phraseto_tsquery(%s::regconfig, %s)",
                (self._ts, tokens(words[0]))).fetchone()[0] if words else 0
        return int(total), out

    def _vectors_ready(self, index: PgVectorIndex) -> bool:
        """Whether `index`'s table exists (asked once: it stays, until replace_vectors drops and
        recreates it in one transaction)."""
        if index.table in self._ready_tables:
            return True
        exists = bool(index.exists(self.conn))
        if exists and self.conn.info.transaction_status == 0:
            # Remembered only outside a transaction: one that created the table may still roll back.
            self._ready_tables.add(index.table)
        return exists

    def _has_vectors(self) -> bool:
        return self.vector_index is not None and self._vectors_ready(self.vector_index)

    def _vectors_exist(self, index: Any) -> bool:
        return self._vectors_ready(index)

    def _vectors_dropped(self, index: Any) -> None:
        self._ready_tables.discard(index.table)

    def _ensure_vector_table(self, index: PgVectorIndex, dim: int) -> None:
        if not self._vectors_ready(index):
            with self.conn.transaction():
                # Two machines' first vectors: one creates the table, the other waits and reuses it.
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(f"cairn vec {self.schema}"),))
                index.create(self.conn, dim, index=not (self._bulk_vectors and index is self.vector_index))

    @contextlib.contextmanager
    def bulk_vectors(self) -> Iterator[None]:
        """For filling an empty store's vectors in bulk (migrate-store): inside, memory_vectors has no
        HNSW index; on leaving (an error included) the index is built once over every vector, in
        memory (maintenance_work_mem raised: _maintenance_memory). pgvector builds a graph of 100k
        vectors that way many times faster than it inserts them one by one into an index. A store
        that already holds vectors keeps its index (the block then changes nothing). Not inside a
        transaction: the build commits on its own."""
        index = self.vector_index
        if index is None or (self._has_vectors() and index.count(self.conn)):
            yield
            return
        if self._has_vectors():
            index.drop_index(self.conn)
        self._bulk_vectors = True
        try:
            yield
        finally:
            self._bulk_vectors = False
            if self._has_vectors():
                with self._maintenance_memory(index.table):
                    index.build_index(self.conn)

    @contextlib.contextmanager
    def _lock_wait(self) -> Iterator[None]:
        """A block of statements on memory_vectors or memory_postings that waits at most
        VECTOR_LOCK_WAIT_MS for the table's lock (a forget's VACUUM FULL holds it exclusively while
        it rewrites the table: a minute for the vectors at 100k memories, with the HNSW rebuild),
        then raises psycopg's LockNotAvailable with the block rolled back. A savepoint inside the
        caller's transaction, else a transaction of its own."""
        with self.conn.transaction():
            self.conn.execute(f"SET LOCAL lock_timeout = '{VECTOR_LOCK_WAIT_MS}ms'")
            yield
            self.conn.execute("SET LOCAL lock_timeout = DEFAULT")  # the caller's transaction waits as before

    def vector_search(self, query: Any, filters: Filters, limit: int) -> list[tuple[int, float]]:
        """Nearest neighbours among the filtered memories: [(seq, cosine)], best first. The default
        view walks the HNSW index (approximate; HNSW_EF_SEARCH candidates, the view's filter applied
        to them); any other filter ranks every filtered memory exactly, so the filter applies before
        the k cut. One round trip."""
        if not self._has_vectors():
            return []
        q = vector_text(query)
        where, params = filters.where()
        if filters.current_only:
            order = "v.embedding <=> %s::vector"  # the index's operator: an HNSW index scan
        else:
            order = "(v.embedding <=> %s::vector) + 0"  # not the index's: an exact scan of the filtered rows
        import psycopg

        try:
            with self._lock_wait():
                rows = self.conn.execute(
                    f"SELECT v.seq, 1 - (v.embedding <=> %s::vector) FROM memory_vectors v JOIN memories m "
                    f"ON m.seq = v.seq WHERE {self.dialect.sql(where)} ORDER BY {order}, v.seq LIMIT %s",
                    [q, *params, q, int(limit)]).fetchall()
        except psycopg.errors.LockNotAvailable:
            log.info("vector search skipped: a forget is rewriting the vector table (keyword results only)")
            return []
        return [(int(s), float(c)) for s, c in rows]

    def vectors_of(self, seqs: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of those memories (absent ones are left out)."""
        if not seqs or not self._has_vectors():
            return {}
        import numpy as np

        import psycopg

        try:
            with self._lock_wait():
                rows = self.conn.execute("SELECT seq, embedding::real[] FROM memory_vectors WHERE seq = ANY(%s)",
                                         (list(seqs),)).fetchall()
        except psycopg.errors.LockNotAvailable:
            return {}  # a forget is rewriting the table: as if these had no vector yet
        return {int(s): np.asarray(v, dtype=np.float32) for s, v in rows}

    # -- writes (inside transaction()) ---------------------------------------------------------------------
    def _tsv_args(self, text: str, tags: Sequence[str], applies_when: Sequence[str] = ()) -> tuple[str, str]:
        return self._ts, tokens(text + " " + " ".join(tags) + " " + " ; ".join(applies_when))

    def insert(self, new: NewMemory, vector: Any) -> int | None:
        """Insert a memory with its index entries; returns its seq, or None when another writer
        stored the same text (normalised) as a current memory meanwhile."""
        row = self._q(
            f"INSERT INTO memories ({sql.INSERT_COLUMNS}, tsv) VALUES ({sql.marks(12)}, "
            f"to_tsvector(?::regconfig, ?)) ON CONFLICT (text_key) WHERE retired_at = {END_OF_TIME} "
            "AND text_key IS NOT NULL DO NOTHING RETURNING seq",
            (*sql.new_memory_params(new, list(new.applies_when) or None),
             *self._tsv_args(new.text, new.tags, new.applies_when))).fetchone()
        if row is None:
            return None
        seq = int(row[0])
        if new.tags:
            self.conn.execute("INSERT INTO memory_tags(tag, seq) SELECT unnest(%s::text[]), %s", (list(new.tags), seq))
        self.put_vector(seq, vector, fresh=True)
        return seq

    def put_vector(self, seq: int, vector: Any, *, fresh: bool = False, wait: bool = False) -> None:
        """Store `vector` for `seq`, or queue the memory for embedding when there is none.
        fresh: `seq` was just inserted (it has no vector and no backlog entry yet). Unless `wait`,
        a vector table locked by a forget's rewrite for VECTOR_LOCK_WAIT_MS queues it as well
        (filling the backlog waits instead: queueing again would only repeat the wait)."""
        import psycopg

        if vector is not None and self.vector_index is not None:
            self._ensure_vector_table(self.vector_index, len(vector))
            try:
                with contextlib.nullcontext() if wait else self._lock_wait():
                    if fresh:
                        self.conn.execute("INSERT INTO memory_vectors(seq, embedding) VALUES (%s, %s::vector)",
                                          (seq, vector_text(vector)))
                        return
                    self.vector_index.upsert(self.conn, seq, vector)
                self.conn.execute("DELETE FROM vector_backlog WHERE seq = %s", (seq,))
                return
            except psycopg.errors.LockNotAvailable:
                # A forget is rewriting the vector table: the memory is stored now and queued for
                # embedding (flush_backlog), rather than the write waiting out the rebuild.
                log.info("memory %s queued for embedding: a forget is rewriting the vector table", seq)
        self.conn.execute("INSERT INTO vector_backlog(seq) VALUES (%s) ON CONFLICT DO NOTHING", (seq,))

    def _erase_index(self, seq: int) -> None:
        # Its postings go with the tsv (the trigger of m009).
        if self.conn.execute("UPDATE memories SET tsv = NULL WHERE seq = %s AND tsv IS NOT NULL", (seq,)).rowcount:
            self._erased("memory_postings")

    def _erased(self, table: str) -> None:
        self._unflushed.add(table)

    def flush_to_disk(self, *, every_table: bool = False) -> bool:
        """After a forget: VACUUM FULL the tables erase() removed rows from since the last flush
        (the memory table always, the postings when it had a keyword entry, the tags' table when it
        had tags, the vector table when it had a vector), or all four (every_table). A plain VACUUM
        only marks the dead row versions free: their bytes stay in the heap pages, and a GIN index
        keeps a word's entry after its last row is gone, until overwritten. VACUUM FULL rewrites
        each table and rebuilds its indexes into new files, so the forgotten text, its words and
        its vector are in no file of the store's tables (the server's WAL keeps them until its
        segments are recycled, and backups keep them). It holds an exclusive lock on each table
        while it runs: reads and writes of that table wait (keyword search reads the tsv instead of
        the postings meanwhile; a write waits, its trigger adds postings). The HNSW rebuild
        dominates; it runs with maintenance_work_mem raised so that pgvector builds the graph in
        memory (maintenance_mem_mb; far faster than the on-disk build it falls back to). Durations
        per table (ms) in `flush_ms`. Returns False when it could not run (a transaction is open
        on this connection)."""
        if self.conn.info.transaction_status != 0:  # IDLE: VACUUM cannot run inside a transaction
            return False
        tables = [t for t in ("memories", "memory_postings", "memory_tags", "memory_vectors", "proposals")
                  if every_table or t in self._unflushed]
        if "memory_vectors" in tables and not self._has_vectors():
            tables.remove("memory_vectors")
        self.flush_ms = {}
        for table in tables:
            start = time.perf_counter()
            with self._maintenance_memory(table):
                self.conn.execute(f"VACUUM FULL {table}")
            self.flush_ms[table] = (time.perf_counter() - start) * 1000
            self._unflushed.discard(table)
        return True

    @contextlib.contextmanager
    def _maintenance_memory(self, table: str) -> Iterator[None]:
        """maintenance_work_mem (this session's) raised for an index build over `table`, then reset:
        pgvector's HNSW build keeps the graph in memory while it fits, else it goes on inserting
        into the index on disk one element at a time (and says so in a NOTICE)."""
        mb = maintenance_mem_mb(self.conn, table)
        if mb is None:
            yield
            return
        self.conn.execute(f"SET maintenance_work_mem = '{int(mb)}MB'")
        try:
            yield
        finally:
            self.conn.execute("RESET maintenance_work_mem")

    def insert_raw(self, memory: Memory, text_key: str | None, asserted_valid_to: int) -> int:
        """Insert a memory exactly as exported (import); index entries follow for live ones."""
        live = memory.text is not None
        row = self._q(
            f"INSERT INTO memories ({sql.RAW_COLUMNS}, tsv) VALUES ({sql.marks(16)}, "
            "CASE WHEN ? THEN to_tsvector(?::regconfig, ?) END) RETURNING seq",
            (*sql.raw_memory_params(memory, text_key, asserted_valid_to,
                                    (list(memory.applies_when) or None) if live else None),
             live, *self._tsv_args(memory.text or "", memory.tags, memory.applies_when))).fetchone()
        seq = int(row[0])
        if live:
            with self.conn.cursor() as cur:
                cur.executemany("INSERT INTO memory_tags(tag, seq) VALUES (%s, %s)", [(t, seq) for t in memory.tags])
            self.conn.execute("INSERT INTO vector_backlog(seq) VALUES (%s)", (seq,))
        return seq

    # -- bulk: export, import, embedding -----------------------------------------------------------------
    def import_rows(self, records: Sequence[tuple[Memory, int]]) -> tuple[int, int]:
        """As SqliteStore.import_rows: (imported, skipped), all or nothing. Raises InvalidImport. From
        BULK_MIN records on, the rows go through COPY and a few set-wise statements (a 100k-memory
        migrate-store in seconds, not a round trip per memory); when the bulk insert breaks a
        constraint, the row-by-row import runs instead to name the memory that broke it."""
        import psycopg

        records = list(records)
        if len(records) >= BULK_MIN:
            try:
                with self.transaction():
                    done = self._import_bulk(records)
            except psycopg.errors.IntegrityError:
                pass  # rolled back; the row-by-row import names the memory (and writes nothing either)
            else:
                if self.conn.info.transaction_status == 0:  # IDLE: VACUUM cannot run inside a transaction
                    # The postings' visibility map set now (index-only scans skip the heap only for
                    # pages marked all-visible) and the planner's row counts taken, rather than when
                    # autovacuum comes round after a bulk load.
                    self.conn.execute("VACUUM (ANALYZE) memory_postings")
                    self.conn.execute("ANALYZE memories")
                return done
        try:
            with self.transaction():
                self.conn.execute("SET CONSTRAINTS ALL DEFERRED")  # chains may point forward in the file
                done = self._import_each(records)
                self.conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
        except psycopg.errors.ForeignKeyViolation:
            raise InvalidImport("superseded_by points to a memory that is neither in the file nor the store") from None
        return done

    def _insert_imported(self, memory: Memory, key: str | None, asserted: int) -> None:
        import psycopg

        try:
            with self.conn.transaction():
                self.insert_raw(memory, key, asserted)
        except psycopg.errors.IntegrityError as exc:
            raise InvalidImport(f"memory {memory.id}: {str(exc).splitlines()[0]}") from None

    def _import_bulk(self, records: list[tuple[Memory, int]]) -> tuple[int, int]:
        """import_rows inside the caller's transaction: the same skips (an id the store or an earlier
        record holds; a live text already current), decided in Python, then COPY into a temporary
        table and one INSERT ... SELECT per table. Raises psycopg's IntegrityError."""
        end = END_OF_TIME
        keys = [sql.import_key(m) for m, _ in records]
        seen_ids = {r[0] for r in self.conn.execute("SELECT id FROM memories WHERE id = ANY(%s)",
                                                    ([m.id for m, _ in records],))}
        seen_keys = {r[0] for r in self.conn.execute(
            "SELECT text_key FROM memories WHERE retired_at = %s AND text_key = ANY(%s)",
            (end, [k for k in keys if k is not None]))}
        rows: list[tuple[object, ...]] = []
        skipped = 0
        for (m, asserted), key in zip(records, keys):
            if m.id in seen_ids or (key is not None and key in seen_keys):
                skipped += 1
                continue
            seen_ids.add(m.id)
            if key is not None:
                seen_keys.add(key)
            live = m.text is not None
            rows.append((len(rows), m.id, m.text, key, m.kind, m.importance, m.source, m.session_id, m.valid_from,
                         m.valid_to or end, asserted, m.recorded_at, m.retired_at or end, m.superseded_by,
                         m.forgotten_at, m.cold_at, "\n".join(m.tags) if live else "",
                         "\n".join(m.applies_when) if live else "",
                         self._tsv_args(m.text or "", m.tags, m.applies_when)[1] if live else None))
        self.conn.execute("SET CONSTRAINTS ALL DEFERRED")  # chains may point forward in the file
        self.conn.execute("""CREATE TEMP TABLE cairn_import (
                ord integer, id text, text text, text_key text, kind text, importance integer, source text,
                session_id text, valid_from bigint, valid_to bigint, asserted_valid_to bigint, recorded_at bigint,
                retired_at bigint, superseded_by text, forgotten_at bigint, cold_at bigint, tags text, applies text,
                tokens text) ON COMMIT DROP""")
        with self.conn.cursor() as cur, cur.copy("COPY cairn_import FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        columns = ("id, text, text_key, kind, importance, source, session_id, valid_from, valid_to, asserted_valid_to, "
                   "recorded_at, retired_at, superseded_by, forgotten_at, cold_at")
        self.conn.execute(f"INSERT INTO memories ({columns}, applies_when, tsv) SELECT {columns}, "
                          "CASE WHEN applies <> '' THEN string_to_array(applies, E'\\n') END, "
                          "CASE WHEN text IS NOT NULL THEN to_tsvector(%s::regconfig, tokens) END "
                          "FROM cairn_import ORDER BY ord", (self._ts,))
        self.conn.execute("INSERT INTO memory_tags(tag, seq) SELECT DISTINCT t.tag, m.seq FROM cairn_import i "
                          "JOIN memories m ON m.id = i.id CROSS JOIN unnest(string_to_array(i.tags, E'\\n')) t(tag) "
                          "WHERE i.text IS NOT NULL AND i.tags <> ''")
        self.conn.execute("INSERT INTO vector_backlog(seq) SELECT m.seq FROM cairn_import i JOIN memories m "
                          "ON m.id = i.id WHERE i.text IS NOT NULL")
        self.conn.execute("DROP TABLE cairn_import")
        self.conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
        return len(rows), skipped

    def fill_backlog(self, vectors: dict[int, Any]) -> int:
        """Store vectors for memories still in the backlog (locked, so one forgotten meanwhile on
        another machine is never given a vector back). Returns how many were stored. From BULK_MIN
        vectors on, through COPY and one statement."""
        if len(vectors) < BULK_MIN or self.vector_index is None:
            return self._fill_backlog_each(vectors)
        with self.transaction():
            self._ensure_vector_table(self.vector_index, len(next(iter(vectors.values()))))
            self.conn.execute("CREATE TEMP TABLE cairn_vectors (seq bigint, embedding text) ON COMMIT DROP")
            with self.conn.cursor() as cur, cur.copy("COPY cairn_vectors FROM STDIN") as copy:
                for seq, vector in vectors.items():
                    copy.write_row((seq, vector_text(vector)))
            stored = self.conn.execute(
                "WITH alive AS (DELETE FROM vector_backlog b USING cairn_vectors v WHERE b.seq = v.seq "
                "RETURNING b.seq) "
                "INSERT INTO memory_vectors(seq, embedding) SELECT v.seq, v.embedding::vector FROM cairn_vectors v "
                "JOIN alive USING (seq) ON CONFLICT (seq) DO UPDATE SET embedding = excluded.embedding").rowcount
            self.conn.execute("DROP TABLE cairn_vectors")
        return int(stored)

    # -- health --------------------------------------------------------------------------------------------
    def integrity(self) -> str:
        return "ok"

    def index_report(self) -> dict[str, int]:
        """As SqliteStore.index_report, for the tsvector column, its postings and the vector table.
        postings_stale: memories whose postings are not one per lexeme of their tsv."""
        one = self._one
        report = {
            "live": one("SELECT count(*) FROM memories WHERE text IS NOT NULL"),
            "fts_missing": one("SELECT count(*) FROM memories WHERE text IS NOT NULL AND tsv IS NULL"),
            "fts_orphans": one("SELECT count(*) FROM memories WHERE text IS NULL AND tsv IS NOT NULL"),
            "postings_stale": one(
                "SELECT count(*) FROM memories m FULL JOIN (SELECT seq, count(*) AS n FROM memory_postings "
                "GROUP BY seq) p ON p.seq = m.seq WHERE coalesce(length(m.tsv), 0) <> coalesce(p.n, 0)"),
            "vector_missing": 0, "vector_orphans": 0,
        }
        live = sql.LIVE_SEQS
        if self._has_vectors():
            report["vector_missing"] = one(
                f"SELECT count(*) FROM ({live}) l WHERE seq NOT IN (SELECT seq FROM memory_vectors) "
                "AND seq NOT IN (SELECT seq FROM vector_backlog)")
            report["vector_orphans"] = one(f"SELECT count(*) FROM memory_vectors WHERE seq NOT IN ({live})")
        return report

    def invalid_indexes(self) -> list[str]:
        """Indexes of the store's schema Postgres marks invalid or not ready (a failed or interrupted
        CREATE INDEX CONCURRENTLY or REINDEX): queries silently stop using them."""
        return [r[0] for r in self.conn.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT (i.indisvalid AND i.indisready) "
            "ORDER BY c.relname", (self.schema,))]

    def rebuild_indexes(self) -> None:
        """As SqliteStore.rebuild_indexes: every live memory's keyword entry and postings recomputed, vectors of
        memories that are not live dropped, live memories without one queued; then each invalid
        index rebuilt (REINDEX) and the tables vacuumed (flush_to_disk)."""
        for index in self.invalid_indexes():
            self.conn.execute(f'REINDEX INDEX "{self.schema}"."{index}"')
        with self.transaction():
            # Postings that drifted are made again from the tsv column: all gone first (the trigger
            # then adds those of each tsv that changes), the rest added after (ON CONFLICT: those).
            self.conn.execute("DELETE FROM memory_postings")
            for seq, text, applies in self.conn.execute(
                    "SELECT seq, text, applies_when FROM memories WHERE text IS NOT NULL").fetchall():
                tags = self._tags([seq]).get(seq, ())
                self.conn.execute("UPDATE memories SET tsv = to_tsvector(%s::regconfig, %s) WHERE seq = %s",
                                  (*self._tsv_args(text, tags, applies or ()), seq))
            self.conn.execute("UPDATE memories SET tsv = NULL WHERE text IS NULL AND tsv IS NOT NULL")
            self.conn.execute("INSERT INTO memory_postings (lexeme, seq, r) SELECT p.lexeme, m.seq, p.r "
                              "FROM memories m CROSS JOIN LATERAL cairn_postings(m.tsv) p WHERE m.tsv IS NOT NULL "
                              "ORDER BY 1, 2 ON CONFLICT (lexeme, seq) DO UPDATE SET r = excluded.r")
            live = sql.LIVE_SEQS
            self.conn.execute(f"DELETE FROM vector_backlog WHERE seq NOT IN ({live})")
            if self._has_vectors():
                self.conn.execute(f"DELETE FROM memory_vectors WHERE seq NOT IN ({live})")
                self.conn.execute(f"INSERT INTO vector_backlog(seq) SELECT seq FROM ({live}) l WHERE seq NOT IN "
                                  "(SELECT seq FROM memory_vectors) ON CONFLICT DO NOTHING")
            else:
                self.conn.execute(f"INSERT INTO vector_backlog(seq) {live} ON CONFLICT DO NOTHING")
        self.flush_to_disk(every_table=True)

    def file_size(self) -> int:
        """Bytes the store's tables and indexes take on the server."""
        return int(self.conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'", (self.schema,)).fetchone()[0])

    def drop(self) -> None:
        """Delete the store: its whole schema."""
        self.conn.execute(f'DROP SCHEMA "{self.schema}" CASCADE')

    # -- captured sessions: a turn's keyword entry is its text weighted A, its index key B ---------------
    _TURN_TSV = "setweight(to_tsvector(?::regconfig, ?), 'A') || setweight(to_tsvector(?::regconfig, ?), 'B')"

    def _turn_tsv_args(self, text: str, key: str) -> tuple[str, str, str, str]:
        return self._ts, tokens(text), self._ts, tokens(key)

    def _turn_index_insert(self, text: str, key: str) -> tuple[str, str, tuple[Any, ...]]:
        return ", tsv", f", {self._TURN_TSV}", self._turn_tsv_args(text, key)

    def _index_turn(self, seq: int, text: str, key: str, *, new: bool) -> None:
        if not new:  # a new turn's entry came with its INSERT (_turn_index_insert)
            self._q(f"UPDATE turns SET tsv = {self._TURN_TSV} WHERE seq = ?", (*self._turn_tsv_args(text, key), seq))

    def turn_keyword_search(self, match: str, limit: int, *, since: int | None = None, until: int | None = None,
                            key_weight: float = 1.0) -> list[tuple[int, float]]:
        """BM25-like scores over turns (as keyword_search; the index key weighs key_weight against
        the turn's text): [(seq, score)], best first."""
        found = phrases(match)
        if not found:
            return []
        clauses, params = self._turn_time(since, until)
        where = self.dialect.sql(" AND ".join(["TRUE", *clauses]))
        rows = self.conn.execute(
            ranked_sql("turns", "t", "ts_rank(%s::real[], t.tsv, q.tq, 1)", where),
            [self._ts, found, [0.0, 0.0, float(key_weight), 1.0], *params, int(limit)]).fetchall()
        return [(int(seq), float(score)) for seq, score in rows]

    def turn_vector_search(self, query: Any, limit: int, *, since: int | None = None,
                           until: int | None = None) -> list[tuple[int, float]]:
        """Nearest turns to `query`: [(seq, cosine)], best first. Without time bounds the HNSW index
        is walked (approximate); with them every turn in the bounds is ranked exactly."""
        if self.turn_index is None or not self._vectors_ready(self.turn_index):
            return []
        q = vector_text(query)
        clauses, params = self._turn_time(since, until)
        where = self.dialect.sql(" AND ".join(["TRUE", *clauses]))
        order = "v.embedding <=> %s::vector" if not params else "(v.embedding <=> %s::vector) + 0"
        rows = self.conn.execute(
            f"SELECT v.seq, 1 - (v.embedding <=> %s::vector) FROM turn_vectors v JOIN turns t ON t.seq = v.seq "
            f"WHERE {where} ORDER BY {order}, v.seq LIMIT %s", [q, *params, q, int(limit)]).fetchall()
        return [(int(s), float(c)) for s, c in rows]
