"""The sessions role of the shared store (protocol.SessionStore): captured turns, their keyword
entries and vectors, and the session catalog, in SQL both backends run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..models import SessionInfo, Turn
from ..timeutil import now_ms
from . import sql

if TYPE_CHECKING:
    import numpy as np

from .dialect import SqlBase


class SessionSql(SqlBase):
    """The sessions role of the shared store (protocol.SessionStore): captured turns, their keyword"""

    # -- captured sessions (turns, their keyword entries and vectors, the session catalog) ------------
    def session_progress(self, session_id: str) -> tuple[str | None, int, str | None]:
        """(transcript_path, bytes read so far, last uuid) of a captured session; (None, 0, None) if unknown."""
        row = self._q("SELECT transcript_path, read_bytes, last_uuid FROM sessions WHERE session_id = ?",
                      (session_id,)).fetchone()
        return (row[0], int(row[1]), row[2]) if row else (None, 0, None)

    def known_uuids(self, session_id: str, uuids: Sequence[str]) -> set[str]:
        """Which of `uuids` the session already holds."""
        out: set[str] = set()
        for chunk in self._chunks(uuids):
            where, params = self._in("uuid", chunk)
            out |= {r[0] for r in self._q(f"SELECT uuid FROM turns WHERE session_id = ? AND {where}",
                                          (session_id, *params))}
        return out

    def last_turns(self, session_id: str, n: int) -> list[Turn]:
        """The session's last `n` turns, in order."""
        rows = self._q(f"SELECT {sql.TURN_COLUMNS} FROM turns WHERE session_id = ? ORDER BY position DESC LIMIT ?",
                       (session_id, int(n))).fetchall()
        return [sql.turn_from_row(r) for r in reversed(rows)]

    def add_turns(self, session_id: str, *, source: str, transcript_path: str | None, title: str | None,
                  turns: Sequence[dict[str, Any]], read_bytes: int | None, last_uuid: str | None,
                  skipped: dict[str, int], redactions: dict[str, int], private_spans: int,
                  trailing_meta: dict[str, list[str]], rekey: dict[str, str]) -> list[int]:
        """Append turns to a session in one transaction, creating its catalog row; returns the seqs of
        the turns inserted (a turn whose uuid the session already holds is skipped: idempotent). The
        catalog row is locked first, so two processes (or machines) capturing the same session
        append one after the other.

        turns: dicts with the Turn fields but position, plus "key" (index key) and "vector" (or None).
        read_bytes/last_uuid: how far the transcript has been read (None: unchanged). skipped,
        redactions (counts only), private_spans: added to the session's tallies. trailing_meta:
        tool metadata for the session's last stored turn. rekey: {uuid: new index key} for turns
        already stored (a turn's key names the turn after it, known only now)."""
        now = now_ms()
        with self.transaction():
            tallies = self._locked_tallies(session_id, source, transcript_path, title, now, skipped, redactions)
            self._amend_stored(session_id, trailing_meta, rekey)
            inserted = self._insert_turns(session_id, turns)
            self._q(
                """UPDATE sessions SET
                     title = coalesce(title, ?),
                     started_at = (SELECT min(at) FROM turns WHERE session_id = ?),
                     ended_at = (SELECT max(at) FROM turns WHERE session_id = ?),
                     turn_count = (SELECT count(*) FROM turns WHERE session_id = ?),
                     git_branch = coalesce((SELECT git_branch FROM turns WHERE session_id = ? AND git_branch
                                            IS NOT NULL ORDER BY position DESC LIMIT 1), git_branch),
                     cwd = coalesce((SELECT cwd FROM turns WHERE session_id = ? AND cwd IS NOT NULL
                                     ORDER BY position LIMIT 1), cwd),
                     transcript_path = coalesce(?, transcript_path),
                     read_bytes = coalesce(?, read_bytes), last_uuid = coalesce(?, last_uuid),
                     skipped = ?, redactions = ?, private_spans = private_spans + ?, updated_at = ?
                   WHERE session_id = ?""",
                (title, session_id, session_id, session_id, session_id, session_id, transcript_path, read_bytes,
                 last_uuid, json.dumps(tallies[0]), json.dumps(tallies[1]), int(private_spans), now, session_id))
        return inserted

    def _locked_tallies(self, session_id: str, source: str, transcript_path: str | None, title: str | None, now: int,
                        skipped: dict[str, int], redactions: dict[str, int]) -> list[dict[str, int]]:
        """The session's catalog row, created if missing and locked (FOR UPDATE on Postgres: two
        writers of one session append in turn); its skipped and redactions tallies plus these."""
        self._q("INSERT INTO sessions (session_id, source, transcript_path, title, updated_at) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO NOTHING",
                (session_id, source, transcript_path, title, now))
        row = self._q(f"SELECT skipped, redactions FROM sessions WHERE session_id = ?{self.dialect.for_update}",
                      (session_id,)).fetchone()
        tallies = [json.loads(row[0]), json.loads(row[1])]
        for tally, extra in zip(tallies, (skipped, redactions)):
            for k, v in extra.items():
                tally[k] = tally.get(k, 0) + int(v)
        return tallies

    def _amend_stored(self, session_id: str, trailing_meta: dict[str, list[str]], rekey: dict[str, str]) -> None:
        """Turns already stored: the last one takes the tool metadata that followed it, and each turn
        in `rekey` its new index key."""
        if trailing_meta:
            last = self._q("SELECT seq, meta FROM turns WHERE session_id = ? ORDER BY position DESC LIMIT 1",
                           (session_id,)).fetchone()
            if last is not None:
                meta = json.loads(last[1] or "{}")
                for k, values in trailing_meta.items():
                    meta[k] = meta.get(k, []) + [v for v in values if v not in meta.get(k, [])]
                self._q("UPDATE turns SET meta = ? WHERE seq = ?", (json.dumps(meta), last[0]))
        for uuid, key in rekey.items():
            hit = self._q("SELECT seq, text FROM turns WHERE session_id = ? AND uuid = ?",
                          (session_id, uuid)).fetchone()
            if hit is not None:
                self._index_turn(hit[0], hit[1], key, new=False)

    def _insert_turns(self, session_id: str, turns: Sequence[dict[str, Any]]) -> list[int]:
        """Insert `turns` after the session's last, with their keyword entries and vectors; the seqs
        of those inserted (a uuid the session holds is skipped)."""
        inserted: list[int] = []
        position = self._one("SELECT coalesce(max(position) + 1, 0) FROM turns WHERE session_id = ?", (session_id,))
        for t in turns:
            index_columns, index_values, index_params = self._turn_index_insert(t["text"], t.get("key") or "")
            added = self._q(
                f"INSERT INTO turns (session_id, uuid, position, role, text, at, speaker, git_branch, cwd, "
                f"meta{index_columns}) VALUES ({sql.marks(10)}{index_values}) "
                "ON CONFLICT (session_id, uuid) DO NOTHING RETURNING seq",
                (session_id, t["uuid"], position, t["role"], t["text"], t["at"], t.get("speaker"),
                 t.get("git_branch"), t.get("cwd"), json.dumps(t.get("meta") or {}), *index_params)).fetchall()
            if not added:
                continue
            position += 1
            seq = int(added[0][0])
            inserted.append(seq)
            self._index_turn(seq, t["text"], t.get("key") or "", new=True)
            self.put_turn_vector(seq, t.get("vector"))
        return inserted

    def put_turn_vector(self, seq: int, vector: np.ndarray | None) -> None:
        """Store a turn's vector, or queue the turn for embedding (inside a transaction)."""
        if vector is not None and self.turn_index is not None:
            self._ensure_vector_table(self.turn_index, len(vector))
            self.turn_index.upsert(self.conn, seq, vector)
            self._q("DELETE FROM turn_vector_backlog WHERE seq = ?", (seq,))
        else:
            self._q("INSERT INTO turn_vector_backlog(seq) VALUES (?) ON CONFLICT DO NOTHING", (seq,))

    def turn_backlog(self, limit: int) -> list[tuple[int, str | None, str, str | None, str | None]]:
        """(seq, speaker, text, speaker and text of the turn before it in its session or None) of turns
        awaiting a vector, oldest first."""
        return [(r[0], r[1], r[2], r[3], r[4]) for r in self._q(
            "SELECT b.seq, t.speaker, t.text, p.speaker, p.text FROM turn_vector_backlog b "
            "JOIN turns t ON t.seq = b.seq "
            "LEFT JOIN turns p ON p.session_id = t.session_id AND p.position = t.position - 1 "
            "ORDER BY b.seq LIMIT ?", (int(limit),)).fetchall()]

    def drop_turn_vectors(self, before: int, seqs: Sequence[int] = ()) -> int:
        """Vector retention: drop the vectors of turns older than `before` (epoch ms) and take them
        out of the embedding queue; their text and keyword entries stay. The turns visited are those
        at or after the last call's `before` (recorded in meta), and `seqs` (turns just captured,
        which may be older). Returns how many vectors were dropped."""
        done = self.get_meta("turn_vectors_dropped_before")
        start = int(done) if done else None
        ranges: list[tuple[str, tuple[Any, ...]]] = []
        if start is None or start < before:
            ranges.append(("SELECT seq FROM turns WHERE at < ?" + ("" if start is None else " AND at >= ?"),
                           (int(before),) if start is None else (int(before), start)))
        for chunk in self._chunks(seqs):
            where, params = self._in("seq", chunk)
            ranges.append((f"SELECT seq FROM turns WHERE at < ? AND {where}", (int(before), *params)))
        dropped = 0
        index = self.turn_index
        with self.transaction():
            for range_sql, values in ranges:
                self._q(f"DELETE FROM turn_vector_backlog WHERE seq IN ({range_sql})", values)
                if index is not None and index.exists(self.conn):
                    dropped += int(self._q(f"DELETE FROM {index.table} WHERE seq IN ({range_sql})", values).rowcount)
            if start is None or start < before:
                self._put_meta("turn_vectors_dropped_before", str(int(before)))
        return dropped

    def fill_turn_backlog(self, vectors: dict[int, Any]) -> None:
        with self.transaction():
            for seq, vector in vectors.items():
                self.put_turn_vector(seq, vector)

    def requeue_turn_vectors(self) -> int:
        """Drop every captured turn's vector and queue all turns for embedding (a re-embedding with
        another model: vectors of two models are never searched together). Returns how many."""
        with self.transaction():
            if self.turn_index is not None:
                self.turn_index.drop(self.conn)
                self._vectors_dropped(self.turn_index)
            self._q("INSERT INTO turn_vector_backlog(seq) SELECT seq FROM turns WHERE true ON CONFLICT DO NOTHING")
            return int(self._one("SELECT count(*) FROM turn_vector_backlog"))

    @staticmethod
    def _turn_time(since: int | None, until: int | None) -> tuple[list[str], list[object]]:
        """Clauses over `turns t` keeping the turns at or after `since` and before `until`."""
        return sql.time_bounds(since, until, start="t.at", end="t.at")

    def turn_exact_search(self, needle: str, limit: int, *, since: int | None = None,
                          until: int | None = None) -> list[tuple[int, float]]:
        """Turns containing `needle` (case-insensitive, for ASCII on SQLite), newest first: [(seq, 1.0)].
        A scan of the turns' text: no index serves a substring (on Postgres that takes pg_trgm,
        which not every server has, pgserver's included)."""
        clauses, params = self._turn_time(since, until)
        rows = self._q(
            f"SELECT t.seq FROM turns t WHERE {self.dialect.instr}(lower(t.text), lower(?)) > 0 "
            f"{''.join(' AND ' + c for c in clauses)} ORDER BY t.at DESC, t.seq DESC LIMIT ?",
            (needle, *params, int(limit))).fetchall()
        return [(int(r[0]), 1.0) for r in rows]

    def turns_by_seqs(self, seqs: Sequence[int]) -> dict[int, Turn]:
        out: dict[int, Turn] = {}
        for chunk in self._chunks(seqs):
            where, params = self._in("seq", chunk)
            rows = self._q(f"SELECT {sql.TURN_COLUMNS} FROM turns WHERE {where}", params).fetchall()
            out.update({int(r[0]): sql.turn_from_row(r) for r in rows})
        return out

    def session_turns(self, session_id: str, offset: int, limit: int) -> list[Turn]:
        """Turns of a session by position: positions offset .. offset + limit - 1."""
        rows = self._q(f"SELECT {sql.TURN_COLUMNS} FROM turns WHERE session_id = ? AND position >= ? "
                       "ORDER BY position LIMIT ?", (session_id, int(offset), int(limit))).fetchall()
        return [sql.turn_from_row(r) for r in rows]

    def session(self, session_id: str) -> SessionInfo | None:
        row = self._q(f"SELECT {sql.SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        return sql.session_from_row(row) if row else None

    def sessions(self, limit: int, *, since: int | None = None, until: int | None = None) -> list[SessionInfo]:
        """Captured sessions, most recently active first."""
        clauses, params = sql.time_bounds(since, until, start="coalesce(started_at, updated_at)",
                                          end="coalesce(ended_at, updated_at)")
        rows = self._q(
            f"SELECT {sql.SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(['1 = 1', *clauses])} "
            "ORDER BY coalesce(ended_at, updated_at) DESC, session_id LIMIT ?", (*params, int(limit))).fetchall()
        return [sql.session_from_row(r) for r in rows]

    def session_totals(self) -> dict[str, object]:
        """{"sessions", "turns", "awaiting_embedding", "skipped": {reason: n}, "redactions": {type: n},
        "private_spans"} over every captured session."""
        sessions, turns, backlog = self._q(
            "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM turns), "
            "(SELECT count(*) FROM turn_vector_backlog)").fetchone()
        skipped: dict[str, int] = {}
        redactions: dict[str, int] = {}
        private = 0
        for s, r, p in self._q("SELECT skipped, redactions, private_spans FROM sessions"):
            for tally, extra in ((skipped, json.loads(s)), (redactions, json.loads(r))):
                for k, v in extra.items():
                    tally[k] = tally.get(k, 0) + v
            private += p
        return {"sessions": int(sessions), "turns": int(turns), "awaiting_embedding": int(backlog),
                "skipped": skipped, "redactions": redactions, "private_spans": int(private)}
