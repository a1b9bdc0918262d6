"""Importing Claude Code's auto memory into Cairn, incrementally, with history; and `cairn doctor`'s
check of it. The format and the folder are auto_memory.py's."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import (
    CairnError, InvalidMemory, MemoryNotFound, NotCurrent, data_root, private_dir, private_file, process_env,
)

from .auto_memory import SOURCE, NativeFile, NativeMemory, NativeMemoryError, memory_files, native_memory, read_file

if TYPE_CHECKING:
    from cairn import Cairn, Check

log = logging.getLogger(__name__)

LOG_NAME = "claude-memory.log"  # in <data root>/logs: the background sync's log


# -- sync -------------------------------------------------------------------------------------------
def _stamp(info: os.stat_result) -> list[int]:
    return [info.st_mtime_ns, info.st_size]


def pending(memory: Cairn, native: NativeMemory) -> dict[str, list[str]]:
    """What a sync would do, from the files' stat alone (no file is read): {"new", "changed",
    "deleted"} file names. The fast path of every session start."""
    state = memory.source_state(SOURCE)
    files = state.get("files", {}) if state.get("folder") == str(native.folder) else {}
    found = memory_files(native.folder)
    out: dict[str, list[str]] = {"new": [], "changed": [], "deleted": []}
    for name, info in found.items():
        entry = files.get(name)
        if entry is None:
            out["new"].append(name)
        elif entry.get("stamp") != _stamp(info):
            out["changed"].append(name)
    out["deleted"] = [name for name in files if name not in found]
    return out


@contextlib.contextmanager
def sync_lock(memory: Cairn, *, wait: bool) -> Iterator[bool]:
    """One sync of a store at a time (an flock on a file per store). Yields whether it was taken:
    without `wait`, False at once when another sync holds it."""
    try:
        import fcntl
    except ImportError:
        yield True
        return
    folder = private_dir(data_root(env=memory.env) / "claude-memory-locks", env=memory.env)
    key = hashlib.sha256(str(memory.choice.path).encode()).hexdigest()[:32]
    with open(folder / f"{key}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sync(memory: Cairn, native: NativeMemory) -> dict[str, Any]:
    """Import what changed in the auto-memory folder since the last sync into `memory`'s store.

    A new file becomes a memory (source claude-memory, tags claude-memory and those an export
    wrote, valid from the file's modification time); an edited file's memory is replaced by its
    new text (the old one stays in its history); a deleted file's memory is retired. Each write
    goes through Cairn.remember, so secrets and <private> spans are scrubbed as for any write. A
    file whose text is already a current memory maps to that memory and never retires it.
    A file that cannot be imported (NativeMemoryError, InvalidMemory) is logged with the reason
    and skipped whole, its earlier memory left as it was; it is read again once it changes.
    Nothing is ever written into the folder. Returns counts: created, superseded, retired,
    unchanged, duplicates, failed ({file: reason}: refused now, or earlier and unchanged since)."""
    state = memory.source_state(SOURCE)
    files: dict[str, dict[str, Any]] = state.get("files", {}) if state.get("folder") == str(native.folder) else {}
    found = memory_files(native.folder)
    done: dict[str, Any] = {"folder": str(native.folder), "created": 0, "superseded": 0, "retired": 0,
                            "unchanged": 0, "duplicates": 0, "failed": {}}
    for name in sorted(found):
        entry = files.get(name)
        if entry is not None and entry.get("stamp") == _stamp(found[name]):
            if entry.get("error"):  # refused before and not changed since: the same reason holds
                done["failed"][name] = entry["error"]
            else:
                done["unchanged"] += 1
            continue
        try:
            parsed, info = read_file(native.folder, name)
            digest = hashlib.sha256(parsed.text.encode()).hexdigest()
            if entry is not None and entry.get("sha256") == digest and entry.get("id"):
                files[name] = {**entry, "stamp": _stamp(info), "mtime_ms": parsed.mtime_ms}
                done["unchanged"] += 1
                continue
            files[name] = _write(memory, parsed, entry, done) | {"stamp": _stamp(info), "sha256": digest}
        except (NativeMemoryError, InvalidMemory) as exc:
            reason = str(exc)
            log.warning("claude memory: %s not imported: %s", native.folder / name, reason)
            done["failed"][name] = reason
            kept = {k: v for k, v in (entry or {}).items() if k in ("id", "owned", "mtime_ms", "sha256")}
            files[name] = {**kept, "stamp": _stamp(found[name]), "error": reason}
        # Recorded after each write: a sync cut short resumes where it stopped.
        memory.set_source_state(SOURCE, {"folder": str(native.folder), "files": files, "synced_at": _now()})
    for name in [n for n in files if n not in found]:
        entry = files.pop(name)
        if entry.get("id") and entry.get("owned"):
            with contextlib.suppress(MemoryNotFound, NotCurrent):
                memory.retire(entry["id"])
                done["retired"] += 1
    memory.set_source_state(SOURCE, {"folder": str(native.folder), "files": files, "synced_at": _now()})
    log.info("claude memory: synced %s: %d created, %d superseded, %d retired, %d unchanged, %d failed",
             native.folder, done["created"], done["superseded"], done["retired"], done["unchanged"],
             len(done["failed"]))
    return done


def _now() -> int:
    return int(time.time() * 1000)


def _write(memory: Cairn, parsed: NativeFile, entry: dict[str, Any] | None, done: dict[str, Any]) -> dict[str, Any]:
    """Write one parsed file's memory; returns its ledger entry (id, owned, mtime_ms)."""
    old_id = entry.get("id") if entry else None
    replaces = None
    if old_id and entry and entry.get("owned"):
        with contextlib.suppress(MemoryNotFound):
            if memory.get(old_id).status == "current":
                replaces = old_id
    result = memory.remember(parsed.text, kind=parsed.kind, tags=parsed.tags, importance=parsed.importance,
                             source=SOURCE, valid_from=min(parsed.mtime_ms, _now()), replaces=replaces,
                             detect=False)
    if result.status == "duplicate" and replaces is None:
        done["duplicates"] += 1
        owned = result.memory.source == SOURCE and not _claimed(memory, result.memory.id)
    else:
        done["superseded" if replaces else "created"] += 1
        owned = True
    return {"id": result.memory.id, "owned": owned, "mtime_ms": parsed.mtime_ms}


def _claimed(memory: Cairn, memory_id: str) -> bool:
    files = memory.source_state(SOURCE).get("files", {})
    return any(e.get("id") == memory_id and e.get("owned") for e in files.values())


def start_background_sync(memory_name: str | None, project: Path, env: dict[str, str] | None = None,
                          environ: Mapping[str, str] | None = None) -> bool:
    """Run `cairn import-claude-memory` for the project in a detached process (the first sync of a
    big folder takes seconds: outside a hook's budget). env: the hook's variables; environ: this
    process's (default: cairn.process_env()), under them. Returns whether it was started; never raises."""
    import subprocess
    import sys

    engine_dir = str(Path(__file__).resolve().parents[3])  # engine/cairn/adapters/claude/auto_memory_sync.py -> engine
    # The hook's environment over this process's (the warm process serves hooks of other sessions).
    environ = process_env() if environ is None else environ
    env = {**environ, **(env or {}), "PYTHONPATH": engine_dir, "CAIRN_NO_WARM": "1"}
    argv = [sys.executable, "-P", "-m", "cairn", "-v", "import-claude-memory"]
    if memory_name:
        argv += ["--store", memory_name]
    try:
        # Its log (what was imported, each file refused and why) goes to LOG_NAME in the data root.
        with open(private_file(private_dir(data_root(environ) / "logs", environ) / LOG_NAME), "ab") as log_file:
            subprocess.Popen(argv, cwd=str(project), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=log_file, start_new_session=True)
    except OSError as exc:
        log.warning("claude memory: background sync not started: %s", exc)
        return False
    log.info("claude memory: started a background sync of %s", project)
    return True


def sync_at_session_start(memory: Cairn | None, project: Path, env: dict[str, str], *,
                          store_name: str | None = None, native: NativeMemory | None = None,
                          environ: Mapping[str, str] | None = None) -> str:
    """At SessionStart, with config claude_memory.sync on: when the auto-memory folder changed since
    the last sync (`pending`: stat only, no file read), start the sync in a detached process. The
    hook itself never writes to the store. memory: the project's open store, or None when it does not
    exist yet. store_name: passed on to the process when the store was named explicitly. Returns
    what was done ("current", "started", "no folder", "not started"); never raises. native:
    native_memory(project, env), when the caller has it already. environ: the environment of the
    process serving the hook, which the sync process inherits (default: cairn.process_env())."""
    try:
        native = native_memory(project, env) if native is None else native
        if memory is None or not memory.exists:
            if not memory_files(native.folder):
                return "no folder"
        elif not any(pending(memory, native).values()):
            return "current"
        return "started" if start_background_sync(store_name, project, env, environ) else "not started"
    except (CairnError, OSError) as exc:
        log.warning("claude memory: sync not checked: %s", exc)
        return "not started"


# -- doctor -----------------------------------------------------------------------------------------
def doctor_check(memory: Cairn | None, cwd: Path, config: dict[str, Any] | None,
                 env: dict[str, str] | None = None) -> Check:
    """`cairn doctor`'s "Claude Code auto memory": on or off for the project and why, its folder,
    and whether Cairn's sync of it is current (a Check; "warn" when files are waiting)."""
    from cairn import Check

    native = native_memory(cwd, env)
    where = f"{native.folder} ({native.setting})"
    if not native.enabled:
        return Check("Claude Code auto memory", "ok", f"off ({native.reason}); folder {where}")
    count = len(memory_files(native.folder))
    head = f"on ({native.reason}); folder {where}, {count} memory files"
    if config is not None and not config.get("claude_memory", {}).get("sync", True):
        return Check("Claude Code auto memory", "ok", f"{head}; Cairn's sync is off (claude_memory.sync)")
    if memory is None or not memory.exists:
        status = "warn" if count else "ok"
        return Check("Claude Code auto memory", status, f"{head}; not synced (no store yet)",
                     "run `cairn import-claude-memory`" if count else None)
    todo = pending(memory, native)
    waiting = sum(len(v) for v in todo.values())
    failed = {n: e["error"] for n, e in memory.source_state(SOURCE).get("files", {}).items() if e.get("error")}
    detail = f"{head}; sync current" if not waiting else (
        f"{head}; sync behind: {len(todo['new'])} new, {len(todo['changed'])} changed, "
        f"{len(todo['deleted'])} deleted")
    if failed:
        detail += "; not importable: " + "; ".join(f"{n}: {r}" for n, r in sorted(failed.items())[:5])
    return Check("Claude Code auto memory", "warn" if waiting or failed else "ok", detail,
                 "run `cairn import-claude-memory` (a session start also runs it)" if waiting else None)
