"""`Cairn`, the class adapters open: the engine (its memories) composed with three sub-APIs.

    with Cairn.open() as memory:
        memory.remember(...); memory.recall(...)      # memories (engine.Engine)
        memory.sessions.search("the flaky test")      # captured sessions (sessions_api.Sessions)
        memory.review.queue()                         # the review queue, maintenance (review.Review)
        memory.scopes.of([...])                       # path and command scopes (scope_index.Scopes)

Each sub-API is called by its own name (`memory.review.decide`, not a copy of it on Cairn). This
module stands on top of the core and wires it: the engine below it knows neither the review queue
nor the captured sessions; these know the engine only through its methods, and the store only by
the role they use (a ReviewStore, a SessionStore), which this module hands them.
"""

from __future__ import annotations

import logging
from functools import partial

from .errors import CairnError
from .memories.engine import Engine
from .memories.scope_index import Scopes
from .models import RememberResult
from .review.review_api import Review
from .review.staging import stage_conflicts
from .sessions.sessions_api import Sessions
from .storage.db import DatabaseError
from .storage.protocol import StoreBackend

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
        return Sessions(self, self.store, claim_space=partial(self._claim_space, self.store))

    @property
    def scopes(self) -> Scopes:
        """The path and command scopes of the project store's memories and what sessions touched
        (scopes.Scopes)."""
        return Scopes(self)

    @property
    def review(self) -> Review:
        """The review queue of the project store and its maintenance (review.Review)."""
        return Review(self, self.store, holding=self._store_holding, every=lambda: self._stores("all"))

    def _queue_conflicts(self, store: StoreBackend, result: RememberResult) -> list[str]:
        """The possible conflicts a write reported join the review queue (conflict proposals); returns
        the ids queued. The write itself is done: a queue that cannot be written is logged, never raised."""
        try:
            return stage_conflicts(self, store, result.memory, result.conflicts)
        except (CairnError, DatabaseError) as exc:
            log.warning("possible conflicts of %s not queued for review: %s", result.memory.id, exc)
            return []


__all__ = ["Cairn"]
