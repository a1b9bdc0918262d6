"""Claude Code hook events, handled with the engine: what to inject at SessionStart and on each prompt.

The same `handle` runs in the warm process (with the embedding model, for hybrid recall) and, when
that is not ready, in the hook process itself (keyword-only; see hook.py). It never raises for a
missing store: a project with no memories gets nothing injected.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import (
    BROKEN_STORE_ERRORS, CairnError, ConfigError, Resolved, StoreBusy, cited_ids, data_root, is_trivial,
    private_dir, private_file, prompt_context, required_extra, resolve, session_brief, write_private,
)

if TYPE_CHECKING:
    from cairn import Cairn, Check, Embedder

log = logging.getLogger(__name__)

DISABLE_MARKER = ".cairn-disable"  # a file at a project's root: no injection in that project
COMPACT_SHARE = 2  # after compaction, a brief of 1/2 the budget: the summary kept the gist
# A hook's whole budget (hooks/hooks.json: 5 s for a prompt, 10 s at session start) must hold even
# when another process keeps the store locked: wait this long for a lock, then fail open.
HOOK_BUSY_TIMEOUT_MS = 1000
SESSION_START = "SessionStart"
STORE_BROKEN = ("Cairn memory: this project's memory store cannot be used, so nothing was recalled. "
                "Tell the user to run `cairn doctor` in a terminal to check and repair it.")
CONFIG_BROKEN = "Cairn memory is off in this project until its configuration is fixed: {error}"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
CAPTURE_EVENTS = ("Stop", "PreCompact")  # events that capture the new part of the session's transcript


def paused_marker(session_id: str) -> Path:
    safe = "".join(c for c in session_id if c.isalnum() or c in "-_")[:100] or "unknown"
    return data_root() / "paused" / safe


def set_paused(session_id: str, paused: bool) -> None:
    marker = paused_marker(session_id)
    if paused:
        private_dir(marker.parent)
        private_file(marker)
    else:
        marker.unlink(missing_ok=True)


def _project_dir(payload: dict[str, Any], env: dict[str, str]) -> Path:
    # The session's project, fixed for the whole session: a `cd` never switches stores.
    return Path(env.get("CLAUDE_PROJECT_DIR") or payload.get("cwd") or os.getcwd())


def _disabled(root: Path | None, config: dict[str, Any], env: dict[str, str], session_id: str) -> str | None:
    if env.get("CAIRN_PAUSE", "").lower() in ("1", "true", "yes", "on"):
        return "CAIRN_PAUSE is set"
    if session_id and paused_marker(session_id).exists():
        return "paused for this session"
    if root is not None and (root / DISABLE_MARKER).exists():
        return f"{DISABLE_MARKER} in {root}"
    if not config["hooks"]["enabled"]:
        return "hooks.enabled is false"
    return None


class SessionState:
    """What this session's context already holds: the digest of the last brief and the ids of the
    memories injected since the context was last cleared or compacted; and `uncounted`, the ids
    injected (once per injection) whose injection the store has not counted yet: the capture at
    Stop counts them, so a hook never writes to the store; and `loaded`, the cached ids of
    memories Claude Code loads by itself (CLAUDE.md, rules, MEMORY.md) with the files' signature.
    Kept in
    <data root>/sessions/<session id>.json, written atomically; a missing or unreadable file is a
    fresh session."""

    def __init__(self, session_id: str):
        self.path = (data_root() / "sessions" / f"{paused_marker(session_id).name}.json") if session_id else None
        self.brief: str | None = None
        self.injected: list[str] = []
        self.uncounted: list[str] = []
        # What Claude Code loads by itself, cached (claude_memory.already_loaded's `cache`).
        self.loaded: dict[str, Any] = {}
        if self.path is not None:
            try:
                data = json.loads(self.path.read_text())
                self.brief = data.get("brief")
                self.loaded = data.get("loaded") if isinstance(data.get("loaded"), dict) else {}
                self.injected = [str(i) for i in data.get("injected", [])]
                self.uncounted = [str(i) for i in data.get("uncounted", [])]
            except (OSError, ValueError, AttributeError):
                pass

    def save(self) -> None:
        if self.path is None:
            return
        write_private(self.path, json.dumps({"brief": self.brief, "injected": self.injected[-500:],
                                             "uncounted": self.uncounted[-2000:], "loaded": self.loaded}).encode())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def handle(event: str, payload: dict[str, Any], env: dict[str, str], *, embedder: Embedder | None = None,
           embedder_for: Callable[[dict[str, Any]], Embedder | None] | None = None,
           open_memory: Callable[[Resolved, Embedder | None], Cairn] | None = None,
           resolver: Callable[..., Resolved] = resolve,
           timings: dict[str, float] | None = None) -> dict[str, Any] | None:
    """The hook's JSON output for `event`, or None to inject nothing.

    payload: the hook's stdin JSON. env: the hook's environment (CLAUDE_PROJECT_DIR, CAIRN_STORE,
    CAIRN_PAUSE ...). embedder: a loaded Embedder for hybrid recall, or None for keyword-only;
    embedder_for(config): instead, the loaded embedder for this project's config, or None (the warm
    process, which may hold several models). open_memory(resolved, embedder): an opener that may
    reuse open stores (the warm process keeps them open);
    by default each call opens and closes the store. The store and config are resolved once here,
    by `resolver` (cairn.resolve's signature; the warm process passes a ResolveCache's). timings:
    filled with the milliseconds each step took (resolve, open, embed, recall), when given.
    Raises whatever the engine raises; the caller fails open.
    """
    from cairn import Cairn

    clock = _Clock(timings)
    session_id = str(payload.get("session_id") or "")
    try:
        resolved = resolver(None, cwd=_project_dir(payload, env), env=env)
    except ConfigError as exc:
        # A bad config turns memory off: say so once, at session start, to the user (a prompt fails
        # open silently; the caller logs it), as for a broken store.
        if event != SESSION_START:
            raise
        log.error("%s: %s", event, exc)
        return {"systemMessage": CONFIG_BROKEN.format(error=exc)}
    choice, config = resolved.choice, resolved.config
    reason = _disabled(choice.project_root, config, env, session_id)
    clock.lap("resolve")
    if reason:
        log.info("%s: nothing injected (%s)", event, reason)
        return None
    notice = _runtime_notice(config, env) if event == SESSION_START else None
    if not resolved.store_exists:
        missing = resolved.missing()
        if missing is not None:  # CAIRN_STORE names a store that does not exist: say so (in the log)
            raise missing
        # No memories yet; do not create a store just by starting a session. The user's global
        # store (preferences for every project) is still briefed, when there is one.
        if event == SESSION_START and config["claude_memory"]["sync"]:
            from .claude_memory_sync import sync_at_session_start  # the first sync creates the store
            sync_at_session_start(None, _project_dir(payload, env), env,
                                  store_name=choice.name if choice.explicit else None)
        glob = resolved.global_instead() if event == SESSION_START else None
        if glob is None:
            return {"systemMessage": notice} if notice else None
        resolved, embedder, embedder_for, global_only = glob, None, None, True  # a brief needs no model
    else:
        global_only = False
    if embedder_for is not None:
        embedder = embedder_for(config)
    try:
        if open_memory is not None:
            memory = open_memory(resolved, embedder)
            clock.lap("open")
            text = _respond(memory, event, payload, config, embedder, clock, global_only=global_only, env=env)
        else:
            with Cairn.open(resolved=resolved, embedder=embedder, busy_timeout_ms=HOOK_BUSY_TIMEOUT_MS) as memory:
                clock.lap("open")
                text = _respond(memory, event, payload, config, embedder, clock, global_only=global_only, env=env)
    except StoreBusy:
        raise  # locked, not broken (`cairn doctor` would find nothing): fail open; the caller logs it
    except BROKEN_STORE_ERRORS as exc:
        # A broken store costs nothing on the healthy path: only a failure gets here. The session
        # start says so once, in one line; a prompt fails open silently (the caller logs it).
        if event != SESSION_START:
            raise
        if global_only:  # the project has no store to be broken; the global one is left out
            log.error("%s: the global store cannot be used: %s", event, exc)
            return {"systemMessage": notice} if notice else None
        log.error("%s: the store %s cannot be used: %s", event, choice.name, exc)
        text = STORE_BROKEN
    if not text and not notice:
        return None
    out: dict[str, Any] = {"systemMessage": notice} if notice else {}
    if text:
        out["hookSpecificOutput"] = {"hookEventName": event, "additionalContext": text}
    return out


def _runtime_notice(config: dict[str, Any], env: dict[str, str]) -> str | None:
    """In the plugin, when the project's model needs an optional backend the runtime lacks: start
    its install in the background (hooks/bootstrap.py extra NAME; never inside the hook's budget)
    and say so to the user, once per session start. None otherwise."""
    emb = config["embedding"]
    extra = required_extra(emb["model"], emb["backend"]) if emb["enabled"] else None
    root, data = env.get("CLAUDE_PLUGIN_ROOT"), env.get("CLAUDE_PLUGIN_DATA")
    if extra is None or not root or not data:
        return None
    import subprocess
    import sys

    bootstrap = Path(root) / "hooks" / "bootstrap.py"
    out = subprocess.run([sys.executable, str(bootstrap), "extra", extra], capture_output=True, text=True,
                         env={**os.environ, "CLAUDE_PLUGIN_DATA": data}, timeout=10)
    status = out.stdout.strip() or f"cannot start the install ({out.stderr.strip()[-200:]})"
    return f"Cairn: embedding model {emb['model']} needs {extra}: {status} Until then memory is keyword-only."


class _Clock:
    """Milliseconds per step into `timings` (a no-op without one)."""

    def __init__(self, timings: dict[str, float] | None):
        self.timings, self.last = timings, time.perf_counter()

    def lap(self, step: str) -> None:
        if self.timings is not None:
            now = time.perf_counter()
            self.timings[step] = self.timings.get(step, 0.0) + 1000 * (now - self.last)
            self.last = now


def _already_loaded(memory: Cairn, payload: dict[str, Any], env: dict[str, str] | None,
                    state: SessionState) -> frozenset[str]:
    """The ids of memories Claude Code itself loads into this session (claude_memory.already_loaded,
    its text matches cached in the session's state); empty when they cannot be found out (a hook
    fails open: injecting twice beats injecting nothing)."""
    from .claude_loaded import already_loaded

    env = dict(os.environ) if env is None else env
    try:
        return frozenset(already_loaded(memory, _project_dir(payload, env), env, cache=state.loaded))
    except (CairnError, OSError) as exc:
        log.warning("what Claude Code already loaded is unknown: %s", exc)
        return frozenset()


def _respond(memory: Cairn, event: str, payload: dict[str, Any], config: dict[str, Any],
             embedder: Embedder | None, clock: _Clock | None = None, *, global_only: bool = False,
             env: dict[str, str] | None = None) -> str | None:
    clock = clock or _Clock(None)
    hooks = config["hooks"]
    state = SessionState(str(payload.get("session_id") or ""))
    clock.lap("session state")
    if event == SESSION_START:
        source = payload.get("source", "startup")
        budget = hooks["brief_chars"] // (COMPACT_SHARE if source == "compact" else 1)
        loaded = _already_loaded(memory, payload, env, state)
        clock.lap("already loaded")
        text = session_brief(memory, budget=budget, global_only=global_only, exclude=loaded)
        clock.lap("brief")
        if config["claude_memory"]["sync"] and not global_only:
            from .claude_memory_sync import sync_at_session_start

            hook_env = dict(os.environ) if env is None else env
            sync_at_session_start(memory, _project_dir(payload, hook_env), hook_env,
                                  store_name=memory.name if memory.choice.explicit else None)
            clock.lap("claude memory sync")
        if source == "resume":
            if text is None or state.brief == _digest(text):
                return None  # the transcript already holds this brief
            state.injected += [i for i in cited_ids(text) if i not in state.injected]
        else:  # startup, clear, compact: the context holds nothing of ours but this brief
            state.injected = cited_ids(text)
        state.brief = _digest(text) if text else None
        state.uncounted += cited_ids(text)
        state.save()
        if config["maintenance"]["background"]:
            start_background_maintenance(memory)
        return text
    if event == USER_PROMPT_SUBMIT:
        prompt = str(payload.get("prompt") or "")
        if is_trivial(prompt):
            return None
        vector = None
        if embedder is not None:
            vectors = memory.embed([prompt[:2000]], query=True)
            vector = None if vectors is None else vectors[0]
        clock.lap("embed")
        # A memory already in the session's context (the brief, an earlier prompt) is not injected
        # again; a changed fact has a new id, so it is.
        # Nor is one Claude Code loaded itself (CLAUDE.md, rules, its auto memory's index).
        cached = dict(state.loaded)
        loaded = _already_loaded(memory, payload, env, state)
        clock.lap("already loaded")
        text = prompt_context(memory, prompt, k=hooks["prompt_k"], budget=hooks["prompt_chars"],
                              query_vector=vector, exclude=frozenset(state.injected) | loaded)
        clock.lap("recall")
        if state.loaded != cached and not text:
            state.save()
        if text:
            state.injected += cited_ids(text)
            state.uncounted += cited_ids(text)
            state.save()
            clock.lap("session state")
        return text
    return None


def start_background_maintenance(memory: Cairn) -> bool:
    """Config maintenance.background (off by default): when the store had no maintenance run within
    maintenance.stale_days, start `cairn maintain --apply --safe-only` for it in a detached process
    (only exact duplicates are retired; nothing else changes without a review). Returns whether one
    was started. Never raises: a hook fails open (errors go to the hook log)."""
    import subprocess
    import sys

    try:
        if not memory.maintenance_status()["stale"]:
            return False
        engine_dir = str(Path(__file__).resolve().parents[2])  # engine/cairn/adapters/claude.py -> engine
        env = {**os.environ, "PYTHONPATH": engine_dir, "CAIRN_NO_WARM": "1"}
        subprocess.Popen([sys.executable, "-P", "-m", "cairn", "maintain", "--apply", "--safe-only", "--store",
                          memory.name], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
        log.info("started a background maintenance run of store %s", memory.name)
        return True
    except (CairnError, OSError) as exc:
        log.warning("background maintenance of %s not started: %s", memory.name, exc)
        return False


def _count_usage(memory: Cairn, session_id: str, cited: list[str]) -> int:
    """At capture: count the injections this session's hooks made since the last capture, and the
    citations ([mem:ID] in the new assistant turns) of memories injected into this session.
    Returns how many citations were counted. The state is re-read just before it is written, and
    only the ids counted are taken off it, so a hook saving it meanwhile loses nothing but in
    that narrow window (counts are best effort; the context is what matters)."""
    state = SessionState(session_id)
    uncounted = list(state.uncounted)
    if uncounted:
        memory.record_injected(uncounted)
    injected = set(state.injected) | set(uncounted)
    counted = memory.record_cited([i for i in cited if i in injected]) if cited and injected else 0
    if uncounted:
        fresh = SessionState(session_id)
        fresh.uncounted = fresh.uncounted[len(uncounted):] if fresh.uncounted[:len(uncounted)] == uncounted \
            else [i for i in fresh.uncounted if i not in set(uncounted)]
        fresh.save()
    return counted


@contextlib.contextmanager
def _capture_lock(session_id: str) -> Iterator[None]:
    """One capture of a session at a time (an exclusive lock on a file per session, waited for):
    Stop hooks fired while a long capture runs then read only what it left, instead of each
    scrubbing and embedding the same turns again (they would be dropped as duplicates)."""
    try:
        import fcntl
    except ImportError:  # not Unix: the uuids still keep captures idempotent
        yield
        return
    folder = private_dir(data_root() / "capture-locks")
    with open(private_file(folder / f"{_digest(session_id)}.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def capture(payload: dict[str, Any], env: dict[str, str], *, embedder: Embedder | None = None,
            embedder_for: Callable[[dict[str, Any]], Embedder | None] | None = None) -> dict[str, Any] | None:
    """Capture the part of the session's transcript (payload `transcript_path`) not read yet into the
    project's store (Cairn.ingest_transcript), then embed turns still waiting for a vector. Nothing
    when capture is off: the per-session pause, CAIRN_PAUSE, the project's .cairn-disable,
    hooks.enabled or sessions.capture false. The injections this session's hooks made since the
    last capture are counted (Cairn.record_injected), and so are the memories injected into this
    session that the new assistant turns cite as [mem:ID] (Cairn.record_cited). Returns the
    ingestion's counts, or None when nothing was done. The log gets counts, never text. Raises
    whatever the engine raises; the caller fails open."""
    from cairn import Cairn

    session_id = str(payload.get("session_id") or "")
    path = payload.get("transcript_path")
    if not session_id or not isinstance(path, str) or not Path(path).is_file():
        return None
    resolved = resolve(None, cwd=_project_dir(payload, env), env=env)
    choice, config = resolved.choice, resolved.config
    reason = _disabled(choice.project_root, config, env, session_id)
    if reason is None and not config["sessions"]["capture"]:
        reason = "sessions.capture is false"
    if reason:
        log.info("capture: nothing captured (%s)", reason)
        return None
    if embedder_for is not None:
        embedder = embedder_for(config)
    with _capture_lock(session_id), Cairn.open(resolved=resolved, embedder=embedder) as memory:
        done = memory.ingest_transcript(path, session_id=session_id)
        cited = _count_usage(memory, session_id, done["cited"])
        if embedder is not None:
            while memory.flush_turn_backlog(256):
                pass
    log.info("capture %s: %d turns added, skipped %s, redacted %s, %d private spans, %d injected memories cited",
             session_id, done["turns_added"], done["skipped"], done["redactions"], done["private_spans"], cited)
    return done


# Cairn's MCP tools that write a memory, as Claude Code names them ("mcp__<server>__<tool>"; the
# plugin's server is "plugin_cairn_cairn", one added by hand usually "cairn").
WRITE_TOOLS = ("memory_remember", "memory_replace")


def _writes_tool(name: object) -> bool:
    parts = name.split("__") if isinstance(name, str) else []
    return len(parts) == 3 and parts[0] == "mcp" and "cairn" in parts[1] and parts[2] in WRITE_TOOLS


def _tool_json(content: object) -> dict[str, Any]:
    """A tool result's JSON object (its text, or its text parts joined; the SDK may wrap it as
    {"result": "<json>"}), or {} when it is not one."""
    text = content if isinstance(content, str) else "".join(
        b.get("text", "") for b in content if isinstance(b, dict)) if isinstance(content, list) else ""
    try:
        data = json.loads(text)
        if isinstance(data, dict) and set(data) == {"result"} and isinstance(data["result"], str):
            data = json.loads(data["result"])
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def session_writes(path: str | Path) -> list[str]:
    """The ids of the memories a Claude Code session created through Cairn's MCP tools
    (memory_remember, memory_replace answered "created"), read from its transcript (JSON Lines:
    an assistant line's tool_use block, a user line's tool_result block with its tool_use_id), in
    order. Lines that are not such JSON are skipped. Raises OSError when the file cannot be read."""
    calls: set[str] = set()
    out: list[str] = []
    with open(path, "rb") as handle:
        for raw in handle:
            if b'"tool_' not in raw:
                continue
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            message = line.get("message") if isinstance(line, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and _writes_tool(block.get("name")):
                    calls.add(str(block.get("id")))
                elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) in calls:
                    data = _tool_json(block.get("content"))
                    if data.get("status") == "created" and isinstance(data.get("id"), str):
                        out.append(data["id"])
    return list(dict.fromkeys(out))


def settle_session(payload: dict[str, Any], env: dict[str, str]) -> dict[str, Any] | None:
    """SessionEnd: queue for review what the session's writes left unresolved (Cairn.settle on the
    memories its transcript shows Cairn's MCP tools created: a possible change the model did not
    resolve with memory_replace is the user's to judge). Nothing when the transcript is missing or
    the project has no store. Returns Cairn.settle's answer, or None. The log gets counts, never
    text. Raises whatever the engine raises; the caller fails open."""
    from cairn import Cairn

    session_id = str(payload.get("session_id") or "")
    path = payload.get("transcript_path")
    if not session_id or not isinstance(path, str) or not Path(path).is_file():
        return None
    written = session_writes(path)
    if not written:
        return None
    resolved = resolve(None, cwd=_project_dir(payload, env), env=env)
    if not resolved.store_exists:
        return None
    with Cairn.open(resolved=resolved, embedder=None) as memory:
        done = memory.settle(written)
    log.info("session end %s: %d writes (%d still current), %d proposals queued for review", session_id,
             len(written), done["checked"], len(done["queued"]))
    return done


def claude_dir(env: dict[str, str] | None = None) -> Path:
    """Claude Code's user folder: $CLAUDE_CONFIG_DIR, else ~/.claude."""
    base = (os.environ if env is None else env).get("CLAUDE_CONFIG_DIR")
    return Path(base) if base else Path.home() / ".claude"


def claude_projects_root(root: str | Path | None = None, env: dict[str, str] | None = None) -> Path:
    """Where Claude Code keeps transcripts: `root`, else $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects."""
    return Path(root) if root is not None else claude_dir(env) / "projects"


SESSION_END = "SessionEnd"  # the session's unresolved writes are queued for review (settle_session)
HOOK_EVENTS = (SESSION_START, USER_PROMPT_SUBMIT, *CAPTURE_EVENTS, SESSION_END)  # what hooks/hooks.json registers


def settings_project(cwd: Path) -> Path:
    """The folder whose .claude/ Claude Code reads for a session started in `cwd`: the nearest
    ancestor holding .claude or .git (the repository's top level), else `cwd`."""
    cwd = cwd.resolve()
    return next((p for p in (cwd, *cwd.parents) if (p / ".claude").is_dir() or (p / ".git").exists()), cwd)


def hook_events_check(log: Path) -> Check:
    """`cairn doctor`'s "hook events": whether hooks.log (`log`; its last 256 KB) records a hook run
    for an event Cairn does not answer (a typo in a hooks configuration turns memory off silently
    otherwise). "warn", with the names."""
    from cairn import Check

    from .hook import UNKNOWN_EVENT

    try:
        with open(log, "rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - 262_144))
            tail = handle.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return Check("hook events", "ok", "no hook has logged an unknown event")
    except OSError as exc:
        return Check("hook events", "warn", f"cannot read {log}: {exc.strerror or exc}")
    names = sorted({line.split(UNKNOWN_EVENT, 1)[1].split(":", 1)[0].strip() for line in tail.splitlines()
                    if UNKNOWN_EVENT in line})
    if not names:
        return Check("hook events", "ok", "no hook has logged an unknown event")
    return Check("hook events", "warn", f"hooks ran for {', '.join(names)}, which Cairn does not answer "
                 f"(see {log})", "fix the event names in your hooks configuration (hooks/hooks.json lists "
                 "Cairn's); Claude Code's names are case-sensitive")


def hooks_check(project: Path | None, env: dict[str, str] | None = None) -> Check:
    """`cairn doctor`'s "hooks registered": whether Claude Code runs Cairn's hooks for `project`.

    Claude Code records an installed plugin as `enabledPlugins: {"cairn@<marketplace>": true}` in the
    user's settings.json, the project's .claude/settings.json or .claude/settings.local.json (a later
    file overrides an earlier one), and copies it to plugins/cache/<marketplace>/cairn/<version>/,
    whose hooks/hooks.json must register HOOK_EVENTS. Hooks written into a settings file by hand
    (a command running cairn-hook or `cairn hook`) count too. "warn", never "fail": the CLI and the
    MCP server work without the hooks; only the automatic brief, recall and capture are missing."""
    from cairn import Check  # not at the top: the keyword-only hook imports this module, not cairn.health
    home = claude_dir(env)
    files = [home / "settings.json"]
    if project is not None:
        files += [project / ".claude" / "settings.json", project / ".claude" / "settings.local.json"]
    enabled: dict[str, tuple[bool, Path]] = {}
    manual: set[str] = set()
    unreadable = []
    for path in files:
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            unreadable.append(f"{path} ({exc.__class__.__name__})")
            continue
        if not isinstance(settings, dict):
            continue
        plugins = settings.get("enabledPlugins")
        for key, value in (plugins.items() if isinstance(plugins, dict) else ()):
            if isinstance(key, str) and key.split("@")[0] == "cairn":
                enabled[key] = (value is True, path)
        hooks = settings.get("hooks")
        for event, entries in (hooks.items() if isinstance(hooks, dict) else ()):
            if "cairn-hook" in json.dumps(entries) or "cairn hook" in json.dumps(entries):
                manual.add(event)
    problems = "; ".join(f"cannot read {u}" for u in unreadable)
    on = sorted(key for key, (value, _) in enabled.items() if value)
    install = "in Claude Code: `/plugin marketplace add <this repository>` then `/plugin install cairn@cairn`"
    if not on and not manual:
        off = [f"{key} is disabled in {path}" for key, (value, path) in enabled.items() if not value]
        detail = "; ".join(off) or "Claude Code has no Cairn plugin enabled for this project"
        return Check("hooks registered", "warn", detail + (f"; {problems}" if problems else ""),
                     "enable it with `/plugin` in Claude Code" if off else install)
    if manual and not on:
        missing = [e for e in (SESSION_START, USER_PROMPT_SUBMIT) if e not in manual]
        return Check("hooks registered", "warn" if missing else "ok",
                     f"hooks set in a settings file: {', '.join(sorted(manual))}",
                     f"add {', '.join(missing)} (see hooks/hooks.json)" if missing else None)
    found = []
    for key in on:
        marketplace = key.partition("@")[2]
        for hooks_json in sorted((home / "plugins" / "cache" / marketplace / "cairn").glob("*/hooks/hooks.json")):
            try:
                events = json.loads(hooks_json.read_text(encoding="utf-8")).get("hooks", {})
            except (OSError, ValueError, AttributeError):
                continue
            found.append((hooks_json.parent.parent.name, [e for e in HOOK_EVENTS if e not in events]))
    if not found:
        return Check("hooks registered", "ok", f"{', '.join(on)} enabled (its files are not in Claude Code's "
                     "plugin cache: loaded with --plugin-dir?)")
    version, missing = found[-1]
    if missing:
        return Check("hooks registered", "warn", f"{', '.join(on)} {version} does not register {', '.join(missing)}",
                     "update the plugin: `/plugin update cairn`")
    return Check("hooks registered", "ok", f"{', '.join(on)} {version}: {', '.join(HOOK_EVENTS)}"
                 + (f"; {problems}" if problems else ""))


def encoded_project(path: Path) -> str:
    """Claude Code's folder name for a project: its absolute path, every character but a letter or digit as '-'."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in str(path))


def _recorded_cwd(folder: Path) -> str | None:
    """The working directory the first transcript in `folder` records (its lines carry `cwd`)."""
    for path in sorted(folder.glob("*.jsonl")):
        try:
            with open(path, "rb") as handle:
                for raw in handle:
                    try:
                        cwd = json.loads(raw).get("cwd")
                    except (ValueError, AttributeError):
                        continue
                    if isinstance(cwd, str) and cwd:
                        return cwd
        except OSError:
            continue
    return None


def import_claude_transcripts(memory: Cairn, *, root: str | Path | None = None, all_projects: bool = False,
                              progress: Callable | None = None) -> dict[str, Any]:
    """`cairn import-sessions`: this project's Claude Code transcripts into `memory` (its store), or
    with all_projects every project folder's into the store of the project its transcripts record
    (a folder whose project no longer exists is counted under skipped["project folder gone"]).
    Returns Cairn.import_transcripts' totals summed, with "projects"."""
    from collections import Counter

    from cairn import Cairn as Engine

    base = claude_projects_root(root)
    totals: dict[str, Any] = {"projects": 0, "files": 0, "turns_added": 0, "skipped": Counter(),
                              "redactions": Counter(), "private_spans": 0}

    def add(done: dict[str, Any]) -> None:
        totals["projects"] += 1
        for key in ("files", "turns_added", "private_spans"):
            totals[key] += done[key]
        totals["skipped"].update(done["skipped"])
        totals["redactions"].update(done["redactions"])

    kwargs = {"progress": progress} if progress is not None else {}
    if not all_projects:
        project = memory.choice.project_root or Path.cwd()
        folder = base / encoded_project(Path(project).resolve())
        if folder.is_dir():
            add(memory.import_transcripts(folder, **kwargs))
    else:
        for folder in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
            cwd = _recorded_cwd(folder)
            if cwd is None or not Path(cwd).is_dir():
                totals["skipped"]["project folder gone"] += 1
                continue
            resolved = resolve(None, cwd=Path(cwd))
            if str(resolved.choice.path) == memory.status().path:
                add(memory.import_transcripts(folder, **kwargs))
                continue
            with Engine.open(resolved=resolved, embedder=memory.embedder) as other:
                add(other.import_transcripts(folder, **kwargs))
    totals.update(skipped=dict(totals["skipped"]), redactions=dict(totals["redactions"]))
    return totals
