"""The usage role of the shared store (protocol.UsageStore): how often each memory was injected and
cited, in SQL both backends run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    pass

from .dialect import SqlBase


class UsageSql(SqlBase):
    """The usage role of the shared store (protocol.UsageStore): how often each memory was injected and"""

    # -- memory usage (injections by hooks, citations in replies) -------------------------------------
    def record_usage(self, memory_ids: Sequence[str], *, column: str, at: int) -> int:
        """Add one injection (column "injected") or citation ("cited") at `at` (epoch ms) to each of
        `memory_ids` that names a memory of this store; returns how many were counted."""
        if column not in ("injected", "cited"):
            raise ValueError(column)
        counted = 0
        with self.transaction():
            for memory_id in dict.fromkeys(memory_ids):
                if self._q("SELECT 1 FROM memories WHERE id = ?", (memory_id,)).fetchone() is None:
                    continue
                self._q(f"INSERT INTO memory_usage (memory_id, {column}, last_{column}_at) VALUES (?, 1, ?) "
                        f"ON CONFLICT (memory_id) DO UPDATE SET {column} = memory_usage.{column} + 1, "
                        f"last_{column}_at = excluded.last_{column}_at", (memory_id, at))
                counted += 1
        return counted

    def usage(self, memory_ids: Sequence[str]) -> dict[str, dict[str, int | None]]:
        """{memory_id: {"injected", "cited", "last_injected_at", "last_cited_at"}} for the ids that
        were ever injected or cited."""
        out: dict[str, dict[str, int | None]] = {}
        for chunk in self._chunks(memory_ids):
            where, params = self._in("memory_id", chunk)
            for r in self._q("SELECT memory_id, injected, cited, last_injected_at, last_cited_at FROM memory_usage "
                             f"WHERE {where}", params):
                out[r[0]] = {"injected": r[1], "cited": r[2], "last_injected_at": r[3], "last_cited_at": r[4]}
        return out

    def usage_totals(self) -> dict[str, int]:
        """{"injected_memories", "injections", "cited_memories", "citations"} over the store."""
        row = self._q("SELECT count(*) FILTER (WHERE injected > 0), coalesce(sum(injected), 0), "
                      "count(*) FILTER (WHERE cited > 0), coalesce(sum(cited), 0) FROM memory_usage").fetchone()
        return {"injected_memories": int(row[0]), "injections": int(row[1]), "cited_memories": int(row[2]),
                "citations": int(row[3])}

    def most_cited(self, limit: int) -> list[str]:
        """Ids of the `limit` memories cited most often (then most recently), any status."""
        return [r[0] for r in self._q(
            "SELECT memory_id FROM memory_usage WHERE cited > 0 ORDER BY cited DESC, last_cited_at DESC LIMIT ?",
            (int(limit),)).fetchall()]

    def reset_usage(self, memory_ids: Sequence[str] | None) -> int:
        """Forget the injection and citation counts of `memory_ids` (None: of every memory); returns
        how many memories had counts."""
        with self.transaction():
            if memory_ids is None:
                return int(self._q("DELETE FROM memory_usage").rowcount)
            return sum(int(self._q("DELETE FROM memory_usage WHERE memory_id = ?", (i,)).rowcount)
                       for i in dict.fromkeys(memory_ids))
