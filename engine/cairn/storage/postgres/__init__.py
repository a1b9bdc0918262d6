"""The Postgres backend: a store is one schema of a PostgreSQL database with pgvector (store.py),
reached without ever showing the server's URL (connection.py), searched by keyword through
tsvectors tokenised as SQLite's FTS5 tokenises (search.py) and by vector through HNSW indexes
(vectors.py). psycopg is imported only when a store is opened."""

from .connection import LANGUAGES, connect, redact, schema_for, secrets_of
from .store import BULK_MIN, PgStore
from .vector_tables import VECTOR_LOCK_WAIT_MS, PgVectorIndex

__all__ = ["BULK_MIN", "LANGUAGES", "VECTOR_LOCK_WAIT_MS", "PgStore", "PgVectorIndex", "connect", "redact",
           "schema_for", "secrets_of"]
