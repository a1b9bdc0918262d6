"""The scope index: which memories the paths and commands of the work fall under.

The store side of scopes.py: given scopes attached at write time, inherited on replace, learned from
what the writing session touched (session_touches), and looked up by a path's ancestors
(`lookup`). `Scopes` is the sub-API adapters use: `memory.scopes` (api.Cairn).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import InvalidMemory
from .scopes import (COMMAND, GIVEN, LEARNED, MAX_LEARNED, Touch, ancestors, decayed, learned_patterns, matches,
                     normalise_patterns, prefix_of, specificity)
from ..timeutil import now_ms

if TYPE_CHECKING:
    from ..models import Memory
    from ..stores.paths import StoreChoice
    from ..storage.protocol import ScopeStore, StoreBackend


ScopeView = dict[str, object]  # {"pattern", "origin", "weight"}: one scope as Scopes.of shows it


class _Engine(Protocol):
    """What Scopes uses of the engine (engine.Engine), without importing it (the engine imports this)."""

    @property
    def store(self) -> StoreBackend: ...
    @property
    def choice(self) -> StoreChoice: ...
    def get(self, memory_id: str) -> Memory: ...

TOUCH_KEEP = 400  # touches kept per session (the most recent)
TOUCH_ACTIONS = ("read", "edit", "search", "run")


def attach(store: ScopeStore, memory_id: str, patterns: Sequence[str], *, at: int) -> int:
    """Give `memory_id` the normalised `patterns` as given scopes (weight 1). Returns how many."""
    return store.put_scopes(memory_id, [(p, prefix_of(p), GIVEN, 1.0) for p in patterns], at) if patterns else 0


def inherit(store: ScopeStore, new_id: str, old_ids: Sequence[str], *, at: int) -> int:
    """A replacing memory takes over the scopes of the memories it replaces (a changed rule still
    governs the same files), given ones as given, learned ones with their weight."""
    rows: dict[str, tuple[str, str, str, float]] = {}
    for scopes in store.scopes_of(list(old_ids)).values():
        for pattern, origin, weight, updated_at in scopes:
            w = weight if origin == GIVEN else decayed(weight, updated_at, at)
            if pattern not in rows or rows[pattern][3] < w:
                rows[pattern] = (pattern, prefix_of(pattern), origin, w)
    return store.put_scopes(new_id, list(rows.values()), at) if rows else 0


def session_touches(store: ScopeStore, session_id: str) -> list[Touch]:
    """What `session_id` touched (its most recent TOUCH_KEEP), most recent first."""
    rows = store.session_touches(session_id, TOUCH_KEEP)
    return [Touch(path, action, last) for path, action, _n, _first, last in rows]


def learn(store: ScopeStore, memory_ids: Sequence[str], session_id: str, *, at: int, weight: float = 1.0) -> int:
    """Associate each of `memory_ids` with what `session_id` touched just before `at`
    (learned_patterns): a learned scope's weight grows toward 1 each time it is learned again
    (w' = w + (1 - w) * new), and a memory keeps its MAX_LEARNED strongest. Given scopes are never
    changed. Returns how many scopes were written."""
    learned = learned_patterns(session_touches(store, session_id), now=at, weight=weight)
    if not learned or not memory_ids:
        return 0
    existing = store.scopes_of(list(memory_ids))
    written = 0
    for memory_id in dict.fromkeys(memory_ids):
        have = {p: (origin, decayed(w, u, at) if origin == LEARNED else w)
                for p, origin, w, u in existing.get(memory_id, [])}
        rows = []
        for pattern, w in learned:
            origin, old = have.get(pattern, (LEARNED, 0.0))
            if origin == GIVEN:
                continue
            rows.append((pattern, prefix_of(pattern), LEARNED, min(1.0, old + (1.0 - old) * w)))
        merged = {p: w for p, (o, w) in have.items() if o == LEARNED}
        merged.update({r[0]: r[3] for r in rows})
        keep = set(sorted(merged, key=lambda p: -merged[p])[:MAX_LEARNED])
        rows = [r for r in rows if r[0] in keep]
        dropped = [p for p in merged if p not in keep and p in have]
        if dropped:
            store.delete_scopes([memory_id], origin=LEARNED, patterns=dropped)
        written += store.put_scopes(memory_id, rows, at) if rows else 0
    return written


@dataclass(frozen=True)
class ScopeMatch:
    """A memory a piece of work falls under: its id, the pattern that matched and the path or command
    it matched, the scope's origin, and the score (specificity x weight, 0..1)."""

    memory_id: str
    pattern: str
    target: str
    origin: str
    score: float


def lookup(store: ScopeStore, targets: Sequence[str], *, now: int) -> list[ScopeMatch]:
    """The memories whose scopes cover any of `targets` (relative paths, folders ending in "/", or
    "cmd:..." commands), each with its best match, best first. One store lookup by the targets'
    ancestors; then each candidate's pattern is matched (compiled once per pattern)."""
    prefixes: list[str] = []
    for t in targets:
        prefixes += [t] if t.startswith(COMMAND) else ancestors(t)
        if t.startswith(COMMAND):  # "cmd:npm run build" also finds "cmd:npm run" and "cmd:npm"
            words = t[len(COMMAND):].split()
            prefixes += [COMMAND + " ".join(words[:i]) for i in range(1, len(words))]
        elif t.endswith("/"):  # a folder also finds the scopes rooted below it (cheap: exact prefix only)
            prefixes.append(t)
    best: dict[str, ScopeMatch] = {}
    for memory_id, pattern, origin, weight, updated_at in store.scoped_candidates(prefixes):
        w = weight if origin == GIVEN else decayed(weight, updated_at, now)
        for t in targets:
            if t.startswith(COMMAND) != pattern.startswith(COMMAND) or not matches(pattern, t):
                continue
            # A given scope is the writer's word: its fit decides. A learned one's weight already
            # says how far from what the session touched it reaches.
            score = specificity(pattern, t) if origin == GIVEN else w
            if memory_id not in best or best[memory_id].score < score:
                best[memory_id] = ScopeMatch(memory_id, pattern, t, origin, score)
    return sorted(best.values(), key=lambda m: (-m.score, m.memory_id))


class Scopes:
    """The path and command scopes of the project store's memories, and what sessions touched:
    `memory.scopes` (api.Cairn). Reads and writes go to the project store (the global store's
    memories hold everywhere and have no project paths)."""

    def __init__(self, engine: _Engine):
        self._engine = engine

    @property
    def _store(self) -> StoreBackend:
        return self._engine.store

    def of(self, memory_ids: Iterable[str]) -> dict[str, tuple[ScopeView, ...]]:
        """{memory_id: [{"pattern", "origin" ("given" | "learned"), "weight" (0..1, decayed to now)}]}
        for the ids that have scopes; given first, then strongest."""
        now = now_ms()
        out: dict[str, tuple[ScopeView, ...]] = {}
        for memory_id, rows in self._store.scopes_of(list(memory_ids)).items():
            items = [{"pattern": p, "origin": o, "weight": round(w if o == GIVEN else decayed(w, u, now), 3)}
                     for p, o, w, u in rows]
            order = sorted(items, key=lambda d: (d["origin"] != GIVEN, -float(d["weight"])))  # type: ignore[arg-type]
            out[memory_id] = tuple(order)
        return out

    def set(self, memory_id: str, patterns: Iterable[str]) -> list[str]:
        """Replace the given scopes of current memory `memory_id` by `patterns` ([] removes them);
        learned ones stay. Returns the normalised patterns. Raises MemoryNotFound, NotCurrent,
        InvalidMemory."""
        from ..errors import NotCurrent

        normalised = normalise_patterns(list(patterns), self._engine.choice.project_root)
        memory = self._engine.get(memory_id)
        if memory.status != "current":
            raise NotCurrent(f"memory {memory_id} is {memory.status}; scope its current version instead")
        with self._store.transaction():
            self._store.delete_scopes([memory_id], origin=GIVEN)
            self._store.delete_scopes([memory_id], patterns=list(normalised))
            attach(self._store, memory_id, normalised, at=now_ms())
        return list(normalised)

    def count_scoped(self) -> int:
        """How many memories have a scope (given or learned), current or not."""
        return self._store.scoped_count()

    def reset(self, memory_ids: Iterable[str] | None = None, *, origin: str = LEARNED) -> int:
        """Forget the `origin` scopes (default the learned ones) of `memory_ids`, or of every memory
        with None. Returns how many scopes went."""
        if origin not in (GIVEN, LEARNED):
            raise InvalidMemory(f"origin is {GIVEN!r} or {LEARNED!r}, not {origin!r}")
        return self._store.delete_scopes(None if memory_ids is None else list(memory_ids), origin=origin)

    def touch(self, session_id: str, touches: Sequence[tuple[str, str]], *, at: int | None = None) -> int:
        """Record that `session_id` touched each (target, action): a relative path, a folder ending
        in "/" or a "cmd:..." command; action one of TOUCH_ACTIONS. Returns how many were recorded."""
        rows = [(t, a) for t, a in touches if t and a in TOUCH_ACTIONS]
        if not session_id or not rows:
            return 0
        return self._store.record_touches(session_id, rows, now_ms() if at is None else at, keep=TOUCH_KEEP)

    def touched(self, session_id: str) -> list[Touch]:
        """What `session_id` touched, most recent first (at most TOUCH_KEEP)."""
        return session_touches(self._store, session_id)

    def recent(self, limit: int, *, exclude_session: str = "") -> list[Touch]:
        """What the project's other sessions touched most recently, newest first, at most `limit`
        (one per path and action)."""
        return [Touch(path, action, at) for path, action, at in
                self._store.recent_touches(limit, exclude_session=exclude_session)]

    def learn(self, memory_ids: Iterable[str], session_id: str, *, weight: float = 1.0) -> int:
        """Associate `memory_ids` with what `session_id` touched just before now (scopes.learn);
        weight CITED_WEIGHT for memories the session cited rather than wrote. Returns scopes written."""
        ids = [i for i in dict.fromkeys(memory_ids) if i]
        if not ids or not session_id:
            return 0
        ids = [i for i in ids if i in self._store.seqs_of(ids)]  # the project store's own memories only
        with self._store.transaction():
            return learn(self._store, ids, session_id, at=now_ms(), weight=weight)

    def matching(self, targets: Sequence[str], *, exclude: Iterable[str] = (),
                 limit: int = 20) -> list[tuple[Memory, ScopeMatch]]:
        """The current memories whose scopes cover any of `targets` (see lookup), best first, at
        most `limit`, without the ids in `exclude`."""
        skip = frozenset(exclude)
        found = [m for m in lookup(self._store, list(targets), now=now_ms()) if m.memory_id not in skip][:limit]
        if not found:
            return []
        seqs = self._store.seqs_of([m.memory_id for m in found])
        memories = self._store.by_seqs(list(seqs.values()))
        out = []
        for match in found:
            memory = memories.get(seqs.get(match.memory_id, -1))
            if memory is not None and memory.status == "current" and memory.cold_at is None:
                out.append((memory, match))
        return out
