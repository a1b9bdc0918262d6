"""The engine API: remember, recall, replace, forget, history, list, status, export, import, reembed.

Every adapter (CLI, MCP server, hooks, warm process) calls this module; the SQL lives in store.py
(with db.py, vectors.py and migrations.py), and nothing above the engine touches it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from .compose import Resolved, embedder_from_config, resolve
from .embedder import Embedder
from .errors import CairnError, EmbedderUnavailable, EmbeddingMismatch, InvalidMemory, MemoryNotFound, NotCurrent
from .errors import StoreError, StoreNotFound
from .migrations import MIGRATIONS
from .models import DEFAULT_IMPORTANCE, KINDS, SCOPES, Hit, Memory, Order, RememberResult, Status
from .paths import GLOBAL_STORE, StoreChoice, store_path, stores_dir, validate_store_name
from .ranking import RankingConfig, rank
from .records import Draft, NewMemory, normalise_tags, parse_export_lines, validate
from .store import Filters, Store
from .supersede import SIMILARITY_THRESHOLD, classify
from .text import fts_query, is_blank, lone_surrogate
from .timeutil import END_OF_TIME, now_ms, parse_time

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

DETECTION_CANDIDATES = 5  # nearest current memories of the same kind checked for supersession
VECTOR_FLOOR = 0.15
"""Recall's relevance floor for a hit whose only evidence is the vector retriever.

The vector retriever always returns its `candidates` nearest memories, however unrelated: on a small
store every memory comes back for any query. A hit with no keyword match and a cosine at or below
this floor is filler (for all-MiniLM-L6-v2, unrelated sentences fall around 0.0-0.15; negative
cosines never mean anything), so recall drops it. Kept low on purpose: a memory that shares no word with
the question but is about it scores well above 0.15, and LoCoMo recall@10 (docs/benchmarks.md)
does not move with this floor. Hits with a keyword match are never dropped by it."""
MAX_QUERY_CHARS = 2000
"""The longest query recall takes (the MCP tool's limit; a hook cuts a prompt to this length). Forming
the keyword query of a pasted 10 MB log took 20 s; a question is never that long."""
Progress = Callable[[Iterable[Any], int], Iterable[Any]]  # (items, total) -> items, e.g. a tqdm wrapper


def _no_progress(items: Iterable[Any], total: int) -> Iterable[Any]:
    return items


def list_stores() -> list[dict[str, Any]]:
    """Every store file in the data root: {name, path, project_root, and its counts}, or {name,
    path, error} for one that cannot be opened. Opens nothing for writing, creates nothing."""
    rows: list[dict[str, Any]] = []
    for path in sorted(stores_dir().glob("*.db")):
        try:
            store = Store.open(path, name=path.stem, create=False)
        except CairnError as exc:
            rows.append({"name": path.stem, "path": str(path), "error": str(exc)})
            continue
        try:
            rows.append({"name": path.stem, "path": str(path), "project_root": store.get_meta("project_root"),
                         **store.counts()})
        finally:
            store.close()
    return rows


def delete_store(name: str) -> Path:
    """Delete the store NAME: its database file and its -wal/-shm files. Returns the path.
    Raises InvalidStoreName, StoreNotFound."""
    path = store_path(validate_store_name(name))
    if not path.exists():
        raise StoreNotFound(f"store {name!r} does not exist ({path})")
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return path


def rename_store(old: str, new: str) -> Path:
    """Rename the store OLD to NEW: its files and its recorded name. Returns the new path.
    Raises InvalidStoreName, StoreNotFound, StoreError (NEW exists)."""
    source, target = store_path(validate_store_name(old)), store_path(validate_store_name(new))
    if not source.exists():
        raise StoreNotFound(f"store {old!r} does not exist ({source})")
    if target.exists():
        raise StoreError(f"store {new!r} already exists ({target}); delete or rename it first")
    store = Store.open(source, name=old, create=False)
    try:
        store.set_meta("name", new)
    finally:
        store.close()  # the last connection checkpoints the WAL into the database file
    for suffix in ("-wal", "-shm", ""):  # the database file last: its name is what marks the store
        if Path(str(source) + suffix).exists():
            Path(str(source) + suffix).rename(str(target) + suffix)
    return target


def create_store(name: str) -> tuple[Path, bool]:
    """Create the named store (for --store / CAIRN_STORE). Returns (path, whether it was created
    now: False when it already existed). Raises InvalidStoreName."""
    path = store_path(validate_store_name(name))
    existed = path.exists()
    Store.open(path, name=name, create=True).close()
    return path, not existed


def _known_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """The kinds of a read's filter, each one of KINDS. Raises InvalidMemory."""
    kinds = tuple(kinds)
    for kind in kinds:
        if kind not in KINDS:
            raise InvalidMemory(f"unknown kind {kind!r}; expected one of: {', '.join(KINDS)}")
    return kinds


def _relevant(hit: Hit) -> bool:
    """Whether a hit has evidence beyond a vector retriever's filler (see VECTOR_FLOOR)."""
    if "bm25" in hit.reasons:
        return True
    cosine = hit.reasons.get("vector", {}).get("cosine")
    return cosine is None or cosine > VECTOR_FLOOR


class Cairn:
    """Memory for one project: its store, the global store, and an embedder.

    Open with `Cairn.open(...)`; close with `close()` or use as a context manager.
    embedder None means keyword-only. `choice` records which store and why.
    """

    def __init__(self, store: Store, *, choice: StoreChoice, embedder: Embedder | None, config: dict[str, Any],
                 ranking: RankingConfig | None = None, check_model: bool = True):
        self.store = store
        self.choice = choice
        self.embedder = embedder
        self.config = config
        self.ranking = ranking or RankingConfig(candidates=config["recall"]["candidates"])
        self.embedder_error: str | None = None if embedder else "embedding disabled by configuration"
        self._global: Store | None = None
        self._check_model = check_model
        self._busy_timeout_ms: int = config["store"]["busy_timeout_ms"]
        self.exists = True  # False: opened read-only on a store file that does not exist (an empty stand-in)
        self._check_fingerprint(store)

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        store: str | None = None,
        *,
        cwd: Path | None = None,
        create: bool = False,
        embedder: Embedder | None | str = "auto",
        config: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
        check_model: bool = True,
        resolved: Resolved | None = None,
        read_only: bool = False,
        busy_timeout_ms: int | None = None,
    ) -> Cairn:
        """Open the chosen store (explicit name > CAIRN_STORE > git toplevel > cwd).

        resolved: what the caller's composition root already decided (compose.resolve); then store,
        cwd, env and config are not consulted. create: allow creating an explicitly named store.
        Stores derived from the working directory and the global store are created on first open.
        embedder: "auto" (compose.embedder_from_config: the configured model, loaded lazily), None
        (keyword-only), or an Embedder. check_model: refuse a store embedded with another model
        (False only for `reembed`). read_only: for commands that only read: a project store that does
        not exist is not created; the engine answers as for an empty store (`exists` is False).
        busy_timeout_ms: how long to wait for another process's lock (default: config
        `store.busy_timeout_ms`); a hook passes about a second so its whole budget fits its timeout.
        Raises StoreNotFound, InvalidStoreName, StoreCorrupted, StoreBusy, SchemaTooNew, EmbeddingMismatch,
        ConfigError.
        """
        resolved = resolved or resolve(store, cwd=cwd, env=env, config=config)
        choice, config = resolved.choice, resolved.config
        if embedder == "auto":
            embedder = embedder_from_config(config)
        allowed = create or not choice.explicit or choice.name == GLOBAL_STORE
        if not allowed and not choice.path.exists():
            raise StoreNotFound(
                f"store {choice.name!r} does not exist (chosen by {choice.reason}); "
                f"create it with `cairn stores create {choice.name}` or pass --create"
            )
        meta = {"project_root": str(choice.project_root)} if choice.project_root else {}
        missing = read_only and not choice.path.exists()
        busy_ms = config["store"]["busy_timeout_ms"] if busy_timeout_ms is None else busy_timeout_ms
        opened = Store.open(
            Path(":memory:") if missing else choice.path, name=choice.name, create=allowed or missing, meta=meta,
            busy_timeout_ms=busy_ms, vector_backend=config["store"]["vector_backend"],
        )
        try:
            engine = cls(opened, choice=choice, embedder=embedder, config=config, check_model=check_model)
            engine._busy_timeout_ms = busy_ms
            engine.exists = not missing
            return engine
        except BaseException:
            opened.close()
            raise

    @property
    def stale(self) -> bool:
        """Whether a store file this engine holds open was deleted or replaced since (a restore, a
        `stores delete`): a long-lived process must then close it and open the path again, or it
        would go on serving the old file's memories."""
        stores = [self.store] + ([self._global] if self._global is not None else [])
        return self.exists and any(s.replaced() for s in stores)

    @property
    def name(self) -> str:
        """The project store's name."""
        return self.store.name

    def close(self) -> None:
        self.store.close()
        if self._global is not None:
            self._global.close()

    def __enter__(self) -> Cairn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_fingerprint(self, store: Store) -> None:
        recorded = store.get_meta("embedding_model")
        if self._check_model and recorded and self.embedder is not None and recorded != self.embedder.model_name:
            raise EmbeddingMismatch(
                f"store {store.name!r} holds vectors from {recorded!r}, but the configured model is "
                f"{self.embedder.model_name!r}; run `cairn reembed` to re-embed it with the configured model"
            )

    def global_store(self, *, create: bool = True) -> Store | None:
        """The user's global store, opened once; None when it does not exist and create is False."""
        if self.store.name == GLOBAL_STORE:
            return self.store
        if self._global is None:
            path = store_path(GLOBAL_STORE)
            if not create and not path.exists():
                return None
            self._global = Store.open(path, name=GLOBAL_STORE, create=True,
                                      busy_timeout_ms=self._busy_timeout_ms,
                                      vector_backend=self.config["store"]["vector_backend"])
            self._check_fingerprint(self._global)
        return self._global

    def _stores(self, scope: str | None, *, write: bool = False) -> list[Store]:
        """The stores a scope covers. Reads skip a global store that does not exist yet."""
        if scope not in SCOPES:
            raise InvalidMemory(f"unknown scope {scope!r}; expected one of: {', '.join(SCOPES)}")
        if scope == "project":
            return [self.store]
        glob = self.global_store(create=write)
        if scope == "global":
            return [glob] if glob is not None else []
        return [self.store] + ([glob] if glob is not None and glob is not self.store else [])

    # -- embeddings ----------------------------------------------------------------------------------
    def embed(self, texts: list[str]) -> np.ndarray | None:
        """Vectors for `texts`, or None when no model is available (the reason goes to status)."""
        if self.embedder is None or not texts:
            return None
        try:
            vectors = self.embedder.embed(texts)
        except EmbedderUnavailable as exc:
            self.embedder_error = str(exc)
            log.warning("keyword-only: %s", exc)
            return None
        self.embedder_error = None  # a model that was not ready before is now
        return vectors

    def _record_fingerprint(self, store: Store) -> None:
        if self.embedder is not None and store.get_meta("embedding_model") is None:
            store.set_meta("embedding_model", self.embedder.model_name)
            store.set_meta("embedding_fingerprint", self.embedder.fingerprint)

    def flush_backlog(self, limit: int = 256, store: Store | None = None) -> int:
        """Embed up to `limit` memories stored while no model was loaded. Returns how many were
        embedded (0 when none waits or no model is available)."""
        store = store or self.store
        pending = store.backlog(limit)
        vectors = self.embed([text for _, text in pending]) if pending and store.vector_index else None
        if vectors is None:
            return 0
        self._record_fingerprint(store)
        store.fill_backlog({seq: vector for (seq, _), vector in zip(pending, vectors)})
        return len(pending)

    # -- writes ----------------------------------------------------------------------------------------
    def remember(
        self,
        text: str,
        *,
        kind: str = "fact",
        tags: Iterable[str] = (),
        importance: int = DEFAULT_IMPORTANCE,
        source: str = "agent",
        session_id: str | None = None,
        valid_from: Any = None,
        valid_to: Any = None,
        replaces: str | Iterable[str] | None = None,
        scope: str = "project",
        detect: bool | None = None,
    ) -> RememberResult:
        """Store one memory. Times: ISO 8601 or epoch ms (UTC); valid_from defaults to now.

        scope: "project" or "global" (the user's store for every project). detect: automatic
        supersession (default: config `supersession.enabled`). Exact duplicates (after
        normalisation) of a current memory write nothing and return it with status "duplicate".
        `replaces` (an id, or several: a merge) supersedes those; otherwise a memory of the same kind
        stating a change to a similar current one supersedes it (supersede.classify).
        Raises InvalidMemory (every problem named), InvalidTime, MemoryNotFound, NotCurrent.
        """
        if replaces is not None and not isinstance(replaces, str):
            replaces = tuple(replaces)
        draft = Draft(text=text, kind=kind, tags=tuple(tags), importance=importance, source=source,
                      session_id=session_id, valid_from=valid_from, valid_to=valid_to, replaces=replaces)
        return self.remember_many([draft], scope=scope, detect=detect)[0]

    def remember_many(self, drafts: list[Draft], *, scope: str = "project",
                      detect: bool | None = None) -> list[RememberResult]:
        """Store several memories, embedded in one batch, each in its own short transaction.

        All drafts are validated before anything is written: one bad draft writes nothing.
        """
        if scope not in ("project", "global"):
            raise InvalidMemory(f"memories are written to scope 'project' or 'global', not {scope!r}")
        store = self._stores(scope, write=True)[0]
        recorded_at = now_ms()
        rows = [validate(d, recorded_at=recorded_at) for d in drafts]
        for draft in drafts:
            for old_id in draft.replaced_ids:
                self._require_current(store, old_id)
        vectors = self.embed([r.text for r in rows])
        if vectors is not None:
            self._record_fingerprint(store)
        detect = self.config["supersession"]["enabled"] if detect is None else detect
        results = []
        for i, (draft, row) in enumerate(zip(drafts, rows)):
            vector = None if vectors is None else vectors[i]
            results.append(self._write(store, row, vector, replaces=draft.replaced_ids, detect=detect))
        return results

    def _require_current(self, store: Store, memory_id: str) -> Memory:
        memory = store.get(memory_id)
        if memory.forgotten_at is not None:
            raise NotCurrent(f"memory {memory_id} was forgotten; there is nothing to replace")
        if memory.superseded_by is not None:
            raise NotCurrent(
                f"memory {memory_id} was already superseded by {memory.superseded_by}; replace that one instead"
            )
        return memory

    def _write(self, store: Store, row: NewMemory, vector: np.ndarray | None, *, replaces: tuple[str, ...],
               detect: bool) -> RememberResult:
        with store.transaction():
            olds = [self._require_current(store, i) for i in replaces]  # re-checked under the write lock
            existing = store.current_by_text_key(row.text_key)
            if existing is not None:
                # The text is already remembered. Replacing other memories by it still retires them
                # (the review verdict "keep the newer one"): nothing new is written.
                retired = [o.id for o in olds if o.id != existing.id]
                for old_id in retired:
                    store.supersede(store.seq_of(old_id), existing.id, at=row.recorded_at, valid_until=row.valid_from)
                return RememberResult(store.get(existing.id), "duplicate", retired)
            superseded: list[str] = []
            conflicts: list[dict[str, str]] = []
            if olds:
                targets = [(store.seq_of(old.id), old, "replaced explicitly") for old in olds]
            elif detect:
                targets, conflicts = self._detect(store, row, vector)
            else:
                targets = []
            store.insert(row, vector)
            for old_seq, old, _ in targets:
                store.supersede(old_seq, row.id, at=row.recorded_at, valid_until=row.valid_from)
                superseded.append(old.id)
        return RememberResult(store.get(row.id), "created", superseded, conflicts)

    def _detect(self, store: Store, row: NewMemory, vector: np.ndarray | None):
        """Current memories of the same kind that `row` supersedes, and those it only resembles."""
        same_kind = Filters(kinds=(row.kind,))
        if vector is not None and store.vector_index is not None:
            near = [(s, c) for s, c in store.vector_search(vector, same_kind, DETECTION_CANDIDATES)
                    if c >= SIMILARITY_THRESHOLD]
        else:
            match = fts_query(row.text)
            near = [(s, None) for s, _ in store.keyword_search(match, same_kind, DETECTION_CANDIDATES)] if match else []
        memories = store.by_seqs([s for s, _ in near])
        targets, conflicts = [], []
        for seq, cosine in near:
            old = memories[seq]
            verdict = classify(old.text or "", row.text, cosine)
            if verdict.label == "supersede":
                targets.append((seq, old, verdict.reason))
            elif verdict.label == "conflict":
                conflicts.append({"id": old.id, "reason": verdict.reason})
        return targets, conflicts

    def replace(
        self,
        memory_id: str | Iterable[str],
        text: str,
        *,
        kind: str | None = None,
        tags: Iterable[str] | None = None,
        importance: int | None = None,
        source: str = "agent",
        session_id: str | None = None,
        valid_from: Any = None,
        valid_to: Any = None,
    ) -> RememberResult:
        """Supersede `memory_id` (or several ids: a merge) with a new memory, in the store that holds
        the (first) old one. Kind, tags and importance default to the first old memory's. If `text`
        is already a current memory, the old ones are superseded by that one and nothing new is
        written. Raises MemoryNotFound, NotCurrent, InvalidMemory."""
        ids = [memory_id] if isinstance(memory_id, str) else list(memory_id)
        if not ids:
            raise InvalidMemory("replace needs at least one memory id")
        store = self._store_holding(ids[0])
        old = self._require_current(store, ids[0])
        scope = "global" if store.name == GLOBAL_STORE and self.store.name != GLOBAL_STORE else "project"
        return self.remember(
            text, kind=old.kind if kind is None else kind, tags=old.tags if tags is None else tags,
            importance=old.importance if importance is None else importance, source=source, session_id=session_id,
            valid_from=valid_from, valid_to=valid_to, replaces=tuple(ids), scope=scope)

    # -- review -----------------------------------------------------------------------------------
    def dismiss_pair(self, first_id: str, second_id: str) -> None:
        """Record the user's verdict "keep both" on a review pair, so it is not proposed again.
        Raises MemoryNotFound unless both are in one store."""
        self._store_holding(first_id).dismiss_pair(first_id, second_id, now_ms())

    def is_dismissed(self, first_id: str, second_id: str) -> bool:
        return any(s.is_dismissed(first_id, second_id) for s in self._stores("all"))

    def forget(self, memory_id: str) -> Memory:
        """Erase a memory: its text, tags, keyword and vector index entries. A tombstone row remains
        (id, kind, times, links) so history shows that something was forgotten, and when.
        Forgetting twice is harmless. Raises MemoryNotFound."""
        store = self._store_holding(memory_id)
        with store.transaction():
            seq = store.seq_of(memory_id)
            if store.get(memory_id).forgotten_at is None:
                store.erase(seq, now_ms())
        return store.get(memory_id)

    def _store_holding(self, memory_id: str) -> Store:
        for store in self._stores("all"):
            try:
                store.seq_of(memory_id)
                return store
            except MemoryNotFound:
                continue
        raise MemoryNotFound(f"no memory {memory_id!r} in store {self.store.name!r} or the global store")

    # -- reads ----------------------------------------------------------------------------------------
    def get(self, memory_id: str) -> Memory:
        return self._store_holding(memory_id).get(memory_id)

    def history(self, memory_id: str) -> list[Memory]:
        """The supersession chain through `memory_id`, oldest first, with both times on each."""
        store = self._store_holding(memory_id)
        return [store.get(i) for i in store.chain_ids(memory_id)]

    def recall(
        self,
        query: str,
        *,
        k: int | None = None,
        kinds: Iterable[str] = (),
        tags: Iterable[str] = (),
        since: Any = None,
        until: Any = None,
        as_of: Any = None,
        known_at: Any = None,
        include_superseded: bool = False,
        scope: str | None = None,
        query_vector: np.ndarray | None = None,
        ranking: RankingConfig | None = None,
        use_vectors: bool = True,
    ) -> list[Hit]:
        """Hybrid recall: the k best memories for `query` among those the filters admit.

        as_of: valid time (what was true then); known_at: transaction time (what the store knew
        then); since/until bound valid_from. Times: ISO 8601 or epoch ms. k and scope default to the
        config's `recall.k` and `recall.scope`. query_vector:
        float32[dim], L2-normalised, when the caller already has it (a warm process); otherwise the
        query is embedded here unless use_vectors is False (keyword-only).
        Hits whose only evidence is a vector cosine at or below VECTOR_FLOOR are left out: no filler.
        Raises InvalidMemory (empty query, one over MAX_QUERY_CHARS, unknown kind or scope), InvalidTime.
        """
        if not isinstance(query, str):
            raise InvalidMemory("query must be a string")
        if is_blank(query):
            raise InvalidMemory("query is empty" + (" (only invisible characters)" if query else ""))
        if lone_surrogate(query) is not None:
            raise InvalidMemory("query is not valid Unicode (a lone surrogate; undecodable bytes?)")
        if len(query) > MAX_QUERY_CHARS:
            raise InvalidMemory(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
        k = self.config["recall"]["k"] if k is None else int(k)
        scope = self.config["recall"]["scope"] if scope is None else scope
        kinds = _known_kinds(kinds)
        filters = Filters(
            as_of=parse_time(as_of, field="as_of"), known_at=parse_time(known_at, field="known_at"),
            kinds=kinds, tags=normalise_tags(tags), since=parse_time(since, field="since"),
            until=parse_time(until, field="until"), include_superseded=include_superseded,
        )
        stores = self._stores(scope)
        if query_vector is None and use_vectors and any(s.vector_index for s in stores):
            vectors = self.embed([query])
            query_vector = None if vectors is None else vectors[0]
        hits: list[Hit] = []
        for store in stores:
            ranked = rank(store, query, query_vector, filters, k, ranking or self.ranking)
            hits += [h for h in ranked if _relevant(h)]
        hits.sort(key=lambda h: (-h.score, h.memory.id))
        return hits[:k]

    def list(
        self, *, kinds: Iterable[str] = (), tags: Iterable[str] = (), as_of: Any = None, known_at: Any = None,
        include_superseded: bool = False, limit: int | None = None, scope: str | None = None,
        order: Order = Order.NEWEST,
    ) -> list[Memory]:
        """Memories matching the filters, in `order` (newest first by default). limit and scope
        default to the config's `list.limit` and `list.scope`. Raises InvalidMemory, InvalidTime."""
        limit = self.config["list"]["limit"] if limit is None else int(limit)
        scope = self.config["list"]["scope"] if scope is None else scope
        try:
            order = Order(order)
        except ValueError:
            expected = ", ".join(o.value for o in Order)
            raise InvalidMemory(f"unknown order {order!r}; expected one of: {expected}") from None
        kinds = _known_kinds(kinds)
        filters = Filters(as_of=parse_time(as_of, field="as_of"), known_at=parse_time(known_at, field="known_at"),
                          kinds=kinds, tags=normalise_tags(tags), include_superseded=include_superseded)
        out: list[Memory] = []
        for store in self._stores(scope):
            out += store.list(filters, limit=limit, order=order)
        return out[:limit]

    def counts(self) -> dict[str, int]:
        """The project store's counts: current, superseded, forgotten, total, awaiting_embedding."""
        return self.store.counts()

    def topics(self, *, tags: int = 8) -> dict[str, Any]:
        """What the project store holds, for a map of it: {"kinds": {kind: current count},
        "tags": [(tag, current count)], the `tags` most used first}."""
        kinds, top = self.store.current_kinds_and_tags(tags)
        return {"kinds": kinds, "tags": top}

    def cosines(self, memory_ids: Iterable[str], query_vector: np.ndarray) -> dict[str, float]:
        """Cosine of each memory's stored vector with `query_vector` (float32[dim], L2-normalised),
        for the memories of the project store that have one (others are left out)."""
        seqs: dict[int, str] = {}
        for memory_id in memory_ids:
            try:
                seqs[self.store.seq_of(memory_id)] = memory_id
            except MemoryNotFound:
                continue
        return {seqs[seq]: float(vector @ query_vector) for seq, vector in self.store.vectors_of(list(seqs)).items()}

    def status(self) -> Status:
        """Which store and why, counts, vector backend, model and whether recall is keyword-only."""
        store = self.store
        model = self.embedder.model_name if self.embedder else None
        loaded = bool(getattr(self.embedder, "loaded", self.embedder is not None))
        reasons = [r for r in (store.vector_unavailable, self.embedder_error) if r]
        return Status(
            store=store.name, path=str(store.path if self.exists else self.choice.path),
            chosen_by=self.choice.reason,
            project_root=str(self.choice.project_root) if self.choice.project_root else None,
            schema_version=len(MIGRATIONS), counts=store.counts(), bytes=store.file_size() if self.exists else 0,
            vector_backend=store.vector_index.name if store.vector_index else None,
            embedding_model=model, store_embedding_model=store.get_meta("embedding_model"), model_loaded=loaded,
            keyword_only=bool(reasons) or self.embedder is None, keyword_only_reason="; ".join(reasons) or None,
        )

    # -- export / import / reembed --------------------------------------------------------------------
    def export(self, out: IO[str], *, include_forgotten: bool = True) -> int:
        """Write every memory of the project store as JSON Lines (Memory.to_json keys plus
        `asserted_valid_to`), oldest first. Vectors are not exported (they are derived). Returns the count."""
        count = 0
        for memory, asserted in self.store.iter_rows():
            if memory.forgotten_at is not None and not include_forgotten:
                continue
            data = memory.to_json()
            data["asserted_valid_to"] = None if asserted >= END_OF_TIME else asserted
            out.write(json.dumps(data, ensure_ascii=False) + "\n")
            count += 1
        return count

    def import_(self, source: IO[bytes], *, progress: Progress = _no_progress) -> dict[str, int]:
        """Read JSON Lines written by `export` (bytes, strict UTF-8), validated by the same rules as
        `remember` (records.parse_record). All or nothing: any bad line raises InvalidImport naming
        the line and each of its problems, and nothing is written. Memories whose id exists are
        skipped. Imported memories are embedded afterwards. Returns {"imported", "skipped"}."""
        imported, skipped = self.store.import_rows(parse_export_lines(source))
        self._embed_all_backlog(progress)
        return {"imported": imported, "skipped": skipped}

    def _embed_all_backlog(self, progress: Progress) -> None:
        total = self.store.counts()["awaiting_embedding"]
        batch = self.config["embedding"]["batch_size"] * 8
        for _ in progress(range(0, total, batch), (total + batch - 1) // batch):
            if self.flush_backlog(batch) == 0:
                break

    def reembed(self, *, progress: Progress = _no_progress) -> int:
        """Re-embed every live memory with the configured model, replacing the vector index and the
        store's recorded fingerprint. Returns how many were embedded. Raises EmbedderUnavailable."""
        if self.embedder is None:
            raise EmbedderUnavailable("embedding is disabled by configuration; nothing to re-embed with")
        store = self.store
        if store.vector_index is None:
            raise EmbedderUnavailable(store.vector_unavailable or "no vector index available")
        rows = store.all_text_seqs()
        batch = self.config["embedding"]["batch_size"] * 8
        chunks = [rows[i : i + batch] for i in range(0, len(rows), batch)]
        vectors: dict[int, np.ndarray] = {}
        for chunk in progress(chunks, len(chunks)):
            vectors.update(zip((seq for seq, _ in chunk), self.embedder.embed([text for _, text in chunk])))
        store.replace_vectors(vectors, model_name=self.embedder.model_name, fingerprint=self.embedder.fingerprint)
        return len(rows)


__all__ = ["Cairn", "Draft", "SCOPES", "VECTOR_FLOOR", "create_store", "delete_store", "list_stores", "rename_store"]
