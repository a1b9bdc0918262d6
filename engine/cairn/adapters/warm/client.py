"""The client side of the warm process (service.py): where its socket is, and how to ask it.

A hook process asks the warm process on every prompt, so what this module imports on that path is
the hook's latency: only `os` and `sys` at import, and when asking, the C halves of the standard
library's socket and json modules (`_socket`, `_json`; the pure-Python `socket` and `json` pull in
enum, selectors and re, about 25 ms on a busy 2-core machine). Where those are missing (another
Python implementation, no Unix sockets) it falls back to the public modules. Everything else
(subprocess, pathlib, base64, the engine) is imported inside the functions that need it. The warm
process is per user and per data root: one Unix socket in a private (0700) folder, so there are no
ports to collide and no other user can connect.

Where the socket is depends on the environment (XDG_RUNTIME_DIR or TMPDIR, and the data root's
CAIRN_HOME): every function takes `environ`, the calling process's environment, which its
composition root passes (the hook process, the CLI, the MCP server, the warm process); `_environ`
is the one default, this process's, for a caller that gives none.
"""

import os
import sys

from cairn import data_root_dir

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing on the hook's path
if TYPE_CHECKING:
    import subprocess
    from pathlib import Path
    from typing import Any

    from collections.abc import Mapping

    from _hashlib import HASH
    from _socket import socket as Socket

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # engine/cairn
PROTOCOL = 5  # 5: a request names its package folder ("package"), not its code_version
POLL_SECONDS = 0.2  # how often a client waiting for the warm process looks again
# How long a client keeps waiting for a warm process that is still loading the model it needs (its
# status file says so): beyond the usual wait, since loading it in the client repeats the same
# attempt. huggingface_hub retries an unreachable host 5 times with backoff per file (about 25 s
# each; 90 s seen for one model at load 5); Cairn's choice, above that.
LOADING_PATIENCE_SECONDS = 300.0
SERVICE_MODULE = "cairn.adapters.warm.service"  # `python -m` this to run the warm process
# The hook environment a hook forwards with its event (and the warm process accepts).
HOOK_ENV_KEYS = ("CLAUDE_PROJECT_DIR", "CAIRN_STORE", "CAIRN_PAUSE", "CAIRN_CONFIG", "CLAUDE_PLUGIN_ROOT",
                 "CLAUDE_PLUGIN_DATA",
                 # where Claude Code's own memory is and whether it is on (claude_memory.native_memory)
                 "HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_DISABLE_AUTO_MEMORY", "CLAUDE_CODE_SIMPLE")
# CLI commands the warm process answers itself (op "cli"), so the CLI process stays light.
CLI_OPS = ("recall",)


def answering_env(environ: "Mapping[str, str]", hook_env: "Mapping[str, str]") -> "dict[str, str]":
    """The environment a hook's request is answered in: `environ`, the answering process's (the
    data root, CAIRN_POSTGRES_URL, XDG_CONFIG_HOME: the hook reached this process by its data
    root), without the hook's variables (HOOK_ENV_KEYS), then `hook_env`, the hook's own (one the
    hook has unset stays unset, whatever the answering process was started with)."""
    return {**{k: v for k, v in environ.items() if k not in HOOK_ENV_KEYS}, **hook_env}


def _environ(environ: "Mapping[str, str] | None") -> "Mapping[str, str]":
    """`environ`, else this process's environment: the client's one read of it."""
    return os.environ if environ is None else environ


def _sha256(data: bytes) -> "HASH":
    try:
        from _sha256 import sha256  # CPython 3.11 (hashlib would load OpenSSL: ~5 ms)
    except ImportError:
        try:
            from _sha2 import sha256  # CPython 3.12+
        except ImportError:
            from hashlib import sha256
    return sha256(data)


def temp_dir(environ: "Mapping[str, str] | None" = None) -> str:
    """tempfile.gettempdir() without importing tempfile (random, shutil, ...): the first of $TMPDIR,
    $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp and the working directory that is a folder this user can
    write in, made absolute."""
    if os.name != "posix":
        import tempfile

        return tempfile.gettempdir()
    environ = _environ(environ)
    candidates = [environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    for folder in [*filter(None, candidates), "/tmp", "/var/tmp", "/usr/tmp", os.curdir]:
        if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
            return folder if folder == os.curdir else os.path.abspath(folder)
    return os.path.abspath(os.curdir)


def runtime_dir_name(environ: "Mapping[str, str] | None" = None) -> str:
    """A short private folder for the socket and lock (Unix socket paths are limited to ~104 bytes)."""
    environ = _environ(environ)
    base = environ.get("XDG_RUNTIME_DIR") or temp_dir(environ)
    uid = os.getuid() if hasattr(os, "getuid") else os.getlogin()
    return os.path.join(base, f"cairn-{uid}")


def runtime_dir(environ: "Mapping[str, str] | None" = None) -> "Path":
    """runtime_dir_name() as a Path."""
    from pathlib import Path

    return Path(runtime_dir_name(environ))


def private_runtime_dir(environ: "Mapping[str, str] | None" = None) -> "Path":
    """The runtime folder, created 0700 (tightened if it exists): only this user reaches the socket."""
    path = runtime_dir(environ)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != 0o700:
        path.chmod(0o700)
    return path


def _key(environ: "Mapping[str, str]") -> str:
    return _sha256(os.path.realpath(data_root_dir(environ)).encode()).hexdigest()[:12]


def socket_file(environ: "Mapping[str, str] | None" = None) -> str:
    environ = _environ(environ)
    return os.path.join(runtime_dir_name(environ), f"{_key(environ)}.sock")


def socket_path(environ: "Mapping[str, str] | None" = None) -> "Path":
    """socket_file() as a Path."""
    from pathlib import Path

    return Path(socket_file(environ))


def lock_path(environ: "Mapping[str, str] | None" = None) -> "Path":
    from pathlib import Path

    environ = _environ(environ)
    return Path(runtime_dir_name(environ)) / f"{_key(environ)}.lock"


def status_path(environ: "Mapping[str, str] | None" = None) -> "Path":
    """The warm process's status file: {"pid", "state": "loading" | "ready" | "failed", "model": the
    model it loads (model, backend, device, batch size), "error" when failed, "at": epoch seconds}.
    A waiting client reads it when the process is gone, to learn why without reading its log."""
    from pathlib import Path

    environ = _environ(environ)
    return Path(runtime_dir_name(environ)) / f"{_key(environ)}.status"


def write_status(state: str, *, model: list | None = None, error: str | None = None,
                 environ: "Mapping[str, str] | None" = None) -> None:
    """Replace the status file (atomically: a reader never sees half of it). Errors are ignored: the
    status only speeds up a client's fallback, which the process's exit alone also triggers."""
    import json
    import time

    path = status_path(environ)
    temporary = path.with_name(f"{path.name}.{os.getpid()}")
    try:
        temporary.write_text(json.dumps({"pid": os.getpid(), "state": state, "model": model, "error": error,
                                         "at": time.time()}))
        os.replace(temporary, path)
    except OSError:
        pass


def read_status(environ: "Mapping[str, str] | None" = None) -> dict | None:
    """The status file's content (see status_path), or None when there is none or it is unreadable."""
    import json

    try:
        status = json.loads(status_path(environ).read_text())
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def _source_files(package_dir: str) -> tuple[list[str], list[str]]:
    """(the folders, the .py files) of the package at `package_dir`, __pycache__ left out."""
    folders, files = [], []
    for folder, dirs, names in os.walk(package_dir):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        folders.append(folder)
        files += [os.path.join(folder, name) for name in names if name.endswith(".py")]
    return folders, sorted(files)


def code_version(package_dir: str = PACKAGE_DIR) -> str:
    """Fingerprint of the engine's source files (names, sizes, mtimes) at `package_dir` (default:
    this one's): a warm process running older code is replaced. The warm process computes it for
    the package a request names (`CodeVersions`); a client sends only its package's folder."""
    digest = _sha256(str(PROTOCOL).encode())
    for path in _source_files(package_dir)[1]:
        stat = os.stat(path)
        digest.update(f"{os.path.relpath(path, package_dir)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:16]


class CodeVersions:
    """code_version per package folder, for the warm process, which checks the one each request
    names: a folder's fingerprint is kept with the stat of each of its folders and source files,
    and given again while none of those changed. A file added, removed or renamed changes its
    folder's mtime, one rewritten in place its own size or mtime, so an edit or a plugin update is
    seen on the very next request, as when every request walked and hashed the package. Checking
    costs a stat per folder and file (~0.2 ms for ~80 files) where the walk cost the hook process
    ~4 ms with its imports. Thread-safe."""

    def __init__(self, max_entries: int = 8):
        import threading

        self.max_entries = max_entries
        self._entries: dict[str, tuple[list[str], list[str], tuple, str]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _stamp(folders: list[str], files: list[str]) -> tuple:
        """The mtime of each folder, and the size and mtime of each file. Raises OSError."""
        return (*(os.stat(path).st_mtime_ns for path in folders),
                *((stat.st_size, stat.st_mtime_ns) for stat in map(os.stat, files)))

    def version(self, package_dir: str) -> str | None:
        """code_version(package_dir), or None when it is not a folder or cannot be read."""
        package_dir = os.path.realpath(package_dir)
        with self._lock:
            entry = self._entries.get(package_dir)
        if entry is not None:
            folders, files, stamp, version = entry
            try:
                if self._stamp(folders, files) == stamp:
                    return version
            except OSError:  # a file or folder went away: walk again
                pass
        if not os.path.isdir(package_dir):
            return None
        try:
            # The stamp is taken before the fingerprint: a change in between makes the next
            # request's stamp differ, so it is computed again rather than served stale.
            folders, files = _source_files(package_dir)
            stamp = self._stamp(folders, files)
            version = code_version(package_dir)
        except OSError:
            return None
        with self._lock:
            self._entries.pop(package_dir, None)
            self._entries[package_dir] = (folders, files, stamp, version)
            while len(self._entries) > self.max_entries:
                del self._entries[next(iter(self._entries))]
        return version


def _unix_socket_api() -> "tuple[type[Socket], int, int] | None":
    """(socket class, AF_UNIX, SOCK_STREAM), or None where there are no Unix sockets."""
    try:
        from _socket import AF_UNIX, SOCK_STREAM, socket
    except ImportError:
        try:
            from socket import AF_UNIX, SOCK_STREAM
            from socket import socket as public_socket
        except ImportError:
            return None
        return public_socket, AF_UNIX, SOCK_STREAM
    return socket, AF_UNIX, SOCK_STREAM


def exchange(line: bytes, *, timeout: float = 1.0, environ: "Mapping[str, str] | None" = None) -> bytes | None:
    """Send one request line to the warm process and read its reply line; None if it is not there
    (no socket, refused, timed out)."""
    api = _unix_socket_api()
    path = socket_file(environ)
    if api is None or not os.path.exists(path):
        return None
    socket, family, kind = api
    conn = socket(family, kind)
    chunks = []
    try:
        conn.settimeout(timeout)
        conn.connect(path)
        conn.sendall(line)
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    except OSError:
        return None
    finally:
        conn.close()
    return b"".join(chunks)


def request(payload: dict, *, timeout: float = 1.0, errors: bool = False,
            environ: "Mapping[str, str] | None" = None) -> dict | None:
    """Send one JSON request to the warm process; its JSON reply, or None if it is not there.
    errors: return an error reply ({"ok": false, "error": ...}) too, rather than None."""
    import json

    raw = exchange(json.dumps({**payload, "package": PACKAGE_DIR}).encode() + b"\n", timeout=timeout,
                   environ=environ)
    if raw is None:
        return None
    try:
        reply = json.loads(raw or b"null")
    except ValueError:
        return None
    return reply if isinstance(reply, dict) and (reply.get("ok") or errors) else None


class _Decoding:
    """The settings `_json.make_scanner` reads from a json.JSONDecoder: json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity


def loads(text: str) -> "Any":
    """json.loads for one JSON value, through `_json`'s scanner (json itself imports re). Raises
    ValueError."""
    try:
        from _json import make_scanner
    except ImportError:
        import json

        return json.loads(text)
    text = text.strip(" \t\r\n")
    try:
        # typeshed types the context as a make_scanner; the C scanner reads the attributes of any
        # object (json.decoder passes a JSONDecoder), as its own TODO says.
        value, end = make_scanner(_Decoding())(text, 0)  # type: ignore[arg-type]
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(text):
        raise ValueError("extra data after the JSON value")
    return value


def json_string(text: str) -> str:
    """A JSON string literal (ASCII), as json.dumps(text) writes it."""
    try:
        from _json import encode_basestring_ascii
    except ImportError:
        from json import dumps as encode_basestring_ascii
    return encode_basestring_ascii(text)


def hook_request(event: str, payload_json: str, env: dict, *, timeout: float = 1.0,
                 environ: "Mapping[str, str] | None" = None) -> dict | None:
    """Ask the warm process to handle a hook event: {"ok": true, "output": ..., "stdout": "<the
    hook's JSON output>" or ""}, or None if it is not there. payload_json: the hook's stdin, a JSON
    object, forwarded without decoding it here (the warm process decodes it; a bad one is an error
    reply, so None). env: the hook's HOOK_ENV_KEYS. environ: the hook process's environment."""
    body = payload_json.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return None
    # A raw line break in JSON text is whitespace (inside a string it is escaped): one request line.
    body = body.replace("\r", " ").replace("\n", " ")
    env_json = ", ".join(f"{json_string(k)}: {json_string(v)}" for k, v in env.items() if k in HOOK_ENV_KEYS)
    line = (f'{{"op": "hook", "event": {json_string(event)}, "env": {{{env_json}}}, '
            f'"package": {json_string(PACKAGE_DIR)}, "payload": {body}}}\n')
    raw = exchange(line.encode("utf-8", "surrogatepass"), timeout=timeout, environ=environ)
    if raw is None:
        return None
    try:
        reply = loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return reply if isinstance(reply, dict) and reply.get("ok") else None


def is_running(environ: "Mapping[str, str] | None" = None) -> bool:
    """True when a warm process holds the lock (it may still be loading its model)."""
    if not hasattr(os, "getuid"):
        return False
    import fcntl

    try:
        lock = lock_path(environ)
        if not lock.exists():
            return False
        with open(lock, "a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.flock(handle, fcntl.LOCK_UN)
            return False
    except OSError:
        return False


def spawn(python: str | None = None, *, environ: "Mapping[str, str] | None" = None) -> "subprocess.Popen[bytes] | None":
    """Start the warm process in the background unless one is running or starting. Returns the
    started process (a subprocess.Popen), or None when it started none. Never waits for the model
    to load. environ: the starting process's environment, which the warm process inherits."""
    environ = _environ(environ)
    if _unix_socket_api() is None or is_running(environ):
        return None
    import subprocess

    from cairn import data_root, private_dir, private_file

    private_runtime_dir(environ)
    log_dir = private_dir(data_root(environ) / "logs", environ)
    env = {**environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.dirname(PACKAGE_DIR),
                                                                    environ.get("PYTHONPATH")]))}
    with open(private_file(log_dir / "service.log"), "ab") as log:
        return subprocess.Popen(
            [python or sys.executable, "-m", SERVICE_MODULE], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            env=env, cwd=runtime_dir_name(environ), start_new_session=True, close_fds=True,
        )


def last_error(environ: "Mapping[str, str] | None" = None) -> str | None:
    """The warm process's last logged error ("cannot load the embedding model: ..."), from the end
    of <data root>/logs/service.log; None if there is none."""
    from cairn import data_root

    try:
        with open(data_root(environ) / "logs" / "service.log", "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 8192))
            tail = log.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    errors = [line.split("cairn.service: ", 1)[-1] for line in tail if "cannot " in line or "Error" in line]
    return errors[-1] if errors else None


def decode_vectors(reply: dict) -> list[bytes]:
    """float32 bytes, one item per embedded text."""
    import base64

    return [base64.b64decode(v) for v in reply["vectors"]]


def encode_vector(raw: bytes) -> str:
    import base64

    return base64.b64encode(raw).decode("ascii")


def model_key(embedding: dict) -> list:
    """What names a loaded model in the warm process: [model, backend, device, batch size]."""
    return [str(embedding.get("model")), str(embedding.get("backend", "auto")), str(embedding.get("device", "cpu")),
            int(embedding.get("batch_size", 32))]


def load_failure(model: list, *, pid: int | None = None, since: float = 0.0,
                 environ: "Mapping[str, str] | None" = None) -> str | None:
    """Why the warm process failed to load this model (model_key), from its status file: the process
    `pid`, or any that failed at `since` (epoch seconds) or later. None when the status says nothing
    about that (another model, another process, not failed)."""
    status = read_status(environ)
    if not status or status.get("state") != "failed" or status.get("model") != model:
        return None
    if (pid is not None and status.get("pid") == pid) or float(status.get("at") or 0) >= since:
        return str(status.get("error") or "the warm process could not load the embedding model")
    return None


def still_loading(model: list, *, environ: "Mapping[str, str] | None" = None) -> bool:
    """Whether a live warm process is loading this model (model_key) now, by its status file."""
    status = read_status(environ) or {}
    if status.get("state") != "loading" or status.get("model") != model or not is_running(environ):
        return False
    try:
        os.kill(int(status["pid"]), 0)
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return True


def wait_until_ready(seconds: float, *, process: "subprocess.Popen[bytes] | None" = None,
                     watch_lock: bool = False, environ: "Mapping[str, str] | None" = None) -> bool:
    """Poll (every POLL_SECONDS) until the warm process answers (True), or `seconds` pass (False).
    Gives up at once (False) when the process is known to be gone or failing: its status file says
    it failed (status_path; written before it exits, so the wait does not include its exit), or
    `process` (what spawn() returned) has exited while no other warm process runs, or, with
    watch_lock, the running one has let go of its lock."""
    import time

    since = time.time()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if request({"op": "ping"}, timeout=1.0, environ=environ) is not None:
            return True
        status = read_status(environ) or {}
        if status.get("state") == "failed" and (
                (process is not None and status.get("pid") == process.pid) or float(status.get("at") or 0) >= since):
            return False
        if process is not None and process.poll() is not None:
            # It exits at once, with 0, when another warm process holds the lock: wait for that one.
            if process.returncode != 0 or not is_running(environ):
                return False
            process, watch_lock = None, True
        elif watch_lock and not is_running(environ):
            return request({"op": "ping"}, timeout=1.0, environ=environ) is not None
        time.sleep(POLL_SECONDS)
    return False
