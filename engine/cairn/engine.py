"""The engine API: remember, recall, replace, forget, history, list, status, export, import, reembed.

Every adapter (CLI, MCP server, hooks) calls this module; nothing above it knows SQL.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from . import db
from .config import load_config
from .embedder import Embedder, SentenceTransformerEmbedder, resolve_model
from .errors import (
    CairnError, EmbedderUnavailable, EmbeddingMismatch, InvalidImport, InvalidMemory, MemoryNotFound, NotCurrent,
    StoreNotFound,
)
from .migrations import MIGRATIONS
from .models import DEFAULT_IMPORTANCE, IMPORTANCE_RANGE, KINDS, MAX_TEXT_BYTES, SOURCES, Hit, Memory, RememberResult
from .paths import GLOBAL_STORE, StoreChoice, choose_store, store_path
from .ranking import RankingConfig, rank
from .store import Filters, NewMemory, Store
from .supersede import SIMILARITY_THRESHOLD, classify
from .text import fts_query, normalise
from .timeutil import END_OF_TIME, now_ms, parse_time

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

SCOPES = ("project", "global", "all")
DETECTION_CANDIDATES = 5  # nearest current memories of the same kind checked for supersession
Progress = Callable[[Iterable[Any], int], Iterable[Any]]  # (items, total) -> items, e.g. a tqdm wrapper


def _no_progress(items: Iterable[Any], total: int) -> Iterable[Any]:
    return items


@dataclass(frozen=True)
class Draft:
    """A memory as a caller states it, before validation. Times: epoch ms or ISO 8601."""

    text: str
    kind: str = "fact"
    tags: tuple[str, ...] = ()
    importance: int = DEFAULT_IMPORTANCE
    source: str = "agent"
    session_id: str | None = None
    valid_from: Any = None
    valid_to: Any = None
    replaces: str | tuple[str, ...] | None = None  # one id, or several (a merge)

    @property
    def replaced_ids(self) -> tuple[str, ...]:
        if not self.replaces:
            return ()
        return (self.replaces,) if isinstance(self.replaces, str) else tuple(self.replaces)


def normalise_tags(tags: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for tag in tags:
        key = normalise(str(tag)).strip(",")
        if not key:
            continue
        if len(key) > 64 or any(c.isspace() or c == "," for c in key):
            raise InvalidMemory(f"invalid tag {tag!r}: at most 64 characters, no spaces or commas")
        if key not in out:
            out.append(key)
    return tuple(sorted(out))


def validate(draft: Draft, *, recorded_at: int) -> NewMemory:
    """Check a draft and turn it into an insertable row. Raises InvalidMemory / InvalidTime."""
    if not isinstance(draft.text, str) or not draft.text.strip():
        raise InvalidMemory("memory text is empty")
    size = len(draft.text.encode("utf-8", "strict"))
    if size > MAX_TEXT_BYTES:
        raise InvalidMemory(f"memory text is {size} bytes of UTF-8; the limit is {MAX_TEXT_BYTES}")
    if draft.kind not in KINDS:
        raise InvalidMemory(f"unknown kind {draft.kind!r}; expected one of: {', '.join(KINDS)}")
    if draft.source not in SOURCES:
        raise InvalidMemory(f"unknown source {draft.source!r}; expected one of: {', '.join(SOURCES)}")
    low, high = IMPORTANCE_RANGE
    if isinstance(draft.importance, bool) or not isinstance(draft.importance, int) or not low <= draft.importance <= high:
        raise InvalidMemory(f"importance must be an integer from {low} to {high}, got {draft.importance!r}")
    valid_from = parse_time(draft.valid_from, field="valid_from")
    valid_to = parse_time(draft.valid_to, field="valid_to")
    valid_from = recorded_at if valid_from is None else valid_from
    if valid_to is not None and valid_to <= valid_from:
        raise InvalidMemory("valid_to must be later than valid_from")
    from ulid import ULID  # imported on the write path only: it costs ~50 ms

    text = draft.text.strip()
    return NewMemory(
        id=str(ULID()), text=text, text_key=normalise(text), kind=draft.kind, tags=normalise_tags(draft.tags),
        importance=draft.importance, source=draft.source, session_id=draft.session_id,
        valid_from=valid_from, valid_to=END_OF_TIME if valid_to is None else valid_to, recorded_at=recorded_at,
    )


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
    ) -> Cairn:
        """Open the store chosen by `choose_store` (explicit name > CAIRN_STORE > git toplevel > cwd).

        create: allow creating an explicitly named store. Stores derived from the working directory
        and the global store are created on first open. embedder: "auto" (configured model, loaded
        lazily), None (keyword-only), or an Embedder. check_model: refuse a store embedded with
        another model (False only for `reembed`).
        Raises StoreNotFound, InvalidStoreName, StoreCorrupted, SchemaTooNew, EmbeddingMismatch, ConfigError.
        """
        choice = choose_store(store, cwd=cwd, env=env)
        config = config or load_config(choice.project_root)
        if embedder == "auto":
            emb = config["embedding"]
            embedder = (
                SentenceTransformerEmbedder(emb["model"], device=emb["device"], batch_size=emb["batch_size"])
                if emb["enabled"] else None
            )
        allowed = create or not choice.explicit or choice.name == GLOBAL_STORE
        if not allowed and not choice.path.exists():
            raise StoreNotFound(
                f"store {choice.name!r} does not exist (chosen by {choice.reason}); "
                f"create it with `cairn stores create {choice.name}` or pass --create"
            )
        meta = {"project_root": str(choice.project_root)} if choice.project_root else {}
        opened = Store.open(
            choice.path, name=choice.name, create=allowed, meta=meta,
            busy_timeout_ms=config["store"]["busy_timeout_ms"], vector_backend=config["store"]["vector_backend"],
        )
        try:
            return cls(opened, choice=choice, embedder=embedder, config=config, check_model=check_model)
        except BaseException:
            opened.close()
            raise

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

    def global_store(self) -> Store:
        if self.store.name == GLOBAL_STORE:
            return self.store
        if self._global is None:
            self._global = Store.open(store_path(GLOBAL_STORE), name=GLOBAL_STORE, create=True,
                                      busy_timeout_ms=self.config["store"]["busy_timeout_ms"],
                                      vector_backend=self.config["store"]["vector_backend"])
            self._check_fingerprint(self._global)
        return self._global

    def _stores(self, scope: str) -> list[Store]:
        if scope not in SCOPES:
            raise InvalidMemory(f"unknown scope {scope!r}; expected one of: {', '.join(SCOPES)}")
        if scope == "project":
            return [self.store]
        if scope == "global":
            return [self.global_store()]
        return [self.store] if self.store.name == GLOBAL_STORE else [self.store, self.global_store()]

    # -- embeddings ----------------------------------------------------------------------------------
    def embed(self, texts: list[str]) -> np.ndarray | None:
        """Vectors for `texts`, or None when no model is available (the reason goes to status)."""
        if self.embedder is None or not texts:
            return None
        try:
            return self.embedder.embed(texts)
        except EmbedderUnavailable as exc:
            self.embedder_error = str(exc)
            log.warning("keyword-only: %s", exc)
            return None

    def _record_fingerprint(self, store: Store) -> None:
        if self.embedder is not None and store.get_meta("embedding_model") is None:
            store.set_meta("embedding_model", self.embedder.model_name)
            store.set_meta("embedding_fingerprint", self.embedder.fingerprint)

    def flush_backlog(self, limit: int = 256, store: Store | None = None) -> int:
        """Embed up to `limit` memories stored while no model was loaded. Returns how many."""
        store = store or self.store
        pending = store.backlog(limit)
        vectors = self.embed([text for _, text in pending]) if pending and store.vector_index else None
        if vectors is None:
            return 0
        self._record_fingerprint(store)
        with db.write_transaction(store.conn):
            alive = {s for (s,) in store.conn.execute("SELECT seq FROM vector_backlog")}
            for (seq, _), vector in zip(pending, vectors):
                if seq in alive:  # forgotten meanwhile: never resurrect a vector
                    store.put_vector(seq, vector)
        return len(pending)

    # -- writes ----------------------------------------------------------------------------------------
    def remember(self, text: str, **fields: Any) -> RememberResult:
        """Store one memory (fields as in Draft; scope="global" writes to the global store;
        detect=False turns automatic supersession off for this write).

        Exact duplicates (after normalisation) of a current memory write nothing and return it with
        status "duplicate". `replaces=ID` supersedes that memory; otherwise a memory of the same kind
        stating a change to a similar current one supersedes it automatically (supersede.classify).
        Raises InvalidMemory, InvalidTime, MemoryNotFound, NotCurrent.
        """
        scope = fields.pop("scope", "project")
        detect = fields.pop("detect", None)
        return self.remember_many([Draft(text=text, **fields)], scope=scope, detect=detect)[0]

    def remember_many(self, drafts: list[Draft], *, scope: str = "project", detect: bool | None = None) -> list[RememberResult]:
        """Store several memories, embedded in one batch, each in its own short transaction.

        All drafts are validated before anything is written: one bad draft writes nothing.
        """
        if scope not in ("project", "global"):
            raise InvalidMemory(f"memories are written to scope 'project' or 'global', not {scope!r}")
        store = self._stores(scope)[0]
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
        with db.write_transaction(store.conn):
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
            near = [(s, c) for s, c in store.vector_search(vector, same_kind, DETECTION_CANDIDATES) if c >= SIMILARITY_THRESHOLD]
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

    def replace(self, memory_id: str | list[str], text: str, **fields: Any) -> RememberResult:
        """Supersede `memory_id` (or several ids: a merge) with a new memory, in the store that holds
        the (first) old one. Kind, tags and importance default to the first old memory's. If `text`
        is already a current memory, the old ones are superseded by that one and nothing new is
        written. Raises MemoryNotFound, NotCurrent, InvalidMemory."""
        ids = [memory_id] if isinstance(memory_id, str) else list(memory_id)
        if not ids:
            raise InvalidMemory("replace needs at least one memory id")
        store = self._store_holding(ids[0])
        old = self._require_current(store, ids[0])
        fields.setdefault("kind", old.kind)
        fields.setdefault("tags", old.tags)
        fields.setdefault("importance", old.importance)
        scope = "global" if store.name == GLOBAL_STORE and self.store.name != GLOBAL_STORE else "project"
        return self.remember(text, replaces=tuple(ids), scope=scope, **fields)

    # -- review -----------------------------------------------------------------------------------
    def dismiss_pair(self, first_id: str, second_id: str) -> None:
        """Record the user's verdict "keep both" on a review pair, so it is not proposed again."""
        store = self._store_holding(first_id)
        store.get(second_id)  # both must exist in that store (raises MemoryNotFound)
        pair = tuple(sorted((first_id, second_id)))
        with db.write_transaction(store.conn):
            store.conn.execute("INSERT OR IGNORE INTO review_dismissals(first_id, second_id, dismissed_at) "
                               "VALUES (?, ?, ?)", (*pair, now_ms()))

    def is_dismissed(self, first_id: str, second_id: str) -> bool:
        pair = tuple(sorted((first_id, second_id)))
        return any(s.conn.execute("SELECT 1 FROM review_dismissals WHERE first_id = ? AND second_id = ?", pair)
                   .fetchone() for s in self._stores("all"))

    def forget(self, memory_id: str) -> Memory:
        """Erase a memory: its text, tags, keyword and vector index entries. A tombstone row remains
        (id, kind, times, links) so history shows that something was forgotten, and when.
        Forgetting twice is harmless. Raises MemoryNotFound."""
        store = self._store_holding(memory_id)
        with db.write_transaction(store.conn):
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
        scope: str = "project",
        query_vector: np.ndarray | None = None,
        ranking: RankingConfig | None = None,
        use_vectors: bool = True,
    ) -> list[Hit]:
        """Hybrid recall: the k best memories for `query` among those the filters admit.

        as_of: valid time (what was true then); known_at: transaction time (what the store knew
        then); since/until bound valid_from. Times: ISO 8601 or epoch ms. query_vector:
        float32[dim], L2-normalised, when the caller already has it (a warm process); otherwise the
        query is embedded here unless use_vectors is False (keyword-only).
        Raises InvalidMemory (unknown kind or scope), InvalidTime.
        """
        k = self.config["recall"]["k"] if k is None else int(k)
        kinds = tuple(kinds)
        for kind in kinds:
            if kind not in KINDS:
                raise InvalidMemory(f"unknown kind {kind!r}; expected one of: {', '.join(KINDS)}")
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
            hits += rank(store, query, query_vector, filters, k, ranking or self.ranking)
        hits.sort(key=lambda h: (-h.score, h.memory.id))
        return hits[:k]

    def list(
        self, *, kinds: Iterable[str] = (), tags: Iterable[str] = (), as_of: Any = None, known_at: Any = None,
        include_superseded: bool = False, limit: int | None = 50, scope: str = "project",
        order: str = "recorded_at DESC",
    ) -> list[Memory]:
        """Memories matching the filters, newest first (or by `order`: a fixed set of SQL orders)."""
        if order not in ("recorded_at DESC", "importance DESC, recorded_at DESC", "recorded_at ASC"):
            raise InvalidMemory(f"unsupported order {order!r}")
        filters = Filters(as_of=parse_time(as_of, field="as_of"), known_at=parse_time(known_at, field="known_at"),
                          kinds=tuple(kinds), tags=normalise_tags(tags), include_superseded=include_superseded)
        out: list[Memory] = []
        for store in self._stores(scope):
            out += store.list(filters, limit=limit, order=order)
        return out[:limit] if limit is not None else out

    def status(self) -> dict[str, Any]:
        """Which store and why, counts, vector backend, model and whether recall is keyword-only."""
        store = self.store
        model = self.embedder.model_name if self.embedder else None
        loaded = bool(getattr(self.embedder, "loaded", self.embedder is not None))
        reasons = [r for r in (store.vector_unavailable, self.embedder_error) if r]
        return {
            "store": store.name,
            "path": str(store.path),
            "chosen_by": self.choice.reason,
            "project_root": str(self.choice.project_root) if self.choice.project_root else None,
            "schema_version": len(MIGRATIONS),
            "counts": store.counts(),
            "bytes": store.file_size(),
            "vector_backend": store.vector_index.name if store.vector_index else None,
            "embedding_model": model,
            "store_embedding_model": store.get_meta("embedding_model"),
            "model_loaded": loaded,
            "keyword_only": bool(reasons) or self.embedder is None,
            "keyword_only_reason": "; ".join(reasons) or None,
        }

    # -- export / import / reembed --------------------------------------------------------------------
    def export(self, out: IO[str], *, include_forgotten: bool = True) -> int:
        """Write every memory of the project store as JSON Lines (Memory.to_json keys plus
        `asserted_valid_to`), oldest first. Vectors are not exported (they are derived). Returns the count."""
        count = 0
        for memory, asserted in self._all_rows():
            if memory.forgotten_at is not None and not include_forgotten:
                continue
            data = memory.to_json()
            data["asserted_valid_to"] = None if asserted >= END_OF_TIME else asserted
            out.write(json.dumps(data, ensure_ascii=False) + "\n")
            count += 1
        return count

    def _all_rows(self) -> Iterator[tuple[Memory, int]]:
        store = self.store
        seqs = [r[0] for r in store.conn.execute("SELECT seq FROM memories ORDER BY seq")]
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            by_seq = store.by_seqs(chunk)
            for seq in chunk:
                yield by_seq[seq], store.asserted_valid_to(seq)

    def import_(self, source: IO[bytes], *, progress: Progress = _no_progress) -> dict[str, int]:
        """Read JSON Lines written by `export` (bytes, strict UTF-8). All or nothing: any bad line
        raises InvalidImport naming the line, and nothing is written. Memories whose id exists are
        skipped. Imported memories are embedded afterwards. Returns {"imported", "skipped"}."""
        from .transfer import parse_export_lines

        records = parse_export_lines(source)
        store = self.store
        imported = skipped = 0
        with db.write_transaction(store.conn):
            store.conn.execute("PRAGMA defer_foreign_keys = ON")  # chains may point forward in the file
            for memory, asserted in records:
                if store.conn.execute("SELECT 1 FROM memories WHERE id = ?", (memory.id,)).fetchone():
                    skipped += 1
                    continue
                key = normalise(memory.text) if memory.text is not None and memory.retired_at is None else None
                if key is not None and store.current_by_text_key(key) is not None:
                    skipped += 1
                    continue
                try:
                    store.insert_raw(memory, key, asserted)
                except db.IntegrityError as exc:
                    raise InvalidImport(f"memory {memory.id}: {exc}") from None
                imported += 1
            bad = store.conn.execute("PRAGMA foreign_key_check(memories)").fetchone()
            if bad:
                raise InvalidImport("superseded_by points to a memory that is neither in the file nor the store")
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
        vectors: list[np.ndarray] = []
        for chunk in progress(chunks, len(chunks)):
            embedded = self.embedder.embed([text for _, text in chunk])
            vectors.extend(embedded)
        with db.write_transaction(store.conn):
            store.vector_index.drop(store.conn)
            store.conn.execute("DELETE FROM vector_backlog")
            for (seq, _), vector in zip(rows, vectors):
                store.put_vector(seq, vector)
            # Anything written meanwhile (by another process) waits in the backlog.
            live = store.conn.execute("SELECT seq FROM memories WHERE text IS NOT NULL").fetchall()
            done = {seq for seq, _ in rows}
            for (seq,) in live:
                if seq not in done:
                    store.put_vector(seq, None)
            store.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embedding_model', ?)",
                               (self.embedder.model_name,))
            store.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('embedding_fingerprint', ?)",
                               (self.embedder.fingerprint,))
        return len(rows)


__all__ = ["Cairn", "Draft", "SCOPES", "validate", "CairnError", "resolve_model"]
