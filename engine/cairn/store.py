"""The store: one SQLite file holding memories, their FTS5 index and their vector index.

This module owns every SQL statement on those tables. It knows nothing of embedding models or
ranking; `engine.py` composes it with both.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import db, paths
from .errors import InvalidImport, MemoryNotFound, SchemaTooNew, StoreCorrupted, StoreError, StoreNotFound
from .migrations import MIGRATIONS, fts_secure_delete_supported, migrate
from .models import Memory, Order, Proposal, SessionInfo, Turn
from .records import NewMemory
from .text import forgotten_subject, index_text, normalise, passage, without_text
from .timeutil import END_OF_TIME, now_ms
from .vectors import BACKENDS, TURN_BACKENDS, NumpyIndex, SqliteVecIndex, VectorCache, VectorIndex

if TYPE_CHECKING:
    import numpy as np

_COLUMNS = (
    "seq, id, text, kind, importance, source, session_id, valid_from, valid_to, recorded_at, "
    "retired_at, superseded_by, forgotten_at, cold_at, applies_when"
)


def _applies_json(phrases: Sequence[str]) -> str | None:
    """applies_when as stored: a JSON array, NULL when there is none."""
    return json.dumps(list(phrases), ensure_ascii=False) if phrases else None


def _applies(value: str | None) -> tuple[str, ...]:
    return tuple(json.loads(value)) if value else ()


def _passage(text: str, applies_json: str | None) -> str:
    return passage(text, _applies(applies_json))


def current_sql(alias: str = "") -> str:
    """The one SQL definition of "current" (models.STATUSES), with one `?` for now (epoch ms):
    not forgotten, not retired, valid_to not yet passed. Memory.status is the same rule in Python."""
    m = f"{alias}." if alias else ""
    return f"{m}forgotten_at IS NULL AND {m}retired_at = {END_OF_TIME} AND {m}valid_to > ?"


def _in_data_root(path: Path) -> bool:
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(paths.data_root()))


def secure_files(path: Path) -> None:
    """Make the store file at `path` (created empty if missing: SQLite takes an empty file for a new
    database) and its -wal and -shm files 0600. SQLite creates -wal and -shm with the database
    file's mode, so a store created here stays private whatever the umask."""
    paths.private_file(path)
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        with contextlib.suppress(FileNotFoundError):
            if side.stat().st_mode & 0o777 != paths.FILE_MODE:
                os.chmod(side, paths.FILE_MODE)


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

    def where(self) -> tuple[str, list[object]]:
        """SQL boolean over `memories m` and its parameters."""
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
            clauses.append(current_sql("m"))  # the current view
            params.append(known)
        elif not self.include_superseded:
            # What was current at transaction time `known`: the same rule, as the store believed then.
            clauses.append(f"m.retired_at > ? AND {valid_to} > ?")
            params += [known, known, known]
        if self.as_of is None and not self.include_cold:
            clauses.append("m.cold_at IS NULL")
        if self.kinds:
            clauses.append(f"m.kind IN ({','.join('?' * len(self.kinds))})")
            params += list(self.kinds)
        if self.tags:
            clauses.append(
                f"m.seq IN (SELECT seq FROM memory_tags WHERE tag IN ({','.join('?' * len(self.tags))}))"
            )
            params += list(self.tags)
        if self.since is not None:
            clauses.append("m.valid_from >= ?")
            params.append(self.since)
        if self.until is not None:
            clauses.append("m.valid_from < ?")
            params.append(self.until)
        return " AND ".join(clauses), params


def _file_identity(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at `path`; None for an in-memory database or a missing file."""
    if str(path) == ":memory:":
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def time_bounds(since: int | None, until: int | None, *, start: str, end: str, mark: str = "?"
                ) -> tuple[list[str], list[object]]:
    """SQL clauses keeping the rows whose span [start, end] overlaps [since, until) (a point in time:
    start == end), and their parameters. since/until: epoch ms, UTC, or None (unbounded); start/end:
    SQL expressions; mark: the driver's placeholder ("?" for sqlite3, "%s" for psycopg)."""
    clauses: list[str] = []
    params: list[object] = []
    if since is not None:
        clauses.append(f"{end} >= {mark}")
        params.append(since)
    if until is not None:
        clauses.append(f"{start} < {mark}")
        params.append(until)
    return clauses, params


def forget_in_proposals(conn: Any, memory_id: str, text: str, at: int, *, mark: str = "?") -> int:
    """Every proposal with `memory_id` among its sources loses the memory's `text` (replaced by
    "[forgotten]" in its subject, payload and result), and a pending one expires: nothing is left
    to decide on. For both backends, inside the forget's transaction: `conn` a SQLite or psycopg
    connection, `mark` its parameter placeholder ("?" or "%s"). Returns how many changed."""
    changed = 0
    rows = conn.execute(f"SELECT {Store._PROPOSAL_COLUMNS} FROM proposals WHERE sources LIKE {mark}",
                        (f'%"{memory_id}"%',)).fetchall()
    for p in map(Store._proposal, rows):
        if memory_id not in p.source_ids:
            continue
        pending = p.state == "pending"
        result = {"reason": "a source memory was forgotten"} if pending else without_text(p.result, text)
        conn.execute(f"UPDATE proposals SET subject = {mark}, payload = {mark}, result = {mark}, state = {mark}, "
                     f"decided_at = {mark} WHERE id = {mark}",
                     (forgotten_subject(p.subject, text), json.dumps(without_text(p.payload, text), ensure_ascii=False),
                      None if result is None else json.dumps(result, ensure_ascii=False),
                      "expired" if pending else p.state, at if pending else p.decided_at, p.id))
        changed += 1
    return changed


class Store:
    """One open store file. Not thread-safe for concurrent writes from one object; use one per thread.

    Attributes: name, path, vector_index (None when no backend can serve this file),
    vector_unavailable (why not, or None).
    """

    def __init__(self, conn: db.Connection, path: Path, name: str):
        self.conn = conn
        self.path = path
        self.name = name
        self.vector_index: VectorIndex | None = None
        self.turn_index: VectorIndex | None = None  # captured turns' vectors, same backend
        self.vector_unavailable: str | None = None
        self.vector_cache: VectorCache | None = None  # see hold_vectors
        self._identity = _file_identity(path)

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
    ) -> Store:
        """Open (and migrate) the store file at `path`.

        create: make the file if missing (else raise StoreNotFound). meta: key/values recorded on
        creation (project path, ...). vector_backend: "auto", "sqlite-vec" or "numpy"; an existing
        store keeps the backend it was created with.
        Raises StoreNotFound, StoreCorrupted, SchemaTooNew.
        """
        in_memory = str(path) == ":memory:"
        if not in_memory and _in_data_root(path):
            paths.ensure_data_root()  # refuses a root owned by another user; tightens an old install
        if not path.exists() and not in_memory:
            if not create:
                raise StoreNotFound(f"store {name!r} does not exist ({path})")
            if _in_data_root(path):
                paths.private_dir(path.parent)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
        elif path.is_dir():
            raise StoreCorrupted(f"{path} is a directory, not a store file")
        if not in_memory:
            secure_files(path)
        conn = db.connect(str(path), busy_timeout_ms=busy_timeout_ms)
        try:
            migrate(conn, str(path))
            store = cls(conn, path, name)
            store._init_meta(meta or {})
            store._choose_vector_index(vector_backend)
        except BaseException:
            conn.close()
            raise
        return store

    def close(self) -> None:
        self.conn.close()

    def hold_vectors(self) -> bool:
        """Keep the memories' vectors in process memory from now on (vectors.VectorCache), for a
        long-lived process: k-NN and vector lookups of the default view are then served from memory,
        re-synchronised with the file before each use. Returns whether it is on (only a sqlite-vec
        index can be held)."""
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

    def transaction(self) -> contextlib.AbstractContextManager:
        """A short write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on any exception."""
        return db.write_transaction(self.conn)

    def _init_meta(self, meta: dict[str, str]) -> None:
        if self.get_meta("created_at") is None:
            with db.write_transaction(self.conn):
                for key, value in {"created_at": str(now_ms()), "name": self.name, **meta}.items():
                    self.conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def _choose_vector_index(self, preference: str) -> None:
        recorded = self.get_meta("vector_backend")
        wanted = recorded or preference
        vec_error = db.load_sqlite_vec(self.conn) if wanted in ("auto", "sqlite-vec") else "not requested"
        if wanted == "auto":
            wanted = "sqlite-vec" if vec_error is None else "numpy"
        if wanted == "sqlite-vec" and vec_error is not None:
            self.vector_unavailable = f"this store's vectors are in sqlite-vec, which failed to load ({vec_error})"
            return
        self.vector_index = BACKENDS[wanted]()
        self.turn_index = TURN_BACKENDS[wanted]()
        if recorded is None:
            self.set_meta("vector_backend", wanted)

    # -- meta --------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with db.write_transaction(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- reads -------------------------------------------------------------------------------
    def _memories(self, rows: Iterable[Sequence[object]]) -> list[Memory]:
        rows = list(rows)
        tags = self._tags([r[0] for r in rows])
        return [
            Memory(
                id=r[1], text=r[2], kind=r[3], tags=tags.get(r[0], ()), importance=r[4], source=r[5],
                session_id=r[6], valid_from=r[7], valid_to=Memory.open_end(r[8]), recorded_at=r[9],
                retired_at=Memory.open_end(r[10]), superseded_by=r[11], forgotten_at=r[12], store=self.name,
                cold_at=r[13],
                applies_when=_applies(r[14]),
            )
            for r in rows
        ]

    def _tags(self, seqs: list[int]) -> dict[int, tuple[str, ...]]:
        out: dict[int, list[str]] = {}
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            rows = self.conn.execute(
                f"SELECT seq, tag FROM memory_tags WHERE seq IN ({','.join('?' * len(chunk))}) ORDER BY tag", chunk
            )
            for seq, tag in rows:
                out.setdefault(seq, []).append(tag)
        return {k: tuple(v) for k, v in out.items()}

    def get(self, memory_id: str) -> Memory:
        """The memory with that id (tombstones included). Raises MemoryNotFound."""
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(f"no memory {memory_id!r} in store {self.name!r}")
        return self._memories([row])[0]

    def get_for_update(self, memory_id: str) -> Memory:
        """As get; inside a write transaction, which holds SQLite's write lock, the row cannot change
        before it commits. Raises MemoryNotFound."""
        return self.get(memory_id)

    def seq_of(self, memory_id: str) -> int:
        row = self.conn.execute("SELECT seq FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(f"no memory {memory_id!r} in store {self.name!r}")
        return row[0]

    def seqs_of(self, memory_ids: Sequence[str]) -> dict[str, int]:
        """{id: seq} for those of `memory_ids` the store holds."""
        out: dict[str, int] = {}
        for start in range(0, len(memory_ids), 500):
            chunk = list(memory_ids[start : start + 500])
            out.update(self.conn.execute(f"SELECT id, seq FROM memories WHERE id IN ({','.join('?' * len(chunk))})",
                                         chunk).fetchall())
        return out

    def by_seqs(self, seqs: Sequence[int]) -> dict[int, Memory]:
        out: dict[int, Memory] = {}
        for start in range(0, len(seqs), 500):
            chunk = list(seqs[start : start + 500])
            rows = self.conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            for row, memory in zip(rows, self._memories(rows)):
                out[row[0]] = memory
        return out

    def current_by_text_key(self, text_key: str) -> Memory | None:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE text_key = ? AND retired_at = ?", (text_key, END_OF_TIME)
        ).fetchone()
        return self._memories([row])[0] if row else None

    _ORDER_SQL = {Order.NEWEST: "recorded_at DESC, seq DESC", Order.OLDEST: "recorded_at ASC, seq ASC",
                  Order.IMPORTANCE: "importance DESC, recorded_at DESC, seq DESC"}

    def list(self, filters: Filters, *, limit: int | None = None, order: Order = Order.NEWEST) -> list[Memory]:
        where, params = filters.where()
        sql = f"SELECT {_COLUMNS} FROM memories m WHERE {where} ORDER BY {self._ORDER_SQL[Order(order)]}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return self._memories(self.conn.execute(sql, params).fetchall())

    def not_current_count(self) -> int:
        """Live memories (with text) outside the current view: superseded, expired or cold (an upper
        bound when a cold one is also superseded). Three index range scans."""
        end, now = END_OF_TIME, now_ms()
        return self.conn.execute(
            f"SELECT (SELECT count(*) FROM memories WHERE retired_at < {end} AND text IS NOT NULL)"
            # `+retired_at`: else the planner walks every current row through memories_by_retired (24 ms at 100k).
            f"     + (SELECT count(*) FROM memories WHERE valid_to <= ? AND +retired_at = {end} AND text IS NOT NULL)"
            # Cold memories are outside the default view too (memories_cold; one counted twice only widens the search).
            "     + (SELECT count(*) FROM memories WHERE cold_at IS NOT NULL AND text IS NOT NULL)",
            (now,),
        ).fetchone()[0]

    def _keep_current(self, ranked: list[tuple[int, float]], limit: int) -> list[tuple[int, float]]:
        if not ranked:
            return []
        where, params = Filters().where()
        marks = ",".join("?" * len(ranked))
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
            rows = self.conn.execute(
                "SELECT rowid, bm25(memory_fts) AS rank FROM memory_fts WHERE memory_fts MATCH ? ORDER BY rank LIMIT ?",
                (match, int(limit) + extra),
            ).fetchall()
            return self._keep_current([(int(seq), -float(rank)) for seq, rank in rows], limit)
        where, params = filters.where()
        rows = self.conn.execute(
            f"SELECT f.rowid, bm25(memory_fts) AS rank FROM memory_fts f JOIN memories m ON m.seq = f.rowid "
            f"WHERE memory_fts MATCH ? AND {where} ORDER BY rank LIMIT ?",
            (match, *params, int(limit)),
        ).fetchall()
        return [(int(seq), -float(rank)) for seq, rank in rows]

    def term_counts(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """How many live memories are keyword-indexed, and for each term (an FTS5 MATCH expression
        as text.fts_query writes one phrase: '"feature"') how many of them match it: the document
        frequencies an IDF is computed from. Counts include superseded memories (they share the
        project's words); each term is one index lookup."""
        # FTS5's docsize table holds one row per indexed document: counting it is a b-tree count,
        # where count(*) on the FTS table reads every row (0.03 against 0.8 ms at 3,000 memories).
        total = self.conn.execute("SELECT count(*) FROM memory_fts_docsize").fetchone()[0]
        out: dict[str, int] = {}
        for term in dict.fromkeys(terms):
            out[term] = self.conn.execute("SELECT count(*) FROM memory_fts WHERE memory_fts MATCH ?",
                                          (term,)).fetchone()[0]
        return int(total), out

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
        marks = ",".join("?" * len(seqs))
        if isinstance(self.vector_index, SqliteVecIndex):
            if len(seqs) <= self.VEC0_POINT_LOOKUPS_MAX:
                # vec0 answers `rowid IN (...)` by reading every chunk (10 ms at 10k memories, for
                # any number of rowids) but `rowid = ?` from its rowid map (~0.3 ms each).
                sql = f"SELECT rowid, embedding FROM {SqliteVecIndex.table} WHERE rowid = ?"
                rows = (row for seq in seqs for row in self.conn.execute(sql, (seq,)))
                return {int(s): np.frombuffer(b, dtype=np.float32) for s, b in rows}
            sql = f"SELECT rowid, embedding FROM {SqliteVecIndex.table} WHERE rowid IN ({marks})"
        else:
            sql = f"SELECT seq, embedding FROM {NumpyIndex.table} WHERE seq IN ({marks})"
        return {int(s): np.frombuffer(b, dtype=np.float32) for s, b in self.conn.execute(sql, list(seqs))}

    def chain_ids(self, memory_id: str) -> list[str]:
        """Ids of the supersession chain through `memory_id`, oldest first."""
        self.seq_of(memory_id)
        back = self.conn.execute(
            """WITH RECURSIVE up(id, depth) AS (
                   SELECT ?, 0
                   UNION SELECT m.id, up.depth + 1 FROM memories m JOIN up ON m.superseded_by = up.id
                   WHERE up.depth < 10000)
               SELECT id FROM up ORDER BY depth DESC""",
            (memory_id,),
        ).fetchall()
        forward = self.conn.execute(
            """WITH RECURSIVE down(id, depth) AS (
                   SELECT superseded_by, 1 FROM memories WHERE id = ? AND superseded_by IS NOT NULL
                   UNION SELECT m.superseded_by, down.depth + 1 FROM memories m JOIN down ON m.id = down.id
                   WHERE m.superseded_by IS NOT NULL AND down.depth < 10000)
               SELECT id FROM down ORDER BY depth""",
            (memory_id,),
        ).fetchall()
        # A memory may have several predecessors (two facts merged into one); keep all, in order.
        return [r[0] for r in back] + [r[0] for r in forward]

    def counts(self) -> dict[str, int]:
        """{"current": current and warm (what the hooks and default recall see), "cold": current but
        demoted to the cold tier, "superseded", "forgotten", "total" (every row), "awaiting_embedding"}."""
        row = self.conn.execute(
            f"""SELECT
                  sum({current_sql()} AND cold_at IS NULL),
                  sum({current_sql()} AND cold_at IS NOT NULL),
                  sum(superseded_by IS NOT NULL AND forgotten_at IS NULL),
                  sum(forgotten_at IS NOT NULL),
                  count(*)
                FROM memories""", (now_ms(), now_ms())
        ).fetchone()
        backlog = self.conn.execute("SELECT count(*) FROM vector_backlog").fetchone()[0]
        return {
            "current": row[0] or 0, "cold": row[1] or 0, "superseded": row[2] or 0, "forgotten": row[3] or 0,
            "total": row[4] or 0, "awaiting_embedding": backlog,
        }

    def current_kinds_and_tags(self, tag_limit: int) -> tuple[dict[str, int], list[tuple[str, int]]]:
        """Current (warm) memories per kind, and the `tag_limit` most used tags of current memories
        with their counts (most used first, then by name). Cold memories are left out, as the hooks do."""
        now = now_ms()
        kinds = dict(self.conn.execute(
            f"SELECT kind, count(*) FROM memories m WHERE {current_sql('m')} AND m.cold_at IS NULL GROUP BY kind",
            (now,)).fetchall())
        tags = self.conn.execute(
            f"SELECT t.tag, count(*) AS n FROM memory_tags t JOIN memories m ON m.seq = t.seq "
            f"WHERE {current_sql('m')} AND m.cold_at IS NULL GROUP BY t.tag ORDER BY n DESC, t.tag LIMIT ?",
            (now, int(tag_limit))).fetchall()
        return kinds, [(tag, n) for tag, n in tags]

    def backlog(self, limit: int) -> list[tuple[int, str]]:
        """(seq, passage) of memories awaiting a vector, oldest first: the passage (Memory.passage)
        is what is embedded."""
        rows = self.conn.execute(
            "SELECT b.seq, m.text, m.applies_when FROM vector_backlog b JOIN memories m ON m.seq = b.seq "
            "WHERE m.text IS NOT NULL ORDER BY b.seq LIMIT ?",
            (int(limit),),
        ).fetchall()
        return [(seq, _passage(text, applies)) for seq, text, applies in rows]

    def all_text_seqs(self) -> list[tuple[int, str]]:
        """(seq, passage) of every live memory: what is embedded."""
        rows = self.conn.execute(
            "SELECT seq, text, applies_when FROM memories WHERE text IS NOT NULL ORDER BY seq").fetchall()
        return [(seq, _passage(text, applies)) for seq, text, applies in rows]

    # -- writes (call inside db.write_transaction) ---------------------------------------------------
    def insert(self, new: NewMemory, vector: np.ndarray | None) -> int:
        """Insert a memory with its index entries; returns its seq. Raises db.IntegrityError on an
        exact duplicate of a current memory."""
        cur = self.conn.execute(
            "INSERT INTO memories (id, text, text_key, kind, importance, source, session_id, valid_from, "
            "valid_to, asserted_valid_to, recorded_at, applies_when) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (new.id, new.text, new.text_key, new.kind, new.importance, new.source, new.session_id,
             new.valid_from, new.valid_to, new.valid_to, new.recorded_at, _applies_json(new.applies_when)),
        )
        seq = int(cur.lastrowid)
        self.conn.executemany("INSERT INTO memory_tags(tag, seq) VALUES (?, ?)", [(t, seq) for t in new.tags])
        self.conn.execute(
            "INSERT INTO memory_fts(rowid, body, tags, applies) VALUES (?, ?, ?, ?)",
            (seq, index_text(new.text), " ".join(new.tags), index_text("; ".join(new.applies_when))),
        )
        self.put_vector(seq, vector)
        return seq

    def put_vector(self, seq: int, vector: np.ndarray | None) -> None:
        """Store `vector` for `seq`, or queue the memory for embedding when there is none."""
        if vector is not None and self.vector_index is not None:
            if not self.vector_index.exists(self.conn):
                self.vector_index.create(self.conn, len(vector))
            self.vector_index.upsert(self.conn, seq, vector)
            self.conn.execute("DELETE FROM vector_backlog WHERE seq = ?", (seq,))
        else:
            self.conn.execute("INSERT OR IGNORE INTO vector_backlog(seq) VALUES (?)", (seq,))

    def supersede(self, old_seq: int, new_id: str, at: int, valid_until: int) -> bool:
        """Retire `old_seq` at transaction time `at`, its validity ending at `valid_until`. Returns
        True (writers are serial here; PgStore returns False when another writer retired it first)."""
        self.conn.execute(
            "UPDATE memories SET retired_at = ?, superseded_by = ?, "
            "valid_to = max(valid_from + 1, min(valid_to, ?)) WHERE seq = ?",
            (at, new_id, valid_until, old_seq),
        )
        return True

    def erase(self, seq: int, at: int) -> None:
        """Forget: text, tags, FTS row and vector gone; the row stays as a tombstone. Review
        proposals that carry the text lose it too (_forget_in_proposals)."""
        row = self.conn.execute("SELECT id, text FROM memories WHERE seq = ?", (seq,)).fetchone()
        if row is not None and row[1] is not None:
            forget_in_proposals(self.conn, row[0], row[1], at)
        self.conn.execute(
            "UPDATE memories SET text = NULL, text_key = NULL, applies_when = NULL, forgotten_at = ?, "
            "retired_at = min(retired_at, ?) WHERE seq = ?",
            (at, at, seq),
        )
        self.conn.execute("DELETE FROM memory_tags WHERE seq = ?", (seq,))
        self.conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (seq,))
        if not fts_secure_delete_supported(self.conn):
            # An SQLite older than 3.42 (the stdlib fallback) keeps deleted entries in the FTS
            # segments until a merge: rewrite the index now, so that the text is gone from it.
            self.conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")
        self.conn.execute("DELETE FROM vector_backlog WHERE seq = ?", (seq,))
        if self.vector_index is not None and self.vector_index.exists(self.conn):
            self.vector_index.delete(self.conn, seq)

    def bulk_vectors(self) -> contextlib.AbstractContextManager:
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
        end = END_OF_TIME
        cur = self.conn.execute(
            "INSERT INTO memories (id, text, text_key, kind, importance, source, session_id, valid_from, valid_to, "
            "asserted_valid_to, recorded_at, retired_at, superseded_by, forgotten_at, cold_at, applies_when) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (memory.id, memory.text, text_key, memory.kind, memory.importance, memory.source, memory.session_id,
             memory.valid_from, memory.valid_to or end, asserted_valid_to, memory.recorded_at,
             memory.retired_at or end, memory.superseded_by, memory.forgotten_at, memory.cold_at,
             _applies_json(memory.applies_when) if memory.text is not None else None),
        )
        seq = int(cur.lastrowid)
        if memory.text is not None:
            self.conn.executemany("INSERT INTO memory_tags(tag, seq) VALUES (?, ?)", [(t, seq) for t in memory.tags])
            self.conn.execute(
                "INSERT INTO memory_fts(rowid, body, tags, applies) VALUES (?, ?, ?, ?)",
                (seq, index_text(memory.text), " ".join(memory.tags), index_text("; ".join(memory.applies_when))),
            )
            self.conn.execute("INSERT INTO vector_backlog(seq) VALUES (?)", (seq,))
        return seq

    def asserted_valid_to(self, seq: int) -> int:
        return self.conn.execute("SELECT asserted_valid_to FROM memories WHERE seq = ?", (seq,)).fetchone()[0]

    # -- review dismissals -----------------------------------------------------------------------
    def dismiss_pair(self, first_id: str, second_id: str, at: int) -> None:
        """Record "keep both" for the unordered pair. Raises MemoryNotFound for an unknown id."""
        self.seq_of(first_id), self.seq_of(second_id)
        pair = tuple(sorted((first_id, second_id)))
        with self.transaction():
            self.conn.execute("INSERT OR IGNORE INTO review_dismissals(first_id, second_id, dismissed_at) "
                              "VALUES (?, ?, ?)", (*pair, at))

    def is_dismissed(self, first_id: str, second_id: str) -> bool:
        pair = tuple(sorted((first_id, second_id)))
        return self.conn.execute("SELECT 1 FROM review_dismissals WHERE first_id = ? AND second_id = ?",
                                 pair).fetchone() is not None

    def dismissals(self) -> list[tuple[str, str, int]]:
        """Every recorded "keep both" pair: (first_id, second_id, dismissed_at)."""
        return [tuple(r) for r in self.conn.execute(
            "SELECT first_id, second_id, dismissed_at FROM review_dismissals ORDER BY first_id, second_id")]

    # -- cold tier, review queue, maintenance lease ---------------------------------------------------
    supports_queue = True

    def set_cold(self, memory_id: str, at: int | None) -> bool:
        """Demote a memory to the cold tier at `at` (epoch ms), or bring it back (None). Returns
        whether it changed. Raises MemoryNotFound."""
        self.seq_of(memory_id)
        was = "cold_at IS NULL" if at is not None else "cold_at IS NOT NULL"
        with self.transaction():
            cur = self.conn.execute(f"UPDATE memories SET cold_at = ? WHERE id = ? AND {was} AND text IS NOT NULL",
                                    (at, memory_id))
        return cur.rowcount == 1

    _PROPOSAL_COLUMNS = ("id, type, state, subject, sources, payload, created_at, expires_at, decided_at, decided_by, "
                         "result")

    @staticmethod
    def _proposal(row: Sequence[object]) -> Proposal:
        return Proposal(id=row[0], type=row[1], state=row[2], subject=row[3],
                        sources=tuple(json.loads(row[4])), payload=json.loads(row[5]), created_at=row[6],
                        expires_at=row[7], decided_at=row[8], decided_by=row[9],
                        result=None if row[10] is None else json.loads(row[10]))

    def add_proposals(self, rows: Sequence[tuple[Proposal, str]]) -> list[str]:
        """Queue pending proposals, each with its open_key, in one transaction. One whose open_key is
        already pending is skipped. Returns the ids written."""
        added: list[str] = []
        if not rows:
            return added
        with self.transaction():
            for proposal, open_key in rows:
                cur = self.conn.execute(
                    f"INSERT OR IGNORE INTO proposals ({self._PROPOSAL_COLUMNS}, open_key) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (proposal.id, proposal.type, proposal.state, proposal.subject,
                     json.dumps(list(proposal.sources), ensure_ascii=False),
                     json.dumps(proposal.payload, ensure_ascii=False), proposal.created_at, proposal.expires_at,
                     proposal.decided_at, proposal.decided_by,
                     None if proposal.result is None else json.dumps(proposal.result, ensure_ascii=False), open_key))
                if cur.rowcount == 1:
                    added.append(proposal.id)
        return added

    def cold_count(self) -> int:
        """Live memories in the cold tier."""
        return self.conn.execute("SELECT count(*) FROM memories WHERE cold_at IS NOT NULL AND text IS NOT NULL"
                                 ).fetchone()[0]

    def proposal(self, proposal_id: str, *, for_update: bool = False) -> Proposal | None:
        """The proposal, or None. for_update: as PgStore's; here the decision's BEGIN IMMEDIATE
        already keeps every other writer out until it ends."""
        row = self.conn.execute(f"SELECT {self._PROPOSAL_COLUMNS} FROM proposals WHERE id = ?",
                                (proposal_id,)).fetchone()
        return None if row is None else self._proposal(row)

    def proposals(self, *, states: Sequence[str] = (), types: Sequence[str] = (),
                  limit: int | None = None) -> list[Proposal]:
        """Proposals in those states and of those types (all when empty), oldest first."""
        clauses, params = ["1"], []
        for column, values in (("state", states), ("type", types)):
            if values:
                clauses.append(f"{column} IN ({','.join('?' * len(values))})")
                params += list(values)
        sql = f"SELECT {self._PROPOSAL_COLUMNS} FROM proposals WHERE {' AND '.join(clauses)} ORDER BY created_at, id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [self._proposal(r) for r in self.conn.execute(sql, params).fetchall()]

    def proposal_keys(self, states: Sequence[str]) -> set[str]:
        """open_key of every proposal in those states."""
        return {r[0] for r in self.conn.execute(
            f"SELECT open_key FROM proposals WHERE state IN ({','.join('?' * len(states))})", list(states))}

    def close_proposal(self, proposal_id: str, *, state: str, at: int, by: str | None,
                       result: dict[str, object] | None, from_state: str = "pending") -> bool:
        """Compare-and-set: move the proposal from `from_state` to `state`. Returns False (nothing
        written) when it was not in `from_state` (another reviewer got there first)."""
        with self.transaction():
            cur = self.conn.execute(
                "UPDATE proposals SET state = ?, decided_at = ?, decided_by = ?, result = ? WHERE id = ? AND state = ?",
                (state, at, by, None if result is None else json.dumps(result, ensure_ascii=False), proposal_id,
                 from_state))
        return cur.rowcount == 1

    def expire_proposals(self, now: int) -> int:
        """Pending proposals past their expires_at become expired (silence is never consent). Returns how many."""
        with self.transaction():
            cur = self.conn.execute(
                "UPDATE proposals SET state = 'expired', decided_at = ?, result = ? "
                "WHERE state = 'pending' AND expires_at <= ?",
                (now, json.dumps({"reason": "not reviewed within 30 days"}), now))
        return cur.rowcount

    def proposal_counts(self) -> dict[str, dict[str, int]]:
        """{state: {type: count}}."""
        out: dict[str, dict[str, int]] = {}
        for state, kind, n in self.conn.execute("SELECT state, type, count(*) FROM proposals GROUP BY state, type"):
            out.setdefault(state, {})[kind] = n
        return out

    def take_lease(self, name: str, holder: str, now: int, ttl_ms: int) -> dict[str, object] | None:
        """Take the lease `name` for `holder` until now + ttl_ms, unless another holder has it
        unexpired: then nothing is written and that holder's row is returned ({"holder",
        "acquired_at", "expires_at"}). None: taken."""
        with self.transaction():
            row = self.conn.execute("SELECT holder, acquired_at, expires_at FROM leases WHERE name = ?",
                                    (name,)).fetchone()
            if row is not None and row[0] != holder and row[2] > now:
                return {"holder": row[0], "acquired_at": row[1], "expires_at": row[2]}
            self.conn.execute("INSERT OR REPLACE INTO leases (name, holder, acquired_at, expires_at) VALUES (?,?,?,?)",
                              (name, holder, now, now + ttl_ms))
        return None

    def release_lease(self, name: str, holder: str) -> None:
        with self.transaction():
            self.conn.execute("DELETE FROM leases WHERE name = ? AND holder = ?", (name, holder))

    def lease(self, name: str) -> dict[str, object] | None:
        row = self.conn.execute("SELECT holder, acquired_at, expires_at FROM leases WHERE name = ?", (name,)).fetchone()
        return None if row is None else {"holder": row[0], "acquired_at": row[1], "expires_at": row[2]}

    def schema_version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    # -- bulk: export, import, embedding ------------------------------------------------------------
    def iter_rows(self, batch: int = 500) -> Iterator[tuple[Memory, int]]:
        """Every memory, tombstones included, oldest first, with its asserted_valid_to (epoch ms)."""
        seqs = [r[0] for r in self.conn.execute("SELECT seq FROM memories ORDER BY seq")]
        for start in range(0, len(seqs), batch):
            chunk = seqs[start : start + batch]
            by_seq = self.by_seqs(chunk)
            asserted = dict(self.conn.execute(
                f"SELECT seq, asserted_valid_to FROM memories WHERE seq IN ({','.join('?' * len(chunk))})", chunk))
            for seq in chunk:
                yield by_seq[seq], asserted[seq]

    def import_rows(self, records: Sequence[tuple[Memory, int]]) -> tuple[int, int]:
        """Insert exported memories in one transaction: (imported, skipped). A memory whose id
        exists, or a live one whose text is already current, is skipped. Raises InvalidImport when
        a row breaks a constraint or a superseded_by points nowhere; then nothing is written."""
        imported = skipped = 0
        with self.transaction():
            self.conn.execute("PRAGMA defer_foreign_keys = ON")  # chains may point forward in the file
            for memory, asserted in records:
                if self.conn.execute("SELECT 1 FROM memories WHERE id = ?", (memory.id,)).fetchone():
                    skipped += 1
                    continue
                key = normalise(memory.text) if memory.text is not None and memory.retired_at is None else None
                if key is not None and self.current_by_text_key(key) is not None:
                    skipped += 1
                    continue
                try:
                    self.insert_raw(memory, key, asserted)
                except db.IntegrityError as exc:
                    raise InvalidImport(f"memory {memory.id}: {exc}") from None
                imported += 1
            if self.conn.execute("PRAGMA foreign_key_check(memories)").fetchone():
                raise InvalidImport("superseded_by points to a memory that is neither in the file nor the store")
        return imported, skipped

    def fill_backlog(self, vectors: dict[int, np.ndarray]) -> int:
        """Store vectors for memories still in the backlog (one forgotten meanwhile is never
        given a vector back). Returns how many were stored."""
        stored = 0
        with self.transaction():
            alive = {s for (s,) in self.conn.execute("SELECT seq FROM vector_backlog")}
            for seq, vector in vectors.items():
                if seq in alive:
                    self.put_vector(seq, vector)
                    stored += 1
        return stored

    def replace_vectors(self, vectors: dict[int, np.ndarray], *, model_name: str, fingerprint: str) -> None:
        """Drop the vector index and rebuild it from `vectors` (seq -> float32[dim]); live memories
        missing from it (written meanwhile by another process) wait in the backlog. Records the model."""
        if self.vector_index is None:
            raise StoreError(self.vector_unavailable or "no vector index available")
        with self.transaction():
            self.vector_index.drop(self.conn)
            self.conn.execute("DELETE FROM vector_backlog")
            for seq, vector in vectors.items():
                self.put_vector(seq, vector)
            for (seq,) in self.conn.execute("SELECT seq FROM memories WHERE text IS NOT NULL").fetchall():
                if seq not in vectors:
                    self.put_vector(seq, None)
            self.conn.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                  [("embedding_model", model_name), ("embedding_fingerprint", fingerprint)])

    # -- health ----------------------------------------------------------------------------------------
    def integrity(self) -> str:
        """`PRAGMA integrity_check`: "ok", or its problems, one per line."""
        return "\n".join(r[0] for r in self.conn.execute("PRAGMA integrity_check").fetchall())

    def index_report(self) -> dict[str, int]:
        """How the FTS and vector indexes agree with the memory table. Live memories (with text) must
        each have one FTS row and either a vector or a backlog entry; nothing else may be indexed.
        {"live", "fts_missing", "fts_orphans", "vector_missing", "vector_orphans"}."""
        live = "SELECT seq FROM memories WHERE text IS NOT NULL"
        one = lambda sql: self.conn.execute(sql).fetchone()[0]  # noqa: E731
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
            self.conn.executemany(
                "INSERT INTO memory_fts(rowid, body, tags, applies) VALUES (?, ?, ?, ?)",
                [(seq, index_text(text), " ".join(tags.get(seq, ())), index_text("; ".join(_applies(applies))))
                 for seq, text, applies in rows])
            index = self.vector_index
            live = "SELECT seq FROM memories WHERE text IS NOT NULL"
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
        paths.private_file(tmp)
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
    def open_file_copy(cls, source: Path, target: Path) -> Store:
        """Copy the database at `source` into the new file `target` (0600, WAL) and open it as a
        store (migrated). Raises StoreCorrupted."""
        copy = db.sqlite.connect(str(paths.private_file(target)), isolation_level=None)
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
    _TURN_COLUMNS = "seq, session_id, uuid, position, role, text, at, speaker, git_branch, cwd, meta"
    _SESSION_COLUMNS = ("session_id, source, title, started_at, ended_at, turn_count, git_branch, cwd, "
                        "transcript_path, skipped, redactions, private_spans")

    @staticmethod
    def _turn(row: Sequence[object]) -> Turn:
        return Turn(session_id=row[1], uuid=row[2], position=row[3], role=row[4], text=row[5], at=row[6],
                    speaker=row[7], git_branch=row[8], cwd=row[9], meta=json.loads(row[10] or "{}"))

    @staticmethod
    def _session(row: Sequence[object]) -> SessionInfo:
        return SessionInfo(session_id=row[0], source=row[1], title=row[2], started_at=row[3], ended_at=row[4],
                           turn_count=row[5], git_branch=row[6], cwd=row[7], transcript_path=row[8],
                           skipped=json.loads(row[9]), redactions=json.loads(row[10]), private_spans=row[11])

    def session_progress(self, session_id: str) -> tuple[str | None, int, str | None]:
        """(transcript_path, bytes read so far, last uuid) of a captured session; (None, 0, None) if unknown."""
        row = self.conn.execute("SELECT transcript_path, read_bytes, last_uuid FROM sessions WHERE session_id = ?",
                                (session_id,)).fetchone()
        return (row[0], row[1], row[2]) if row else (None, 0, None)

    def known_uuids(self, session_id: str, uuids: Sequence[str]) -> set[str]:
        """Which of `uuids` the session already holds."""
        out: set[str] = set()
        for start in range(0, len(uuids), 500):
            chunk = list(uuids[start : start + 500])
            out |= {r[0] for r in self.conn.execute(
                f"SELECT uuid FROM turns WHERE session_id = ? AND uuid IN ({','.join('?' * len(chunk))})",
                (session_id, *chunk))}
        return out

    def last_turns(self, session_id: str, n: int) -> list[Turn]:
        """The session's last `n` turns, in order."""
        rows = self.conn.execute(f"SELECT {self._TURN_COLUMNS} FROM turns WHERE session_id = ? "
                                 "ORDER BY position DESC LIMIT ?", (session_id, int(n))).fetchall()
        return [self._turn(r) for r in reversed(rows)]

    def add_turns(self, session_id: str, *, source: str, transcript_path: str | None, title: str | None,
                  turns: Sequence[dict], read_bytes: int | None, last_uuid: str | None, skipped: dict[str, int],
                  redactions: dict[str, int], private_spans: int, trailing_meta: dict[str, list[str]],
                  rekey: dict[str, str]) -> list[int]:
        """Append turns to a session in one transaction, creating its catalog row; returns the seqs of
        the turns inserted (a turn whose uuid the session already holds is skipped: idempotent).

        turns: dicts with the Turn fields but position, plus "key" (index key) and "vector" (or None).
        read_bytes/last_uuid: how far the transcript has been read (None: unchanged). skipped,
        redactions (counts only), private_spans: added to the session's tallies. trailing_meta:
        tool metadata for the session's last stored turn. rekey: {uuid: new index key} for turns
        already stored (a turn's key names the turn after it, known only now)."""
        now = now_ms()
        inserted: list[int] = []
        with self.transaction():
            row = self.conn.execute("SELECT skipped, redactions, title FROM sessions WHERE session_id = ?",
                                    (session_id,)).fetchone()
            if row is None:
                self.conn.execute(
                    "INSERT INTO sessions (session_id, source, transcript_path, title, updated_at) VALUES (?,?,?,?,?)",
                    (session_id, source, transcript_path, title, now))
                row = ("{}", "{}", title)
            tallies = [json.loads(row[0]), json.loads(row[1])]
            for tally, extra in zip(tallies, (skipped, redactions)):
                for k, v in extra.items():
                    tally[k] = tally.get(k, 0) + int(v)
            if trailing_meta:
                last = self.conn.execute("SELECT seq, meta FROM turns WHERE session_id = ? ORDER BY position DESC "
                                         "LIMIT 1", (session_id,)).fetchone()
                if last is not None:
                    meta = json.loads(last[1] or "{}")
                    for k, values in trailing_meta.items():
                        meta[k] = meta.get(k, []) + [v for v in values if v not in meta.get(k, [])]
                    self.conn.execute("UPDATE turns SET meta = ? WHERE seq = ?", (json.dumps(meta), last[0]))
            for uuid, key in rekey.items():
                hit = self.conn.execute("SELECT seq, text FROM turns WHERE session_id = ? AND uuid = ?",
                                        (session_id, uuid)).fetchone()
                if hit is not None:
                    self.conn.execute("DELETE FROM turn_fts WHERE rowid = ?", (hit[0],))
                    self.conn.execute("INSERT INTO turn_fts(rowid, body, key) VALUES (?, ?, ?)",
                                      (hit[0], index_text(hit[1]), index_text(key)))
            position = self.conn.execute("SELECT coalesce(max(position) + 1, 0) FROM turns WHERE session_id = ?",
                                         (session_id,)).fetchone()[0]
            for t in turns:
                cur = self.conn.execute(
                    "INSERT OR IGNORE INTO turns (session_id, uuid, position, role, text, at, speaker, git_branch, "
                    "cwd, meta) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (session_id, t["uuid"], position, t["role"], t["text"], t["at"], t.get("speaker"),
                     t.get("git_branch"), t.get("cwd"), json.dumps(t.get("meta") or {})))
                if cur.rowcount != 1:
                    continue
                position += 1
                seq = int(cur.lastrowid)
                inserted.append(seq)
                self.conn.execute("INSERT INTO turn_fts(rowid, body, key) VALUES (?, ?, ?)",
                                  (seq, index_text(t["text"]), index_text(t.get("key") or "")))
                self.put_turn_vector(seq, t.get("vector"))
            self.conn.execute(
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
            if not self.turn_index.exists(self.conn):
                self.turn_index.create(self.conn, len(vector))
            self.turn_index.upsert(self.conn, seq, vector)
            self.conn.execute("DELETE FROM turn_vector_backlog WHERE seq = ?", (seq,))
        else:
            self.conn.execute("INSERT OR IGNORE INTO turn_vector_backlog(seq) VALUES (?)", (seq,))

    def turn_backlog(self, limit: int) -> list[tuple[int, str | None, str]]:
        """(seq, speaker, text) of turns awaiting a vector, oldest first."""
        return self.conn.execute("SELECT b.seq, t.speaker, t.text FROM turn_vector_backlog b "
                                 "JOIN turns t ON t.seq = b.seq "
                                 "ORDER BY b.seq LIMIT ?", (int(limit),)).fetchall()

    def fill_turn_backlog(self, vectors: dict[int, np.ndarray]) -> None:
        with self.transaction():
            for seq, vector in vectors.items():
                self.put_turn_vector(seq, vector)

    def requeue_turn_vectors(self) -> int:
        """Drop every captured turn's vector and queue all turns for embedding (a re-embedding with
        another model: vectors of two models are never searched together). Returns how many."""
        with self.transaction():
            if self.turn_index is not None:
                self.turn_index.drop(self.conn)
            self.conn.execute("INSERT OR IGNORE INTO turn_vector_backlog(seq) SELECT seq FROM turns")
            return self.conn.execute("SELECT count(*) FROM turn_vector_backlog").fetchone()[0]

    @staticmethod
    def _turn_time_sql(since: int | None, until: int | None) -> tuple[str, list[object]]:
        clauses, params = time_bounds(since, until, start="t.at", end="t.at")
        return " AND ".join(clauses), params

    def turn_keyword_search(self, match: str, limit: int, *, since: int | None = None, until: int | None = None,
                            key_weight: float = 1.0) -> list[tuple[int, float]]:
        """BM25 over turns (text, and its index key weighted by key_weight): [(seq, -bm25)], best first."""
        where, params = self._turn_time_sql(since, until)
        join = f" JOIN turns t ON t.seq = f.rowid AND {where}" if where else ""
        rows = self.conn.execute(
            f"SELECT f.rowid, bm25(turn_fts, 1.0, ?) AS rank FROM turn_fts f{join} WHERE turn_fts MATCH ? "
            "ORDER BY rank LIMIT ?", (float(key_weight), *params, match, int(limit))).fetchall()
        return [(int(seq), -float(rank)) for seq, rank in rows]

    def turn_vector_search(self, query: np.ndarray, limit: int, *, since: int | None = None,
                           until: int | None = None) -> list[tuple[int, float]]:
        """Nearest turns to `query`: [(seq, cosine)], best first."""
        if self.turn_index is None or not self.turn_index.exists(self.conn):
            return []
        where, params = self._turn_time_sql(since, until)
        restrict = f"SELECT t.seq FROM turns t WHERE {where}" if where else None
        return self.turn_index.search(self.conn, query, limit, restrict, params)

    def turn_exact_search(self, needle: str, limit: int, *, since: int | None = None,
                          until: int | None = None) -> list[tuple[int, float]]:
        """Turns containing `needle` (case-insensitive for ASCII), newest first: [(seq, 1.0)]."""
        where, params = self._turn_time_sql(since, until)
        rows = self.conn.execute(
            f"SELECT t.seq FROM turns t WHERE instr(lower(t.text), lower(?)) > 0 {'AND ' + where if where else ''} "
            "ORDER BY t.at DESC, t.seq DESC LIMIT ?", (needle, *params, int(limit))).fetchall()
        return [(int(r[0]), 1.0) for r in rows]

    def turns_by_seqs(self, seqs: Sequence[int]) -> dict[int, Turn]:
        out: dict[int, Turn] = {}
        for start in range(0, len(seqs), 500):
            chunk = list(seqs[start : start + 500])
            rows = self.conn.execute(f"SELECT {self._TURN_COLUMNS} FROM turns WHERE seq IN "
                                     f"({','.join('?' * len(chunk))})", chunk).fetchall()
            out.update({int(r[0]): self._turn(r) for r in rows})
        return out

    def session_turns(self, session_id: str, offset: int, limit: int) -> list[Turn]:
        """Turns of a session by position: positions offset .. offset + limit - 1."""
        rows = self.conn.execute(f"SELECT {self._TURN_COLUMNS} FROM turns WHERE session_id = ? AND position >= ? "
                                 "ORDER BY position LIMIT ?", (session_id, int(offset), int(limit))).fetchall()
        return [self._turn(r) for r in rows]

    def session(self, session_id: str) -> SessionInfo | None:
        row = self.conn.execute(f"SELECT {self._SESSION_COLUMNS} FROM sessions WHERE session_id = ?",
                                (session_id,)).fetchone()
        return self._session(row) if row else None

    def sessions(self, limit: int, *, since: int | None = None, until: int | None = None) -> list[SessionInfo]:
        """Captured sessions, most recently active first."""
        clauses, params = time_bounds(since, until, start="coalesce(started_at, updated_at)",
                                      end="coalesce(ended_at, updated_at)")
        clauses.insert(0, "1")
        rows = self.conn.execute(
            f"SELECT {self._SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(clauses)} "
            "ORDER BY coalesce(ended_at, updated_at) DESC, session_id LIMIT ?", (*params, int(limit))).fetchall()
        return [self._session(r) for r in rows]

    def session_totals(self) -> dict[str, object]:
        """{"sessions", "turns", "awaiting_embedding", "skipped": {reason: n}, "redactions": {type: n},
        "private_spans"} over every captured session."""
        sessions, turns = self.conn.execute(
            "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM turns)").fetchone()
        backlog = self.conn.execute("SELECT count(*) FROM turn_vector_backlog").fetchone()[0]
        skipped: dict[str, int] = {}
        redactions: dict[str, int] = {}
        private = 0
        for s, r, p in self.conn.execute("SELECT skipped, redactions, private_spans FROM sessions"):
            for tally, extra in ((skipped, json.loads(s)), (redactions, json.loads(r))):
                for k, v in extra.items():
                    tally[k] = tally.get(k, 0) + v
            private += p
        return {"sessions": sessions, "turns": turns, "awaiting_embedding": backlog, "skipped": skipped,
                "redactions": redactions, "private_spans": private}

    # -- memory usage (injections by hooks, citations in replies) ------------------------------------
    def record_usage(self, memory_ids: Sequence[str], *, column: str, at: int) -> int:
        """Add one injection (column "injected") or citation ("cited") at `at` (epoch ms) to each of
        `memory_ids` that names a memory of this store; returns how many were counted."""
        if column not in ("injected", "cited"):
            raise ValueError(column)
        ids = list(dict.fromkeys(memory_ids))
        counted = 0
        with self.transaction():
            for memory_id in ids:
                if self.conn.execute("SELECT 1 FROM memories WHERE id = ?", (memory_id,)).fetchone() is None:
                    continue
                self.conn.execute(
                    f"INSERT INTO memory_usage (memory_id, {column}, last_{column}_at) VALUES (?, 1, ?) "
                    f"ON CONFLICT(memory_id) DO UPDATE SET {column} = {column} + 1, last_{column}_at = ?",
                    (memory_id, at, at))
                counted += 1
        return counted

    def usage(self, memory_ids: Sequence[str]) -> dict[str, dict[str, int | None]]:
        """{memory_id: {"injected", "cited", "last_injected_at", "last_cited_at"}} for the ids that
        were ever injected or cited."""
        out: dict[str, dict[str, int | None]] = {}
        for start in range(0, len(memory_ids), 500):
            chunk = list(memory_ids[start : start + 500])
            for row in self.conn.execute(
                    "SELECT memory_id, injected, cited, last_injected_at, last_cited_at FROM memory_usage "
                    f"WHERE memory_id IN ({','.join('?' * len(chunk))})", chunk):
                out[row[0]] = {"injected": row[1], "cited": row[2], "last_injected_at": row[3],
                               "last_cited_at": row[4]}
        return out

    def usage_totals(self) -> dict[str, int]:
        """{"injected_memories", "injections", "cited_memories", "citations"} over the store."""
        row = self.conn.execute(
            "SELECT count(*) FILTER (WHERE injected > 0), coalesce(sum(injected), 0), "
            "count(*) FILTER (WHERE cited > 0), coalesce(sum(cited), 0) FROM memory_usage").fetchone()
        return {"injected_memories": row[0], "injections": row[1], "cited_memories": row[2], "citations": row[3]}

    def file_size(self) -> int:
        """Bytes on disk: the database plus its WAL."""
        wal = Path(str(self.path) + "-wal")
        return os.path.getsize(self.path) + (os.path.getsize(wal) if wal.exists() else 0)
