"""The team store: one Cairn store in a PostgreSQL database, with pgvector for the vector arm.

`PgStore` has the interface of `store.Store` that the engine uses, with the same semantics:
bitemporal valid time / transaction time filtered inside the query (`store.Filters`), supersession,
exact duplicates refused by a partial unique index, forget erasing text, tags, keyword entry and
vector (then VACUUM), tombstones. Each store is one schema of the database (`cairn_<name>`), so one
server holds many stores; several machines share a store by connecting to the same database.

- Keyword arm: a `tsvector` per memory, built with the store's own text search configuration
  (`cairn_text`: the snowball stemmer of the store's language, no stop words, since the query side
  drops stop words itself). The text is tokenised in Python first exactly as FTS5's unicode61 does
  (runs of letters and digits, diacritics removed, CJK runs as bigrams then unigrams: text.py), so
  `server.http.port` or `GB/s` become the same words on both backends. Scores are BM25-like: the sum
  over the query's phrases of idf(phrase) * ts_rank. `memory_postings` (m008) holds each tsv's
  lexemes with their ts_rank, kept by triggers on every write of a tsv: a one-word phrase is
  ranked from its b-tree alone (an index-only scan), the view's filter applied to the best-scored
  memories only; a phrase of several words is matched against the tsv. Same scores either way.
- Vector arm: `memory_vectors` (vector(dim)) with an HNSW index (cosine). The default view searches
  the index for limit + (memories outside the view) and drops those, as store.py does; any other
  filter runs an exact scan over the filtered rows, so filters apply before the k cut.
- Writers: each write is one short transaction; supersession and forget lock the rows they change
  (SELECT ... FOR UPDATE), so two machines superseding the same memory cannot both do it, and an
  exact duplicate written at the same moment on two machines is stored once (ON CONFLICT).

The review queue and the maintenance lease as on SQLite (review.py runs unchanged on both): a
decision locks its proposal's row (SELECT ... FOR UPDATE) and moves its state compare-and-set, so
two reviewers on two machines never apply one proposal twice; the lease is taken by one upsert.

Captured sessions as on SQLite: `turns` with a tsvector per turn (its text weighted A, its index
key B) for keyword search, `turn_vectors` (HNSW) for semantic search, a substring scan for exact
search (no pg_trgm: see turn_exact_search). The connection URL is never stored, logged or shown (an
error naming it is redacted: `redact`); `path` names only the schema.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import time
import unicodedata
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .errors import InvalidImport, MemoryNotFound, SchemaTooNew, StoreError, StoreNotFound
from .models import Memory, Order, Proposal, SessionInfo, Turn
from .records import NewMemory
from .store import Filters, Store, current_sql, forget_in_proposals, time_bounds
from .text import index_text, normalise, passage
from .timeutil import END_OF_TIME, now_ms

if TYPE_CHECKING:
    import numpy as np
    import psycopg

log = logging.getLogger(__name__)

LANGUAGES = ("simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish", "french",
             "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali",
             "norwegian", "portuguese", "romanian", "russian", "serbian", "spanish", "swedish", "tamil", "turkish",
             "yiddish")
HNSW_MAX_EF = 1000  # pgvector's ceiling for hnsw.ef_search
BULK_MIN = 200  # import_rows / fill_backlog with at least this many rows go through COPY
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
def _cols(alias: str = "memories") -> str:
    """A memory's columns, its tags (sorted) then its applies_when: one query per read, not one more for the tags."""
    a = alias
    return (f"{a}.seq, {a}.id, {a}.text, {a}.kind, {a}.importance, {a}.source, {a}.session_id, {a}.valid_from, "
            f"{a}.valid_to, {a}.recorded_at, {a}.retired_at, {a}.superseded_by, {a}.forgotten_at, {a}.cold_at, "
            f"ARRAY(SELECT t.tag FROM memory_tags t WHERE t.seq = {a}.seq ORDER BY t.tag), {a}.applies_when")


_COLUMNS = _cols()
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
    have = conn.execute("SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'maintenance_work_mem'"
                        ).fetchone()[0] // 2**20  # the setting's unit is kB
    return want if want > have else None


def _pg(sql: str) -> str:
    """store.py's `?` placeholders as psycopg's `%s` (the shared SQL has no literal `?` or `%`)."""
    assert "%" not in sql
    return sql.replace("?", "%s")


def _plain(char: str) -> str:
    """A Latin letter without its diacritics (as unicode61's remove_diacritics); other scripts as they are."""
    parts = unicodedata.normalize("NFD", char)
    if len(parts) > 1 and parts[0] < "\u0250" and all(unicodedata.combining(p) for p in parts[1:]):
        return parts[0]
    return char


def _words(text: str) -> str:
    plain = "".join(_plain(c) if ord(c) > 127 else c for c in unicodedata.normalize("NFC", text))
    return " ".join(_WORD.findall(plain))


def tokens(text: str) -> str:
    """What the tsvector is built from: FTS5 unicode61's tokens of `index_text(text)` (CJK runs as
    bigrams and unigrams), Latin diacritics removed, joined by spaces (so Postgres's parser sees
    only plain words and numbers)."""
    return _words(index_text(text))


def phrases(match: str) -> list[str]:
    """The phrases of an FTS5 MATCH expression as text.fts_query writes it ("a b" OR "c"), each as
    the words Postgres will see. Empty phrases are dropped."""
    out = []
    for quoted in re.findall(r'"((?:[^"]|"")*)"', match):
        phrase = _words(quoted.replace('""', '"'))
        if phrase and phrase not in out:
            out.append(phrase)
    return out


def schema_for(name: str) -> str:
    """The schema holding store `name`: cairn_<name>, or a hashed form when that is longer than
    Postgres's 63-byte identifiers."""
    schema = f"cairn_{name}"
    if len(schema.encode()) <= 63:
        return schema
    return f"cairn_{name[:40]}_{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def _vector_text(vector: Any) -> str:
    import numpy as np

    if isinstance(vector, (bytes, bytearray)):
        vector = np.frombuffer(vector, dtype=np.float32)
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


def _idf_ctes(table: str) -> str:
    """The CTEs `est`, `total` and `idf` of a ranking statement over `table`'s tsv, after a CTE
    `hits (i, seq, r)`: idf per phrase i as BM25's (Lucene's form), ln(1 + (N - n + 0.5) / (n + 0.5)),
    n the rows holding the phrase, N the rows (the planner's estimate from 1,000 on; an exact count
    costs a scan per query)."""
    return f"""est AS MATERIALIZED (SELECT reltuples AS n FROM pg_class WHERE oid = '{table}'::regclass),
             total AS MATERIALIZED (
                 SELECT CASE WHEN (SELECT n FROM est) >= 1000 THEN (SELECT n FROM est)
                        ELSE (SELECT count(*) FROM {table} WHERE tsv IS NOT NULL) END AS n),
             idf AS MATERIALIZED (
                 SELECT i, ln(1 + (greatest(total.n, count(*)) - count(*) + 0.5) / (count(*) + 0.5)) AS idf
                 FROM hits, total GROUP BY i, total.n)"""


def _ranked_sql(table: str, alias: str, rank: str, where: str) -> str:
    """One statement ranking the rows of `table` (its `tsv` column) for a list of phrases, BM25-like:
    score = sum over the phrases a row holds of idf(phrase) * rank, idf as BM25's (Lucene's form)
    from the number of rows holding the phrase (counted from the same index scan that finds them)
    and the number of rows (the planner's estimate from 1,000 on; an exact count costs a scan per
    query). Parameters, in order: the text search configuration, the phrases (text[]), those of
    `rank`, those of `where` (a boolean over `alias`, applied to the hits), the limit."""
    a = alias
    return f"""WITH q AS MATERIALIZED (
                 SELECT i, phraseto_tsquery(%s::regconfig, p) AS tq
                 FROM unnest(%s::text[]) WITH ORDINALITY t(p, i)),
             hits AS MATERIALIZED (
                 SELECT q.i, {a}.seq, {rank} AS r, ({where}) AS ok
                 FROM q JOIN {table} {a} ON {a}.tsv @@ q.tq),
             {_idf_ctes(table)}
            SELECT h.seq, sum(idf.idf * h.r) AS score FROM hits h JOIN idf USING (i)
            WHERE h.ok GROUP BY h.seq ORDER BY score DESC, h.seq LIMIT %s"""


def _postings_sql(where: str) -> str:
    """keyword_search's statement on the memories' postings (m008): the scores of _ranked_sql over
    `memories` with rank ts_rank(m.tsv, q.tq, 1), found another way. A phrase of one lexeme is
    looked up in memory_postings (an index-only scan of (lexeme, seq) including the rank computed
    at write time); a phrase of several (`pre commit`) is matched against the tsv as in
    _ranked_sql. Every hit is counted for idf, as there; the filter `where` (over `memories m`) is
    applied last, to the scored memories best first, so that only as many memory rows are read as
    it takes to find `limit` that pass. Parameters, in order: the text search configuration twice,
    the phrases (text[]), those of `where`, the limit."""
    return f"""WITH q AS MATERIALIZED (
                 SELECT i, tq, CASE WHEN numnode(tq) = 1
                                    THEN (tsvector_to_array(to_tsvector(%s::regconfig, p)))[1] END AS lexeme
                 FROM (SELECT i, p, phraseto_tsquery(%s::regconfig, p) AS tq
                       FROM unnest(%s::text[]) WITH ORDINALITY t(p, i)) t),
             hits AS MATERIALIZED (
                 SELECT q.i, p.seq, p.r FROM q JOIN memory_postings p ON p.lexeme = q.lexeme COLLATE "C"
                 UNION ALL
                 SELECT q.i, m.seq, ts_rank(m.tsv, q.tq, 1) FROM q JOIN memories m ON m.tsv @@ q.tq
                 WHERE q.lexeme IS NULL),
             {_idf_ctes("memories")}
            SELECT s.seq, s.score
            FROM (SELECT h.seq, sum(idf.idf * h.r) AS score FROM hits h JOIN idf USING (i)
                  GROUP BY h.seq ORDER BY score DESC, h.seq) s
            JOIN memories m ON m.seq = s.seq
            WHERE {where} ORDER BY s.score DESC, s.seq LIMIT %s"""


# -- migrations: the same numbered scheme as migrations.py, their own list ---------------------------
PG_MIGRATIONS: list[tuple[int, str]] = [(1, "m001_initial"), (2, "m002_review_dismissals"), (3, "m003_memory_usage"),
                                        (4, "m004_sessions"), (5, "m005_cold_tier"), (6, "m006_applies_when"),
                                        (7, "m007_review_queue"), (8, "m008_postings")]


def _m001_initial(conn: psycopg.Connection, language: str) -> None:
    end = END_OF_TIME
    conn.execute(
        f"""CREATE TABLE memories (
            seq bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,  -- shared with tags, vectors, backlog
            id text NOT NULL UNIQUE,              -- ULID
            text text,                            -- NULL once forgotten (the row is then a tombstone)
            text_key text,                        -- normalised text, for exact duplicates
            kind text NOT NULL,
            importance integer NOT NULL CHECK (importance BETWEEN 1 AND 5),
            source text NOT NULL,
            session_id text,
            valid_from bigint NOT NULL,           -- valid time (epoch ms)
            valid_to bigint NOT NULL DEFAULT {end},
            asserted_valid_to bigint NOT NULL DEFAULT {end},
            recorded_at bigint NOT NULL,          -- transaction time
            retired_at bigint NOT NULL DEFAULT {end},
            superseded_by text REFERENCES memories(id) DEFERRABLE INITIALLY IMMEDIATE,
            forgotten_at bigint,
            tsv tsvector,                         -- keyword index entry (NULL once forgotten)
            CHECK (valid_from < valid_to)
        )""")
    conn.execute("CREATE INDEX memories_by_retired ON memories(retired_at, valid_from)")
    conn.execute("CREATE INDEX memories_by_recorded ON memories(recorded_at)")
    conn.execute("CREATE INDEX memories_by_valid_to ON memories(valid_to)")
    conn.execute("CREATE INDEX memories_by_superseded_by ON memories(superseded_by)")
    conn.execute("CREATE INDEX memories_tsv ON memories USING gin(tsv)")
    conn.execute(f"CREATE UNIQUE INDEX memories_current_text ON memories(text_key) "
                 f"WHERE retired_at = {end} AND text_key IS NOT NULL")
    conn.execute("""CREATE TABLE memory_tags (
            tag text NOT NULL,
            seq bigint NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
            PRIMARY KEY (tag, seq))""")
    conn.execute("CREATE INDEX memory_tags_by_seq ON memory_tags(seq)")
    conn.execute("CREATE TABLE vector_backlog (seq bigint PRIMARY KEY REFERENCES memories(seq) ON DELETE CASCADE)")
    conn.execute("CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)")
    # The store's text search configuration: its language's stemmer, no stop words (query
    # formation drops those; an index without them could not find "NOT NULL").
    stem = "simple" if language == "simple" else f"snowball, language = {language}"
    conn.execute(f"CREATE TEXT SEARCH DICTIONARY cairn_stem (template = {stem})")
    conn.execute("CREATE TEXT SEARCH CONFIGURATION cairn_text (COPY = pg_catalog.simple)")
    conn.execute("ALTER TEXT SEARCH CONFIGURATION cairn_text ALTER MAPPING FOR asciiword, asciihword, "
                 "hword_asciipart, word, hword, hword_part, numword, numhword, hword_numpart WITH cairn_stem")
    conn.execute("INSERT INTO meta(key, value) VALUES ('text_search_language', %s)", (language,))


def _m002_review_dismissals(conn: psycopg.Connection, language: str) -> None:
    conn.execute("""CREATE TABLE review_dismissals (
            first_id text NOT NULL, second_id text NOT NULL, dismissed_at bigint NOT NULL,
            PRIMARY KEY (first_id, second_id))""")


def _m003_memory_usage(conn: psycopg.Connection, language: str) -> None:
    # As SQLite's m006: how often hooks injected each memory and replies cited it (counts only).
    conn.execute("""CREATE TABLE memory_usage (
            memory_id text PRIMARY KEY, injected bigint NOT NULL DEFAULT 0, cited bigint NOT NULL DEFAULT 0,
            last_injected_at bigint, last_cited_at bigint)""")


def _m004_sessions(conn: psycopg.Connection, language: str) -> None:
    # As SQLite's m005: captured conversations apart from memories. A turn's keyword entry is one
    # tsvector: its text weighted A, its index key (speaker, date, the turns around it) weighted B,
    # so that one ts_rank weighs the key as FTS5's bm25 column weight does. Vectors: turn_vectors,
    # created with the first vector (its dimension known then).
    conn.execute("""CREATE TABLE sessions (
            session_id text PRIMARY KEY,
            source text NOT NULL,
            transcript_path text,
            title text,
            started_at bigint,
            ended_at bigint,
            turn_count integer NOT NULL DEFAULT 0,
            git_branch text,
            cwd text,
            read_bytes bigint NOT NULL DEFAULT 0,
            last_uuid text,
            skipped text NOT NULL DEFAULT '{}',
            redactions text NOT NULL DEFAULT '{}',
            private_spans integer NOT NULL DEFAULT 0,
            updated_at bigint NOT NULL)""")
    conn.execute("""CREATE TABLE turns (
            seq bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            session_id text NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
            uuid text NOT NULL,
            position integer NOT NULL,
            role text NOT NULL,
            speaker text,
            text text NOT NULL,                   -- scrubbed (privacy.py) before it is written
            at bigint,
            git_branch text,
            cwd text,
            meta text NOT NULL DEFAULT '{}',
            tsv tsvector,
            UNIQUE (session_id, uuid),
            UNIQUE (session_id, position))""")
    conn.execute("CREATE INDEX turns_by_at ON turns(at)")
    conn.execute("CREATE INDEX turns_tsv ON turns USING gin(tsv)")
    conn.execute("CREATE TABLE turn_vector_backlog (seq bigint PRIMARY KEY REFERENCES turns(seq) ON DELETE CASCADE)")


def _m005_cold_tier(conn: psycopg.Connection, language: str) -> None:
    # As SQLite's m007 for the cold tier (the review queue came with m007).
    conn.execute("ALTER TABLE memories ADD COLUMN cold_at bigint")
    conn.execute("CREATE INDEX memories_cold ON memories(cold_at) WHERE cold_at IS NOT NULL")


def _m006_applies_when(conn: psycopg.Connection, language: str) -> None:
    # As SQLite's m008: write-time applies-when phrases (NULL when none), also in the tsv of the
    # memories written with them (existing memories have none, so no tsv changes).
    conn.execute("ALTER TABLE memories ADD COLUMN applies_when text[]")


def _m007_review_queue(conn: psycopg.Connection, language: str) -> None:
    # As SQLite's m007 for the review queue and the maintenance lease (the cold tier came with
    # m005). sources / payload / result: JSON text, read and written as on SQLite. open_key is unique
    # among pending proposals, so one thing is never queued twice, even by two machines at once.
    conn.execute("""CREATE TABLE proposals (
            id text PRIMARY KEY,                  -- ULID
            type text NOT NULL CHECK (type IN ('duplicate', 'near_duplicate', 'summarise', 'demote',
                                               'conflict', 'add')),
            state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected',
                                                                   'expired', 'applied')),
            subject text,
            sources text NOT NULL DEFAULT '[]',
            payload text NOT NULL DEFAULT '{}',
            open_key text NOT NULL,
            created_at bigint NOT NULL,           -- epoch ms, UTC
            expires_at bigint NOT NULL,
            decided_at bigint,
            decided_by text,                      -- cli | mcp | http
            result text)""")
    conn.execute("CREATE UNIQUE INDEX proposals_open ON proposals(open_key) WHERE state = 'pending'")
    conn.execute("CREATE INDEX proposals_by_state ON proposals(state, created_at)")
    conn.execute("""CREATE TABLE leases (
            name text PRIMARY KEY,
            holder text NOT NULL,
            acquired_at bigint NOT NULL,
            expires_at bigint NOT NULL)""")


def _m008_postings(conn: psycopg.Connection, language: str) -> None:
    # Postings of the keyword index: one row per (lexeme, memory) of every tsv, with that lexeme's
    # ts_rank(tsv, 'lexeme', 1) computed when the tsv is written. A one-word phrase is then ranked
    # from the b-tree alone (an index-only scan: no heap visit, no ts_rank call per hit); the
    # ranks are the values ts_rank gives at query time, so the scores are the same. Kept exact by
    # triggers on memories, whatever statement writes a tsv: a statement-level one for inserts (a
    # bulk import's INSERT ... SELECT adds its postings in one statement), a row-level one when a
    # tsv changes (rebuild; forget sets it to NULL) or a row goes. Names are schema-qualified: a
    # trigger runs under the search_path of whichever session writes.
    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    s = '"' + schema.replace('"', '""') + '"'
    conn.execute('CREATE TABLE memory_postings (lexeme text COLLATE "C" NOT NULL, seq bigint NOT NULL, '
                 "r real NOT NULL)")
    # Each lexeme of `tsv` with its rank as a one-lexeme query: the lexeme written as tsquery input
    # (quoted, backslash and quote escaped), so it is taken as it is, not parsed or stemmed again.
    quoted = r"'''' || replace(replace(u.lexeme, '\', '\\'), '''', '\''') || ''''"
    conn.execute(f"""CREATE FUNCTION {s}.cairn_postings(tsv tsvector) RETURNS TABLE (lexeme text, r real)
        LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT u.lexeme, ts_rank(tsv, ({quoted})::tsquery, 1) FROM unnest(tsv) u $$""")
    conn.execute(f"""CREATE FUNCTION {s}.memory_postings_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO {s}.memory_postings (lexeme, seq, r)
          SELECT p.lexeme, a.seq, p.r FROM added a CROSS JOIN LATERAL {s}.cairn_postings(a.tsv) p
          WHERE a.tsv IS NOT NULL ORDER BY 1, 2;
          RETURN NULL;
        END $$""")
    conn.execute(f"""CREATE FUNCTION {s}.memory_postings_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF OLD.tsv IS NOT NULL THEN
            DELETE FROM {s}.memory_postings p
            WHERE p.lexeme = ANY (tsvector_to_array(OLD.tsv) COLLATE "C") AND p.seq = OLD.seq;
          END IF;
          IF TG_OP = 'UPDATE' AND NEW.tsv IS NOT NULL THEN
            INSERT INTO {s}.memory_postings (lexeme, seq, r)
            SELECT p.lexeme, NEW.seq, p.r FROM {s}.cairn_postings(NEW.tsv) p;
          END IF;
          RETURN NULL;
        END $$""")
    conn.execute("INSERT INTO memory_postings (lexeme, seq, r) SELECT p.lexeme, m.seq, p.r FROM memories m "
                 "CROSS JOIN LATERAL cairn_postings(m.tsv) p WHERE m.tsv IS NOT NULL ORDER BY 1, 2")
    conn.execute("CREATE UNIQUE INDEX memory_postings_by_lexeme ON memory_postings (lexeme, seq) INCLUDE (r)")
    conn.execute("CREATE TRIGGER memory_postings_added AFTER INSERT ON memories REFERENCING NEW TABLE AS added "
                 "FOR EACH STATEMENT EXECUTE FUNCTION memory_postings_added()")
    conn.execute("CREATE TRIGGER memory_postings_changed AFTER UPDATE OF tsv ON memories FOR EACH ROW "
                 "WHEN (OLD.tsv IS DISTINCT FROM NEW.tsv) EXECUTE FUNCTION memory_postings_changed()")
    conn.execute("CREATE TRIGGER memory_postings_removed AFTER DELETE ON memories FOR EACH ROW "
                 "EXECUTE FUNCTION memory_postings_changed()")


_STEPS = {"m001_initial": _m001_initial, "m002_review_dismissals": _m002_review_dismissals,
          "m003_memory_usage": _m003_memory_usage, "m004_sessions": _m004_sessions,
          "m005_cold_tier": _m005_cold_tier, "m006_applies_when": _m006_applies_when,
          "m007_review_queue": _m007_review_queue, "m008_postings": _m008_postings}


def _lock_key(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


class PgVectorIndex:
    """Vectors by seq: `<table>(seq, embedding vector(dim))` with an HNSW index (cosine). The
    memories' are in memory_vectors, captured turns' in turn_vectors."""

    name = "pgvector"

    def __init__(self, table: str = "memory_vectors"):
        self.table = table

    def exists(self, conn: psycopg.Connection) -> bool:
        return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (self.table,)).fetchone()[0]

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
                     "ON CONFLICT (seq) DO UPDATE SET embedding = excluded.embedding", (seq, _vector_text(vector)))

    def delete(self, conn: psycopg.Connection, seq: int) -> bool:
        """Delete `seq`'s vector; returns whether it had one."""
        return conn.execute(f"DELETE FROM {self.table} WHERE seq = %s", (seq,)).rowcount > 0

    def count(self, conn: psycopg.Connection) -> int:
        return conn.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]


def secrets_of(url: str) -> list[str]:
    """The parts of a libpq URL or conninfo string that must never be shown: the whole string, its
    password, user, host and port and database name, longest first (so a part inside another is
    redacted with it). Best effort on a malformed string: then the string and each of its words."""
    parts = {url}
    try:
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(url)
        parts |= {str(info[k]) for k in ("password", "user", "host", "hostaddr", "dbname", "port") if info.get(k)}
    except Exception:  # noqa: BLE001 - a malformed URL: hide every piece of it
        parts |= set(re.split(r"[\s:/@?&=]+", url))
    return sorted((p for p in parts if len(p) >= 3), key=len, reverse=True)


def redact(message: str, url: str) -> str:
    """`message` with every part of `url` (secrets_of) replaced by `<redacted>`."""
    for part in secrets_of(url):
        message = message.replace(part, "<redacted>")
    return message


def connect(url: str) -> psycopg.Connection:
    """An autocommit connection to `url` (a libpq URL or conninfo; the password from the URL, the
    libpq environment or ~/.pgpass). Raises StoreError naming why, never the URL nor any part of it
    (libpq quotes a malformed conninfo whole, password included; a refused login names user and host)."""
    try:
        import psycopg
    except ImportError:
        raise StoreError("the postgres backend needs psycopg: pip install 'cairn-memory[postgres]'") from None
    try:
        return psycopg.connect(url, autocommit=True, application_name="cairn", connect_timeout=10)
    except (psycopg.Error, ValueError, TypeError) as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"cannot connect to the Postgres server: {redact(reason, url)}") from None


class PgStore:
    """One store in a Postgres schema. One object per thread; many processes and machines may share
    the store. Attributes as Store: name, path (a display name without the URL), vector_index,
    turn_index (captured turns' vectors), vector_unavailable."""

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
            server = conn.execute("SHOW server_version").fetchone()[0]
            vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            exists = PgStore._schema_exists(conn, schema)
            version = conn.execute(f'SELECT coalesce(max(number), 0) FROM "{schema}".migrations').fetchone()[0] \
                if exists else 0
        finally:
            conn.close()
        return {"server": f"PostgreSQL {server.split()[0]}", "vector": vector[0] if vector else None,
                "exists": exists, "schema_version": int(version)}

    @staticmethod
    def _schema_exists(conn: psycopg.Connection, schema: str) -> bool:
        return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{schema}".meta',)).fetchone()[0]

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
            cls._migrate(conn, schema, language)
            conn.execute(f'SET search_path TO "{schema}", public')
            conn.execute(f"SET hnsw.ef_search = {HNSW_EF_SEARCH}")
            store = cls(conn, schema, name)
            store._init_meta(meta or {})
            store._has_vectors()  # known once here, not asked again on every write
        except BaseException:
            conn.close()
            raise
        return store

    @staticmethod
    def _migrate(conn: psycopg.Connection, schema: str, language: str) -> int:
        latest = len(PG_MIGRATIONS)
        with conn.transaction():
            # One migrator per store at a time, across machines; the extension once per database.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(f"cairn migrate {schema}"),))
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("cairn extension"),))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            conn.execute(f'SET LOCAL search_path TO "{schema}", public')
            conn.execute("CREATE TABLE IF NOT EXISTS migrations (number integer PRIMARY KEY, name text NOT NULL, "
                         "applied_at bigint NOT NULL)")
            version = conn.execute("SELECT coalesce(max(number), 0) FROM migrations").fetchone()[0]
            if version > latest:
                raise SchemaTooNew(f"store schema {schema} has schema version {version}, newer than this Cairn "
                                   f"understands ({latest}); upgrade Cairn to open it")
            for number, name in PG_MIGRATIONS[version:]:
                _STEPS[name](conn, language)
                conn.execute("INSERT INTO migrations (number, name, applied_at) VALUES (%s, %s, %s)",
                             (number, name, now_ms()))
        return latest

    def schema_version(self) -> int:
        return self.conn.execute("SELECT coalesce(max(number), 0) FROM migrations").fetchone()[0]

    def close(self) -> None:
        self.conn.close()

    def hold_vectors(self) -> bool:
        """As Store.hold_vectors: never here; the HNSW index answers on the server."""
        return False

    def replaced(self) -> bool:
        """Whether this connection is no longer usable (closed, or lost with the server): a
        long-lived process then opens the store again (Cairn.stale). No round trip."""
        return self.conn.closed or self.conn.broken

    def transaction(self) -> contextlib.AbstractContextManager:
        """A short write transaction (a savepoint when nested), rolled back on any exception."""
        return self.conn.transaction()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A read-only repeatable-read transaction: every read inside sees the store as it was at
        its first statement, whatever other machines commit meanwhile (a backup)."""
        with self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield

    def _init_meta(self, meta: dict[str, str]) -> None:
        with self.transaction():
            for key, value in {"created_at": str(now_ms()), "name": self.name, "vector_backend": "pgvector",
                               **meta}.items():
                self.conn.execute("INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT DO NOTHING", (key, value))

    # -- meta --------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                          "SET value = excluded.value", (key, value))

    # -- reads ---------------------------------------------------------------------------------------
    def _memories(self, rows: Sequence[Sequence[Any]]) -> list[Memory]:
        return [
            Memory(id=r[1], text=r[2], kind=r[3], tags=tuple(r[14]), importance=r[4], source=r[5],
                   session_id=r[6], valid_from=r[7], valid_to=Memory.open_end(r[8]), recorded_at=r[9],
                   retired_at=Memory.open_end(r[10]), superseded_by=r[11], forgotten_at=r[12], store=self.name,
                   cold_at=r[13], applies_when=tuple(r[15] or ()))
            for r in rows
        ]

    def _tags(self, seqs: list[int]) -> dict[int, tuple[str, ...]]:
        out: dict[int, list[str]] = {}
        if seqs:
            for seq, tag in self.conn.execute("SELECT seq, tag FROM memory_tags WHERE seq = ANY(%s) ORDER BY tag",
                                              (list(seqs),)):
                out.setdefault(seq, []).append(tag)
        return {k: tuple(v) for k, v in out.items()}

    def get(self, memory_id: str) -> Memory:
        """The memory with that id (tombstones included). Raises MemoryNotFound."""
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = %s", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(f"no memory {memory_id!r} in store {self.name!r}")
        return self._memories([row])[0]

    def get_for_update(self, memory_id: str) -> Memory:
        """As get, locking the row until the transaction ends (another writer's supersession or
        forget of it waits, then sees this one's). Raises MemoryNotFound."""
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE id = %s FOR UPDATE", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(f"no memory {memory_id!r} in store {self.name!r}")
        return self._memories([row])[0]

    def seq_of(self, memory_id: str) -> int:
        row = self.conn.execute("SELECT seq FROM memories WHERE id = %s", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFound(f"no memory {memory_id!r} in store {self.name!r}")
        return row[0]

    def seqs_of(self, memory_ids: Sequence[str]) -> dict[str, int]:
        """{id: seq} for those of `memory_ids` the store holds."""
        return dict(self.conn.execute("SELECT id, seq FROM memories WHERE id = ANY(%s)",
                                      (list(memory_ids),)).fetchall())

    def by_seqs(self, seqs: Sequence[int]) -> dict[int, Memory]:
        if not seqs:
            return {}
        rows = self.conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE seq = ANY(%s)", (list(seqs),)).fetchall()
        return {row[0]: memory for row, memory in zip(rows, self._memories(rows))}

    def current_by_text_key(self, text_key: str) -> Memory | None:
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM memories WHERE text_key = %s AND retired_at = %s",
                                (text_key, END_OF_TIME)).fetchone()
        return self._memories([row])[0] if row else None

    _ORDER_SQL = {Order.NEWEST: "recorded_at DESC, seq DESC", Order.OLDEST: "recorded_at ASC, seq ASC",
                  Order.IMPORTANCE: "importance DESC, recorded_at DESC, seq DESC"}

    def list(self, filters: Filters, *, limit: int | None = None, order: Order = Order.NEWEST) -> list[Memory]:
        where, params = filters.where()
        sql = f"SELECT {_cols('m')} FROM memories m WHERE {_pg(where)} ORDER BY {self._ORDER_SQL[Order(order)]}"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(int(limit))
        return self._memories(self.conn.execute(sql, params).fetchall())

    def not_current_count(self) -> int:
        """Live memories (with text) outside the current view: superseded or expired."""
        return self.conn.execute(
            "SELECT (SELECT count(*) FROM memories WHERE retired_at < %s AND text IS NOT NULL)"
            " + (SELECT count(*) FROM memories WHERE valid_to <= %s AND retired_at = %s AND text IS NOT NULL)"
            " + (SELECT count(*) FROM memories WHERE cold_at IS NOT NULL AND text IS NOT NULL)",
            (END_OF_TIME, now_ms(), END_OF_TIME)).fetchone()[0]

    def keyword_search(self, match: str, filters: Filters, limit: int, *,
                       postings: bool = True) -> list[tuple[int, float]]:
        """BM25-like scores over text and tags for an FTS5 MATCH expression (text.fts_query):
        [(seq, score)], best first, higher is better. score = sum over the query's phrases found in
        the memory of idf(phrase) * ts_rank(tsv, phrase, 1), idf as BM25's (Lucene's form) from the
        number of memories holding the phrase (counted from the same scan that finds them) and the
        number of memories (the planner's estimate from 1,000 on; an exact count costs a scan per
        query). The filters apply in the same query. One round trip. postings: one-word phrases
        from memory_postings (_postings_sql, the default); False ranks every phrase from the tsv
        (_ranked_sql), the same scores read the slow way (the reference the tests compare with)."""
        found = phrases(match)
        if not found:
            return []
        where, params = filters.where()
        if postings:
            import psycopg

            try:
                with self._lock_wait():
                    rows = self.conn.execute(_postings_sql(_pg(where)),
                                             [self._ts, self._ts, found, *params, int(limit)]).fetchall()
                return [(int(seq), float(score)) for seq, score in rows]
            except psycopg.errors.LockNotAvailable:
                log.info("keyword search from the tsv: a forget is rewriting the postings")
        rows = self.conn.execute(_ranked_sql("memories", "m", "ts_rank(m.tsv, q.tq, 1)", _pg(where)),
                                 [self._ts, found, *params, int(limit)]).fetchall()
        return [(int(seq), float(score)) for seq, score in rows]

    def term_counts(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """As Store.term_counts: live memories, and how many of them match each term (one phrase of
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
        exists = index.exists(self.conn)
        if exists and self.conn.info.transaction_status == 0:
            # Remembered only outside a transaction: one that created the table may still roll back.
            self._ready_tables.add(index.table)
        return exists

    def _has_vectors(self) -> bool:
        return self.vector_index is not None and self._vectors_ready(self.vector_index)

    def _ensure_vector_table(self, index: PgVectorIndex, dim: int) -> None:
        if not self._vectors_ready(index):
            with self.conn.transaction():
                # Two machines' first vectors: one creates the table, the other waits and reuses it.
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(f"cairn vec {self.schema}"),))
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
        q = _vector_text(query)
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
                    f"ON m.seq = v.seq WHERE {_pg(where)} ORDER BY {order}, v.seq LIMIT %s",
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

    def chain_ids(self, memory_id: str) -> list[str]:
        """Ids of the supersession chain through `memory_id`, oldest first."""
        self.seq_of(memory_id)
        back = self.conn.execute(
            """WITH RECURSIVE up(id, depth) AS (
                   SELECT %s::text, 0
                   UNION SELECT m.id, up.depth + 1 FROM memories m JOIN up ON m.superseded_by = up.id
                   WHERE up.depth < 10000)
               SELECT id FROM up ORDER BY depth DESC""", (memory_id,)).fetchall()
        forward = self.conn.execute(
            """WITH RECURSIVE down(id, depth) AS (
                   SELECT superseded_by, 1 FROM memories WHERE id = %s AND superseded_by IS NOT NULL
                   UNION SELECT m.superseded_by, down.depth + 1 FROM memories m JOIN down ON m.id = down.id
                   WHERE m.superseded_by IS NOT NULL AND down.depth < 10000)
               SELECT id FROM down ORDER BY depth""", (memory_id,)).fetchall()
        ids = [r[0] for r in back] + [r[0] for r in forward]
        return list(dict.fromkeys(ids))

    def counts(self) -> dict[str, int]:
        """As Store.counts: "current" is warm only (what the hooks and default recall see), "cold" apart."""
        now = now_ms()
        row = self.conn.execute(
            f"""SELECT count(*) FILTER (WHERE {_pg(current_sql())} AND cold_at IS NULL),
                       count(*) FILTER (WHERE {_pg(current_sql())} AND cold_at IS NOT NULL),
                       count(*) FILTER (WHERE superseded_by IS NOT NULL AND forgotten_at IS NULL),
                       count(*) FILTER (WHERE forgotten_at IS NOT NULL),
                       count(*)
                FROM memories""", (now, now)).fetchone()
        backlog = self.conn.execute("SELECT count(*) FROM vector_backlog").fetchone()[0]
        return {"current": row[0], "cold": row[1], "superseded": row[2], "forgotten": row[3], "total": row[4],
                "awaiting_embedding": backlog}

    def current_kinds_and_tags(self, tag_limit: int) -> tuple[dict[str, int], list[tuple[str, int]]]:
        now = now_ms()
        kinds = dict(self.conn.execute(
            f"SELECT kind, count(*) FROM memories m WHERE {_pg(current_sql('m'))} AND m.cold_at IS NULL GROUP BY kind",
            (now,)).fetchall())
        tags = self.conn.execute(
            f"SELECT t.tag, count(*) AS n FROM memory_tags t JOIN memories m ON m.seq = t.seq "
            f"WHERE {_pg(current_sql('m'))} AND m.cold_at IS NULL GROUP BY t.tag ORDER BY n DESC, t.tag LIMIT %s",
            (now, int(tag_limit))).fetchall()
        return kinds, [(tag, n) for tag, n in tags]

    def backlog(self, limit: int) -> list[tuple[int, str]]:
        """(seq, passage) of memories awaiting a vector, oldest first (as Store.backlog)."""
        rows = self.conn.execute("SELECT b.seq, m.text, m.applies_when FROM vector_backlog b JOIN memories m "
                                 "ON m.seq = b.seq WHERE m.text IS NOT NULL ORDER BY b.seq LIMIT %s",
                                 (int(limit),)).fetchall()
        return [(seq, passage(text, tuple(applies or ()))) for seq, text, applies in rows]

    def all_text_seqs(self) -> list[tuple[int, str]]:
        """(seq, passage) of every live memory (as Store.all_text_seqs)."""
        rows = self.conn.execute("SELECT seq, text, applies_when FROM memories WHERE text IS NOT NULL "
                                 "ORDER BY seq").fetchall()
        return [(seq, passage(text, tuple(applies or ()))) for seq, text, applies in rows]

    # -- writes (inside transaction()) ---------------------------------------------------------------------
    def _tsv_args(self, text: str, tags: Sequence[str], applies_when: Sequence[str] = ()) -> tuple[str, str]:
        return self._ts, tokens(text + " " + " ".join(tags) + " " + " ; ".join(applies_when))

    def insert(self, new: NewMemory, vector: Any) -> int | None:
        """Insert a memory with its index entries; returns its seq, or None when another writer
        stored the same text (normalised) as a current memory meanwhile."""
        row = self.conn.execute(
            f"INSERT INTO memories (id, text, text_key, kind, importance, source, session_id, valid_from, "
            f"valid_to, asserted_valid_to, recorded_at, applies_when, tsv) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,"
            f"%s, to_tsvector(%s::regconfig, %s)) ON CONFLICT (text_key) WHERE retired_at = {END_OF_TIME} "
            f"AND text_key IS NOT NULL DO NOTHING RETURNING seq",
            (new.id, new.text, new.text_key, new.kind, new.importance, new.source, new.session_id, new.valid_from,
             new.valid_to, new.valid_to, new.recorded_at, list(new.applies_when) or None,
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
                                          (seq, _vector_text(vector)))
                        return
                    self.vector_index.upsert(self.conn, seq, vector)
                self.conn.execute("DELETE FROM vector_backlog WHERE seq = %s", (seq,))
                return
            except psycopg.errors.LockNotAvailable:
                # A forget is rewriting the vector table: the memory is stored now and queued for
                # embedding (flush_backlog), rather than the write waiting out the rebuild.
                log.info("memory %s queued for embedding: a forget is rewriting the vector table", seq)
        self.conn.execute("INSERT INTO vector_backlog(seq) VALUES (%s) ON CONFLICT DO NOTHING", (seq,))

    def supersede(self, old_seq: int, new_id: str, at: int, valid_until: int) -> bool:
        """Retire `old_seq` at transaction time `at`, its validity ending at `valid_until`. The row
        is locked first; returns False (and changes nothing) when another writer retired or forgot
        it meanwhile."""
        row = self.conn.execute("SELECT retired_at, forgotten_at FROM memories WHERE seq = %s FOR UPDATE",
                                (old_seq,)).fetchone()
        if row is None or row[0] != END_OF_TIME or row[1] is not None:
            return False
        self.conn.execute("UPDATE memories SET retired_at = %s, superseded_by = %s, "
                          "valid_to = greatest(valid_from + 1, least(valid_to, %s)) WHERE seq = %s",
                          (at, new_id, valid_until, old_seq))
        return True

    def erase(self, seq: int, at: int) -> None:
        """Forget: text, tags, keyword entry (its postings with it: the trigger of m008) and vector
        gone; the row stays as a tombstone."""
        row = self.conn.execute("SELECT tsv IS NOT NULL, id, text FROM memories WHERE seq = %s FOR UPDATE",
                                (seq,)).fetchone()
        if row is not None and row[2] is not None and forget_in_proposals(self.conn, row[1], row[2], at, mark="%s"):
            self._unflushed.add("proposals")
        self.conn.execute("UPDATE memories SET text = NULL, text_key = NULL, tsv = NULL, applies_when = NULL, "
                          "forgotten_at = %s, "
                          "retired_at = least(retired_at, %s) WHERE seq = %s", (at, at, seq))
        self._unflushed.add("memories")
        if row is not None and row[0]:
            self._unflushed.add("memory_postings")
        if self.conn.execute("DELETE FROM memory_tags WHERE seq = %s", (seq,)).rowcount:
            self._unflushed.add("memory_tags")
        self.conn.execute("DELETE FROM vector_backlog WHERE seq = %s", (seq,))
        if self._has_vectors() and self.vector_index.delete(self.conn, seq):
            self._unflushed.add("memory_vectors")

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
        end = END_OF_TIME
        live = memory.text is not None
        row = self.conn.execute(
            "INSERT INTO memories (id, text, text_key, kind, importance, source, session_id, valid_from, valid_to, "
            "asserted_valid_to, recorded_at, retired_at, superseded_by, forgotten_at, cold_at, applies_when, tsv) "
            "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s, "
            "CASE WHEN %s THEN to_tsvector(%s::regconfig, %s) END) RETURNING seq",
            (memory.id, memory.text, text_key, memory.kind, memory.importance, memory.source, memory.session_id,
             memory.valid_from, memory.valid_to or end, asserted_valid_to, memory.recorded_at,
             memory.retired_at or end, memory.superseded_by, memory.forgotten_at, memory.cold_at,
             (list(memory.applies_when) or None) if live else None, live,
             *self._tsv_args(memory.text or "", memory.tags, memory.applies_when))).fetchone()
        seq = int(row[0])
        if live:
            with self.conn.cursor() as cur:
                cur.executemany("INSERT INTO memory_tags(tag, seq) VALUES (%s, %s)", [(t, seq) for t in memory.tags])
            self.conn.execute("INSERT INTO vector_backlog(seq) VALUES (%s)", (seq,))
        return seq

    def asserted_valid_to(self, seq: int) -> int:
        return self.conn.execute("SELECT asserted_valid_to FROM memories WHERE seq = %s", (seq,)).fetchone()[0]

    # -- review dismissals -----------------------------------------------------------------------------
    def dismiss_pair(self, first_id: str, second_id: str, at: int) -> None:
        """Record "keep both" for the unordered pair. Raises MemoryNotFound for an unknown id."""
        self.seq_of(first_id), self.seq_of(second_id)
        pair = tuple(sorted((first_id, second_id)))
        self.conn.execute("INSERT INTO review_dismissals(first_id, second_id, dismissed_at) VALUES (%s, %s, %s) "
                          "ON CONFLICT DO NOTHING", (*pair, at))

    def is_dismissed(self, first_id: str, second_id: str) -> bool:
        pair = tuple(sorted((first_id, second_id)))
        return self.conn.execute("SELECT 1 FROM review_dismissals WHERE first_id = %s AND second_id = %s",
                                 pair).fetchone() is not None

    def dismissals(self) -> list[tuple[str, str, int]]:
        """Every recorded "keep both" pair: (first_id, second_id, dismissed_at)."""
        return [tuple(r) for r in self.conn.execute(
            "SELECT first_id, second_id, dismissed_at FROM review_dismissals ORDER BY first_id, second_id")]

    # -- bulk: export, import, embedding -----------------------------------------------------------------
    def iter_rows(self, batch: int = 500) -> Iterator[tuple[Memory, int]]:
        """Every memory, tombstones included, oldest first, with its asserted_valid_to (epoch ms)."""
        seqs = [r[0] for r in self.conn.execute("SELECT seq FROM memories ORDER BY seq")]
        for start in range(0, len(seqs), batch):
            chunk = seqs[start : start + batch]
            by_seq = self.by_seqs(chunk)
            asserted = dict(self.conn.execute("SELECT seq, asserted_valid_to FROM memories WHERE seq = ANY(%s)",
                                              (chunk,)).fetchall())
            for seq in chunk:
                yield by_seq[seq], asserted[seq]

    def import_rows(self, records: Sequence[tuple[Memory, int]]) -> tuple[int, int]:
        """As Store.import_rows: (imported, skipped), all or nothing. Raises InvalidImport. From
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
        imported = skipped = 0
        try:
            with self.transaction():
                self.conn.execute("SET CONSTRAINTS ALL DEFERRED")  # chains may point forward in the file
                for memory, asserted in records:
                    if self.conn.execute("SELECT 1 FROM memories WHERE id = %s", (memory.id,)).fetchone():
                        skipped += 1
                        continue
                    key = normalise(memory.text) if memory.text is not None and memory.retired_at is None else None
                    if key is not None and self.current_by_text_key(key) is not None:
                        skipped += 1
                        continue
                    try:
                        with self.conn.transaction():
                            self.insert_raw(memory, key, asserted)
                    except psycopg.errors.IntegrityError as exc:
                        raise InvalidImport(f"memory {memory.id}: {str(exc).splitlines()[0]}") from None
                    imported += 1
                self.conn.execute("SET CONSTRAINTS ALL IMMEDIATE")
        except psycopg.errors.ForeignKeyViolation:
            raise InvalidImport("superseded_by points to a memory that is neither in the file nor the store") from None
        return imported, skipped

    def _import_bulk(self, records: list[tuple[Memory, int]]) -> tuple[int, int]:
        """import_rows inside the caller's transaction: the same skips (an id the store or an earlier
        record holds; a live text already current), decided in Python, then COPY into a temporary
        table and one INSERT ... SELECT per table. Raises psycopg's IntegrityError."""
        end = END_OF_TIME
        keys = [normalise(m.text) if m.text is not None and m.retired_at is None else None for m, _ in records]
        seen_ids = {r[0] for r in self.conn.execute("SELECT id FROM memories WHERE id = ANY(%s)",
                                                    ([m.id for m, _ in records],))}
        seen_keys = {r[0] for r in self.conn.execute(
            "SELECT text_key FROM memories WHERE retired_at = %s AND text_key = ANY(%s)",
            (end, [k for k in keys if k is not None]))}
        rows, skipped = [], 0
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
                         self._tsv_args(m.text, m.tags, m.applies_when)[1] if live else None))
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
            stored = 0
            with self.transaction():
                alive = {s for (s,) in self.conn.execute("SELECT seq FROM vector_backlog FOR UPDATE")}
                for seq, vector in vectors.items():
                    if seq in alive:
                        self.put_vector(seq, vector, wait=True)
                        stored += 1
            return stored
        with self.transaction():
            self._ensure_vector_table(self.vector_index, len(next(iter(vectors.values()))))
            self.conn.execute("CREATE TEMP TABLE cairn_vectors (seq bigint, embedding text) ON COMMIT DROP")
            with self.conn.cursor() as cur, cur.copy("COPY cairn_vectors FROM STDIN") as copy:
                for seq, vector in vectors.items():
                    copy.write_row((seq, _vector_text(vector)))
            stored = self.conn.execute(
                "WITH alive AS (DELETE FROM vector_backlog b USING cairn_vectors v WHERE b.seq = v.seq "
                "RETURNING b.seq) "
                "INSERT INTO memory_vectors(seq, embedding) SELECT v.seq, v.embedding::vector FROM cairn_vectors v "
                "JOIN alive USING (seq) ON CONFLICT (seq) DO UPDATE SET embedding = excluded.embedding").rowcount
            self.conn.execute("DROP TABLE cairn_vectors")
        return stored

    def replace_vectors(self, vectors: dict[int, Any], *, model_name: str, fingerprint: str) -> None:
        with self.transaction():
            assert self.vector_index is not None
            self.vector_index.drop(self.conn)
            self._ready_tables.discard(self.vector_index.table)
            self.conn.execute("DELETE FROM vector_backlog")
            for seq, vector in vectors.items():
                self.put_vector(seq, vector, wait=True)
            for (seq,) in self.conn.execute("SELECT seq FROM memories WHERE text IS NOT NULL").fetchall():
                if seq not in vectors:
                    self.put_vector(seq, None)
            self.set_meta("embedding_model", model_name)
            self.set_meta("embedding_fingerprint", fingerprint)

    # -- health --------------------------------------------------------------------------------------------
    def integrity(self) -> str:
        return "ok"

    def index_report(self) -> dict[str, int]:
        """As Store.index_report, for the tsvector column, its postings and the vector table.
        postings_stale: memories whose postings are not one per lexeme of their tsv."""
        one = lambda sql: self.conn.execute(sql).fetchone()[0]  # noqa: E731
        report = {
            "live": one("SELECT count(*) FROM memories WHERE text IS NOT NULL"),
            "fts_missing": one("SELECT count(*) FROM memories WHERE text IS NOT NULL AND tsv IS NULL"),
            "fts_orphans": one("SELECT count(*) FROM memories WHERE text IS NULL AND tsv IS NOT NULL"),
            "postings_stale": one(
                "SELECT count(*) FROM memories m FULL JOIN (SELECT seq, count(*) AS n FROM memory_postings "
                "GROUP BY seq) p ON p.seq = m.seq WHERE coalesce(length(m.tsv), 0) <> coalesce(p.n, 0)"),
            "vector_missing": 0, "vector_orphans": 0,
        }
        live = "SELECT seq FROM memories WHERE text IS NOT NULL"
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
        """As Store.rebuild_indexes: every live memory's keyword entry and postings recomputed, vectors of
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
            live = "SELECT seq FROM memories WHERE text IS NOT NULL"
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

    # -- memory usage (as Store's) ----------------------------------------------------------------------
    def record_usage(self, memory_ids: Sequence[str], *, column: str, at: int) -> int:
        """Add one injection ("injected") or citation ("cited") at `at` (epoch ms) to each of
        `memory_ids` that names a memory of this store; returns how many were counted."""
        if column not in ("injected", "cited"):
            raise ValueError(column)
        counted = 0
        with self.transaction():
            for memory_id in dict.fromkeys(memory_ids):
                if self.conn.execute("SELECT 1 FROM memories WHERE id = %s", (memory_id,)).fetchone() is None:
                    continue
                self.conn.execute(
                    f"INSERT INTO memory_usage (memory_id, {column}, last_{column}_at) VALUES (%s, 1, %s) "
                    f"ON CONFLICT (memory_id) DO UPDATE SET {column} = memory_usage.{column} + 1, "
                    f"last_{column}_at = excluded.last_{column}_at", (memory_id, at))
                counted += 1
        return counted

    def usage(self, memory_ids: Sequence[str]) -> dict[str, dict[str, int | None]]:
        """{memory_id: {"injected", "cited", "last_injected_at", "last_cited_at"}} for the ids that
        were ever injected or cited."""
        rows = self.conn.execute("SELECT memory_id, injected, cited, last_injected_at, last_cited_at FROM memory_usage "
                                 "WHERE memory_id = ANY(%s)", (list(memory_ids),)).fetchall()
        return {r[0]: {"injected": r[1], "cited": r[2], "last_injected_at": r[3], "last_cited_at": r[4]} for r in rows}

    def usage_totals(self) -> dict[str, int]:
        """{"injected_memories", "injections", "cited_memories", "citations"} over the store."""
        row = self.conn.execute(
            "SELECT count(*) FILTER (WHERE injected > 0), coalesce(sum(injected), 0), "
            "count(*) FILTER (WHERE cited > 0), coalesce(sum(cited), 0) FROM memory_usage").fetchone()
        return {"injected_memories": int(row[0]), "injections": int(row[1]), "cited_memories": int(row[2]),
                "citations": int(row[3])}

    # -- captured sessions (as Store's: turns, their keyword entries and vectors, the catalog) ----------
    def _turn_tsv_sql(self) -> str:
        return "setweight(to_tsvector(%s::regconfig, %s), 'A') || setweight(to_tsvector(%s::regconfig, %s), 'B')"

    def _turn_tsv_args(self, text: str, key: str) -> tuple[str, str, str, str]:
        return self._ts, tokens(text), self._ts, tokens(key)


    # -- cold tier, review queue, maintenance lease (as Store's) ---------------------------------------
    supports_queue = True

    def set_cold(self, memory_id: str, at: int | None) -> bool:
        """As Store.set_cold."""
        self.seq_of(memory_id)
        was = "cold_at IS NULL" if at is not None else "cold_at IS NOT NULL"
        with self.transaction():
            cur = self.conn.execute(f"UPDATE memories SET cold_at = %s WHERE id = %s AND {was} AND text IS NOT NULL",
                                    (at, memory_id))
        return cur.rowcount == 1

    def cold_count(self) -> int:
        """Live memories in the cold tier."""
        return self.conn.execute("SELECT count(*) FROM memories WHERE cold_at IS NOT NULL AND text IS NOT NULL"
                                 ).fetchone()[0]

    _PROPOSAL_COLUMNS = Store._PROPOSAL_COLUMNS

    def add_proposals(self, rows: Sequence[tuple[Proposal, str]]) -> list[str]:
        """As Store.add_proposals: one whose open_key is already pending (on any machine) is skipped."""
        added: list[str] = []
        if not rows:
            return added
        with self.transaction():
            for proposal, open_key in rows:
                cur = self.conn.execute(
                    f"INSERT INTO proposals ({self._PROPOSAL_COLUMNS}, open_key) "
                    "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
                    (proposal.id, proposal.type, proposal.state, proposal.subject,
                     json.dumps(list(proposal.sources), ensure_ascii=False),
                     json.dumps(proposal.payload, ensure_ascii=False), proposal.created_at, proposal.expires_at,
                     proposal.decided_at, proposal.decided_by,
                     None if proposal.result is None else json.dumps(proposal.result, ensure_ascii=False), open_key))
                if cur.rowcount == 1:
                    added.append(proposal.id)
        return added

    def proposal(self, proposal_id: str, *, for_update: bool = False) -> Proposal | None:
        """The proposal, or None. for_update: lock its row until the transaction ends, so that a
        second reviewer's decision waits for this one's and then sees it decided."""
        lock = " FOR UPDATE" if for_update else ""
        row = self.conn.execute(f"SELECT {self._PROPOSAL_COLUMNS} FROM proposals WHERE id = %s{lock}",
                                (proposal_id,)).fetchone()
        return None if row is None else Store._proposal(row)

    def proposals(self, *, states: Sequence[str] = (), types: Sequence[str] = (),
                  limit: int | None = None) -> list[Proposal]:
        """As Store.proposals: oldest first."""
        clauses, params = ["true"], []
        for column, values in (("state", states), ("type", types)):
            if values:
                clauses.append(f"{column} = ANY(%s)")
                params.append(list(values))
        sql = f"SELECT {self._PROPOSAL_COLUMNS} FROM proposals WHERE {' AND '.join(clauses)} ORDER BY created_at, id"
        if limit is not None:
            sql += " LIMIT %s"
            params.append(int(limit))
        return [Store._proposal(r) for r in self.conn.execute(sql, params).fetchall()]

    def proposal_keys(self, states: Sequence[str]) -> set[str]:
        """open_key of every proposal in those states."""
        return {r[0] for r in self.conn.execute("SELECT open_key FROM proposals WHERE state = ANY(%s)",
                                                (list(states),))}

    def close_proposal(self, proposal_id: str, *, state: str, at: int, by: str | None,
                       result: dict[str, object] | None, from_state: str = "pending") -> bool:
        """As Store.close_proposal: compare-and-set. Under READ COMMITTED a concurrent UPDATE of the
        row waits for the first to commit and then re-checks `state = from_state`, so only one wins."""
        cur = self.conn.execute(
            "UPDATE proposals SET state = %s, decided_at = %s, decided_by = %s, result = %s "
            "WHERE id = %s AND state = %s",
            (state, at, by, None if result is None else json.dumps(result, ensure_ascii=False), proposal_id,
             from_state))
        return cur.rowcount == 1

    def expire_proposals(self, now: int) -> int:
        """As Store.expire_proposals."""
        cur = self.conn.execute(
            "UPDATE proposals SET state = 'expired', decided_at = %s, result = %s "
            "WHERE state = 'pending' AND expires_at <= %s",
            (now, json.dumps({"reason": "not reviewed within 30 days"}), now))
        return cur.rowcount

    def proposal_counts(self) -> dict[str, dict[str, int]]:
        """{state: {type: count}}."""
        out: dict[str, dict[str, int]] = {}
        for state, kind, n in self.conn.execute("SELECT state, type, count(*) FROM proposals GROUP BY state, type"):
            out.setdefault(state, {})[kind] = int(n)
        return out

    def take_lease(self, name: str, holder: str, now: int, ttl_ms: int) -> dict[str, object] | None:
        """As Store.take_lease, in one statement: the upsert takes the lease when it is free, ours
        or lapsed; two machines racing for it serialise on the row (or on the primary key)."""
        with self.transaction():
            taken = self.conn.execute(
                "INSERT INTO leases (name, holder, acquired_at, expires_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at, "
                "expires_at = excluded.expires_at WHERE leases.holder = excluded.holder OR leases.expires_at <= %s "
                "RETURNING holder", (name, holder, now, now + ttl_ms, now)).fetchone()
            if taken is not None:
                return None
            row = self.conn.execute("SELECT holder, acquired_at, expires_at FROM leases WHERE name = %s",
                                    (name,)).fetchone()
        return {"holder": row[0], "acquired_at": row[1], "expires_at": row[2]}

    def release_lease(self, name: str, holder: str) -> None:
        self.conn.execute("DELETE FROM leases WHERE name = %s AND holder = %s", (name, holder))

    def lease(self, name: str) -> dict[str, object] | None:
        row = self.conn.execute("SELECT holder, acquired_at, expires_at FROM leases WHERE name = %s",
                                (name,)).fetchone()
        return None if row is None else {"holder": row[0], "acquired_at": row[1], "expires_at": row[2]}

    def session_progress(self, session_id: str) -> tuple[str | None, int, str | None]:
        """(transcript_path, bytes read so far, last uuid) of a captured session; (None, 0, None) if unknown."""
        row = self.conn.execute("SELECT transcript_path, read_bytes, last_uuid FROM sessions WHERE session_id = %s",
                                (session_id,)).fetchone()
        return (row[0], int(row[1]), row[2]) if row else (None, 0, None)

    def known_uuids(self, session_id: str, uuids: Sequence[str]) -> set[str]:
        """Which of `uuids` the session already holds."""
        if not uuids:
            return set()
        return {r[0] for r in self.conn.execute("SELECT uuid FROM turns WHERE session_id = %s AND uuid = ANY(%s)",
                                                (session_id, list(uuids)))}

    def last_turns(self, session_id: str, n: int) -> list[Turn]:
        """The session's last `n` turns, in order."""
        rows = self.conn.execute(f"SELECT {Store._TURN_COLUMNS} FROM turns WHERE session_id = %s "
                                 "ORDER BY position DESC LIMIT %s", (session_id, int(n))).fetchall()
        return [Store._turn(r) for r in reversed(rows)]

    def add_turns(self, session_id: str, *, source: str, transcript_path: str | None, title: str | None,
                  turns: Sequence[dict], read_bytes: int | None, last_uuid: str | None, skipped: dict[str, int],
                  redactions: dict[str, int], private_spans: int, trailing_meta: dict[str, list[str]],
                  rekey: dict[str, str]) -> list[int]:
        """As Store.add_turns, in one transaction: the session's catalog row is locked first, so two
        processes (or machines) capturing the same session append one after the other, each turn
        once (a uuid the session holds is skipped)."""
        now = now_ms()
        inserted: list[int] = []
        with self.transaction():
            self.conn.execute("INSERT INTO sessions (session_id, source, transcript_path, title, updated_at) "
                              "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id) DO NOTHING",
                              (session_id, source, transcript_path, title, now))
            row = self.conn.execute("SELECT skipped, redactions FROM sessions WHERE session_id = %s FOR UPDATE",
                                    (session_id,)).fetchone()
            tallies = [json.loads(row[0]), json.loads(row[1])]
            for tally, extra in zip(tallies, (skipped, redactions)):
                for k, v in extra.items():
                    tally[k] = tally.get(k, 0) + int(v)
            if trailing_meta:
                last = self.conn.execute("SELECT seq, meta FROM turns WHERE session_id = %s ORDER BY position DESC "
                                         "LIMIT 1", (session_id,)).fetchone()
                if last is not None:
                    meta = json.loads(last[1] or "{}")
                    for k, values in trailing_meta.items():
                        meta[k] = meta.get(k, []) + [v for v in values if v not in meta.get(k, [])]
                    self.conn.execute("UPDATE turns SET meta = %s WHERE seq = %s", (json.dumps(meta), last[0]))
            for uuid, key in rekey.items():
                hit = self.conn.execute("SELECT seq, text FROM turns WHERE session_id = %s AND uuid = %s",
                                        (session_id, uuid)).fetchone()
                if hit is not None:
                    self.conn.execute(f"UPDATE turns SET tsv = {self._turn_tsv_sql()} WHERE seq = %s",
                                      (*self._turn_tsv_args(hit[1], key), hit[0]))
            position = self.conn.execute("SELECT coalesce(max(position) + 1, 0) FROM turns WHERE session_id = %s",
                                         (session_id,)).fetchone()[0]
            for t in turns:
                row = self.conn.execute(
                    "INSERT INTO turns (session_id, uuid, position, role, text, at, speaker, git_branch, cwd, meta, "
                    f"tsv) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s, {self._turn_tsv_sql()}) "
                    "ON CONFLICT (session_id, uuid) DO NOTHING RETURNING seq",
                    (session_id, t["uuid"], position, t["role"], t["text"], t["at"], t.get("speaker"),
                     t.get("git_branch"), t.get("cwd"), json.dumps(t.get("meta") or {}),
                     *self._turn_tsv_args(t["text"], t.get("key") or ""))).fetchone()
                if row is None:
                    continue
                position += 1
                seq = int(row[0])
                inserted.append(seq)
                self.put_turn_vector(seq, t.get("vector"))
            self.conn.execute(
                """UPDATE sessions SET
                     title = coalesce(title, %s),
                     started_at = (SELECT min(at) FROM turns WHERE session_id = %s),
                     ended_at = (SELECT max(at) FROM turns WHERE session_id = %s),
                     turn_count = (SELECT count(*) FROM turns WHERE session_id = %s),
                     git_branch = coalesce((SELECT git_branch FROM turns WHERE session_id = %s AND git_branch
                                            IS NOT NULL ORDER BY position DESC LIMIT 1), git_branch),
                     cwd = coalesce((SELECT cwd FROM turns WHERE session_id = %s AND cwd IS NOT NULL
                                     ORDER BY position LIMIT 1), cwd),
                     transcript_path = coalesce(%s, transcript_path),
                     read_bytes = coalesce(%s, read_bytes), last_uuid = coalesce(%s, last_uuid),
                     skipped = %s, redactions = %s, private_spans = private_spans + %s, updated_at = %s
                   WHERE session_id = %s""",
                (title, session_id, session_id, session_id, session_id, session_id, transcript_path, read_bytes,
                 last_uuid, json.dumps(tallies[0]), json.dumps(tallies[1]), int(private_spans), now, session_id))
        return inserted

    def put_turn_vector(self, seq: int, vector: Any) -> None:
        """Store a turn's vector, or queue the turn for embedding (inside a transaction)."""
        if vector is not None and self.turn_index is not None:
            self._ensure_vector_table(self.turn_index, len(vector))
            self.turn_index.upsert(self.conn, seq, vector)
            self.conn.execute("DELETE FROM turn_vector_backlog WHERE seq = %s", (seq,))
        else:
            self.conn.execute("INSERT INTO turn_vector_backlog(seq) VALUES (%s) ON CONFLICT DO NOTHING", (seq,))

    def turn_backlog(self, limit: int) -> list[tuple[int, str | None, str]]:
        """(seq, speaker, text) of turns awaiting a vector, oldest first."""
        return self.conn.execute("SELECT b.seq, t.speaker, t.text FROM turn_vector_backlog b "
                                 "JOIN turns t ON t.seq = b.seq "
                                 "ORDER BY b.seq LIMIT %s", (int(limit),)).fetchall()

    def fill_turn_backlog(self, vectors: dict[int, Any]) -> None:
        with self.transaction():
            for seq, vector in vectors.items():
                self.put_turn_vector(seq, vector)

    def requeue_turn_vectors(self) -> int:
        """As Store.requeue_turn_vectors."""
        with self.transaction():
            if self.turn_index is not None:
                self.turn_index.drop(self.conn)
                self._ready_tables.discard(self.turn_index.table)
            self.conn.execute("INSERT INTO turn_vector_backlog(seq) SELECT seq FROM turns ON CONFLICT DO NOTHING")
            return self.conn.execute("SELECT count(*) FROM turn_vector_backlog").fetchone()[0]

    @staticmethod
    def _turn_time_sql(since: int | None, until: int | None) -> tuple[str, list[object]]:
        clauses, params = time_bounds(since, until, start="t.at", end="t.at", mark="%s")
        return " AND ".join(["TRUE", *clauses]), params

    def turn_keyword_search(self, match: str, limit: int, *, since: int | None = None, until: int | None = None,
                            key_weight: float = 1.0) -> list[tuple[int, float]]:
        """BM25-like scores over turns (as keyword_search; the index key weighs key_weight against
        the turn's text): [(seq, score)], best first."""
        found = phrases(match)
        if not found:
            return []
        where, params = self._turn_time_sql(since, until)
        rows = self.conn.execute(
            _ranked_sql("turns", "t", "ts_rank(%s::real[], t.tsv, q.tq, 1)", where),
            [self._ts, found, [0.0, 0.0, float(key_weight), 1.0], *params, int(limit)]).fetchall()
        return [(int(seq), float(score)) for seq, score in rows]

    def turn_vector_search(self, query: Any, limit: int, *, since: int | None = None,
                           until: int | None = None) -> list[tuple[int, float]]:
        """Nearest turns to `query`: [(seq, cosine)], best first. Without time bounds the HNSW index
        is walked (approximate); with them every turn in the bounds is ranked exactly."""
        if self.turn_index is None or not self._vectors_ready(self.turn_index):
            return []
        q = _vector_text(query)
        where, params = self._turn_time_sql(since, until)
        order = "v.embedding <=> %s::vector" if not params else "(v.embedding <=> %s::vector) + 0"
        rows = self.conn.execute(
            f"SELECT v.seq, 1 - (v.embedding <=> %s::vector) FROM turn_vectors v JOIN turns t ON t.seq = v.seq "
            f"WHERE {where} ORDER BY {order}, v.seq LIMIT %s", [q, *params, q, int(limit)]).fetchall()
        return [(int(s), float(c)) for s, c in rows]

    def turn_exact_search(self, needle: str, limit: int, *, since: int | None = None,
                          until: int | None = None) -> list[tuple[int, float]]:
        """Turns containing `needle` (case-insensitive), newest first: [(seq, 1.0)]. A scan of the
        turns' text: without pg_trgm (not in every server, pgserver's included) no index serves a
        substring."""
        where, params = self._turn_time_sql(since, until)
        rows = self.conn.execute(
            f"SELECT t.seq FROM turns t WHERE strpos(lower(t.text), lower(%s)) > 0 AND {where} "
            "ORDER BY t.at DESC, t.seq DESC LIMIT %s", (needle, *params, int(limit))).fetchall()
        return [(int(r[0]), 1.0) for r in rows]

    def turns_by_seqs(self, seqs: Sequence[int]) -> dict[int, Turn]:
        if not seqs:
            return {}
        rows = self.conn.execute(f"SELECT {Store._TURN_COLUMNS} FROM turns WHERE seq = ANY(%s)",
                                 (list(seqs),)).fetchall()
        return {int(r[0]): Store._turn(r) for r in rows}

    def session_turns(self, session_id: str, offset: int, limit: int) -> list[Turn]:
        """Turns of a session by position: positions offset .. offset + limit - 1."""
        rows = self.conn.execute(f"SELECT {Store._TURN_COLUMNS} FROM turns WHERE session_id = %s AND position >= %s "
                                 "ORDER BY position LIMIT %s", (session_id, int(offset), int(limit))).fetchall()
        return [Store._turn(r) for r in rows]

    def session(self, session_id: str) -> SessionInfo | None:
        row = self.conn.execute(f"SELECT {Store._SESSION_COLUMNS} FROM sessions WHERE session_id = %s",
                                (session_id,)).fetchone()
        return Store._session(row) if row else None

    def sessions(self, limit: int, *, since: int | None = None, until: int | None = None) -> list[SessionInfo]:
        """Captured sessions, most recently active first."""
        clauses, params = time_bounds(since, until, start="coalesce(started_at, updated_at)",
                                      end="coalesce(ended_at, updated_at)", mark="%s")
        clauses.insert(0, "TRUE")
        rows = self.conn.execute(
            f"SELECT {Store._SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(clauses)} "
            "ORDER BY coalesce(ended_at, updated_at) DESC, session_id LIMIT %s", (*params, int(limit))).fetchall()
        return [Store._session(r) for r in rows]

    def session_totals(self) -> dict[str, object]:
        """{"sessions", "turns", "awaiting_embedding", "skipped": {reason: n}, "redactions": {type: n},
        "private_spans"} over every captured session."""
        sessions, turns, backlog = self.conn.execute(
            "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM turns), "
            "(SELECT count(*) FROM turn_vector_backlog)").fetchone()
        skipped: dict[str, int] = {}
        redactions: dict[str, int] = {}
        private = 0
        for s, r, p in self.conn.execute("SELECT skipped, redactions, private_spans FROM sessions"):
            for tally, extra in ((skipped, json.loads(s)), (redactions, json.loads(r))):
                for k, v in extra.items():
                    tally[k] = tally.get(k, 0) + v
            private += p
        return {"sessions": int(sessions), "turns": int(turns), "awaiting_embedding": int(backlog),
                "skipped": skipped, "redactions": redactions, "private_spans": int(private)}
