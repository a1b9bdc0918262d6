"""Connecting to a Postgres server without ever showing its URL, and where a store lives there."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

from ...errors import StoreError

if TYPE_CHECKING:
    import psycopg

LANGUAGES = ("simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish", "french",
             "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali",
             "norwegian", "portuguese", "romanian", "russian", "serbian", "spanish", "swedish", "tamil", "turkish",
             "yiddish")


def schema_for(name: str) -> str:
    """The schema holding store `name`: cairn_<name>, or a hashed form when that is longer than
    Postgres's 63-byte identifiers."""
    schema = f"cairn_{name}"
    if len(schema.encode()) <= 63:
        return schema
    return f"cairn_{name[:40]}_{hashlib.sha256(name.encode()).hexdigest()[:12]}"


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


def scalar(conn: psycopg.Connection, query: str, params: tuple[object, ...] = ()) -> Any:
    """The first column of the one row `query` returns (a count, a setting, an existence test)."""
    row = conn.execute(query, params).fetchone()
    assert row is not None, query
    return row[0]


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
