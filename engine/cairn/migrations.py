"""Numbered schema migrations, recorded in the database they were applied to.

Each migration is a function `mNNN_name(conn)`, registered in order by `@migration`. Adding a
column is adding a function. `PRAGMA user_version` holds the number of the last one applied, so a
file written by a newer Cairn is recognised and refused instead of being misread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .db import Connection, DatabaseError, busy, checkpoint_truncate, is_busy, write_transaction
from .errors import SchemaTooNew, StoreBusy, StoreCorrupted
from .timeutil import END_OF_TIME, now_ms

log = logging.getLogger(__name__)
Migration = Callable[[Connection], None]
MIGRATIONS: list[tuple[int, str, Migration]] = []


def migration(fn: Migration) -> Migration:
    number = int(fn.__name__[1:4])
    assert number == len(MIGRATIONS) + 1, f"migration {fn.__name__} out of order"
    MIGRATIONS.append((number, fn.__name__, fn))
    return fn


@migration
def m001_initial(conn: Connection) -> None:
    conn.execute(
        f"""
        CREATE TABLE memories (
            seq INTEGER PRIMARY KEY,              -- rowid shared with the FTS and vector indexes
            id TEXT NOT NULL UNIQUE,              -- ULID: sortable by creation time
            text TEXT,                            -- NULL once forgotten (the row is then a tombstone)
            text_key TEXT,                        -- normalised text, for exact duplicates
            kind TEXT NOT NULL,
            importance INTEGER NOT NULL CHECK (importance BETWEEN 1 AND 5),
            source TEXT NOT NULL,
            session_id TEXT,
            valid_from INTEGER NOT NULL,          -- valid time: when it holds in the world (epoch ms)
            valid_to INTEGER NOT NULL DEFAULT {END_OF_TIME},
            asserted_valid_to INTEGER NOT NULL DEFAULT {END_OF_TIME},  -- valid_to as first recorded
            recorded_at INTEGER NOT NULL,         -- transaction time: when the store learned it
            retired_at INTEGER NOT NULL DEFAULT {END_OF_TIME},  -- ... and when it stopped believing it
            superseded_by TEXT REFERENCES memories(id),
            forgotten_at INTEGER,
            CHECK (valid_from < valid_to)
        )"""
    )
    conn.execute("CREATE INDEX memories_by_retired ON memories(retired_at, valid_from)")
    conn.execute("CREATE INDEX memories_by_recorded ON memories(recorded_at)")
    # One current memory per normalised text: the database itself refuses an exact duplicate, so two
    # sessions racing to store the same text cannot both succeed.
    conn.execute(
        f"CREATE UNIQUE INDEX memories_current_text ON memories(text_key) "
        f"WHERE retired_at = {END_OF_TIME} AND text_key IS NOT NULL"
    )
    conn.execute(
        """CREATE TABLE memory_tags (
            tag TEXT NOT NULL,
            seq INTEGER NOT NULL REFERENCES memories(seq) ON DELETE CASCADE,
            PRIMARY KEY (tag, seq)
        ) WITHOUT ROWID"""
    )
    conn.execute("CREATE INDEX memory_tags_by_seq ON memory_tags(seq)")
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5("
        "body, tags, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    # Memories stored while no embedder was loaded; embedded when one is.
    conn.execute("CREATE TABLE vector_backlog (seq INTEGER PRIMARY KEY REFERENCES memories(seq) ON DELETE CASCADE)")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


@migration
def m002_review_dismissals(conn: Connection) -> None:
    # A pair the user reviewed and chose to keep both of: /cairn:review-memory does not ask again.
    # The first piece of the durable review queue (proposals and verdicts come with maintenance).
    conn.execute(
        """CREATE TABLE review_dismissals (
            first_id TEXT NOT NULL,               -- the older memory's id (ids are sortable ULIDs)
            second_id TEXT NOT NULL,
            dismissed_at INTEGER NOT NULL,
            PRIMARY KEY (first_id, second_id)
        ) WITHOUT ROWID"""
    )


@migration
def m003_valid_to_index(conn: Connection) -> None:
    # Counting the live memories that are not current (superseded or expired) must be an index
    # lookup: recall uses that count to search the indexes without a filter, exactly (store.py).
    conn.execute("CREATE INDEX memories_by_valid_to ON memories(valid_to)")


@migration
def m004_fts_secure_delete(conn: Connection) -> None:
    # FTS5 removes a deleted row's entries from its index segments instead of leaving them until a
    # merge (a persistent option of the table, SQLite 3.42+). Entries deleted before this are purged
    # by purge_deleted below.
    if fts_secure_delete_supported(conn):  # else (the stdlib fallback's older SQLite) Store.erase optimizes
        conn.execute("INSERT INTO memory_fts(memory_fts, rank) VALUES ('secure-delete', 1)")


def fts_secure_delete_supported(conn: Connection) -> bool:
    """FTS5's secure-delete option exists from SQLite 3.42.0 (sqlite.org/fts5.html#the_secure_delete_option)."""
    version = conn.execute("SELECT sqlite_version()").fetchone()[0]
    return tuple(int(p) for p in version.split(".")[:3]) >= (3, 42, 0)


# Migrations after which a store written by an older Cairn may still hold forgotten text (FTS
# segments, free pages): purge_deleted runs once when one of them is applied to an existing store.
PURGE_AFTER = {4}


def purge_deleted(conn: Connection) -> None:
    """Rewrite the FTS index and the whole file so that no deleted content remains in it: an FTS
    'optimize' (one segment, deleted entries dropped), VACUUM (free pages gone), then an emptied WAL.
    Outside any transaction; costs about as much as copying the file."""
    conn.execute("INSERT INTO memory_fts(memory_fts) VALUES ('optimize')")
    conn.execute("VACUUM")
    checkpoint_truncate(conn)


@migration
def m005_sessions(conn: Connection) -> None:
    # Captured conversations, apart from distilled memories: their own tables, keyword index and
    # vectors, so they never reach the brief or memory_recall.
    conn.execute(
        """CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY,
            source TEXT NOT NULL,                 -- claude-code | locomo | ...
            transcript_path TEXT,                 -- where it was read from (Claude Code JSONL)
            title TEXT,                           -- the first user prompt, shortened
            started_at INTEGER,                   -- first and last turn's time (epoch ms)
            ended_at INTEGER,
            turn_count INTEGER NOT NULL DEFAULT 0,
            git_branch TEXT,
            cwd TEXT,
            read_bytes INTEGER NOT NULL DEFAULT 0,  -- byte offset of the transcript read so far
            last_uuid TEXT,
            skipped TEXT NOT NULL DEFAULT '{}',   -- JSON {reason: lines skipped}
            redactions TEXT NOT NULL DEFAULT '{}',  -- JSON {secret type: count}; never a value
            private_spans INTEGER NOT NULL DEFAULT 0,
            updated_at INTEGER NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE turns (
            seq INTEGER PRIMARY KEY,              -- rowid shared with turn_fts and the turn vectors
            session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
            uuid TEXT NOT NULL,                   -- the transcript's message uuid
            position INTEGER NOT NULL,            -- 0, 1, ... within the session
            role TEXT NOT NULL,                   -- user | assistant
            speaker TEXT,
            text TEXT NOT NULL,                   -- scrubbed (privacy.py) before it is written
            at INTEGER,                           -- epoch ms
            git_branch TEXT,
            cwd TEXT,
            meta TEXT NOT NULL DEFAULT '{}',      -- JSON {"tools": [...], "files": [...]}
            UNIQUE (session_id, uuid),
            UNIQUE (session_id, position)
        )"""
    )
    conn.execute("CREATE INDEX turns_by_at ON turns(at)")
    # body: the turn; key: what else it is found by (speaker, date, the turns around it).
    conn.execute(
        "CREATE VIRTUAL TABLE turn_fts USING fts5("
        "body, key, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    if fts_secure_delete_supported(conn):  # as m004 for memories
        conn.execute("INSERT INTO turn_fts(turn_fts, rank) VALUES ('secure-delete', 1)")
    conn.execute("CREATE TABLE turn_vector_backlog (seq INTEGER PRIMARY KEY REFERENCES turns(seq) ON DELETE CASCADE)")


@migration
def m006_memory_usage(conn: Connection) -> None:
    # How often each memory was injected into a session's context by a hook, and how often the
    # assistant then cited it ([mem:ID] in its reply, read from the transcript at capture). Counts
    # and times only: ranking priors and the maintenance of never-used memories read them.
    conn.execute(
        """CREATE TABLE memory_usage (
            memory_id TEXT PRIMARY KEY,
            injected INTEGER NOT NULL DEFAULT 0,
            cited INTEGER NOT NULL DEFAULT 0,
            last_injected_at INTEGER,             -- epoch ms
            last_cited_at INTEGER
        )"""
    )



@migration
def m007_review_queue(conn: Connection) -> None:
    # The durable review queue (review.py): what maintenance, `remember`'s possible conflicts and
    # import-guidance propose, and the user's verdict on each. Nothing a proposal names changes
    # before it is approved. sources: JSON [{"id", "stamp"}], each source memory's version stamp when
    # proposed (a decision compares them: compare-and-set). open_key: type + source ids (or the
    # text of an `add`), unique among pending proposals so that one thing is never queued twice.
    # A lease (holder + expiry) keeps two maintenance runs off one store. cold_at: the cold tier
    # (epoch ms it was demoted; NULL: warm): left out of hooks and of default recall and list.
    conn.execute(
        """CREATE TABLE proposals (
            id TEXT PRIMARY KEY,                  -- ULID
            type TEXT NOT NULL CHECK (type IN ('duplicate', 'near_duplicate', 'summarise', 'demote',
                                               'conflict', 'add')),
            state TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'approved', 'rejected',
                                                                   'expired', 'applied')),
            subject TEXT,                         -- what it is about, for grouping the review
            sources TEXT NOT NULL DEFAULT '[]',
            payload TEXT NOT NULL DEFAULT '{}',   -- JSON: texts, similarity, draft, reason, ...
            open_key TEXT NOT NULL,
            created_at INTEGER NOT NULL,          -- epoch ms, UTC
            expires_at INTEGER NOT NULL,
            decided_at INTEGER,
            decided_by TEXT,                      -- cli | mcp | http
            result TEXT                           -- JSON: what applying it did, or why it closed
        )"""
    )
    conn.execute("CREATE UNIQUE INDEX proposals_open ON proposals(open_key) WHERE state = 'pending'")
    conn.execute("CREATE INDEX proposals_by_state ON proposals(state, created_at)")
    conn.execute(
        """CREATE TABLE leases (
            name TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            acquired_at INTEGER NOT NULL,
            expires_at INTEGER NOT NULL
        )"""
    )
    conn.execute("ALTER TABLE memories ADD COLUMN cold_at INTEGER")
    conn.execute("CREATE INDEX memories_cold ON memories(cold_at) WHERE cold_at IS NOT NULL")


@migration
def m008_applies_when(conn: Connection) -> None:
    # Write-time "applies when" phrases (JSON array of strings; NULL when none), kept with each
    # memory version, and a third FTS column indexing them. FTS5 tables cannot gain a column, so the
    # index is rebuilt under a new name with its rows copied, then renamed.
    conn.execute("ALTER TABLE memories ADD COLUMN applies_when TEXT")
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts_v8 USING fts5("
        "body, tags, applies, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    if fts_secure_delete_supported(conn):  # as m004
        conn.execute("INSERT INTO memory_fts_v8(memory_fts_v8, rank) VALUES ('secure-delete', 1)")
    conn.execute("INSERT INTO memory_fts_v8(rowid, body, tags, applies) SELECT rowid, body, tags, '' FROM memory_fts")
    conn.execute("DROP TABLE memory_fts")
    conn.execute("ALTER TABLE memory_fts_v8 RENAME TO memory_fts")


def _user_tables(conn: Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    return {r[0] for r in rows}


def migrate(conn: Connection, path: str) -> int:
    """Bring the database at `conn` up to the newest schema; returns the schema version.

    Raises SchemaTooNew for a file written by a newer Cairn, StoreCorrupted for a file that is not
    a Cairn store (or not a database).
    """
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = _user_tables(conn)
    except DatabaseError as exc:
        if is_busy(exc):
            raise busy(conn) from None
        raise StoreCorrupted(f"{path} is not a readable SQLite database ({exc})") from None
    latest = len(MIGRATIONS)
    if version > latest:
        raise SchemaTooNew(
            f"{path} has schema version {version}, newer than this Cairn understands ({latest}); "
            "upgrade Cairn to open it"
        )
    if version == 0 and tables:
        # Judged again under the write lock: a process creating this store may be mid-way (seen
        # under load: a reader found tables and no schema version while a capture created the store).
        with write_transaction(conn):
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            raise StoreCorrupted(f"{path} is an SQLite database but not a Cairn store")
    if version == latest:
        return version
    with write_transaction(conn):
        # Re-read under the write lock: another process may have migrated meanwhile.
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)")
        for number, name, fn in MIGRATIONS[version:]:
            fn(conn)
            conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (name, now_ms()))
            conn.execute(f"PRAGMA user_version = {number}")
    if version > 0 and any(version < n for n in PURGE_AFTER) and conn.execute(
            "SELECT 1 FROM memories WHERE forgotten_at IS NOT NULL LIMIT 1").fetchone():
        try:
            purge_deleted(conn)
        except (DatabaseError, StoreBusy) as exc:  # busy: the store works; `cairn doctor --fix` purges later
            log.warning("%s: could not purge forgotten text left by an older Cairn (%s)", path, exc)
    return latest
