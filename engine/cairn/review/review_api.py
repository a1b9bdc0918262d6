"""Review: what may be wrong with the memories, and the user's verdict on each (`memory.review`).

The class here, `Review`, is the review area's public face; the work is in three modules:
- queue.py: the durable review queue: proposals kept in the store until the user decides
  (approve, reject, edit; promote for the cold tier), compare-and-set, expiring after 30 days;
- staging.py: proposals staged from writes and imports: propose (an `add`),
  stage_conflicts (the possible conflicts `remember` reports), settle (for a writer that resolves
  them itself, Engine.defer_review: what its session left at its end);
- maintenance.py: maintenance (`maintain`): retires exact duplicates and fills the queue with
  near-duplicates, clusters to summarise, stale memories to demote and possible conflicts.

It stands above the engine: memories are read, written and retired only through the engine's
methods (Engine.get, remember, replace, retire_into); the queue, its lease and the cold tier
through a ReviewStore (storage.protocol), the one role of a store the review area uses.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..models import Proposal
from .guidance import import_tree
from .maintenance import maintain, maintenance_status
from .queue import decide, promote, queue, show
from .staging import propose, settle
from ..timeutil import now_ms

if TYPE_CHECKING:
    from ..memories.engine import Engine
    from ..storage.protocol import ReviewStore


class Review:
    """The review queue of an engine's project store and its maintenance (`memory.review`): what
    may be wrong with the memories, and the user's verdict on each."""

    def __init__(self, engine: Engine, store: ReviewStore, *, holding: Callable[[str], ReviewStore],
                 every: Callable[[], Sequence[ReviewStore]]):
        """engine: whose memories are reviewed; store: its project store, whose queue this is;
        holding(memory_id): the store holding a memory (MemoryNotFound); every(): each store the
        engine reads (project, global)."""
        self._engine = engine
        self._store = store
        self._holding = holding
        self._every = every

    def queue(self, *, states: Iterable[str] = ("pending",), types: Iterable[str] = (),
              limit: int | None = None) -> list[Proposal]:
        """The review queue of the project store, oldest first (review_queue.queue): proposals in
        `states` (PROPOSAL_STATES; default pending) of `types` (PROPOSAL_TYPES; default all). Pending
        proposals older than 30 days, or whose sources changed, become expired first, on either
        backend (SQLite or Postgres). Raises InvalidInput."""
        return queue(self._engine, self._store, states=tuple(states), types=tuple(types), limit=limit)

    def show(self, proposal_id: str) -> dict[str, Any]:
        """One proposal with its evidence: {"proposal", "sources" (each memory as it is now), "stale"
        (why it can no longer be applied, or None), "after" (what each verdict would do)}.
        Raises ProposalNotFound."""
        return show(self._engine, self._store, proposal_id)

    def decide(self, proposal_id: str, verdict: str, *, text: str | None = None, keep_id: str | None = None,
               tags: Iterable[str] | None = None, by: str = "cli") -> dict[str, Any]:
        """Apply the user's verdict on one proposal (approve | reject | edit; "keep" means reject),
        compare-and-set in one transaction: keep_id chooses the memory that stays, text (edit) the
        one written instead, tags the tags it keeps; see review_queue.decide. Raises InvalidInput,
        ProposalNotFound, ProposalClosed, StaleProposal."""
        return decide(self._engine, self._store, proposal_id, verdict, text=text, keep_id=keep_id,
                      tags=None if tags is None else list(tags), by=by)

    def propose(self, text: str, *, kind: str = "fact", tags: Iterable[str] = (), context: str | None = None,
                applies_when: list[str] | None = None, origin: str | None = None,
                paths: Iterable[str] = ()) -> dict[str, Any]:
        """Queue a new memory for the user's approval (an `add` proposal; nothing is stored before),
        with the path scope (`paths`) it gets when approved: see review_staging.propose. Returns {"status":
        "queued" | "pending" | "exists" | "reviewed", "proposal", ...}. Raises InvalidMemory."""
        return propose(self._engine, self._store, text, kind=kind, tags=tuple(tags), context=context,
                       applies_when=applies_when, origin=origin, paths=paths)

    def import_guidance(self, path: str | Path | None = None, *, cwd: str | Path | None = None,
                        dry_run: bool = False) -> dict[str, Any]:
        """Split guidance deterministically (guidance.split: headings, bullets, paragraphs) into `add`
        proposals, each with the scope its file gives it (a nested CLAUDE.md / AGENTS.md: its folder;
        Cursor, Claude, Copilot, Windsurf and Cline rules: their globs; guidance.import_tree). path:
        one file, a folder (every guidance file under it: git ls-files inside a repository, vendored
        and build folders left out), or None for the project (the git work tree of `cwd`, default
        the working directory). Nothing is stored before approval. Returns {"root", "files": [per
        file: "file", "format", "paths", "items", "queued", "pending", "exists", "reviewed", "merged",
        "scoped", "skipped", "left_out", "notes", "proposals"], the same counts in total, "private",
        "proposals": [ids], ...; "file" for one file}. dry_run: the same report, nothing queued
        ("queued": what would be). Raises InvalidInput (missing target; one file unreadable, not
        UTF-8 or over 1 MiB)."""
        def propose_(text: str, **options: Any) -> dict[str, Any]:
            return propose(self._engine, self._store, text, dry_run=dry_run, **options)

        return {**import_tree(propose_, path, cwd=None if cwd is None else Path(cwd)), "dry_run": dry_run}

    def promote(self, memory_id: str) -> dict[str, Any]:
        """Bring a cold memory back (hooks, default recall and list). Returns {"promoted": id}.
        Raises MemoryNotFound, InvalidInput (not cold)."""
        return promote(self._engine, memory_id)

    def dismiss(self, first_id: str, second_id: str) -> None:
        """Record the user's verdict "keep both" on a pair of memories, so it is not proposed again.
        Raises MemoryNotFound unless both are in one store."""
        self._holding(first_id).dismiss_pair(first_id, second_id, now_ms())

    def keep_both(self, memory_id: str, others: Iterable[str]) -> dict[str, Any]:
        """The writer's judgment that the memory `memory_id` changes none of `others` (memories its
        write listed in `related`): both hold, so each pair is recorded as kept (`dismiss`) and the
        session's end (`settle`) and maintenance do not queue it for the user. Nothing is retired.
        Returns {"id", "kept": [the other ids]}. Raises InvalidInput for an id paired with itself,
        MemoryNotFound unless each pair is in one store."""
        kept = []
        for other in dict.fromkeys(others):
            if other == memory_id:
                raise InvalidInput(f"{memory_id} cannot be kept beside itself")
            self.dismiss(memory_id, other)
            kept.append(other)
        return {"id": memory_id, "kept": kept}

    def is_dismissed(self, first_id: str, second_id: str) -> bool:
        """Whether the user kept both memories of this pair (dismiss), in any store."""
        return any(s.is_dismissed(first_id, second_id) for s in self._every())

    def settle(self, memory_ids: Iterable[str]) -> dict[str, Any]:
        """At the end of the session that wrote `memory_ids` (an engine with defer_review): queue
        for review what their writer left unresolved (review_staging.settle). Returns {"checked": writes
        still current, "queued": [proposal ids]}."""
        return settle(self._engine, self._store, list(memory_ids))

    def maintain(self, *, apply: bool = False, safe_only: bool = False) -> dict[str, Any]:
        """One maintenance run over the project store (review_maintain.maintain): a dry run unless apply;
        apply retires exact duplicates and, unless safe_only, queues proposals. Never deletes.
        Raises MaintenanceBusy (another run, on any machine, holds the store's lease)."""
        return maintain(self._engine, self._store, apply=apply, safe_only=safe_only)

    def status(self) -> dict[str, Any]:
        """The last maintenance run, whether the store is due one, the lease, queue counts by state
        and type, and how many memories are cold (review_maintain.maintenance_status). Reads only."""
        return maintenance_status(self._engine, self._store)
