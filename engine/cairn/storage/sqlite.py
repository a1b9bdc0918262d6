"""The SQLite backend: one file holding a store's memories, their FTS5 index and their vector index.

What both backends do alike is base.SqlStore's; this module holds what is SQLite's own: opening a
file (private, WAL, migrated), the FTS5 keyword index, the vector index (sqlite-vec, or numpy where
the extension cannot load; vectors.py) with its in-process cache, and backup and restore through
SQLite's backup API. It knows nothing of embedding models or ranking; `engine.py` composes it
with both.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import home
from ..errors import InvalidImport, SchemaTooNew, StoreCorrupted, StoreError, StoreNotFound
from ..models import Memory, NewMemory
from ..text import index_text
from . import db, fts_postings, fts_prune, sql
from .base import SqlStore
from .dialect import SQLITE
from .fts_prune import phrases_of, rare_first
from .migrations import MIGRATIONS, fts_secure_delete_supported, migrate_sqlite
from .sql import Filters
from .vectors import BACKENDS, NumpyIndex, SqliteVecIndex, TurnCodeIndex, VectorCache, VectorIndex, selected_seqs

if TYPE_CHECKING:
    import numpy as np


def _applies_json(phrases: Sequence[str]) -> str | None:
    """applies_when as stored: a JSON array, NULL when there is none."""
    return json.dumps(list(phrases), ensure_ascii=False) if phrases else None


def _applies(value: str | None) -> tuple[str, ...]:
    return tuple(json.loads(value)) if value else ()


def _in_data_root(path: Path, data_root: Path | None) -> bool:
    return data_root is not None and Path(os.path.realpath(path)).is_relative_to(os.path.realpath(data_root))


def secure_files(path: Path) -> None:
    """Make the store file at `path` (created empty if missing: SQLite takes an empty file for a new
    database) and its -wal and -shm files 0600. SQLite creates -wal and -shm with the database
    file's mode, so a store created here stays private whatever the umask."""
    home.private_file(path)
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            if side.stat().st_mode & 0o777 != home.FILE_MODE:
                os.chmod(side, home.FILE_MODE)


def _file_identity(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at `path`; None for an in-memory database or a missing file."""
    if str(path) == ":memory:":
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


TERM_COUNTS_KEPT = 4096  # terms term_counts keeps at most (a few hundred KB), then starts again
PHRASE_COUNTS_DRIFT = 0.05  # _phrase_counts recounts once a table's highest seq moved by this share


class SqliteStore(SqlStore):
    """One open store file. Not thread-safe for concurrent writes from one object; use one per thread.

    Attributes: name, path, vector_index (None when no backend can serve this file),
    vector_unavailable (why not, or None).
    """

    dialect = SQLITE
    backend = "sqlite"
    _NOT_RETIRED = "+retired_at"  # see SqlStore.not_current_count
    _UNINDEXED = "+"  # see SqlStore.memories

    def __init__(self, conn: db.Connection, path: Path, name: str):
        self.conn = conn
        self.path = path
        self.name = name
        self.vector_index: VectorIndex | None = None
        self.turn_index: VectorIndex | None = None  # captured turns' vectors, same backend
        self.vector_unavailable: str | None = None
        self.vector_cache: VectorCache | None = None  # see hold_vectors
        self._identity = _file_identity(path)
        self._terms: dict[str, int] = {}  # term_counts' answers while the store is unchanged
        self._terms_total = 0
        self._terms_seen: tuple[int, int] | None = None
        # _phrase_counts' answers per FTS table: (max(seq) when counted, rows indexed, {phrase: rows})
        self._phrase_cache: dict[str, tuple[int, int, dict[str, int]]] = {}
        self.postings: dict[str, fts_postings.HeldPostings] = {}  # see hold_vectors

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: Path,
        *,
        name: str,
        create: bool,
        busy_timeout_ms: int = db.BUSY_TIMEOUT_MS,
        vector_backend: str = "auto",
        meta: dict[str, str] | None = None,
        data_root: Path | None = None,
    ) -> SqliteStore:
        """Open (and migrate) the store file at `path`.

        create: make the file if missing (else raise StoreNotFound). meta: key/values recorded on
        creation (project path, ...). vector_backend: "auto", "sqlite-vec" or "numpy"; an existing
        store keeps the backend it was created with. data_root: the data root the caller found
        (stores/: home.data_root(env)); a file under it has the root checked and tightened and its
        folders made 0700 (home.secure_root). None: the file is not in a data root (its folder is
        made as the umask says; the file itself is 0600 all the same).
        Raises StoreNotFound, StoreCorrupted, SchemaTooNew, UnsafeDataRoot.
        """
        in_memory = str(path) == ":memory:"
        in_root = not in_memory and _in_data_root(path, data_root)
        if in_root:
            assert data_root is not None
            home.secure_root(data_root)  # refuses a root owned by another user; tightens an old install
        if not path.exists() and not in_memory:
            if not create:
                raise StoreNotFound(f"store {name!r} does not exist ({path})")
            if in_root:
                home.private_dir(path.parent, root=data_root)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
        elif path.is_dir():
            raise StoreCorrupted(f"{path} is a directory, not a store file")
        if not in_memory:
            secure_files(path)
        conn = db.connect(str(path), busy_timeout_ms=busy_timeout_ms)
        try:
            migrate_sqlite(conn, str(path))
            store = cls(conn, path, name)
            store._init_meta(meta or {})
            store._choose_vector_index(vector_backend)
        except BaseException:
            conn.close()
            raise
        return store

    def close(self) -> None:
        for held in self.postings.values():
            held.tokenizer.conn.close()
        self.conn.close()

    def hold_vectors(self) -> bool:
        """Keep the memories' vectors in process memory from now on (vectors.VectorCache), for a
        long-lived process: k-NN and vector lookups of the default view are then served from memory,
        re-synchronised with the file before each use. Returns whether it is on (only a sqlite-vec
        index can be held). The keyword indexes' postings are held too, whatever the vector index
        (fts_postings.HeldPostings: BM25 in numpy, FTS5's scores, each word read on first use)."""
        if not self.postings:
            self.postings = {fts: fts_postings.HeldPostings(self.conn, fts) for fts in ("memory_fts", "turn_fts")}
        if isinstance(self.vector_index, SqliteVecIndex) and self.vector_cache is None:
            self.vector_cache = VectorCache()
        return self.vector_cache is not None

    def _held(self) -> VectorCache | None:
        cache = self.vector_cache
        return cache if cache is not None and cache.sync(self.conn) else None

    def replaced(self) -> bool:
        """Whether the file at `path` is no longer the one this connection has open: deleted, or
        replaced by another file (a restore, a rename over it). One stat."""
        return self._identity is not None and _file_identity(self.path) != self._identity

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        """A short write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on any exception."""
        return db.write_transaction(self.conn)

    def _one_write(self) -> contextlib.AbstractContextManager[Any]:
        return db.write_transaction(self.conn)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read transaction: every read inside sees the file as it was at its first read, whatever
        other connections commit meanwhile (WAL). Inside a transaction, that transaction's view."""
        if self.conn.in_transaction:
            yield
            return
        self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.execute("COMMIT")

    def _init_meta(self, meta: dict[str, str]) -> None:
        if self.get_meta("created_at") is None:  # once: opening a store takes no write lock
            self._record_meta(meta)

    def _choose_vector_index(self, preference: str) -> None:
        self.turn_index = TurnCodeIndex()  # int8 codes searched in numpy: no extension needed
        recorded = self.get_meta("vector_backend")
        wanted = recorded or preference
        vec_error = db.load_sqlite_vec(self.conn) if wanted in ("auto", "sqlite-vec") else "not requested"
        if wanted == "auto":
            wanted = "sqlite-vec" if vec_error is None else "numpy"
        if wanted == "sqlite-vec" and vec_error is not None:
            self.vector_unavailable = f"this store's vectors are in sqlite-vec, which failed to load ({vec_error})"
            return
        self.vector_index = BACKENDS[wanted]()
        if recorded is None:
            self.set_meta("vector_backend", wanted)

    # -- reads -------------------------------------------------------------------------------
    def _memory_columns(self, alias: str = "memories") -> str:
        return sql.MEMORY_COLUMNS

    def _memories(self, rows: Sequence[Sequence[Any]]) -> list[Memory]:
        tags = self._tags([r[0] for r in rows])
        return [sql.memory_from_row(r, tags=tags.get(r[0], ()), applies_when=_applies(r[14]), store=self.name)
                for r in rows]

    def _applies(self, value: Any) -> tuple[str, ...]:
        return _applies(value)

    def _tags(self, seqs: list[int]) -> dict[int, tuple[str, ...]]:
        out: dict[int, list[str]] = {}
        for chunk in self._chunks(seqs):
            where, params = self._in("seq", chunk)
            for seq, tag in self.conn.execute(f"SELECT seq, tag FROM memory_tags WHERE {where} ORDER BY tag", params):
                out.setdefault(seq, []).append(tag)
        return {k: tuple(v) for k, v in out.items()}

    def _keep_current(self, ranked: list[tuple[int, float]], limit: int) -> list[tuple[int, float]]:
        if not ranked:
            return []
        where, params = Filters().where()
        marks = sql.marks(len(ranked))
        # NOT INDEXED: by primary key. Else the planner walks every current row through
        # memories_by_retired (1.4 ms at 10k memories, twice a recall) to check ~100 seqs.
        ok = {r[0] for r in self.conn.execute(
            f"SELECT m.seq FROM memories m NOT INDEXED WHERE m.seq IN ({marks}) AND {where}",
            [s for s, _ in ranked] + params)}
        return [(s, v) for s, v in ranked if s in ok][:limit]

    # Exact shortcut for the default view. Filtering inside the search costs a pass over every row
    # (vec0's `rowid IN (...)`, a join per FTS match): ~125 ms of vector search at 100k memories.
    # When at most FAST_PATH_MAX_EXCLUDED indexed memories fall outside the view, searching without
    # the filter for limit + excluded results, then dropping the excluded, returns exactly the same
    # top `limit` (every excluded one can displace at most one result).
    FAST_PATH_MAX_EXCLUDED = 2000

    def _fast_path_extra(self, filters: Filters) -> int | None:
        if not filters.current_only:
            return None
        excluded = self.not_current_count()
        return excluded if excluded <= self.FAST_PATH_MAX_EXCLUDED else None

    def keyword_search(self, match: str, filters: Filters, limit: int) -> list[tuple[int, float]]:
        """BM25 over text, tags and applies-when phrases: [(seq, score)], best first; score = -bm25
        (higher is better)."""
        extra = self._fast_path_extra(filters)
        if extra is not None:
            held = self._held_top("memory_fts", match, int(limit) + extra, ())
            if held is not None:
                return self._keep_current(held, limit)
            plain = ("SELECT rowid, bm25(memory_fts) AS rank FROM memory_fts WHERE memory_fts MATCH ? "
                     "ORDER BY rank LIMIT ?")
            rows = self._bm25_top("memory_fts", "memories", match, int(limit) + extra,
                                  lambda expr, n: self.conn.execute(plain, (expr, n)).fetchall())
            return self._keep_current([(int(seq), -float(rank)) for seq, rank in rows], limit)
        where, params = filters.where()
        rows = self._bm25_top("memory_fts", "memories", match, int(limit), lambda expr, n: self.conn.execute(
            f"SELECT f.rowid, bm25(memory_fts) AS rank FROM memory_fts f JOIN memories m ON m.seq = f.rowid "
            f"WHERE memory_fts MATCH ? AND {where} ORDER BY rank LIMIT ?", (expr, *params, n)).fetchall())
        return [(int(seq), -float(rank)) for seq, rank in rows]

    def _held_top(self, fts: str, match: str, limit: int, weights: Sequence[float], allowed: str | None = None,
                  params: Sequence[object] = ()) -> list[tuple[int, float]] | None:
        """The `limit` best [(rowid, -bm25)] for `match` from the postings held (hold_vectors), FTS5's
        scores (fts_postings); None when none are held, `match` is not an OR of phrases or a
        transaction is open. weights:
        bm25's column weights; allowed: SQL selecting the rowids a row must be among (one column named
        seq, with params)."""
        held = self.postings.get(fts)
        phrases = phrases_of(match)
        # Inside a write transaction FTS5 scores with its own pending totals, which its averages
        # record (what the hold reads) gets only at commit: FTS5 answers there (remember's detection).
        if held is None or phrases is None or self.conn.in_transaction:
            return None
        with self.snapshot():  # the records, the lengths and FTS5's fresh rows of one moment
            held.sync(self.conn)
            rows, scores = held.scores(self.conn, phrases, weights)
            keep = None if allowed is None else selected_seqs(self.conn, allowed, params)
        return fts_postings.top(rows, scores, limit, keep)

    def _bm25_top(self, fts: str, owner: str, match: str, limit: int,
                  run: Callable[[str, int], list[Any]]) -> list[tuple[int, float]]:
        """The `limit` best (rowid, FTS5 rank) for `match` over the FTS table `fts` of base table
        `owner`, best (lowest) first: run(expression, n) returns one expression's n best; above
        fts_prune.PRUNE_POSTINGS matches only the rows holding the query's rarest words are scored
        (fts_prune.rare_first)."""
        phrases = phrases_of(match)
        if phrases is None or len(phrases) < 2:
            return list(run(match, limit))
        total, df = self._phrase_counts(fts, owner, phrases)
        expressions = rare_first(match, total, df, limit)
        if expressions == [match]:
            return list(run(match, limit))
        best: dict[int, float] = {}  # a row in both lists keeps its lower rank: the OR's score
        for expression in expressions:
            for seq, rank in run(expression, limit):
                best[int(seq)] = min(float(rank), best.get(int(seq), float("inf")))
        if len(best) < limit:  # the rare words' rows are too few: rank every match
            return list(run(match, limit))
        return sorted(best.items(), key=lambda row: (row[1], row[0]))[:limit]

    def term_counts(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """How many live memories are keyword-indexed, and for each term (an FTS5 MATCH expression
        as text.fts_query writes one phrase: '"feature"') how many of them match it: the document
        frequencies an IDF is computed from. Counts include superseded memories (they share the
        project's words); each term is one index lookup, kept until the store changes: a prompt's
        recall and its relevance gate ask for the same words (ranking.query_weights,
        context.term_weights)."""
        # Exact, never stale: kept while PRAGMA data_version (another connection's commit) and
        # total_changes (this connection's writes) are what they were, as VectorCache.sync does.
        seen = (self.conn.execute("PRAGMA data_version").fetchone()[0], self.conn.total_changes)
        if self._terms_seen != seen or len(self._terms) > TERM_COUNTS_KEPT:
            # FTS5's docsize table holds one row per indexed document: counting it is a b-tree count,
            # where count(*) on the FTS table reads every row (0.03 against 0.8 ms at 3,000 memories).
            self._terms_total = int(self.conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()[0])
            self._terms, self._terms_seen = {}, seen
        out: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            if term not in self._terms:
                self._terms[term] = int(self.conn.execute(
                    "SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?", (term,)).fetchone()[0])
            out[term] = self._terms[term]
        return self._terms_total, out

    def vector_search(self, query: np.ndarray, filters: Filters, limit: int) -> list[tuple[int, float]]:
        """Nearest neighbours among the filtered memories: [(seq, cosine)], best first."""
        if self.vector_index is None or not self.vector_index.exists(self.conn):
            return []
        extra = self._fast_path_extra(filters)
        if extra is not None:
            held = self._held()
            found = held.search(query, limit + extra) if held is not None else \
                self.vector_index.search(self.conn, query, limit + extra, None, ())
            return self._keep_current(found, limit)
        where, params = filters.where()
        return self.vector_index.search(self.conn, query, limit, f"SELECT m.seq FROM memories m WHERE {where}", params)

    VEC0_POINT_LOOKUPS_MAX = 32  # ~0.3 ms a lookup against one ~10 ms pass at 10k memories

    def vectors_of(self, seqs: Sequence[int]) -> dict[int, np.ndarray]:
        """Stored vectors of those memories (absent ones are left out)."""
        if self.vector_index is None or not self.vector_index.exists(self.conn) or not seqs:
            return {}
        import numpy as np

        held = self._held()
        if held is not None:
            return held.vectors_of(seqs)
        marks = sql.marks(len(seqs))
        if isinstance(self.vector_index, SqliteVecIndex):
            if len(seqs) <= self.VEC0_POINT_LOOKUPS_MAX:
                # vec0 answers `rowid IN (...)` by reading every chunk (10 ms at 10k memories, for
                # any number of rowids) but `rowid = ?` from its rowid map (~0.3 ms each).
                point = f"SELECT rowid, embedding FROM {SqliteVecIndex.table} WHERE rowid = ?"
                rows = (row for seq in seqs for row in self.conn.execute(point, (seq,)))
                return {int(s): np.frombuffer(b, dtype=np.float32) for s, b in rows}
            text = f"SELECT rowid, embedding FROM {SqliteVecIndex.table} WHERE rowid IN ({marks})"
        else:
            text = f"SELECT seq, embedding FROM {NumpyIndex.table} WHERE seq IN ({marks})"
        return {int(s): np.frombuffer(b, dtype=np.float32) for s, b in self.conn.execute(text, list(seqs))}

    # -- writes (call inside transaction()) ----------------------------------------------------------
    def _index_memory(self, seq: int, text: str, tags: Sequence[str], applies_when: Sequence[str]) -> None:
        self.conn.execute("INSERT INTO memory_fts(rowid, body, tags, applies) VALUES (?, ?, ?, ?)",
                          (seq, index_text(text), " ".join(tags), index_text("; ".join(applies_when))))

    def _add_tags(self, seq: int, tags: Sequence[str]) -> None:
        self.conn.executemany("INSERT INTO memory_tags(tag, seq) VALUES (?, ?)", [(t, seq) for t in tags])

    def insert(self, new: NewMemory, vector: np.ndarray | None) -> int | None:
        """Insert a memory with its index entries; returns its seq. Raises db.IntegrityError on an
        exact duplicate of a current memory (writers are serial here: the engine checked first)."""
        cur = self.conn.execute(f"INSERT INTO memories ({sql.INSERT_COLUMNS}) VALUES ({sql.marks(12)})",
                                sql.new_memory_params(new, _applies_json(new.applies_when)))
        seq = int(cur.lastrowid)
        self._add_tags(seq, new.tags)
        self._index_memory(seq, new.text, new.tags, new.applies_when)
        self.put_vector(seq, vector)
        return seq

    def _ensure_vector_table(self, index: VectorIndex, dim: int) -> None:
        if not index.exists(self.conn):
            index.create(self.conn, dim)

    def put_vector(self, seq: int, vector: np.ndarray | None, *, fresh: bool = False, wait: bool = False) -> None:
        """Store `vector` for `seq`, or queue the memory for embedding when there is none (fresh and
        wait are Postgres's: a write here never waits on the vector table apart from the file)."""
        if vector is not None and self.vector_index is not None:
            self._ensure_vector_table(self.vector_index, len(vector))
            self.vector_index.upsert(self.conn, seq, vector)
            self.conn.execute("DELETE FROM vector_backlog WHERE seq = ?", (seq,))
        else:
            self.conn.execute("INSERT OR IGNORE INTO vector_backlog(seq) VALUES (?)", (seq,))

    def _erase_index(self, seq: int) -> None:
        self.conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (seq,))
        if not fts_secure_delete_supported(self.conn):
            # An SQLite older than 3.42 (the stdlib fallback) keeps deleted entries in the FTS
            # segments until a merge: rewrite the index now, so that the text is gone from it.
            self.conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")

    def bulk_vectors(self) -> contextlib.AbstractContextManager[Any]:
        """As PgStore.bulk_vectors (an index built once after a bulk fill); sqlite-vec's index has no
        graph to build, so nothing changes here."""
        return contextlib.nullcontext()

    def flush_to_disk(self) -> bool:
        """Checkpoint the WAL into the database file and truncate it (after a forget: the erased
        text then survives in no file). Returns False when a reader kept the WAL in use; the next
        checkpoint empties it."""
        return db.checkpoint_truncate(self.conn)

    def insert_raw(self, memory: Memory, text_key: str | None, asserted_valid_to: int) -> int:
        """Insert a memory exactly as exported (import); index entries follow for live ones."""
        live = memory.text is not None
        cur = self.conn.execute(f"INSERT INTO memories ({sql.RAW_COLUMNS}) VALUES ({sql.marks(16)})",
                                sql.raw_memory_params(memory, text_key, asserted_valid_to,
                                                      _applies_json(memory.applies_when) if live else None))
        seq = int(cur.lastrowid)
        if memory.text is not None:
            self._add_tags(seq, memory.tags)
            self._index_memory(seq, memory.text, memory.tags, memory.applies_when)
            self.conn.execute("INSERT INTO vector_backlog(seq) VALUES (?)", (seq,))
        return seq

    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    # -- bulk: export, import, embedding ------------------------------------------------------------
    def import_rows(self, records: Sequence[tuple[Memory, int]]) -> tuple[int, int]:
        """Insert exported memories in one transaction: (imported, skipped). A memory whose id
        exists, or a live one whose text is already current, is skipped. Raises InvalidImport when
        a row breaks a constraint or a superseded_by points nowhere; then nothing is written."""
        with self.transaction():
            self.conn.execute("PRAGMA defer_foreign_keys = ON")  # chains may point forward in the file
            done = self._import_each(records)
            if self.conn.execute("PRAGMA foreign_key_check(memories)").fetchone():
                raise InvalidImport("superseded_by points to a memory that is neither in the file nor the store")
        return done

    def _insert_imported(self, memory: Memory, key: str | None, asserted: int) -> None:
        try:
            self.insert_raw(memory, key, asserted)
        except db.IntegrityError as exc:
            raise InvalidImport(f"memory {memory.id}: {exc}") from None

    def fill_backlog(self, vectors: dict[int, np.ndarray]) -> int:
        """Store vectors for memories still in the backlog (one forgotten meanwhile is never
        given a vector back). Returns how many were stored."""
        return self._fill_backlog_each(vectors)

    # -- health ----------------------------------------------------------------------------------------
    def integrity(self) -> str:
        """`PRAGMA integrity_check`: "ok", or its problems, one per line."""
        return "\n".join(r[0] for r in self.conn.execute("PRAGMA integrity_check").fetchall())

    def index_report(self) -> dict[str, int]:
        """How the FTS and vector indexes agree with the memory table. Live memories (with text) must
        each have one FTS row and either a vector or a backlog entry; nothing else may be indexed.
        {"live", "fts_missing", "fts_orphans", "vector_missing", "vector_orphans"}."""
        live = sql.LIVE_SEQS
        one = self._one
        report = {
            "live": one(f"SELECT count(*) FROM ({live})"),
            "fts_missing": one(f"SELECT count(*) FROM ({live}) WHERE seq NOT IN (SELECT rowid FROM memory_fts)"),
            "fts_orphans": one(f"SELECT count(*) FROM memory_fts WHERE rowid NOT IN ({live})"),
            "vector_missing": 0, "vector_orphans": 0,
        }
        index = self.vector_index
        if index is not None and index.exists(self.conn):
            key = "rowid" if isinstance(index, SqliteVecIndex) else "seq"
            report["vector_missing"] = one(
                f"SELECT count(*) FROM ({live}) WHERE seq NOT IN (SELECT {key} FROM {index.table}) "
                "AND seq NOT IN (SELECT seq FROM vector_backlog)")
            report["vector_orphans"] = one(f"SELECT count(*) FROM {index.table} WHERE {key} NOT IN ({live})")
        elif index is not None:
            report["vector_missing"] = one(f"SELECT count(*) FROM ({live}) WHERE seq NOT IN "
                                           "(SELECT seq FROM vector_backlog)")
        return report

    def rebuild_indexes(self) -> None:
        """Rebuild the FTS index from the memory table, drop vectors of memories that are not live,
        and queue live memories without a vector for embedding (in one transaction)."""
        with self.transaction():
            self.conn.execute("DELETE FROM memory_fts")
            rows = self.conn.execute("SELECT seq, text, applies_when FROM memories WHERE text IS NOT NULL").fetchall()
            tags = self._tags([seq for seq, _, _ in rows])
            for seq, text, applies in rows:
                self._index_memory(seq, text, tags.get(seq, ()), _applies(applies))
            index = self.vector_index
            live = sql.LIVE_SEQS
            self.conn.execute(f"DELETE FROM vector_backlog WHERE seq NOT IN ({live})")
            if index is not None and index.exists(self.conn):
                key = "rowid" if isinstance(index, SqliteVecIndex) else "seq"
                for (seq,) in self.conn.execute(f"SELECT {key} FROM {index.table} WHERE {key} NOT IN ({live})"
                                                ).fetchall():
                    index.delete(self.conn, seq)
                self.conn.execute(f"INSERT OR IGNORE INTO vector_backlog(seq) SELECT seq FROM ({live}) "
                                  f"WHERE seq NOT IN (SELECT {key} FROM {index.table})")
            elif index is not None:
                self.conn.execute(f"INSERT OR IGNORE INTO vector_backlog(seq) {live}")
        self.flush_to_disk()

    # -- backup and restore --------------------------------------------------------------------------
    def backup_to(self, target: Path) -> None:
        """Copy this store into a new file `target` (0600) with SQLite's online backup API: one
        consistent snapshot, taken while other connections keep writing (WAL readers do not block
        writers). The copy is a single self-contained file (rollback journal, no -wal) and passes
        `PRAGMA integrity_check`; it is written under a temporary name and renamed, so a backup
        killed midway leaves no file that looks complete. Raises StoreError if the copy fails its check."""
        tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
        home.private_file(tmp)
        try:
            copy = db.sqlite.connect(str(tmp), isolation_level=None)
            try:
                self.conn.backup(copy)
                copy.execute("PRAGMA journal_mode = DELETE")
                check = copy.execute("PRAGMA integrity_check").fetchone()[0]
            finally:
                copy.close()
            if check != "ok":
                raise StoreError(f"the backup of {self.name!r} failed its integrity check: {check}")
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)

    def restore_from(self, source: Path) -> None:
        """Replace this store's whole content by the database at `source`, in one write transaction
        of the backup API: every other connection to this file (the warm process, MCP servers) sees
        the restored content at its next read, never a mix. Check `source` with inspect_file first."""
        src = db.connect_read_only(str(source))
        try:
            src.backup(self.conn)
        finally:
            src.close()
        db.checkpoint_truncate(self.conn)

    @classmethod
    def open_file_copy(cls, source: Path, target: Path) -> SqliteStore:
        """Copy the database at `source` into the new file `target` (0600, WAL) and open it as a
        store (migrated). Raises StoreCorrupted."""
        copy = db.sqlite.connect(str(home.private_file(target)), isolation_level=None)
        try:
            src = db.connect_read_only(str(source))
            try:
                src.backup(copy)
            finally:
                src.close()
        finally:
            copy.close()
        return cls.open(target, name=target.stem, create=False)

    @staticmethod
    def inspect_file(path: Path) -> dict[str, object]:
        """What a store or backup file holds, read without changing it: {"schema_version", "name"
        (as recorded in it, or None), "integrity" ("ok" or the first problem)}. Raises StoreCorrupted
        (not a database, or not a Cairn store), SchemaTooNew (written by a newer Cairn)."""
        conn = db.connect_read_only(str(path))
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            latest = len(MIGRATIONS)
            if version > latest:
                raise SchemaTooNew(f"{path} has schema version {version}, newer than this Cairn understands "
                                   f"({latest}); upgrade Cairn to restore it")
            has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone()
            if version == 0 or not has_meta:
                raise StoreCorrupted(f"{path} is not a Cairn store")
            row = conn.execute("SELECT value FROM meta WHERE key = 'name'").fetchone()
            integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        except db.DatabaseError as exc:
            raise StoreCorrupted(f"{path} cannot be read ({exc})") from None
        finally:
            conn.close()
        return {"schema_version": version, "name": row[0] if row else None, "integrity": integrity}

    # -- captured sessions (turns, their FTS rows and vectors, the session catalog) ------------------
    def _turn_index_insert(self, text: str, key: str) -> tuple[str, str, tuple[Any, ...]]:
        return "", "", ()  # the FTS row follows the INSERT (_index_turn)

    def _index_turn(self, seq: int, text: str, key: str, *, new: bool) -> None:
        if not new:
            self.conn.execute("DELETE FROM turn_fts WHERE rowid = ?", (seq,))
        self.conn.execute("INSERT INTO turn_fts(rowid, body, key) VALUES (?, ?, ?)",
                          (seq, index_text(text), index_text(key)))

    def turn_keyword_search(self, match: str, limit: int, *, since: int | None = None, until: int | None = None,
                            key_weight: float = 1.0) -> list[tuple[int, float]]:
        """BM25 over turns (text, and its index key weighted by key_weight): [(seq, -bm25)], best first."""
        clauses, params = self._turn_time(since, until)
        held = self._held_top("turn_fts", match, int(limit), (1.0, float(key_weight)),
                              f"SELECT t.seq FROM turns t WHERE {' AND '.join(clauses)}" if clauses else None, params)
        if held is not None:
            return held
        join = f" JOIN turns t ON t.seq = f.rowid AND {' AND '.join(clauses)}" if clauses else ""
        rows = self._bm25_top("turn_fts", "turns", match, int(limit), lambda expr, n: self.conn.execute(
            f"SELECT f.rowid, bm25(turn_fts, 1.0, ?) AS rank FROM turn_fts f{join} WHERE turn_fts MATCH ? "
            "ORDER BY rank LIMIT ?", (float(key_weight), *params, expr, n)).fetchall())
        return [(int(seq), -float(rank)) for seq, rank in rows]

    def _phrase_counts(self, fts: str, owner: str, phrases: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(rows keyword-indexed in `fts`, {phrase: rows holding it}), for _bm25_top's choice of rows to
        score. Nothing is counted when the rows (bounded by max(seq) of `owner`, its base table) times
        the phrases are within fts_prune.PRUNE_POSTINGS: the query is then run as it is. Counts are
        kept until that max(seq) moves by PHRASE_COUNTS_DRIFT: they only choose which rows BM25
        scores, the scores are FTS5's own, and a count takes up to ~10 ms at 200,000 turns (a
        remember's duplicate check must not pay one each time). term_counts stays exact for IDFs."""
        at = int(self.conn.execute(f"SELECT coalesce(max(seq), 0) FROM {owner}").fetchone()[0])
        if at * len(phrases) <= fts_prune.PRUNE_POSTINGS:
            return at, {}
        held_at, total, counts = self._phrase_cache.get(fts, (-1, 0, {}))
        if abs(at - held_at) > PHRASE_COUNTS_DRIFT * held_at or len(counts) > TERM_COUNTS_KEPT:
            total = int(self.conn.execute(f"SELECT count(*) FROM {fts}_docsize").fetchone()[0])
            counts = {}
            self._phrase_cache[fts] = (at, total, counts)
        out: dict[str, int] = {}
        for phrase in dict.fromkeys(phrases):
            if phrase not in counts:
                counts[phrase] = int(self.conn.execute(
                    f"SELECT count(*) FROM {fts} WHERE {fts} MATCH ?", (phrase,)).fetchone()[0])
            out[phrase] = counts[phrase]
        return total, out

    def turn_vector_search(self, query: np.ndarray, limit: int, *, since: int | None = None,
                           until: int | None = None) -> list[tuple[int, float]]:
        """Nearest turns to `query`: [(seq, cosine)], best first."""
        if self.turn_index is None or not self.turn_index.exists(self.conn):
            return []
        clauses, params = self._turn_time(since, until)
        restrict = f"SELECT t.seq FROM turns t WHERE {' AND '.join(clauses)}" if clauses else None
        return self.turn_index.search(self.conn, query, limit, restrict, params)

    def file_size(self) -> int:
        """Bytes on disk: the database plus its WAL."""
        wal = Path(str(self.path) + "-wal")
        return os.path.getsize(self.path) + (os.path.getsize(wal) if wal.exists() else 0)
