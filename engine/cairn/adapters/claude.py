"""Claude Code hook events, handled with the engine: what to inject at SessionStart and on each prompt.

The same `handle` runs in the warm process (with the embedding model, for hybrid recall) and, when
that is not ready, in the hook process itself (keyword-only; see hook.py). It never raises for a
missing store: a project with no memories gets nothing injected.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import (
    Resolved, StoreNotFound, cited_ids, data_root, is_trivial, prompt_context, resolve, session_brief,
)

if TYPE_CHECKING:
    from cairn import Cairn, Embedder

log = logging.getLogger(__name__)

DISABLE_MARKER = ".cairn-disable"  # a file at a project's root: no injection in that project
COMPACT_SHARE = 2  # after compaction, a brief of 1/2 the budget: the summary kept the gist
# A hook's whole budget (hooks/hooks.json: 5 s for a prompt, 10 s at session start) must hold even
# when another process keeps the store locked: wait this long for a lock, then fail open.
HOOK_BUSY_TIMEOUT_MS = 1000
SESSION_START = "SessionStart"
USER_PROMPT_SUBMIT = "UserPromptSubmit"


def paused_marker(session_id: str) -> Path:
    safe = "".join(c for c in session_id if c.isalnum() or c in "-_")[:100] or "unknown"
    return data_root() / "paused" / safe


def set_paused(session_id: str, paused: bool) -> None:
    marker = paused_marker(session_id)
    if paused:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
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
    memories injected since the context was last cleared or compacted. Kept in
    <data root>/sessions/<session id>.json, written atomically; a missing or unreadable file is a
    fresh session."""

    def __init__(self, session_id: str):
        self.path = (data_root() / "sessions" / f"{paused_marker(session_id).name}.json") if session_id else None
        self.brief: str | None = None
        self.injected: list[str] = []
        if self.path is not None:
            try:
                data = json.loads(self.path.read_text())
                self.brief = data.get("brief")
                self.injected = [str(i) for i in data.get("injected", [])]
            except (OSError, ValueError, AttributeError):
                pass

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"brief": self.brief, "injected": self.injected[-500:]}))
        os.replace(tmp, self.path)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def handle(event: str, payload: dict[str, Any], env: dict[str, str], *, embedder: Embedder | None = None,
           embedder_for: Callable[[dict[str, Any]], Embedder | None] | None = None,
           open_memory: Callable[[Resolved, Embedder | None], Cairn] | None = None) -> dict[str, Any] | None:
    """The hook's JSON output for `event`, or None to inject nothing.

    payload: the hook's stdin JSON. env: the hook's environment (CLAUDE_PROJECT_DIR, CAIRN_STORE,
    CAIRN_PAUSE ...). embedder: a loaded Embedder for hybrid recall, or None for keyword-only;
    embedder_for(config): instead, the loaded embedder for this project's config, or None (the warm
    process, which may hold several models). open_memory(resolved, embedder): an opener that may
    reuse open stores (the warm process keeps them open);
    by default each call opens and closes the store. The store and config are resolved once here.
    Raises whatever the engine raises; the caller fails open.
    """
    from cairn import Cairn

    session_id = str(payload.get("session_id") or "")
    resolved = resolve(None, cwd=_project_dir(payload, env), env=env)
    choice, config = resolved.choice, resolved.config
    reason = _disabled(choice.project_root, config, env, session_id)
    if reason:
        log.info("%s: nothing injected (%s)", event, reason)
        return None
    if not choice.path.exists():
        if choice.explicit:  # CAIRN_STORE names a store that does not exist: say so (in the log)
            raise StoreNotFound(f"store {choice.name!r} (from {choice.reason}) does not exist; "
                                f"create it with `cairn stores create {choice.name}`")
        return None  # no memories yet; do not create a store just by starting a session
    if embedder_for is not None:
        embedder = embedder_for(config)
    if open_memory is not None:
        text = _respond(open_memory(resolved, embedder), event, payload, config, embedder)
    else:
        with Cairn.open(resolved=resolved, embedder=embedder, busy_timeout_ms=HOOK_BUSY_TIMEOUT_MS) as memory:
            text = _respond(memory, event, payload, config, embedder)
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _respond(memory: Cairn, event: str, payload: dict[str, Any], config: dict[str, Any],
             embedder: Embedder | None) -> str | None:
    hooks = config["hooks"]
    state = SessionState(str(payload.get("session_id") or ""))
    if event == SESSION_START:
        source = payload.get("source", "startup")
        budget = hooks["brief_chars"] // (COMPACT_SHARE if source == "compact" else 1)
        text = session_brief(memory, budget=budget)
        if source == "resume":
            if text is None or state.brief == _digest(text):
                return None  # the transcript already holds this brief
            state.injected += [i for i in cited_ids(text) if i not in state.injected]
        else:  # startup, clear, compact: the context holds nothing of ours but this brief
            state.injected = cited_ids(text)
        state.brief = _digest(text) if text else None
        state.save()
        return text
    if event == USER_PROMPT_SUBMIT:
        prompt = str(payload.get("prompt") or "")
        if is_trivial(prompt):
            return None
        vector = None
        if embedder is not None:
            vectors = memory.embed([prompt[:2000]])
            vector = None if vectors is None else vectors[0]
        # A memory already in the session's context (the brief, an earlier prompt) is not injected
        # again; a changed fact has a new id, so it is.
        text = prompt_context(memory, prompt, k=hooks["prompt_k"], budget=hooks["prompt_chars"],
                              query_vector=vector, exclude=frozenset(state.injected))
        if text:
            state.injected += cited_ids(text)
            state.save()
        return text
    return None
