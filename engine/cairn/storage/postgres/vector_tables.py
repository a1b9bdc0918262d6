"""pgvector: the vector tables of a store on Postgres, and the memory an HNSW build is given."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .connection import scalar

if TYPE_CHECKING:
    import psycopg

HNSW_MAX_EF = 1000  # pgvector's ceiling for hnsw.ef_search
HNSW_EF_SEARCH = 400  # candidates the HNSW scan keeps: the default view's filter drops some of them
VECTOR_LOCK_WAIT_MS = 500  # how long a vector read or write waits for the vector table before going without
HNSW_BUILD_MAX_MB = 2048  # the most maintenance_work_mem an HNSW (re)build asks for


def maintenance_mem_mb(conn: psycopg.Connection, table: str) -> int | None:
    """maintenance_work_mem (MB) for building the HNSW index of vector table `table` in memory:
    pgvector's in-memory graph takes about the vectors' size plus their neighbour lists (m = 16:
    32 neighbours at level 0), here 2.5 times the table's heap, at least 64 and at most
    HNSW_BUILD_MAX_MB. None when the session's setting is already as large, or `table` holds
    no vectors."""
    row = conn.execute(
        "SELECT pg_table_size(c.oid) FROM pg_class c "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'embedding' WHERE c.oid = to_regclass(%s)",
        (table,)).fetchone()
    if row is None:
        return None
    want = min(HNSW_BUILD_MAX_MB, max(64, int(row[0] * 2.5 / 2**20) + 1))
    have = scalar(conn, "SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'maintenance_work_mem'"
                  ) // 2**20  # the setting's unit is kB
    return want if want > have else None


def vector_text(vector: Any) -> str:
    import numpy as np

    if isinstance(vector, (bytes, bytearray)):
        vector = np.frombuffer(vector, dtype=np.float32)
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


class PgVectorIndex:
    """Vectors by seq: `<table>(seq, embedding vector(dim))` with an HNSW index (cosine). The
    memories' are in memory_vectors, captured turns' in turn_vectors."""

    name = "pgvector"

    def __init__(self, table: str = "memory_vectors"):
        self.table = table

    def exists(self, conn: psycopg.Connection) -> bool:
        return bool(scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", (self.table,)))

    def create(self, conn: psycopg.Connection, dim: int, *, index: bool = True) -> None:
        """The table, and its HNSW index unless `index` is False (a bulk load builds it afterwards:
        build_index)."""
        # No foreign key to memories: it would lock memories against every other writer's open
        # transaction while this one (inside a write) creates the table, a deadlock. Memory rows are
        # never deleted (tombstones stay), and erase deletes the vector itself.
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.table} (seq bigint PRIMARY KEY, "
                     f"embedding vector({int(dim)}) NOT NULL)")
        if index:
            self.build_index(conn)

    def build_index(self, conn: psycopg.Connection) -> None:
        conn.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_hnsw ON {self.table} "
                     "USING hnsw (embedding vector_cosine_ops)")

    def drop_index(self, conn: psycopg.Connection) -> None:
        conn.execute(f"DROP INDEX IF EXISTS {self.table}_hnsw")

    def drop(self, conn: psycopg.Connection) -> None:
        conn.execute(f"DROP TABLE IF EXISTS {self.table}")

    def upsert(self, conn: psycopg.Connection, seq: int, vector: Any) -> None:
        conn.execute(f"INSERT INTO {self.table}(seq, embedding) VALUES (%s, %s::vector) "
                     "ON CONFLICT (seq) DO UPDATE SET embedding = excluded.embedding", (seq, vector_text(vector)))

    def delete(self, conn: psycopg.Connection, seq: int) -> bool:
        """Delete `seq`'s vector; returns whether it had one."""
        return conn.execute(f"DELETE FROM {self.table} WHERE seq = %s", (seq,)).rowcount > 0

    def count(self, conn: psycopg.Connection) -> int:
        return int(scalar(conn, f"SELECT count(*) FROM {self.table}"))
