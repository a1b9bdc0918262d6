"""The engine: remember, recall, replace, forget, history, list, status, export, import, reembed.

`Engine` holds one project's store, the global store and the embedder, and is the one writer of
memories and of their supersession. What stands above it uses it: the review queue (review/), the
captured sessions (sessions_api.py), the hooks' context (context.py), and `Cairn` (api.py), the
public class adapters open, which adds `memory.review` and `memory.sessions`. The SQL lives in
storage/ (one contract, protocol.StoreBackend, for SQLite and Postgres). Its steps live beside it:
writes.py (the write path, which only `Engine` calls), detection.py (what a write finds among the
current memories: the changes it retires, possible conflicts, related memories) and reads.py (what
a read admits).
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Self, cast

from ..compose import Resolved, embedder_from_config, resolve
from ..embedder import Embedder, compatible, parse_fingerprint
from ..errors import EmbedderUnavailable, EmbeddingMismatch, InvalidMemory, MemoryNotFound
from ..errors import StoreBusy, StoreError, StoreNotFound
from . import detection
from .ranking import RankingConfig, for_model, rank
from .reads import check_query, id_by_prefix, read_filters, relevant
from .records import Draft, parse_export_lines, validate
from .writes import attach_scopes, require_current, scrub_drafts, supersede_row, write
from ..models import DEFAULT_IMPORTANCE, SCOPES, Hit, Memory, Order, RememberResult, Status
from ..models import NewMemory
from ..storage.db import DatabaseError
from ..storage.protocol import StoreBackend as Store  # either backend, typed by the storage contract
from ..stores.admin import Progress, no_progress, scrubbed_rows
from ..stores.backends import backend_of, open_store
from ..stores.paths import GLOBAL_STORE, StoreChoice, store_path
from ..text import duplicate_key, passage
from ..timeutil import END_OF_TIME, now_ms

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


def _open_project_store(resolved: Resolved, *, create: bool, read_only: bool, busy_ms: int) -> tuple[Store, bool]:
    """The project store `resolved` chose, opened as Engine.open's arguments say, and whether it is
    missing (read_only on a store that does not exist: an empty stand-in in memory). Raises
    StoreNotFound (also for a missing Postgres store unless read_only), InvalidStoreName,
    StoreCorrupted, StoreBusy, SchemaTooNew, ConfigError."""
    choice, config, env = resolved.choice, resolved.config, resolved.env
    allowed = create or not choice.explicit or choice.name == GLOBAL_STORE
    meta = {"project_root": str(choice.project_root)} if choice.project_root else {}
    on_postgres = backend_of(choice.name, config, project=True, env=env) == "postgres"
    absent = None if create else resolved.missing()
    if absent is not None:
        raise absent
    missing = False
    if on_postgres:
        try:
            opened = open_store(choice.name, choice.path, config, create=allowed and not read_only,
                                project=True, meta=meta, env=env)
        except StoreNotFound:
            if not read_only:
                raise StoreNotFound(
                    f"store {choice.name!r} does not exist on the Postgres server (chosen by {choice.reason}); "
                    f"create it with `cairn stores create {choice.name} --postgres URL` or pass --create"
                ) from None
            missing = True
    else:
        missing = read_only and not choice.path.exists()
    if not on_postgres or missing:
        opened = open_store(choice.name, Path(":memory:") if missing else choice.path, config,
                            create=allowed or missing, project=True, meta=meta, backend="sqlite",
                            busy_timeout_ms=busy_ms, env=env)
    return opened, missing


class Engine:
    """Memory for one project: its store, the global store, and an embedder.

    Open with `Cairn.open(...)` (api.Cairn, this engine with the review queue and captured sessions);
    close with `close()` or use as a context manager. embedder None means keyword-only. `choice`
    records which store and why. env: the environment it was opened in (None: environment.
    process_env()), which names the data root that holds the global store.
    """

    def __init__(self, store: Store, *, choice: StoreChoice, embedder: Embedder | None, config: dict[str, Any],
                 ranking: RankingConfig | None = None, check_model: bool = True,
                 env: Mapping[str, str] | None = None):
        self.store = store
        self.choice = choice
        self.env = env
        self.embedder = embedder
        self.config = config
        self.ranking = ranking or for_model(RankingConfig(candidates=config["recall"]["candidates"]),
                                            embedder.model_name if embedder is not None else None)
        self.embedder_error: str | None = None if embedder else "embedding disabled by configuration"
        self._global: Store | None = None
        self._check_model = check_model
        self._busy_timeout_ms: int = config["store"]["busy_timeout_ms"]
        self.exists = True  # False: opened read-only on a store file that does not exist (an empty stand-in)
        # True: a write's possible conflicts stay in its `related` for the writer to resolve, and are
        # queued only if still unresolved when its session ends (settle). Set by an adapter whose
        # sessions end with a settle call (the plugin's MCP server: the SessionEnd hook settles).
        self.defer_review = False
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
        env: Mapping[str, str] | None = None,
        check_model: bool = True,
        resolved: Resolved | None = None,
        read_only: bool = False,
        busy_timeout_ms: int | None = None,
    ) -> Self:
        """Open the chosen store (explicit name > CAIRN_STORE > git toplevel > cwd).

        resolved: what the caller's composition root already decided (compose.resolve); then store,
        cwd and config are not consulted, and env only when `resolved` carries none. The engine
        keeps that env (`env`): the global store is found in its data root. create: allow creating
        an explicitly named store. Stores derived from the working directory and the global store
        are created on first open.
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
        if resolved.env is None and env is not None:  # a Resolved built by hand, and the env beside it
            resolved = replace(resolved, env=env)
        choice, config = resolved.choice, resolved.config
        if isinstance(embedder, str):  # "auto"
            embedder = embedder_from_config(config)
        busy_ms = config["store"]["busy_timeout_ms"] if busy_timeout_ms is None else busy_timeout_ms
        opened, missing = _open_project_store(resolved, create=create, read_only=read_only, busy_ms=busy_ms)
        try:
            engine = cls(opened, choice=choice, embedder=embedder, config=config, check_model=check_model,
                         env=resolved.env)
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

    def hold_vectors(self) -> bool:
        """For a long-lived process (the warm process, the MCP server): keep the project store's
        memory vectors in process memory, so that a recall's k-NN is a matrix product (vectors.
        VectorCache; exact, re-synchronised with the file before each use). Costs dim x 4 bytes a
        memory (15 MB at 10,000 x 384). A SQLite store also holds its keyword postings from then on
        (storage/fts_postings.py: BM25 with FTS5's own scores, in numpy; each word read on first use,
        about 7 bytes a posting), whatever its vector index. Returns whether the vectors are held: a
        sqlite-vec store only (Postgres searches its HNSW index and its own postings)."""
        return self.store.hold_vectors()

    @property
    def name(self) -> str:
        """The project store's name."""
        return self.store.name

    def close(self) -> None:
        self.store.close()
        if self._global is not None:
            self._global.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_fingerprint(self, store: Store) -> None:
        """At open: the store's vectors and the configured model must share a space. Only the model
        name is compared here (cheap, no load); the weights are checked once they are known
        (`_claim_space`)."""
        recorded = store.get_meta("embedding_model")
        if self._check_model and recorded and self.embedder is not None and recorded != self.embedder.model_name:
            raise EmbeddingMismatch(
                f"store {store.name!r} holds vectors from {recorded!r}, but the configured model is "
                f"{self.embedder.model_name!r}; run `cairn reembed` to re-embed it with the configured model"
            )
        if self._check_model and self.embedder is not None and self.embedder.loaded:
            self._claim_space(store)

    def global_store(self, *, create: bool = True) -> Store | None:
        """The user's global store, opened once; None when it does not exist and create is False."""
        if self.store.name == GLOBAL_STORE:
            return self.store
        if self._global is None:
            path = store_path(GLOBAL_STORE, env=self.env)
            on_postgres = backend_of(GLOBAL_STORE, self.config, project=False, env=self.env) == "postgres"
            if not create and not on_postgres and not path.exists():
                return None
            self._global = open_store(GLOBAL_STORE, path, self.config, create=True, project=False,
                                      busy_timeout_ms=self._busy_timeout_ms, env=self.env)
            self._check_fingerprint(self._global)
        return self._global

    def _stores(self, scope: str | None, *, write: bool = False) -> list[Store]:
        """The stores a scope covers. Reads skip a global store that does not exist yet, and a read
        of scope "all" one that cannot be used (logged)."""
        if scope not in SCOPES:
            raise InvalidMemory(f"unknown scope {scope!r}; expected one of: {', '.join(SCOPES)}")
        if scope == "project":
            return [self.store]
        try:
            glob = self.global_store(create=write)
        except (StoreError, DatabaseError) as exc:
            # A read of "all" answers from the project store when the global one cannot be used (one
            # broken file must not cost every project its recall); a write or a global read says why.
            if write or scope == "global" or isinstance(exc, StoreBusy):
                raise
            log.warning("the global store is left out of this read: %s", exc)
            return [self.store]
        if scope == "global":
            return [glob] if glob is not None else []
        return [self.store] + ([glob] if glob is not None and glob is not self.store else [])

    # -- embeddings ----------------------------------------------------------------------------------
    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray | None:
        """float32[len(texts), dim], L2-normalised, or None when no model is available (the reason
        goes to status). query: the texts are search queries (some models embed those differently)."""
        if self.embedder is None or not texts:
            return None
        try:
            vectors = self.embedder.embed_queries(texts) if query else self.embedder.embed(texts)
        except EmbedderUnavailable as exc:
            if str(exc) != self.embedder_error:  # said once, not on every embed of the call
                log.warning("keyword-only: %s", exc)
            self.embedder_error = str(exc)
            return None
        self.embedder_error = None  # a model that was not ready before is now
        return vectors

    def _claim_space(self, store: Store, *, record: bool = True) -> None:
        """Before the loaded embedder's vectors meet a store's: record its fingerprint in a store
        that has none (or an older one without weights), and refuse a store whose vectors come from
        an incompatible space (embedder.compatible: other weights of the same model, a replaced
        model at the same path). Raises EmbeddingMismatch."""
        if self.embedder is None or not self._check_model:
            return
        current = self.embedder.fingerprint
        recorded = store.get_meta("embedding_fingerprint")
        if store.get_meta("embedding_model") is None or recorded is None:
            if not record or not self.embedder.dim:  # a read writes nothing; a space with no size is not known yet
                return
            store.set_meta("embedding_model", self.embedder.model_name)
            store.set_meta("embedding_fingerprint", current)
            return
        if not compatible(recorded, current):
            raise EmbeddingMismatch(
                f"store {store.name!r} holds vectors of {recorded!r}, which this model's vectors "
                f"({current!r}) cannot be mixed with; run `cairn reembed` to re-embed it with the configured model"
            )
        if record and parse_fingerprint(recorded).get("weights", "?") == "?" and self.embedder.weights \
                and self.embedder.weights != "?":
            # recorded before fingerprints named the weights, or while they were unknown ("weights=?"):
            # name them now, so the weights are checked from here on
            store.set_meta("embedding_fingerprint", current)

    def flush_backlog(self, limit: int = 256, store: Store | None = None) -> int:
        """Embed up to `limit` memories stored while no model was loaded. Returns how many were
        embedded (0 when none waits or no model is available)."""
        store = store or self.store
        pending = store.backlog(limit)
        vectors = self.embed([text for _, text in pending]) if pending and store.vector_index else None
        if vectors is None:
            return 0
        self._claim_space(store)
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
        applies_when: Iterable[str] = (),
        paths: Iterable[str] = (),
    ) -> RememberResult:
        """Store one memory. Times: ISO 8601 or epoch ms (UTC); valid_from defaults to now.

        applies_when: one to MAX_APPLIES_WHEN (4) short phrases, at most MAX_APPLIES_CHARS (80)
        characters each, naming the tasks in which the memory matters ("fixing a flaky test",
        "changing the public API"); embedded and keyword-indexed with the text, so recall and the
        per-prompt gate find the memory for a task its words do not name.
        paths: up to 8 globs relative to the project root ("src/payments/**", "**/*.tsx"), literal
        files or folders, or commands ("cmd:alembic"), that the memory governs: the tool hooks bring
        it when Claude touches them (scopes.py). Without paths, a replacing memory keeps the scopes
        of those it replaces. session_id: also associates the memory with what that session
        touched just before (learned scopes, scopes.learn).
        scope: "project" or "global" (the user's store for every project). detect: automatic
        supersession (default: config `supersession.enabled`). Duplicates of a current memory (the
        same text after NFC, casefolding, whitespace and punctuation that says nothing:
        text.duplicate_key, stored as the memory's text_key and found by one index lookup) write
        nothing and return it with status "duplicate"; replacing a memory by its own text with other
        punctuation, tags or kind writes a new version of it.
        `replaces` (an id, or several: a merge) supersedes those; otherwise a memory of the same kind
        stating a change to a similar current one supersedes it (supersede.classify), and similar
        ones it does not retire are listed in `conflicts` and queued for review: at once, or, with
        `defer_review`, only if still unresolved when the writer's session ends (settle). The text is
        stored without its `<private>...</private>` spans and with secrets (API keys, tokens,
        passwords) replaced by `[REDACTED:<type>]`, as captured turns are (privacy.scrub).
        Raises InvalidMemory (every problem named; a text that is all private), InvalidTime,
        MemoryNotFound, NotCurrent.
        """
        if replaces is not None and not isinstance(replaces, str):
            replaces = tuple(replaces)
        if applies_when is not None and not isinstance(applies_when, str):
            applies_when = tuple(applies_when)
        # A string passed as applies_when reaches validate, which refuses it with the reason.
        draft = Draft(text=text, kind=kind, tags=tuple(tags), importance=importance, source=source,
                      session_id=session_id, valid_from=valid_from, valid_to=valid_to, replaces=replaces,
                      applies_when=applies_when,  # type: ignore[arg-type]
                      paths=paths if isinstance(paths, str) else tuple(paths))  # type: ignore[arg-type]
        return self.remember_many([draft], scope=scope, detect=detect)[0]

    def remember_many(self, drafts: list[Draft], *, scope: str = "project",
                      detect: bool | None = None) -> list[RememberResult]:
        """Store several memories, embedded in one batch, each in its own short transaction.

        All drafts are scrubbed (as `remember`) and validated before anything is written: one bad
        draft writes nothing.
        """
        if scope not in ("project", "global"):
            raise InvalidMemory(f"memories are written to scope 'project' or 'global', not {scope!r}")
        store = self._stores(scope, write=True)[0]
        recorded_at = now_ms()
        drafts, redacted = scrub_drafts(drafts)
        rows = [validate(d, recorded_at=recorded_at) for d in drafts]
        for draft in drafts:
            for old_id in draft.replaced_ids:
                require_current(store, old_id)
        vectors = self.embed([passage(r.text, r.applies_when) for r in rows])
        if vectors is not None:
            self._claim_space(store)
        detect = self.config["supersession"]["enabled"] if detect is None else detect
        results = []
        for i, (draft, row) in enumerate(zip(drafts, rows)):
            vector = None if vectors is None else vectors[i]
            with store.transaction():  # the memory and its scopes commit together
                result = write(store, row, vector, replaces=draft.replaced_ids, detect=detect)
                attach_scopes(store, draft, result, at=row.recorded_at, root=self.choice.project_root)
            results.append(replace(result, redacted=redacted[i]))
            if results[-1].conflicts and not self.defer_review:
                results[-1] = replace(results[-1], queued=self._queue_conflicts(store, results[-1]))
        return results

    def _queue_conflicts(self, store: Store, result: RememberResult) -> list[str]:
        """What becomes of the possible conflicts a write reported, once the write is done: here
        nothing; `Cairn` (api.py), which has the review queue, queues them as conflict proposals.
        Returns the ids of the proposals queued."""
        return []

    def possible_changes(self, memory_id: str) -> list[dict[str, Any]]:
        """The current memories recorded before `memory_id` (project store) that it may change or
        restate, as its write would report them now (RememberResult.conflicts: each {"id", "reason",
        "restatement"?}), from its stored vector (none: keyword candidates only). Empty when it is no
        longer current. Reads only. Raises MemoryNotFound."""
        store = self.store
        memory = store.get(memory_id)
        if memory.status != "current" or memory.text is None:
            return []
        seq = store.seq_of(memory_id)
        vector = store.vectors_of([seq]).get(seq)
        # detect reads a row's text and kind only, which a stored memory has as a new one does.
        found = detection.detect(store, cast("NewMemory", memory), vector, retire=False, skip={memory_id})
        older = {c["id"] for c in found.conflicts if store.seq_of(c["id"]) < seq}
        return [c for c in found.conflicts if c["id"] in older]

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
        applies_when: Iterable[str] | None = None,
        paths: Iterable[str] = (),
    ) -> RememberResult:
        """Supersede `memory_id` (or several ids: a merge) with a new memory, in the store that holds
        the (first) old one. Kind, tags, importance and applies_when default to the first old
        memory's (applies_when=[] drops them); path scopes to the old ones' unless `paths` are
        given (see remember). If `text`
        is already a current memory, the old ones are superseded by that one and nothing new is
        written. Raises MemoryNotFound, NotCurrent, InvalidMemory."""
        ids = [memory_id] if isinstance(memory_id, str) else list(memory_id)
        if not ids:
            raise InvalidMemory("replace needs at least one memory id")
        store = self._store_holding(ids[0])
        old = require_current(store, ids[0])
        scope = "global" if store.name == GLOBAL_STORE and self.store.name != GLOBAL_STORE else "project"
        return self.remember(
            text, kind=old.kind if kind is None else kind, tags=old.tags if tags is None else tags,
            importance=old.importance if importance is None else importance, source=source, session_id=session_id,
            valid_from=valid_from, valid_to=valid_to, replaces=tuple(ids), scope=scope,
            applies_when=old.applies_when if applies_when is None else applies_when, paths=paths)

    def set_cold(self, memory_id: str, cold: bool) -> bool:
        """Demote a memory to the cold tier (cold=True, now) or bring it back. Returns whether it
        changed. Raises MemoryNotFound."""
        return self._store_holding(memory_id).set_cold(memory_id, now_ms() if cold else None)

    def memory_vectors(self, memory_ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The stored vector (float32[dim], L2-normalised) of each memory of the project store that
        has one: {id: vector}."""
        seqs = self.store.seqs_of(list(memory_ids))
        by_seq = {seq: memory_id for memory_id, seq in seqs.items()}
        return {by_seq[seq]: v for seq, v in self.store.vectors_of(list(by_seq)).items()}

    def forget(self, memory_id: str) -> Memory:
        """Erase a memory: its text, tags, keyword and vector index entries. A tombstone row remains
        (id, kind, times, links) so history shows that something was forgotten, and when.

        The erased bytes are overwritten (SQLite secure_delete, FTS5 secure-delete, vec0 zeroes a
        deleted vector) and the WAL is checkpointed and truncated before this returns, so the text
        is in no file of the data root; if another process is mid-read the WAL is emptied at the
        next checkpoint instead (logged). Backups made before, and filesystem snapshots, keep it.
        Forgetting twice is harmless. Raises MemoryNotFound."""
        store = self._store_holding(memory_id)
        with store.transaction():
            seq = store.seq_of(memory_id)
            if store.get(memory_id).forgotten_at is None:
                store.erase(seq, now_ms())
        if not store.flush_to_disk():
            log.warning("forget %s: a reader kept the WAL in use; the next checkpoint empties it", memory_id)
        return store.get(memory_id)

    def retire(self, memory_id: str) -> Memory:
        """Retire a current memory without a successor: it leaves the current view (status
        "retired") and keeps its text, so `history` still shows it. For a memory whose source is
        gone (a deleted Claude Code memory file). Retiring twice is harmless. Raises MemoryNotFound,
        NotCurrent (superseded or forgotten)."""
        store = self._store_holding(memory_id)
        with store.transaction():
            old = require_current(store, memory_id, lock=True)
            if old.retired_at is None:
                at = now_ms()
                supersede_row(store, memory_id, None, at=at, valid_until=at)
        return store.get(memory_id)

    def retire_into(self, memory_ids: Iterable[str], keep_id: str, *, at: int | None = None) -> builtins.list[str]:
        """Retire current memories into `keep_id`, a current memory of the same store that stays:
        each leaves the current view superseded by it, valid until `at` (epoch ms, default now), its
        text kept in history. Nothing new is written (a review verdict keeping one memory of a
        pair, maintenance retiring exact duplicates). Inside a caller's transaction it joins it (a
        savepoint). Returns the ids retired. Raises MemoryNotFound, NotCurrent."""
        store = self.store  # where the review queue's memories are; the global store is opened only if need be
        try:
            store.seq_of(keep_id)
        except MemoryNotFound:
            store = self._store_holding(keep_id)
        at = now_ms() if at is None else int(at)
        retired = []
        with store.transaction():
            require_current(store, keep_id)
            for memory_id in memory_ids:
                require_current(store, memory_id, lock=True)
                if supersede_row(store, memory_id, keep_id, at=at, valid_until=at):
                    retired.append(memory_id)
        return retired

    def source_state(self, name: str) -> dict[str, Any]:
        """What the importer of an outside source (`name`, e.g. "claude-memory") recorded in the
        project store about what it imported: a JSON object, {} when nothing was recorded. Kept in
        the store, so a backup or restore keeps it with the memories it names."""
        raw = self.store.get_meta(f"source:{name}") if self.exists else None
        try:
            value = json.loads(raw) if raw else {}
        except ValueError:
            log.warning("the recorded state of source %s is not JSON; starting afresh", name)
            return {}
        return value if isinstance(value, dict) else {}

    def set_source_state(self, name: str, state: dict[str, Any]) -> None:
        """Record `state` (a JSON object) for source `name`; see source_state."""
        self.store.set_meta(f"source:{name}", json.dumps(state, ensure_ascii=False, separators=(",", ":")))

    def current_by_texts(self, texts: Iterable[str], *, scope: str = "all") -> list[Memory]:
        """The current memories that are one of `texts` (the same text.duplicate_key: NFC, casefold,
        collapsed whitespace, punctuation that says nothing): an index lookup per text, in the stores `scope` covers."""
        keys = {duplicate_key(t) for t in texts if t and not t.isspace()}
        found: dict[str, Memory] = {}
        for store in self._stores(scope):
            for key in keys:
                hit = store.current_by_text_key(key)
                if hit is not None:
                    found.setdefault(hit.id, hit)
        return list(found.values())

    def _store_holding(self, memory_id: str) -> Store:
        # The project store first: finding the global store costs its path's checks, and a brief asks
        # for a hundred or more project memories by id.
        try:
            self.store.seq_of(memory_id)
            return self.store
        except MemoryNotFound:
            pass
        for store in self._stores("all")[1:]:
            try:
                store.seq_of(memory_id)
                return store
            except MemoryNotFound:
                continue
        raise MemoryNotFound(f"no memory {memory_id!r} in store {self.store.name!r} or the global store")

    # -- reads ----------------------------------------------------------------------------------------
    def full_id(self, memory_id: str) -> str:
        """The id a user means by `memory_id`: itself when a store holds it, else the one id of the
        project or the global store that starts with it (reads.id_by_prefix). Raises MemoryNotFound
        when none does, InvalidInput when several do."""
        try:
            self._store_holding(memory_id)
            return memory_id
        except MemoryNotFound:
            return id_by_prefix(self._stores("all"), memory_id)

    def get(self, memory_id: str) -> Memory:
        return self._store_holding(memory_id).get(memory_id)

    def get_many(self, memory_ids: Iterable[str]) -> dict[str, Memory]:
        """{id: Memory} for those of `memory_ids` the project or the global store holds (any status;
        ids held by neither are left out): one query a store, the global store only for ids the
        project store does not hold."""
        rest = list(dict.fromkeys(memory_ids))
        found: dict[str, Memory] = {}
        if rest:
            found = self._held_by(self.store, rest)
            rest = [i for i in rest if i not in found]
        for store in self._stores("all")[1:] if rest else []:
            found.update(self._held_by(store, rest))
        return found

    @staticmethod
    def _held_by(store: Store, memory_ids: list[str]) -> dict[str, Memory]:
        seqs = store.seqs_of(memory_ids)
        return {m.id: m for m in store.by_seqs(list(seqs.values())).values()}

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
        include_cold: bool = False,
        scope: str | None = None,
        query_vector: np.ndarray | None = None,
        ranking: RankingConfig | None = None,
        use_vectors: bool = True,
    ) -> list[Hit]:
        """Hybrid recall: the k best memories for `query` among those the filters admit.

        as_of: valid time (what was true then); known_at: transaction time (what the store knew
        then); since/until bound valid_from. include_cold: also memories demoted to the cold tier
        (an as_of read always includes them). Times: ISO 8601 or epoch ms. k and scope default to the
        config's `recall.k` and `recall.scope`. query_vector:
        float32[dim], L2-normalised, when the caller already has it (a warm process); otherwise the
        query is embedded here unless use_vectors is False (keyword-only).
        Hits whose only evidence is a vector cosine at or below VECTOR_FLOOR are left out: no filler.
        Raises InvalidMemory (empty query, one over MAX_QUERY_CHARS, unknown kind or scope), InvalidTime.
        """
        check_query(query)
        k = self.config["recall"]["k"] if k is None else int(k)
        scope = self.config["recall"]["scope"] if scope is None else scope
        filters = read_filters(kinds=kinds, tags=tags, as_of=as_of, known_at=known_at, since=since, until=until,
                               include_superseded=include_superseded, include_cold=include_cold)
        stores = self._stores(scope)
        if query_vector is None and use_vectors and any(s.vector_index for s in stores):
            vectors = self.embed([query], query=True)
            query_vector = None if vectors is None else vectors[0]
        if query_vector is not None:
            for store in stores:
                if store.vector_index:
                    self._claim_space(store, record=False)
        hits: list[Hit] = []
        for store in stores:
            ranked = rank(store, query, query_vector, filters, k, ranking or self.ranking)
            hits += [h for h in ranked if relevant(h)]
        hits.sort(key=lambda h: (-h.score, h.memory.id))
        return hits[:k]

    def list(
        self, *, kinds: Iterable[str] = (), tags: Iterable[str] = (), as_of: Any = None, known_at: Any = None,
        include_superseded: bool = False, limit: int | None = None, scope: str | None = None,
        order: Order = Order.NEWEST, include_cold: bool = False,
    ) -> list[Memory]:
        """Memories matching the filters, in `order` (newest first by default). limit and scope
        default to the config's `list.limit` and `list.scope`. include_cold: also memories in the
        cold tier (an as_of read always includes them). Raises InvalidMemory, InvalidTime."""
        limit = self.config["list"]["limit"] if limit is None else int(limit)
        scope = self.config["list"]["scope"] if scope is None else scope
        try:
            order = Order(order)
        except ValueError:
            expected = ", ".join(o.value for o in Order)
            raise InvalidMemory(f"unknown order {order!r}; expected one of: {expected}") from None
        filters = read_filters(kinds=kinds, tags=tags, as_of=as_of, known_at=known_at,
                               include_superseded=include_superseded, include_cold=include_cold)
        out: list[Memory] = []
        for store in self._stores(scope):
            out += store.memories(filters, limit=limit, order=order)
        return out[:limit]

    def counts(self) -> dict[str, int]:
        """The project store's counts: current (warm: what the hooks and default recall see), cold
        (current but demoted to the cold tier), superseded, forgotten, total, awaiting_embedding."""
        return self.store.counts()

    def topics(self, *, tags: int = 8) -> dict[str, Any]:
        """What the project store holds, for a map of it: {"kinds": {kind: current count},
        "tags": [(tag, current count)], the `tags` most used first}."""
        kinds, top = self.store.current_kinds_and_tags(tags)
        return {"kinds": kinds, "tags": top}

    def term_counts(self, terms: Iterable[str]) -> tuple[int, dict[str, int]]:
        """Document frequencies in the project store: (live memories keyword-indexed, {term: how many
        of them contain it}). A term is one quoted phrase as text.fts_query writes it ('"flag"'),
        stemmed as the index is. For an IDF of a prompt's words (context.py)."""
        return self.store.term_counts(list(terms))

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
        loaded = self.embedder is not None and self.embedder.loaded
        reasons = [r for r in (store.vector_unavailable, self.embedder_error) if r]
        return Status(
            store=store.name, path=str(store.path if self.exists else self.choice.path),
            chosen_by=self.choice.reason,
            project_root=str(self.choice.project_root) if self.choice.project_root else None,
            schema_version=store.schema_version(), counts=store.counts(), bytes=store.file_size() if self.exists else 0,
            vector_backend=store.vector_index.name if store.vector_index else None,
            embedding_model=model, store_embedding_model=store.get_meta("embedding_model"), model_loaded=loaded,
            keyword_only=bool(reasons) or self.embedder is None, keyword_only_reason="; ".join(reasons) or None,
            sessions=store.session_totals(), usage=store.usage_totals(),
        )

    # -- memory usage ----------------------------------------------------------------------------------
    def record_injected(self, memory_ids: Iterable[str], *, at: int | None = None) -> int:
        """Count one injection into a session's context (a hook's brief or per-prompt context) for
        each memory id (the project and the global store). at: epoch ms, default now. Ids of no
        memory are ignored. Returns how many were counted."""
        return self._record_usage(memory_ids, "injected", at)

    def record_cited(self, memory_ids: Iterable[str], *, at: int | None = None) -> int:
        """Count one citation ([mem:ID] in the assistant's reply) for each memory id, as
        record_injected. Returns how many were counted."""
        return self._record_usage(memory_ids, "cited", at)

    def _record_usage(self, memory_ids: Iterable[str], column: str, at: int | None) -> int:
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return 0
        when = now_ms() if at is None else int(at)
        return sum(store.record_usage(ids, column=column, at=when) for store in self._stores("all"))

    def usage(self, memory_id: str) -> dict[str, int | None]:
        """How a memory was used: {"injected", "cited" (counts), "last_injected_at", "last_cited_at"
        (epoch ms or None)}; zeros for a memory never injected. Raises MemoryNotFound."""
        store = self._store_holding(memory_id)
        return store.usage([memory_id]).get(memory_id) or {"injected": 0, "cited": 0, "last_injected_at": None,
                                                            "last_cited_at": None}

    def usage_of(self, memory_ids: Iterable[str]) -> dict[str, dict[str, int | None]]:
        """usage() of many memories of the project store at once: {id: counts} for the ids ever
        injected or cited (others are left out: zeros)."""
        return self.store.usage(builtins.list(dict.fromkeys(memory_ids)))

    def most_cited(self, limit: int) -> builtins.list[str]:
        """Ids of the project store's `limit` most cited memories (any status), most cited first."""
        return self.store.most_cited(limit) if limit > 0 else []

    def reset_usage(self, memory_ids: Iterable[str] | None = None) -> int:
        """Forget how often memories were injected and cited (the learning from use: briefs and
        per-prompt recall start afresh for them). memory_ids None: every memory of the project store.
        Returns how many memories had counts."""
        return self.store.reset_usage(None if memory_ids is None else builtins.list(memory_ids))

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

    def import_(self, source: IO[bytes], *, progress: Progress = no_progress) -> dict[str, int]:
        """Read JSON Lines written by `export` (bytes, strict UTF-8), validated by the same rules as
        `remember` (records.parse_record). All or nothing: any bad line raises InvalidImport naming
        the line and each of its problems, and nothing is written. Memories whose id exists are
        skipped. Into a store on Postgres, `<private>` spans and secrets are scrubbed as `remember`
        does (a text that was all private arrives forgotten). Imported memories are embedded
        afterwards. Returns {"imported", "skipped"}."""
        rows, _ = scrubbed_rows(self.store, parse_export_lines(source))
        imported, skipped = self.store.import_rows(rows)
        self._embed_all_backlog(progress)
        return {"imported": imported, "skipped": skipped}

    def _embed_all_backlog(self, progress: Progress) -> None:
        total = self.store.counts()["awaiting_embedding"]
        batch = self.config["embedding"]["batch_size"] * 8
        for _ in progress(range(0, total, batch), (total + batch - 1) // batch):
            if self.flush_backlog(batch) == 0:
                break

    def reembed(self, *, progress: Progress = no_progress) -> int:
        """Re-embed every live memory with the configured model, replacing the vector index and the
        store's recorded fingerprint; every captured turn's vector is dropped and queued (search
        finds the turns by keyword until `memory.sessions.embed_backlog` embeds them, as the next
        capture does). Returns how many memories were embedded. Raises EmbedderUnavailable."""
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
        # Captured turns' old vectors are in the old model's space: none may meet the new ones.
        store.requeue_turn_vectors()
        return len(rows)


__all__ = ["Draft", "Engine", "SCOPES"]
