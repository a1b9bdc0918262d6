"""`Cairn`, the class adapters open: the engine with its two sub-APIs.

    with Cairn.open() as memory:
        memory.remember(...); memory.recall(...)      # memories (engine.Engine)
        memory.sessions.search("the flaky test")      # captured sessions (sessions_api.Sessions)
        memory.review.queue()                         # the review queue, maintenance (review.Review)

This module stands on top of the core: the engine below it knows neither the review queue nor the
captured sessions, and these know the engine only through its methods.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .engine import Engine
from .errors import CairnError
from .models import Proposal, RememberResult, SessionHits, SessionInfo, Turn
from .review import Review, stage_conflicts
from .scope_index import Scopes
from .sessions_api import Sessions
from .storage.db import DatabaseError
from .storage.protocol import StoreBackend
from .stores import Progress, no_progress

log = logging.getLogger(__name__)


class Cairn(Engine):
    """Memory for one project: its store, the global store, and an embedder; `sessions` holds its
    captured sessions, `review` its review queue.

    Open with `Cairn.open(...)`; close with `close()` or use as a context manager.
    embedder None means keyword-only. `choice` records which store and why.
    """

    @property
    def sessions(self) -> Sessions:
        """The captured sessions of the project store: capture, search, read (sessions_api.Sessions)."""
        return Sessions(self)

    @property
    def scopes(self) -> Scopes:
        """The path and command scopes of the project store's memories and what sessions touched
        (scopes.Scopes)."""
        return Scopes(self)

    @property
    def review(self) -> Review:
        """The review queue of the project store and its maintenance (review.Review)."""
        return Review(self)

    def _queue_conflicts(self, store: StoreBackend, result: RememberResult) -> list[str]:
        """The possible conflicts a write reported join the review queue (conflict proposals); returns
        the ids queued. The write itself is done: a queue that cannot be written is logged, never raised."""
        try:
            return stage_conflicts(self, store, result.memory, result.conflicts)
        except (CairnError, DatabaseError) as exc:
            log.warning("possible conflicts of %s not queued for review: %s", result.memory.id, exc)
            return []

    # -- the names the adapters call (CLI, MCP server, HTTP, hooks), each one of the sub-APIs' methods --
    def review_queue(self, *, states: Iterable[str] = ("pending",), types: Iterable[str] = (),
                     limit: int | None = None) -> list[Proposal]:
        """`memory.review.queue`, by the name the adapters call."""
        return self.review.queue(states=states, types=types, limit=limit)

    def review_show(self, proposal_id: str) -> dict[str, Any]:
        """`memory.review.show`, by the name the adapters call."""
        return self.review.show(proposal_id)

    def review_decide(self, proposal_id: str, verdict: str, **options: Any) -> dict[str, Any]:
        """`memory.review.decide`, by the name the adapters call."""
        return self.review.decide(proposal_id, verdict, **options)

    def propose(self, text: str, **options: Any) -> dict[str, Any]:
        """`memory.review.propose`, by the name the adapters call."""
        return self.review.propose(text, **options)

    def import_guidance(self, path: str | Path | None = None, **options: Any) -> dict[str, Any]:
        """`memory.review.import_guidance`, by the name the adapters call."""
        return self.review.import_guidance(path, **options)

    def promote(self, memory_id: str) -> dict[str, Any]:
        """`memory.review.promote`, by the name the adapters call."""
        return self.review.promote(memory_id)

    def keep_both(self, memory_id: str, others: Iterable[str]) -> dict[str, Any]:
        """`memory.review.keep_both`, by the name the adapters call."""
        return self.review.keep_both(memory_id, others)

    def settle(self, memory_ids: Iterable[str]) -> dict[str, Any]:
        """`memory.review.settle`, by the name the adapters call."""
        return self.review.settle(memory_ids)

    def maintain(self, *, apply: bool = False, safe_only: bool = False) -> dict[str, Any]:
        """`memory.review.maintain`, by the name the adapters call."""
        return self.review.maintain(apply=apply, safe_only=safe_only)

    def maintenance_status(self) -> dict[str, Any]:
        """`memory.review.status`, by the name the adapters call."""
        return self.review.status()

    def search_sessions(self, query: str, **options: Any) -> SessionHits:
        """`memory.sessions.search`, by the name the adapters call."""
        return self.sessions.search(query, **options)

    def list_sessions(self, **options: Any) -> list[SessionInfo]:
        """`memory.sessions.catalog`, by the name the adapters call."""
        return self.sessions.catalog(**options)

    def read_session(self, session_id: str, **options: Any) -> tuple[SessionInfo, list[Turn]]:
        """`memory.sessions.read`, by the name the adapters call."""
        return self.sessions.read(session_id, **options)

    def ingest_transcript(self, path: str | Path, **options: Any) -> dict[str, Any]:
        """`memory.sessions.ingest`, by the name the adapters call."""
        return self.sessions.ingest(path, **options)

    def import_transcripts(self, folder: str | Path, *, progress: Progress = no_progress) -> dict[str, Any]:
        """`memory.sessions.import_folder`, by the name the adapters call."""
        return self.sessions.import_folder(folder, progress=progress)

    def import_locomo(self, path: str | Path) -> dict[str, Any]:
        """`memory.sessions.import_locomo`, by the name the adapters call."""
        return self.sessions.import_locomo(path)


__all__ = ["Cairn"]
