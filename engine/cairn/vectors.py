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
        self, conn: Connection, query: np.ndarray, k: int, filter_sql: str, params: Sequence[object]
    ) -> list[tuple[int, float]]:
        """The k memories nearest `query` among `filter_sql`'s seqs (all, when None):
        [(seq, cosine similarity)], best first."""

    @abstractmethod
    def count(self, conn: Connection) -> int: ...


def _blob(vector) -> bytes:
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

    def search(self, conn, query, k, filter_sql, params):
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

    def search(self, conn, query, k, filter_sql, params):
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
