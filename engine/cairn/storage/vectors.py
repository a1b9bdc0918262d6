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


def selected_seqs(conn: Connection, select_sql: str, params: Sequence[object]) -> np.ndarray:
    """The seqs `select_sql` selects (one integer column named seq), as int64[n] in its order: read
    as one group_concat string, since a row at a time through the binding costs about 1 us a row
    (10 ms for a month of a year's 200,000 captured turns)."""
    import numpy as np

    text = conn.execute(f"SELECT group_concat(seq) FROM ({select_sql})", tuple(params)).fetchone()[0]
    return np.fromstring(text, dtype=np.int64, sep=",") if text else np.zeros(0, dtype=np.int64)


# Turn vectors are stored as int8 codes with one float32 scale (4 + dim bytes: 388 for 384 floats,
# a quarter of float32), and searched in two steps: the Hamming distance of their sign bits picks
# CODE_CANDIDATES (at least CODE_CANDIDATES_PER_K x k) candidates, whose int8 dot products with the
# query then rank them. On LoCoMo's dev conversations the ranking equals float32 search within
# 0.003 recall (docs/benchmarks.md, "A year of captured turns").
CODE_CANDIDATES = 1000
CODE_CANDIDATES_PER_K = 20
CODE_COUNT_KEY = "turn_codes_count"  # meta row kept by triggers (migration 11): rows in turn_codes


def encode_code(vector: object) -> bytes:
    """A float vector as its code: float32 scale (max |x| / 127) then int8 round(x / scale)."""
    import numpy as np

    v = np.frombuffer(vector, dtype=np.float32) if isinstance(vector, (bytes, bytearray)) \
        else np.asarray(vector, dtype=np.float32)
    top = float(np.abs(v).max()) if v.size else 0.0
    scale = np.float32(top / 127 if top > 0 else 1.0)
    return scale.tobytes() + np.round(v / scale).astype(np.int8).tobytes()


class TurnCodeIndex(VectorIndex):
    """Captured turns' vectors as int8 codes in `turn_codes` (seq = turns.seq), searched from a copy
    held in process memory: int8 codes (dim bytes a turn), sign bits (dim / 8 bytes) and scales,
    brought up to date before each search. Appended rows are read alone (the row count is kept in
    meta by triggers: when it grew by exactly the rows past the highest seq held, nothing else
    changed); any other change reloads the whole table (~0.3 s at 200,000 turns)."""

    name = "int8"
    table = "turn_codes"

    def __init__(self) -> None:
        self.seen: tuple[int, int] | None = None
        self.held = 0
        self.top = 0
        self.seqs: np.ndarray | None = None  # int64[n], ascending
        self.codes: np.ndarray | None = None  # int8[n, dim]
        self.scales: np.ndarray | None = None  # float32[n]
        self.bits: np.ndarray | None = None  # uint64[n, dim / 64]: sign bits

    def exists(self, conn: Connection) -> bool:
        return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (self.table,)).fetchone() is not None

    def create(self, conn: Connection, dim: int) -> None:
        return None  # the table is the schema's (migration 11), whatever the dimension

    def drop(self, conn: Connection) -> None:
        conn.execute(f"DELETE FROM {self.table}")

    def upsert(self, conn: Connection, seq: int, vector: np.ndarray) -> None:
        # DELETE then INSERT, not REPLACE: the count triggers see both.
        conn.execute(f"DELETE FROM {self.table} WHERE seq = ?", (seq,))
        conn.execute(f"INSERT INTO {self.table}(seq, code) VALUES (?, ?)", (seq, encode_code(vector)))

    def delete(self, conn: Connection, seq: int) -> None:
        conn.execute(f"DELETE FROM {self.table} WHERE seq = ?", (seq,))

    def count(self, conn: Connection) -> int:
        return conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]

    @staticmethod
    def _decode(rows: Sequence[Sequence[object]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        import numpy as np

        seqs = np.fromiter((int(r[0]) for r in rows), dtype=np.int64, count=len(rows))  # type: ignore[call-overload]
        raw = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.uint8)  # type: ignore[call-overload]
        raw = raw.reshape(len(rows), -1)
        scales = raw[:, :4].copy().view(np.float32).ravel()
        codes = raw[:, 4:].copy().view(np.int8)
        return seqs, codes, scales

    @staticmethod
    def _signs(codes: np.ndarray) -> np.ndarray:
        import numpy as np

        packed = np.packbits(codes > 0, axis=1)
        pad = (-packed.shape[1]) % 8
        if pad:
            packed = np.pad(packed, ((0, 0), (0, pad)))
        return packed.view(np.uint64)

    def sync(self, conn: Connection) -> None:
        """Bring the held copy up to date with the table."""
        import numpy as np

        seen = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        if seen == self.seen:
            return
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (CODE_COUNT_KEY,)).fetchone()
        count = int(row[0]) if row else self.count(conn)
        appended = conn.execute(f"SELECT seq, code FROM {self.table} WHERE seq > ? ORDER BY seq",
                                (self.top,)).fetchall() if self.seqs is not None and count >= self.held else None
        if appended is not None and self.held + len(appended) == count:
            if appended:
                seqs, codes, scales = self._decode(appended)
                assert self.seqs is not None and self.codes is not None and self.scales is not None
                assert self.bits is not None
                self.seqs = np.concatenate([self.seqs, seqs])
                self.codes = np.concatenate([self.codes, codes]) if len(self.codes) else codes
                self.scales = np.concatenate([self.scales, scales])
                self.bits = np.concatenate([self.bits, self._signs(codes)]) if len(self.bits) else self._signs(codes)
        else:
            rows = conn.execute(f"SELECT seq, code FROM {self.table} ORDER BY seq").fetchall()
            if rows:
                self.seqs, self.codes, self.scales = self._decode(rows)
                self.bits = self._signs(self.codes)
            else:
                self.seqs, self.scales = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
                self.codes, self.bits = np.zeros((0, 0), dtype=np.int8), np.zeros((0, 0), dtype=np.uint64)
        self.held = len(self.seqs) if self.seqs is not None else 0
        self.top = int(self.seqs[-1]) if self.held and self.seqs is not None else 0
        self.seen = (seen[0], conn.total_changes)

    def search(self, conn: Connection, query: np.ndarray, k: int, filter_sql: str | None,
               params: Sequence[object]) -> list[tuple[int, float]]:
        import numpy as np

        self.sync(conn)
        if not self.held or k <= 0:
            return []
        assert self.seqs is not None and self.codes is not None and self.scales is not None and self.bits is not None
        q = np.frombuffer(query, dtype=np.float32) if isinstance(query, (bytes, bytearray)) \
            else np.asarray(query, dtype=np.float32)
        if filter_sql:
            allowed = selected_seqs(conn, filter_sql, params)
            found = np.searchsorted(self.seqs, allowed)
            inside = found < self.held
            found, allowed = found[inside], allowed[inside]
            pool = found[self.seqs[found] == allowed]  # turns without a vector are left out
        else:
            pool = np.arange(self.held)
        if not len(pool):
            return []
        wanted = max(CODE_CANDIDATES, CODE_CANDIDATES_PER_K * int(k))
        if len(pool) > wanted:
            qbits = self._signs(np.round(q * 127).astype(np.int8)[None, :])[0]
            # Every row unfiltered: no copy of the bits (9.6 MB at 200,000 turns); the words summed
            # column by column, which numpy does 3 times faster than a sum over each short row.
            counts = np.bitwise_count((self.bits if filter_sql is None else self.bits[pool]) ^ qbits)
            distance = counts[:, 0].astype(np.uint64)
            for column in range(1, counts.shape[1]):
                distance += counts[:, column]
            pool = pool[np.argpartition(distance, wanted - 1)[:wanted]]
        similarity = (self.codes[pool].astype(np.float32) @ q) * self.scales[pool]
        top = min(int(k), len(pool))
        best = np.argpartition(-similarity, top - 1)[:top]
        order = best[np.lexsort((self.seqs[pool][best], -similarity[best]))]
        return [(int(self.seqs[pool][i]), float(similarity[i])) for i in order]


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
