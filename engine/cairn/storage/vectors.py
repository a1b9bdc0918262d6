"""The vector index: k-nearest neighbours by cosine, filtered inside the query.

Two interchangeable backends share the `VectorIndex` interface:
- `SqliteVecIndex`: a sqlite-vec `vec0` table, searched in C.
- `NumpyIndex`: a plain BLOB table, searched with a numpy dot product; used where the extension
  cannot load. It returns the same neighbours in the same order.

Both take the candidate filter as SQL (`SELECT seq FROM memories WHERE ...`) and apply it before
the k cut, so a narrow filter still yields up to k matches.

Vectors: float32[dim], L2-normalised, so cosine similarity = 1 - cosine distance = dot product.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .db import Connection

if TYPE_CHECKING:  # numpy costs ~150 ms to import; a keyword-only hook never needs it
    import numpy as np


class VectorIndex(ABC):
    """Interface of a vector backend. `seq` is the memory's integer rowid."""

    name: str
    table: str

    @abstractmethod
    def exists(self, conn: Connection) -> bool: ...

    @abstractmethod
    def create(self, conn: Connection, dim: int) -> None: ...

    @abstractmethod
    def drop(self, conn: Connection) -> None: ...

    @abstractmethod
    def upsert(self, conn: Connection, seq: int, vector: np.ndarray) -> None: ...

    @abstractmethod
    def delete(self, conn: Connection, seq: int) -> None: ...

    @abstractmethod
    def search(
        self, conn: Connection, query: np.ndarray, k: int, filter_sql: str | None, params: Sequence[object]
    ) -> list[tuple[int, float]]:
        """The k memories nearest `query` among `filter_sql`'s seqs (all, when None):
        [(seq, cosine similarity)], best first."""

    @abstractmethod
    def count(self, conn: Connection) -> int: ...


def _blob(vector: object) -> bytes:
    """float32 bytes of `vector` (a numpy array, or bytes already in that layout)."""
    if isinstance(vector, (bytes, bytearray)):
        return bytes(vector)
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


class SqliteVecIndex(VectorIndex):
    name = "sqlite-vec"
    table = "memory_vec"

    def exists(self, conn: Connection) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (self.table,)).fetchone() is not None

    def create(self, conn: Connection, dim: int) -> None:
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.table} USING vec0("
            f"embedding float[{int(dim)}] distance_metric=cosine)"
        )

    def drop(self, conn: Connection) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {self.table}")

    def upsert(self, conn: Connection, seq: int, vector: np.ndarray) -> None:
        # vec0 has no UPSERT; delete then insert inside the caller's transaction.
        conn.execute(f"DELETE FROM {self.table} WHERE rowid = ?", (seq,))
        conn.execute(f"INSERT INTO {self.table}(rowid, embedding) VALUES (?, ?)", (seq, _blob(vector)))

    def delete(self, conn: Connection, seq: int) -> None:
        conn.execute(f"DELETE FROM {self.table} WHERE rowid = ?", (seq,))

    def search(self, conn: Connection, query: np.ndarray, k: int, filter_sql: str | None,
               params: Sequence[object]) -> list[tuple[int, float]]:
        restrict = f" AND rowid IN ({filter_sql})" if filter_sql else ""
        rows = conn.execute(
            f"SELECT rowid, distance FROM {self.table} WHERE embedding MATCH ? AND k = ?{restrict} ORDER BY distance",
            (_blob(query), int(k), *params),
        ).fetchall()
        return [(int(seq), 1.0 - float(distance)) for seq, distance in rows]

    def count(self, conn: Connection) -> int:
        return conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]


class NumpyIndex(VectorIndex):
    name = "numpy"
    table = "memory_vectors"

    def exists(self, conn: Connection) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (self.table,)).fetchone() is not None

    def create(self, conn: Connection, dim: int) -> None:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (seq INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")

    def drop(self, conn: Connection) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {self.table}")

    def upsert(self, conn: Connection, seq: int, vector: np.ndarray) -> None:
        conn.execute(f"INSERT OR REPLACE INTO {self.table}(seq, embedding) VALUES (?, ?)", (seq, _blob(vector)))

    def delete(self, conn: Connection, seq: int) -> None:
        conn.execute(f"DELETE FROM {self.table} WHERE seq = ?", (seq,))

    def search(self, conn: Connection, query: np.ndarray, k: int, filter_sql: str | None,
               params: Sequence[object]) -> list[tuple[int, float]]:
        import numpy as np

        restrict = f" WHERE seq IN ({filter_sql})" if filter_sql else ""
        rows = conn.execute(f"SELECT seq, embedding FROM {self.table}{restrict}", tuple(params)).fetchall()
        if not rows:
            return []
        if isinstance(query, (bytes, bytearray)):
            query = np.frombuffer(query, dtype=np.float32)
        seqs = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        similarity = matrix @ np.asarray(query, dtype=np.float32)
        top = min(int(k), len(rows))
        best = np.argpartition(-similarity, top - 1)[:top]
        # Ties broken by seq, as vec0 does, so both backends agree exactly.
        order = best[np.lexsort((seqs[best], -similarity[best]))]
        return [(int(seqs[i]), float(similarity[i])) for i in order]

    def count(self, conn: Connection) -> int:
        return conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]


BACKENDS: dict[str, type[VectorIndex]] = {"sqlite-vec": SqliteVecIndex, "numpy": NumpyIndex}


class TurnSqliteVecIndex(SqliteVecIndex):
    """Captured turns' vectors (seq = turns.seq), apart from the memories'."""

    table = "turn_vec"


class TurnNumpyIndex(NumpyIndex):
    table = "turn_vectors"


TURN_BACKENDS: dict[str, type[VectorIndex]] = {"sqlite-vec": TurnSqliteVecIndex, "numpy": TurnNumpyIndex}


class VectorCache:
    """The memories' vectors of a sqlite-vec index held in process memory, for long-lived processes
    (the warm process, the MCP server): an exact k-NN is then one matrix product (~1.6 ms for
    10,000 x 384 floats on one core) instead of vec0's pass over its chunks (~10-14 ms), and a
    stored vector is a dictionary lookup instead of a vec0 point query (~0.3 ms each).

    Exact, never stale: before each use, `sync` compares the connection's PRAGMA data_version
    (changes when another connection commits) and total_changes (this connection's writes) with
    what the cache saw; when either moved, it re-reads vec0's chunk table (validity bitmap and
    rowids per chunk of 1,024 slots: ~0.1 ms at 10k) and the store's embedding fingerprint, and
    reloads only the chunks whose slots changed. A slot is only ever rewritten in place with the
    same rowid by a re-embedding (SqlStore.replace_vectors), which records a new fingerprint.

    Reads sqlite-vec's shadow tables (`<table>_chunks`, `<table>_vector_chunks00`; layout of
    sqlite-vec 0.1.x). If they are not laid out as expected, `sync` returns False and the caller
    searches vec0 as before.
    """

    def __init__(self, table: str = SqliteVecIndex.table):
        self.table = table
        self.seen: tuple[int, int] | None = None  # (data_version, total_changes) at the last sync
        self.fingerprint: object = None
        self.chunks: dict[int, tuple[bytes, bytes]] = {}  # chunk_id -> (validity, rowids) as loaded
        self.parts: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # chunk_id -> (seqs, vectors) of valid slots
        self.seqs: np.ndarray | None = None  # int64[n]
        self.matrix: np.ndarray | None = None  # float32[n, dim], L2-normalised rows
        self.row_of: dict[int, int] = {}
        self.usable = True

    def sync(self, conn: Connection) -> bool:
        """Bring the cache up to date with the store; False when it cannot serve (unknown layout)."""
        if not self.usable:
            return False
        seen = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        if seen == self.seen:
            return True
        try:
            self._reload(conn)
        except (ValueError, TypeError, IndexError) as exc:  # not the layout this reads: use vec0
            import logging

            logging.getLogger(__name__).warning("vector cache off (sqlite-vec layout not understood: %s)", exc)
            self.usable = False
            return False
        # total_changes again: the reads above wrote nothing, so this is the value the next sync sees.
        self.seen = (seen[0], conn.total_changes)
        return True

    def _reload(self, conn: Connection) -> None:
        import numpy as np

        fingerprint = conn.execute("SELECT value FROM meta WHERE key = 'embedding_fingerprint'").fetchone()
        if fingerprint != self.fingerprint:
            self.chunks, self.parts, self.fingerprint = {}, {}, fingerprint
        exists = conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (self.table,)).fetchone()
        rows = conn.execute(f'SELECT chunk_id, size, validity, rowids FROM "{self.table}_chunks"').fetchall() \
            if exists else []
        current = {int(chunk_id): (bytes(validity), bytes(rowids)) for chunk_id, _, validity, rowids in rows}
        sizes = {int(chunk_id): int(size) for chunk_id, size, _, _ in rows}
        changed = [c for c, meta in current.items() if self.chunks.get(c) != meta]
        removed = set(self.parts) - set(current)
        for chunk_id in removed:
            del self.parts[chunk_id]
        for chunk_id in changed:
            validity, rowids = current[chunk_id]
            size = sizes[chunk_id]
            (blob,) = conn.execute(f'SELECT vectors FROM "{self.table}_vector_chunks00" WHERE rowid = ?',
                                   (chunk_id,)).fetchone()
            valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:size].astype(bool)
            seqs = np.frombuffer(rowids, dtype=np.int64)[:size]
            vectors = np.frombuffer(blob, dtype=np.float32).reshape(size, -1)
            self.parts[chunk_id] = (seqs[valid].copy(), vectors[valid].copy())
        self.chunks = current
        if changed or removed or self.seqs is None:
            parts = [self.parts[c] for c in sorted(self.parts)]
            if parts:
                self.seqs = np.concatenate([p[0] for p in parts])
                self.matrix = np.ascontiguousarray(np.concatenate([p[1] for p in parts]))
            else:
                self.seqs, self.matrix = np.zeros(0, dtype=np.int64), None
            self.row_of = {int(s): i for i, s in enumerate(self.seqs)}

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The k nearest of all cached vectors: [(seq, cosine similarity)], best first, ties by seq
        (as vec0 orders them)."""
        import numpy as np

        if self.matrix is None or self.seqs is None or k <= 0:
            return []
        if isinstance(query, (bytes, bytearray)):
            query = np.frombuffer(query, dtype=np.float32)
        similarity = self.matrix @ np.asarray(query, dtype=np.float32)
        top = min(int(k), len(similarity))
        best = np.argpartition(-similarity, top - 1)[:top]
        order = best[np.lexsort((self.seqs[best], -similarity[best]))]
        return [(int(self.seqs[i]), float(similarity[i])) for i in order]

    def vectors_of(self, seqs: Sequence[int]) -> dict[int, np.ndarray]:
        """The cached vector of each of `seqs` that has one (absent ones are left out)."""
        matrix = self.matrix
        return {} if matrix is None else {int(s): matrix[i] for s in seqs if (i := self.row_of.get(int(s))) is not None}
