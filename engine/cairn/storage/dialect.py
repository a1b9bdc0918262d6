"""The SQL dialects of the two backends, and what every part of the shared store stands on: the
connection, running a statement in the dialect, and the hooks a backend implements.

`SqlBase` is the root of the shared store's parts (base.SqlStore: the memories; review_sql,
usage_sql, scope_sql, session_sql: one role of the storage contract each), so each part runs its SQL
through the same plumbing without knowing which backend holds the store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..models import Memory
from ..timeutil import now_ms
from . import sql

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")


@dataclass(frozen=True)
class Dialect:
    """What tells one backend's SQL from the other's.

    mark: the driver's placeholder. chunk: how many values one `IN (...)` list may hold (SQLite's
    default variable limit was 999); None: a whole list is one array parameter. for_update: the
    row-lock clause of a read inside a write. least/greatest: the two-argument min/max functions.
    defer: the statement that checks references (superseded_by) at commit until the transaction ends.
    """

    name: str
    mark: str
    chunk: int | None
    for_update: str
    least: str
    greatest: str
    instr: str  # position of a substring: instr(hay, needle) / strpos(hay, needle)
    defer: str

    def sql(self, text: str) -> str:
        """`text` written with `?` placeholders, in this dialect's (the shared SQL has no literal `?` or `%`)."""
        if self.mark == "?":
            return text
        assert "%" not in text, text
        return text.replace("?", self.mark)

    def in_list(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        """`column` is one of `values`: (SQL with `?`, its parameters)."""
        if self.chunk is None:
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({sql.marks(len(values))})", list(values)


SQLITE = Dialect(name="sqlite", mark="?", chunk=500, for_update="", least="min", greatest="max", instr="instr",
                 defer="PRAGMA defer_foreign_keys = ON")  # reset by SQLite at commit
POSTGRES = Dialect(name="postgres", mark="%s", chunk=None, for_update=" FOR UPDATE", least="least",
                   greatest="greatest", instr="strpos",
                   defer="SET CONSTRAINTS ALL DEFERRED")  # superseded_by is DEFERRABLE; lasts to commit


class SqlBase:
    """The plumbing of the shared store. Subclasses set `dialect`, `conn`, `name`, `vector_index`,
    `turn_index` and `vector_unavailable`, and implement the hooks that raise NotImplementedError."""

    dialect: ClassVar[Dialect]
    conn: Any
    name: str
    vector_index: Any
    turn_index: Any
    vector_unavailable: str | None

    # -- plumbing -------------------------------------------------------------------------------------
    def _q(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run `text` (written with `?`) with `params`; the driver's cursor."""
        return self.conn.execute(self.dialect.sql(text), params)

    def _one(self, text: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row of `text`."""
        return self._q(text, params).fetchone()[0]

    def _chunks(self, values: Sequence[T]) -> Iterator[list[T]]:
        """`values` in lists short enough for one `in_list` each (one list on Postgres)."""
        step = self.dialect.chunk or max(len(values), 1)
        for start in range(0, len(values), step):
            yield list(values[start : start + step])

    def _in(self, column: str, values: Sequence[object]) -> tuple[str, list[object]]:
        return self.dialect.in_list(column, values)

    def transaction(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _one_write(self) -> contextlib.AbstractContextManager[Any]:
        """Around a write of one statement: SQLite takes its write lock up front (BEGIN IMMEDIATE);
        on Postgres the statement is its own transaction."""
        raise NotImplementedError

    # -- hooks a backend implements -------------------------------------------------------------------
    def _memory_columns(self, alias: str = "memories") -> str:
        """The select list `_memories` reads (sql.MEMORY_COLUMNS, and what the backend adds)."""
        raise NotImplementedError

    def _memories(self, rows: Sequence[Sequence[Any]]) -> list[Memory]:
        raise NotImplementedError

    def _applies(self, value: Any) -> tuple[str, ...]:
        """applies_when as the backend stores it, decoded (none: ())."""
        raise NotImplementedError

    def put_vector(self, seq: int, vector: np.ndarray | None, *, fresh: bool = False, wait: bool = False) -> None:
        raise NotImplementedError

    def insert_raw(self, memory: Memory, text_key: str | None, asserted_valid_to: int) -> int:
        raise NotImplementedError

    def _erase_index(self, seq: int) -> None:
        """Remove memory `seq`'s keyword index entry (inside the forget's transaction)."""
        raise NotImplementedError

    def _erased(self, table: str) -> None:
        """A forget removed rows of `table` (Postgres vacuums those at flush_to_disk)."""

    def _ensure_vector_table(self, index: Any, dim: int) -> None:
        """Create `index`'s table for vectors of `dim` floats unless it exists."""
        raise NotImplementedError

    def _vectors_dropped(self, index: Any) -> None:
        """`index`'s table was dropped (inside a transaction that recreates it or not)."""

    def _turn_index_insert(self, text: str, key: str) -> tuple[str, str, tuple[Any, ...]]:
        """What a new turn's INSERT adds for its keyword entry: (", columns", ", values", parameters)."""
        raise NotImplementedError

    def _index_turn(self, seq: int, text: str, key: str, *, new: bool) -> None:
        """Write turn `seq`'s keyword entry after its INSERT (new) or when its index key changes."""
        raise NotImplementedError

    def seq_of(self, memory_id: str) -> int:
        """Memory `memory_id`'s seq (base.SqlStore's, which the other parts read through)."""
        raise NotImplementedError

    # -- meta -----------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self._q("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _put_meta(self, key: str, value: str) -> None:
        self._q("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value))

    def set_meta(self, key: str, value: str) -> None:
        with self._one_write():
            self._put_meta(key, value)

    def _record_meta(self, meta: dict[str, str]) -> None:
        """Record created_at, name and `meta`, each unless the store holds it already."""
        with self.transaction():
            for key, value in {"created_at": str(now_ms()), "name": self.name, **meta}.items():
                self._q("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT DO NOTHING", (key, value))
