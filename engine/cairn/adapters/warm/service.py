"""The warm process: one per user and data root, holding the embedding models.

Hooks ask it (over a Unix socket, see client.py) to handle their event with hybrid recall, and MCP
servers ask it for embeddings, so the model (and `import sentence_transformers`, ~5 s) is paid once
per machine rather than in every hook or session. It:
- is single-instance by an exclusive lock file, so two starters cannot both bind;
- creates its socket only once the model is loaded: no socket means "not ready", and callers fall
  back to keyword-only at once;
- exits after `CAIRN_SERVICE_IDLE_SECONDS` (default 900) without a request, when asked to, or when
  a request carries another code version (a plugin update), so no stale or orphaned process stays.

`serve` is the warm process's composition root: it reads the process environment once and passes it
down (the socket's place, the user config, the runtime); a hook's own variables come with its request.

It loads the user-level model at start; a project whose config names another model gets it loaded
in the background on its first hook (that hook answers keyword-only), or at once for an embed.

Run as `python -m cairn.adapters.warm.service`.

Protocol: one JSON object per line each way.
    {"op": "ping"}                                      -> {"ok": true, "model": ..., "pid": ...}
    {"op": "embed", "texts": [str], "embedding": {model, device, batch_size}}
                                                        -> {"ok": true, "model": ..., "dim": ...,
                                                            "vectors": [base64 float32[dim]]}
    {"op": "hook", "event": str, "payload": {}, "env": {}} -> {"ok": true, "output": {...} | null,
                                                            "stdout": the hook's output line, or ""}
    {"op": "capture", "event": str, "payload": {}, "env": {}} -> {"ok": true, "queued": true}
        (Stop / PreCompact: the transcript's new part is captured by a worker thread, after the reply)
    {"op": "shutdown"}                                  -> {"ok": true}
Every request carries "package", the client's engine/cairn folder: when that code's fingerprint
(warm.code_version, checked by a stat per source file) is not this process's, it answers
{"ok": false, "error": "stale"} and exits.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import socketserver
import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

# Before numpy is imported: a product of the held vectors (Cairn.hold_vectors) with a query is
# memory-bound, and BLAS threads only contend for the cores: 9 ms with two threads against 1.6 ms
# with one, 10k x 384 on a busy 2-core machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from cairn import Embedder, EmbedderUnavailable, embedder_from_config

from . import client as warm
from .runtime import WarmRuntime

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("cairn.service")
MAX_REQUEST_BYTES = 4 * 1024 * 1024


class WarmServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    # Join request threads on close, so the reply to "shutdown" (or "stale") is sent before exit.
    daemon_threads = False
    block_on_close = True

    def __init__(self, path: str, config: dict[str, Any], embedder: Embedder, code: str, idle_seconds: float,
                 environ: Mapping[str, str]):
        self.runtime = WarmRuntime(config, embedder, environ)  # the models, open stores and resolutions (runtime.py)
        self.code = code
        self.code_versions = warm.CodeVersions()  # the fingerprint of each client's package
        self.captures: queue.Queue = queue.Queue()  # capture jobs, run one at a time by capture_worker
        threading.Thread(target=self.capture_worker, daemon=True).start()
        self.idle_seconds = idle_seconds
        self.last_request = time.monotonic()
        super().__init__(path, Handler)

    def reply(self, request: dict[str, Any]) -> dict[str, Any]:
        self.last_request = time.monotonic()
        package = request.get("package")
        if not isinstance(package, str) or self.code_versions.version(package) != self.code:
            self.stop("a request came from other code (plugin updated)")
            return {"ok": False, "error": "stale"}
        op = request.get("op")
        runtime = self.runtime
        if op == "ping":
            return {"ok": True, "model": runtime.embedder.model_name, "pid": os.getpid()}
        if op == "embed":
            texts = [str(t) for t in request.get("texts", [])]
            spec = request.get("embedding") or {}
            try:
                embedder = runtime.model(spec) if spec else runtime.embedder  # loaded once it returns
            except EmbedderUnavailable as exc:  # the client takes this as its own failure to load it
                return {"ok": False, "error": str(exc), "unavailable": True}
            embed = embedder.embed_queries if request.get("query") else embedder.embed
            vectors: np.ndarray | list[np.ndarray] = embed(texts) if texts else []
            return {"ok": True, "model": embedder.model_name, "dim": embedder.dim,
                    "fingerprint": embedder.fingerprint, "vectors": [warm.encode_vector(v.tobytes()) for v in vectors]}
        if op == "hook":
            from ..claude.hooks import handle

            env = {k: str(v) for k, v in (request.get("env") or {}).items() if k in warm.HOOK_ENV_KEYS}
            started, timings = time.perf_counter(), {}
            with runtime.lock:  # the open stores' connections serve one request at a time
                timings["wait"] = 1000 * (time.perf_counter() - started)
                output = handle(str(request.get("event")), request.get("payload") or {}, env, runtime,
                                timings=timings)
            timings["total"] = 1000 * (time.perf_counter() - started)
            # The hook prints "stdout" as it is: it need not import json to encode the output.
            return {"ok": True, "output": output, "stdout": json.dumps(output) if output else "",
                    "timings": {k: round(v, 2) for k, v in timings.items()}}
        if op == "capture":
            env = {k: str(v) for k, v in (request.get("env") or {}).items() if k in warm.HOOK_ENV_KEYS}
            # Captured in this process's environment (its data root) under the hook's variables.
            self.captures.put((request.get("payload") or {}, warm.answering_env(self.runtime.environ, env)))
            return {"ok": True, "queued": True}
        if op == "cli":
            return self.cli(request)
        if op == "shutdown":
            self.stop("asked to")
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def cli(self, request: dict[str, Any]) -> dict[str, Any]:
        """A CLI command (warm.CLI_OPS) run here, where the store is open and the model loaded:
        {"ok": true, "result": ...} or {"ok": true, "error": "..."} (the CLI's exit 2)."""
        from pathlib import Path

        from cairn import CairnError

        command, options = request.get("command"), dict(request.get("options") or {})
        if command not in warm.CLI_OPS:
            return {"ok": False, "error": f"unknown command {command!r}"}
        env = {k: str(v) for k, v in (request.get("env") or {}).items() if k in warm.HOOK_ENV_KEYS}
        runtime = self.runtime
        try:
            with runtime.lock:
                resolved = runtime.resolve(request.get("store"), cwd=Path(str(request.get("cwd") or ".")), env=env)
                if not resolved.store_exists:  # a read never creates a store
                    missing = resolved.missing()
                    if missing is not None:
                        raise missing
                    # A project with no store yet may still see the global store (scope all/global):
                    # the CLI answers that in-process, as it does with no warm process.
                    return {"ok": False, "error": "no project store: answered by the CLI"}
                try:
                    embedder = runtime.embedder_for(resolved.config, wait=True)
                except CairnError as exc:  # the project's model cannot load: keyword-only, as in-process
                    log.warning("keyword-only recall for %s: %s", resolved.choice.name, exc)
                    embedder = None
                memory = runtime.memory_for(resolved, embedder)
                options.pop("keyword_only", None)
                hits = memory.recall(str(options.pop("query", "")), **options)
                return {"ok": True, "result": [h.to_json() for h in hits]}
        except CairnError as exc:
            return {"ok": True, "error": str(exc)}

    def capture_worker(self) -> None:
        """Run queued captures one after another, each with its own store connection (not the hooks'
        shared ones, so a long capture never holds up a prompt's recall). A failure is logged."""
        from ..claude.capture import capture

        while True:
            payload, env = self.captures.get()
            try:
                capture(payload, env, embedder_for=lambda config: self.runtime.embedder_for(config, wait=True))
            except Exception:
                log.exception("capture failed")
            finally:
                self.last_request = time.monotonic()

    def stop(self, why: str) -> None:
        log.info("stopping: %s", why)
        threading.Thread(target=self.shutdown, daemon=True).start()

    def watch_idle(self) -> None:
        while True:
            time.sleep(min(5.0, self.idle_seconds))
            if time.monotonic() - self.last_request > self.idle_seconds:
                self.stop(f"idle for {self.idle_seconds:.0f} s")
                return


class Handler(socketserver.StreamRequestHandler):
    timeout = 60  # seconds; a client that connects and never sends cannot hold the process open
    server: WarmServer

    def handle(self) -> None:
        line = self.rfile.readline(MAX_REQUEST_BYTES)
        try:
            reply = self.server.reply(json.loads(line))
        except Exception as exc:  # one bad request must not take the process down
            log.exception("request failed")
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        self.wfile.write(json.dumps(reply).encode() + b"\n")


def serve() -> int:
    """Run the warm process until idle. Returns the exit status."""
    import fcntl

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s cairn.service: %(message)s")
    environ = os.environ  # the one read of this process's environment, passed down from here
    # This process's files (lock, socket, store files) are private whatever the caller's umask: the
    # socket is created by bind(), which has no mode argument.
    os.umask(0o077)
    warm.private_runtime_dir(environ)
    lock = open(warm.lock_path(environ), "a")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        log.info("another warm process is running")
        return 0
    from cairn import ConfigError, load_config

    try:
        config = load_config(env=environ)  # the user-level config
    except ConfigError as exc:
        log.error("cannot read the configuration: %s", exc)
        warm.write_status("failed", error=f"cannot read the configuration: {exc}", environ=environ)
        return 1
    # One torch thread: a one-sentence query takes ~10 ms either way on an idle machine, but with two
    # threads its p95 grew to ~700 ms while other processes used the cores (measured; docs/benchmarks.md).
    config["embedding"]["enabled"] = True  # a project may still enable it
    embedder = embedder_from_config(config, threads=1)
    assert embedder is not None  # embedding enabled just above
    model = warm.model_key(config["embedding"])
    warm.write_status("loading", model=model, environ=environ)
    started = time.monotonic()
    try:
        embedder.load()
    except Exception as exc:
        log.error("cannot load the embedding model: %s", exc)
        # Before exiting: a client waiting on this process reads why as soon as it sees it gone.
        warm.write_status("failed", model=model, error=str(exc), environ=environ)
        lock.close()  # a new warm process may start now, not after this interpreter's teardown
        return 1
    log.info("model %s loaded in %.1f s", embedder.model_name, time.monotonic() - started)
    path = warm.socket_path(environ)
    path.unlink(missing_ok=True)  # a socket left by a killed process; we hold the lock
    idle = float(environ.get("CAIRN_SERVICE_IDLE_SECONDS", "900"))
    server = WarmServer(str(path), config, embedder, warm.code_version(), idle, environ)
    os.chmod(path, 0o600)
    warm.write_status("ready", model=model, environ=environ)
    threading.Thread(target=server.watch_idle, daemon=True).start()
    log.info("listening on %s (pid %d)", path, os.getpid())
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        path.unlink(missing_ok=True)
        lock.close()
    return 0


if __name__ == "__main__":
    sys.exit(serve())
