"""The warm process's runtime: the embedding models it holds, the stores it keeps open and the
resolutions it caches; what a hook asks of it (claude.hooks.HookRuntime), and the CLI's recall.

Apart from the socket server (service.py), so that it can be held to the same contract as the hook
process's own runtime (claude.hooks.InProcessRuntime) in tests/adapters/test_hook_runtime.py.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import Embedder, ResolveCache, Resolved, embedder_from_config, process_env, required_extra

from . import client as warm

if TYPE_CHECKING:
    from cairn import Cairn

log = logging.getLogger("cairn.service")


def model_key(embedding: dict[str, Any]) -> tuple[str, str, str, int]:
    """What names a loaded model here: (model, backend, device, batch size) (client.model_key)."""
    return tuple(warm.model_key(embedding))


class WarmRuntime:
    """The models, open stores and cached resolutions of the warm process. config: the user-level
    config, whose model `embedder` is (loaded by the caller; it answers `embed` requests that name
    no model). environ: the warm process's environment (default: cairn.process_env()), which the
    processes a hook starts inherit. Thread-safe: `lock` is held by the caller for a whole request
    that uses the open stores (their connections serve one request at a time)."""

    def __init__(self, config: dict[str, Any], embedder: Embedder, environ: Mapping[str, str] | None = None):
        self.environ = process_env() if environ is None else environ
        self.default_key = model_key(config["embedding"])
        self.embedders: dict[tuple[str, str, str, int], Embedder] = {self.default_key: embedder}
        self.embedders_lock = threading.Lock()
        self.stores: dict[tuple[str, ...], Cairn] = {}  # open Cairn per (store file, config, model); reads stay fresh
        self.lock = threading.Lock()  # held for a whole request that uses the open stores
        self.resolver = ResolveCache()  # store and config per project, re-resolved when they change

    @property
    def embedder(self) -> Embedder:
        """The user-level config's model."""
        return self.embedders[self.default_key]

    # -- HookRuntime --------------------------------------------------------------------------
    def resolve(self, store: str | None = None, *, cwd: Path | None = None,
                env: Mapping[str, str] | None = None) -> Resolved:
        """As cairn.resolve, from the cache (compose.ResolveCache: re-resolved when what it read changed).
        env: the hook's variables (warm.HOOK_ENV_KEYS), answered in warm.answering_env."""
        return self.resolver.resolve(store, cwd=cwd,
                                     env=self.environ if env is None else warm.answering_env(self.environ, env))

    def embedder_for(self, config: dict[str, Any], *, wait: bool = False) -> Embedder | None:
        """The loaded embedder for this config's model. A model not loaded yet is loaded in the
        background (wait=False: None meanwhile, so a hook answers keyword-only within its budget)."""
        if not config["embedding"]["enabled"]:
            return None
        embedder = self._embedder(config, load_in_background=not wait)
        if wait:
            embedder.load()
        return embedder if embedder.loaded else None

    @contextmanager
    def memory(self, resolved: Resolved, embedder: Embedder | None) -> Iterator[Cairn]:
        """memory_for with the hook's short busy timeout (a hook's budget includes lock waits), left
        open after the request."""
        from ..claude.hooks import HOOK_BUSY_TIMEOUT_MS

        yield self.memory_for(resolved, embedder, busy_timeout_ms=HOOK_BUSY_TIMEOUT_MS)

    # -- the rest of the warm process ---------------------------------------------------------
    def model(self, embedding: dict[str, Any]) -> Embedder:
        """The embedder for these embedding settings (model, device, batch_size), loaded before it
        returns (the `embed` request). Raises EmbedderUnavailable."""
        embedder = self._embedder({"embedding": {"enabled": True, "backend": "auto", **embedding}},
                                  load_in_background=False)
        embedder.load()
        return embedder

    def _embedder(self, config: dict[str, Any], *, load_in_background: bool) -> Embedder:
        """The embedder for this config's model, whose embedding is enabled: made on first use (and
        then, load_in_background: loaded in a thread), loaded or not."""
        key = model_key(config["embedding"])
        with self.embedders_lock:
            embedder = self.embedders.get(key)
            if embedder is not None and embedder.error and required_extra(config["embedding"]["model"],
                                                                          config["embedding"]["backend"]) is None:
                embedder = None  # it failed for want of an optional backend, installed since: try again
            if embedder is None:
                made = embedder_from_config(config, threads=1)
                assert made is not None  # embedding is enabled (the callers check)
                embedder = self.embedders[key] = made
                if load_in_background:
                    threading.Thread(target=self._load, args=(embedder,), daemon=True).start()
        return embedder

    @staticmethod
    def _load(embedder: Embedder) -> None:
        try:
            embedder.load()
            log.info("model %s loaded", embedder.model_name)
        except Exception as exc:
            log.error("cannot load embedding model: %s", exc)

    def memory_for(self, resolved: Resolved, embedder: Embedder | None, *, busy_timeout_ms: int | None = None
                   ) -> Cairn:
        """An open engine for that project, kept open across requests. SQLite reads see every commit,
        so a memory replaced or forgotten by another process is never served from here; a store file
        deleted or replaced (a restore) is noticed on the next request (one stat) and reopened.
        busy_timeout_ms: as Cairn.open (None: the config's). The caller holds `lock`."""
        from cairn import Cairn

        key = (str(resolved.choice.path), json.dumps(resolved.config, sort_keys=True), str(id(embedder)),
               str(busy_timeout_ms))
        memory = self.stores.get(key)
        if memory is not None and memory.stale:  # deleted or restored since: never serve the old file
            log.info("store %s was deleted or replaced; reopening it", resolved.choice.path)
            self.stores.pop(key).close()
            memory = None
        if memory is None:
            memory = self.stores[key] = Cairn.open(resolved=resolved, embedder=embedder,
                                                   busy_timeout_ms=busy_timeout_ms)
            if embedder is not None:
                memory.hold_vectors()  # every prompt's k-NN from memory; kept exact by VectorCache.sync
        return memory

    def close(self) -> None:
        """Close every open store."""
        with self.lock:
            for memory in self.stores.values():
                memory.close()
            self.stores.clear()
