"""SQLite connections: which binding, which pragmas, and write transactions.

Python's stdlib `sqlite3` is often built without extension loading (macOS system Python, pyenv,
this project's CI image), so the sqlite-vec extension cannot load there. `sqlean.py` ships an SQLite
that can, with wheels for Linux, macOS and Windows; it is the first choice. When neither it nor
`pysqlite3` imports, the stdlib binding is used and the vector index falls back to numpy.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from ..errors import StoreBusy, StoreCorrupted, StoreError, StoreUnreadable

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000  # many sessions, hooks and MCP servers share a file; wait, don't fail


def _load_binding() -> ModuleType:
    """The first SQLite binding that imports (a test of the stdlib fallback hides the others, as
    `sys.modules[name] = None` does)."""
    names = ["sqlean", "pysqlite3.dbapi2", "sqlite3"]
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"no SQLite binding importable from {names}")


sqlite = _load_binding()
Connection = Any  # the binding's Connection class; bindings differ, the DB-API surface does not
DatabaseError = sqlite.DatabaseError
IntegrityError = sqlite.IntegrityError
OperationalError = sqlite.OperationalError
# What reading a store that cannot be used raises: the file is not a Cairn store, or SQLite finds
# it malformed mid-query (which the engine does not wrap). For callers that must tell a broken store
# from other failures (the session-start hook).
BROKEN_STORE_ERRORS = (StoreError, DatabaseError)


def sqlite_vec_path() -> str:
    """sqlite_vec.loadable_path(), found without importing sqlite_vec: its __init__ imports numpy
    (about 100 ms), which a keyword-only hook process never needs. Raises ImportError."""
    from importlib.util import find_spec

    spec = find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the sqlite-vec package is not installed")
    return os.path.normpath(os.path.join(list(spec.submodule_search_locations)[0], "vec0"))


def load_sqlite_vec(conn: Connection) -> str | None:
    """Load the sqlite-vec extension into `conn`. Returns None on success, else why it failed."""
    try:
        path = sqlite_vec_path()
        conn.enable_load_extension(True)
        conn.load_extension(path)
        conn.enable_load_extension(False)
        return None
    except Exception as exc:  # AttributeError on bindings without enable_load_extension, too
        return f"{type(exc).__name__}: {exc}"


def sqlite_vec_error() -> str | None:
    """Whether sqlite-vec loads into this binding: None if it does, else why not."""
    conn = sqlite.connect(":memory:")
    try:
        return load_sqlite_vec(conn)
    finally:
        conn.close()


def is_busy(exc: BaseException) -> bool:
    """Whether `exc` is SQLite's SQLITE_BUSY / SQLITE_LOCKED: the busy timeout ran out."""
    return isinstance(exc, OperationalError) and any(w in str(exc) for w in ("locked", "busy"))


def busy(conn: Connection) -> StoreBusy:
    """The StoreBusy to raise for `conn` (its file and its busy timeout named)."""
    waited = conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    return StoreBusy(f"store {path} is locked by another process (waited {waited:g} s); try again")


_BindingConnection: Any = sqlite.Connection  # chosen at import: a base class no checker can name


class StoreConnection(_BindingConnection):
    """A connection on which any statement, not only BEGIN or the pragmas at open, raises StoreBusy
    (naming the file and the wait) when another process's lock outlasts the busy timeout: a read, a
    checkpoint or an autocommit write never shows the user SQLite's raw "database is locked"."""

    def execute(self, *args: Any) -> Any:
        return self._busy_as_store_busy(super().execute, args)

    def executemany(self, *args: Any) -> Any:
        return self._busy_as_store_busy(super().executemany, args)

    def executescript(self, *args: Any) -> Any:
        return self._busy_as_store_busy(super().executescript, args)

    def _busy_as_store_busy(self, run: Any, args: tuple) -> Any:
        try:
            return run(*args)
        except OperationalError as exc:
            if is_busy(exc):
                raise busy(self) from None
            raise


def unreadable(path: str, *, write: bool = True) -> StoreUnreadable | None:
    """The error to raise when this user cannot open `path` or its -wal or -shm file (another
    user's, such as one made by `sudo cairn ...`), naming the file and its owner; else None."""
    for name in (path, f"{path}-wal", f"{path}-shm"):
        try:
            os.close(os.open(name, os.O_RDWR if write else os.O_RDONLY))
        except FileNotFoundError:
            continue
        except PermissionError:
            try:
                import pwd

                owner = pwd.getpwuid(os.stat(name).st_uid).pw_name
            except (ImportError, KeyError, OSError):
                owner = "another user"
            return StoreUnreadable(f"{name} belongs to {owner} and cannot be opened by this user; give it back "
                                   f"to this user (chown) or run Cairn as {owner}")
        except OSError:
            continue
    return None


def connect(path: str, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Connection:
    """Open `path` in WAL mode with a busy timeout; autocommit, transactions are explicit.

    Raises StoreUnreadable when this user cannot open the file (another user's), StoreCorrupted
    when it is not an SQLite database, StoreBusy when another process holds it locked for longer
    than the busy timeout (then, or at any later statement).
    """
    try:
        conn = sqlite.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000,
                              factory=StoreConnection)
    except DatabaseError:
        raise (unreadable(path) or StoreCorrupted(f"{path} cannot be opened as an SQLite database")) from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # durable at each checkpoint; safe with WAL
        conn.execute("PRAGMA foreign_keys = ON")
        # Deleted content is overwritten with zeros, not left in free pages: forget means gone.
        conn.execute("PRAGMA secure_delete = ON")
    except StoreBusy:
        conn.close()
        raise
    except DatabaseError as exc:
        conn.close()
        raise (unreadable(path) or StoreCorrupted(f"{path} is not a readable SQLite database ({exc})")) from None
    return conn


def connect_read_only(path: str) -> Connection:
    """Open `path` read-only, without changing it (no journal mode switch, no -wal created).
    Raises StoreUnreadable when this user cannot read it, StoreCorrupted when it cannot be opened
    as a database."""
    try:
        conn = sqlite.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False,
                              factory=StoreConnection)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except DatabaseError as exc:
        raise (unreadable(path, write=False)
               or StoreCorrupted(f"{path} is not a readable SQLite database ({exc})")) from None
    return conn


def checkpoint_truncate(conn: Connection) -> bool:
    """Copy the WAL into the database file and truncate the WAL to zero bytes, so that pages a
    transaction overwrote (a forgotten memory's text) survive in no file. Waits for readers up to
    the busy timeout. Returns whether the WAL was emptied (False: a reader kept it in use)."""
    busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return busy == 0


@contextlib.contextmanager
def write_transaction(conn: Connection) -> Iterator[Connection]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception; inside a transaction, a savepoint.

    The write lock is taken up front: in WAL mode a transaction that reads and then upgrades to a
    write fails at once with SQLITE_BUSY under contention, whatever the busy timeout.
    Raises StoreBusy when the lock is not had within the busy timeout.
    """
    if conn.in_transaction:
        # Nested (a review decision applies engine writes inside its own transaction): a savepoint,
        # so the whole decision commits or rolls back as one.
        name = f"nested_{id(object())}"
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield conn
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        else:
            conn.execute(f"RELEASE {name}")
        return
    conn.execute("BEGIN IMMEDIATE")  # StoreBusy (StoreConnection) when the lock is not had in time
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")
