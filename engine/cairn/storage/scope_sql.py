"""The scope role of the shared store (protocol.ScopeStore): the path and command scopes of the
memories and what sessions touched, in SQL both backends run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..timeutil import now_ms
from . import sql

if TYPE_CHECKING:
    pass

from .dialect import SqlBase


class ScopeSql(SqlBase):
    """The scope role of the shared store (protocol.ScopeStore): the path and command scopes of the"""

    # -- path and command scopes, and what sessions touched (scopes.py) -----------------------------
    def put_scopes(self, memory_id: str, rows: Sequence[tuple[str, str, str, float]], at: int) -> int:
        """Add or update scopes of `memory_id`: rows of (pattern, prefix, origin, weight); an existing
        (memory_id, pattern) takes the row's origin, weight and `at` (epoch ms). Returns how many."""
        with self.transaction():
            for pattern, prefix, origin, weight in rows:
                self._q("INSERT INTO memory_scopes (memory_id, pattern, prefix, origin, weight, updated_at) "
                        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (memory_id, pattern) DO UPDATE SET "
                        "prefix = excluded.prefix, origin = excluded.origin, weight = excluded.weight, "
                        "updated_at = excluded.updated_at", (memory_id, pattern, prefix, origin, float(weight), at))
        return len(rows)

    def delete_scopes(self, memory_ids: Sequence[str] | None, *, origin: str | None = None,
                      patterns: Sequence[str] = ()) -> int:
        """Remove scopes: of `memory_ids` (None: of every memory), only of `origin` when given, only
        `patterns` when given. Returns how many rows went."""
        where, params = [], []  # type: list[str], list[object]
        if origin is not None:
            where.append("origin = ?")
            params.append(origin)
        if patterns:
            clause, values = self._in("pattern", list(patterns))
            where.append(clause)
            params += values
        removed = 0
        with self.transaction():
            if memory_ids is None:
                sql_text = "DELETE FROM memory_scopes" + (" WHERE " + " AND ".join(where) if where else "")
                return int(self._q(sql_text, params).rowcount)
            for chunk in self._chunks(list(dict.fromkeys(memory_ids))):
                clause, values = self._in("memory_id", chunk)
                removed += int(self._q("DELETE FROM memory_scopes WHERE " + " AND ".join([clause, *where]),
                                       [*values, *params]).rowcount)
        return removed

    def scopes_of(self, memory_ids: Sequence[str]) -> dict[str, list[tuple[str, str, float, int]]]:
        """{memory_id: [(pattern, origin, weight, updated_at), ...]} for the ids with scopes,
        given ones first, then by weight."""
        out: dict[str, list[tuple[str, str, float, int]]] = {}
        for chunk in self._chunks(list(dict.fromkeys(memory_ids))):
            clause, values = self._in("memory_id", chunk)
            for r in self._q("SELECT memory_id, pattern, origin, weight, updated_at FROM memory_scopes "
                             f"WHERE {clause} ORDER BY memory_id, origin, weight DESC, pattern", values):
                out.setdefault(r[0], []).append((r[1], r[2], float(r[3]), int(r[4])))
        return out

    def scoped_candidates(self, prefixes: Sequence[str]) -> list[tuple[str, str, str, float, int]]:
        """Scopes whose literal prefix is one of `prefixes` (a path's ancestors, "" for the root's
        globs, "cmd:NAME" for a command), of current warm memories only: rows of (memory_id,
        pattern, origin, weight, updated_at)."""
        if not prefixes:
            return []
        clause, values = self._in("s.prefix", list(dict.fromkeys(prefixes)))
        # CROSS JOIN: from memory_scopes_by_prefix to each row's memory. Left to itself SQLite's
        # planner (no statistics) walks every current memory and looks up its scopes: 11 ms a tool
        # call at 10,000 memories against 0.1 ms this way round. Postgres plans it as an inner join.
        return [(r[0], r[1], r[2], float(r[3]), int(r[4])) for r in self._q(
            "SELECT s.memory_id, s.pattern, s.origin, s.weight, s.updated_at FROM memory_scopes s CROSS JOIN "
            f"memories m WHERE m.id = s.memory_id AND {clause} AND m.cold_at IS NULL AND {sql.current_sql('m')}",
            [*values, now_ms()])]

    def scoped_count(self) -> int:
        """How many current memories have at least one scope."""
        # CROSS JOIN, as in scoped_candidates: the scopes' rows, each with its memory (5.8 -> 3.7 ms
        # at 10,000 memories, a third of them scoped, on SQLite).
        return int(self._one("SELECT count(DISTINCT s.memory_id) FROM memory_scopes s CROSS JOIN memories m "
                             f"WHERE m.id = s.memory_id AND {sql.current_sql('m')}", (now_ms(),)))

    def scope_counts(self) -> dict[str, int]:
        """{origin: rows} over the store's scopes."""
        return {str(r[0]): int(r[1]) for r in self._q("SELECT origin, count(*) FROM memory_scopes GROUP BY origin")}

    def record_touches(self, session_id: str, touches: Sequence[tuple[str, str]], at: int, *, keep: int) -> int:
        """Count each (path, action) as touched by `session_id` at `at` (epoch ms); the session keeps
        its `keep` most recent rows. Returns how many rows were written."""
        with self.transaction():
            for path, action in touches:
                self._q("INSERT INTO session_touches (session_id, path, action, n, first_at, last_at) "
                        "VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT (session_id, path, action) DO UPDATE SET "
                        "n = session_touches.n + 1, last_at = excluded.last_at", (session_id, path, action, at, at))
            if self._one("SELECT count(*) FROM session_touches WHERE session_id = ?", (session_id,)) > keep:
                cutoff = self._q("SELECT last_at FROM session_touches WHERE session_id = ? ORDER BY last_at DESC "
                                 "LIMIT 1 OFFSET ?", (session_id, keep)).fetchone()
                if cutoff is not None:
                    self._q("DELETE FROM session_touches WHERE session_id = ? AND last_at <= ?",
                            (session_id, cutoff[0]))
        return len(touches)

    def session_touches(self, session_id: str, limit: int) -> list[tuple[str, str, int, int, int]]:
        """What `session_id` touched, most recent first: rows of (path, action, n, first_at, last_at)."""
        return [(r[0], r[1], int(r[2]), int(r[3]), int(r[4])) for r in self._q(
            "SELECT path, action, n, first_at, last_at FROM session_touches WHERE session_id = ? "
            "ORDER BY last_at DESC, path LIMIT ?", (session_id, int(limit)))]

    def recent_touches(self, limit: int, *, exclude_session: str = "") -> list[tuple[str, str, int]]:
        """The paths the store's sessions touched most recently, other than `exclude_session`'s:
        rows of (path, action, last_at), one per (path, action), newest first, at most `limit`."""
        out: dict[tuple[str, str], int] = {}
        # Newest rows first by the last_at index (m013); a path touched in several sessions has a row
        # in each, so read a few times `limit` rows to find `limit` distinct ones.
        for path, action, at in self._q("SELECT path, action, last_at FROM session_touches WHERE session_id <> ? "
                                        "ORDER BY last_at DESC LIMIT ?", (exclude_session, int(limit) * 4)):
            out.setdefault((path, action), int(at))
        return [(path, action, at) for (path, action), at in list(out.items())[:limit]]

    def prune_touches(self, before: int) -> int:
        """Drop touches last seen before `before` (epoch ms); returns how many rows went."""
        with self.transaction():
            return int(self._q("DELETE FROM session_touches WHERE last_at < ?", (before,)).rowcount)
