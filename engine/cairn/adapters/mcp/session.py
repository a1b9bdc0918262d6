"""One MCP server's hold on the engine: the store opened lazily, calls serialised, the model warmed.

The store is opened on first use and, while opening fails (a CAIRN_STORE naming a missing store, a
corrupted file, a bad config), on every later call again: fixing the cause needs no restart, and
each tool answers with the reason in the meantime. Calls run on the SDK's worker threads, and one
engine (one SQLite connection) must not interleave transactions, so every call holds one lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from cairn import Cairn, CairnError, Embedder, EmbedderUnavailable, Resolved, process_env, resolve

from ..warm.embedders import GatedEmbedder, session_embedder

log = logging.getLogger("cairn.mcp")

T = TypeVar("T")

MODEL_WAIT_S = 2.0
"""How long a call needing vectors waits for the model's warm-up before it goes on keyword-only (a
write is then embedded later, from the backlog): the first call is answered within seconds whatever
the model's state (loading, slow machine, a configured model that cannot load)."""


class Unavailable(Exception):
    """The store cannot be opened; the message says why and what to do. `cause`: the CairnError
    that said so (None for an unexpected failure), for adapters that map errors to codes."""

    def __init__(self, message: str, cause: Exception | None = None):
        super().__init__(message)
        self.cause = cause


NO_PROJECT = ("cannot tell which project this is: the MCP server was started in the Cairn plugin's own folder "
              "without CLAUDE_PROJECT_DIR. Set CLAUDE_PROJECT_DIR to the project's folder (or CAIRN_STORE to a "
              "store name) in the server's environment; no store is used until then")


def shared_embedder(config: dict[str, Any], environ: Mapping[str, str] | None = None) -> Any:
    """The embedder a session process should use for a project with this config: through the
    per-user warm process (cairn.adapters.warm.client), which loads the model once per machine and falls
    back to loading it in-process; in-process only when CAIRN_NO_WARM=1 (in `environ`, the server's
    environment; default cairn.process_env()). None when the config disables embedding."""
    environ = process_env() if environ is None else environ
    if environ.get("CAIRN_NO_WARM") == "1":
        from cairn import embedder_from_config

        return embedder_from_config(config)
    return session_embedder(config, environ=environ)


class Session:
    """The engine for one project folder, opened on first use and shared by all tool calls.

    project_dir None: the project is unknown; every call raises Unavailable (NO_PROJECT) unless
    CAIRN_STORE names a store."""

    def __init__(self, project_dir: Path | None, embedder_for: Callable[[dict[str, Any]], Any] | None = None,
                 store: str | None = None, *, defer_review: bool = False, environ: Mapping[str, str] | None = None):
        """store: a store name chosen explicitly (`--store`); None picks as everywhere else
        (CAIRN_STORE, else the project of `project_dir`). defer_review: the engine's (Cairn.
        defer_review): a write's possible conflicts wait for the session's end (the plugin, whose
        SessionEnd hook settles them) rather than join the review queue at once. environ: the
        server's environment (its CAIRN_STORE, CAIRN_CONFIG, CAIRN_NO_WARM; default
        cairn.process_env()). embedder_for: the embedder for a config (default: shared_embedder)."""
        self.project_dir = project_dir
        self.store_name = store
        self.defer_review = defer_review
        self.environ = process_env() if environ is None else environ
        self._name: str | None = None
        self._embedder_for = embedder_for or (lambda config: shared_embedder(config, self.environ))
        self._engine: Cairn | None = None
        self._placeholder_for: Resolved | None = None  # the store an empty read-only engine stands for
        self._embedder: Embedder | None = None  # the engine's, ungated (the warm-up loads it)
        self._lock = threading.RLock()
        self._warm_lock = threading.Lock()  # never the engine lock: the event loop takes this one
        self._warm_thread: threading.Thread | None = None
        self._warmed = threading.Event()
        self.warm_state = "not started"  # not started | loading | ready | keyword-only | failed

    # -- the engine ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The name of the store this session uses (resolved once). Raises InvalidStoreName, ConfigError."""
        if self._name is None:
            self._name = self._resolve().choice.name
        return self._name

    def _open(self, *, write: bool = True) -> Cairn:
        """The open engine. Call with the lock held. Raises Unavailable.

        write: the call may write. A project store that does not exist yet is created only by a
        write; reads meanwhile get an empty read-only engine, replaced by the real store as soon as
        it exists (another process wrote) or a write needs it."""
        if self._engine is not None and self._engine.stale:  # deleted or restored: open the path again
            log.info("the store file was deleted or replaced; reopening it")
            self._engine.close()
            self._engine = None
        if self._engine is not None and not self._engine.exists and (write or self._placeholder_ends()):
            self._engine.close()
            self._engine = None
        if self._engine is not None:
            return self._engine
        try:
            # Resolved once for the session: the store, its config, and the embedder for that config
            # (not loaded yet), passed in at open.
            resolved = self._resolve()
            self._embedder = self._embedder_for(resolved.config)
            # The engine embeds only once the warm-up has loaded the model (_ready_to_embed).
            gated = None if self._embedder is None else GatedEmbedder(
                self._embedder, self._ready_to_embed, is_loaded=lambda: self.warm_state == "ready")
            read_only = not write and not resolved.store_exists
            self._engine = Cairn.open(resolved=resolved, embedder=gated, read_only=read_only)
            # hooks.enabled false: no SessionEnd hook settles the writes, so they are queued at once.
            self._engine.defer_review = self.defer_review and resolved.config["hooks"]["enabled"]
            self._placeholder_for = resolved if read_only else None
        except Unavailable:
            raise
        except CairnError as exc:
            raise Unavailable(str(exc), exc) from None
        except Exception as exc:  # an unreadable folder, a broken SQLite binding: still say what
            log.exception("cannot open the memory store")
            raise Unavailable(f"cannot open the memory store: {type(exc).__name__}: {exc}") from None
        log.info("store %s (%s)", self._engine.name, self._engine.choice.reason)
        return self._engine

    def _placeholder_ends(self) -> bool:
        """Whether the store the read-only placeholder stands for exists now (one stat)."""
        return self._placeholder_for is not None and self._placeholder_for.store_exists

    def call(self, fn: Callable[[Cairn], T], *, embeds: bool = False, writes: bool = True) -> T:
        """Run fn(engine) alone. embeds: fn needs the model, so first wait (at most MODEL_WAIT_S) for
        the warm-up, without holding the engine (memory_status must still answer meanwhile).
        writes: fn may write (only a write creates the project's store; see _open).
        Raises Unavailable, or what fn raises."""
        if embeds and self.warm_state != "ready":
            self.start_warmup()
            self._warmed.wait(MODEL_WAIT_S)
        with self._lock:
            return fn(self._open(write=writes))

    def try_call(self, fn: Callable[[Cairn], T], timeout: float) -> T | None:
        """Like call, but None if another call holds the engine for longer than `timeout` seconds
        (e.g. a first recall waiting for the model): status must answer while that happens."""
        if not self._lock.acquire(timeout=timeout):
            return None
        try:
            return fn(self._open(write=False))
        finally:
            self._lock.release()

    def close(self, timeout: float = 1.0) -> None:
        """Close the store unless a call still holds it (the process is about to exit anyway)."""
        if self._lock.acquire(timeout=timeout):
            try:
                if self._engine is not None:
                    self._engine.close()
                    self._engine = None
            finally:
                self._lock.release()

    # -- warming the model ------------------------------------------------------------------------
    def _ready_to_embed(self) -> None:
        """Before each embed the engine makes: until the warm-up has loaded the model, start it and
        raise EmbedderUnavailable, which the engine turns into keyword-only recall and an embedding
        backlog."""
        if self.warm_state != "ready":  # Session.call(embeds=True) has already waited for it
            self.start_warmup()
            raise EmbedderUnavailable(f"the embedding model is not ready ({self.warm_state}); keyword-only "
                                      "until it is")

    def start_warmup(self) -> None:
        """Load the embedding model in a daemon thread, once. Never blocks the caller."""
        if self._warm_thread is not None or self.warm_state == "no project":
            return
        if self.project_dir is None and self.store_name is None and not self.environ.get("CAIRN_STORE"):
            self.warm_state = "no project"  # nothing to serve: no model to load
            return
        with self._warm_lock:
            if self._warm_thread is not None:
                return
            # numpy first, on this thread: the warm-up and a tool call importing it at once can see a
            # partially initialised numpy (an ImportError that left the server keyword-only for good).
            import numpy  # noqa: F401

            self._warm_thread = threading.Thread(target=self._warm, name="cairn-warmup", daemon=True)
            self.warm_state = "loading"
            self._warm_thread.start()

    def _warm(self) -> None:
        try:
            self.warm_state = self._load_model()
        except Exception as exc:
            self.warm_state = "failed"
            log.exception("warming the embedding model failed: %s", exc)
        finally:
            self._warmed.set()
        if self.warm_state != "ready":
            return
        if not self._store_exists():
            return  # no store, so no backlog
        try:  # memories written while no model was available get their vectors now, in batches
            for _ in range(10_000):  # bounded: a backlog row that never clears must not spin forever
                if self.call(lambda e: e.flush_backlog()) == 0:
                    break
        except Exception:
            log.exception("embedding the backlog failed")

    def _resolve(self) -> Resolved:
        """Raises Unavailable when the project is unknown, CairnError from resolve."""
        if self.project_dir is None and self.store_name is None and not self.environ.get("CAIRN_STORE"):
            raise Unavailable(NO_PROJECT)
        return resolve(self.store_name, cwd=self.project_dir, env=self.environ)

    def _store_exists(self) -> bool:
        try:
            return self._resolve().store_exists
        except Unavailable:
            return False
        except CairnError:
            return True  # let opening report the bad name or config

    def _warm_without_store(self) -> str:
        """Warm the model without opening the store: opening creates a project's store, and a
        session that never writes must leave none behind."""
        embedder = self._embedder_for(self._resolve().config)
        if embedder is None:
            return "keyword-only"
        embedder.embed(["warm-up"])
        return "ready"

    def _load_model(self) -> str:
        started = time.monotonic()
        if self._engine is None and not self._store_exists():
            state = self._warm_without_store()
            log.info("embedding model %s in %.1f s (no store yet)", state, time.monotonic() - started)
            return state
        try:
            engine = self.call(lambda e: e, writes=False)
        except Unavailable as exc:
            log.warning("not warming the model: %s", exc)
            return "failed"
        if engine.embedder is None or self._embedder is None:
            return "keyword-only"
        # Outside the engine lock: loading takes seconds and the embedder has its own lock.
        try:
            self._embedder.embed(["warm-up"])
        except EmbedderUnavailable as exc:
            log.warning("keyword-only: %s", exc)
            return "keyword-only"
        log.info("embedding model ready in %.1f s", time.monotonic() - started)
        return "ready"
