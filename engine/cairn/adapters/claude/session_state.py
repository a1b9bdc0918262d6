"""What a Claude Code session carries between hook runs: its pause, whether Cairn is off for it,
and its state file (what its context already holds, what is left to count).

Each lives in the data root of `environ`: the whole environment the hook is answered in (the
request's Resolved.env, an open engine's `env`; None: cairn.process_env())."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn import cited_ids, data_root, private_dir, private_file, write_private

DISABLE_MARKER = ".cairn-disable"  # a file at a project's root: no injection in that project


def paused_marker(session_id: str, environ: Mapping[str, str] | None = None) -> Path:
    """The file whose presence pauses Cairn for a session (<data root>/paused/<session id, made safe>)."""
    return data_root(env=environ) / "paused" / _safe(session_id)


def _safe(session_id: str) -> str:
    return "".join(c for c in session_id if c.isalnum() or c in "-_")[:100] or "unknown"


def set_paused(session_id: str, paused: bool, environ: Mapping[str, str] | None = None) -> None:
    """Pause Cairn for one session (/cairn:pause), or end the pause."""
    marker = paused_marker(session_id, environ)
    if paused:
        private_dir(marker.parent, env=environ)
        private_file(marker)
    else:
        marker.unlink(missing_ok=True)


def project_dir(payload: dict[str, Any], env: dict[str, str]) -> Path:
    """The session's project: $CLAUDE_PROJECT_DIR, else the payload's cwd, else this process's."""
    # Fixed for the whole session: a `cd` never switches stores.
    return Path(env.get("CLAUDE_PROJECT_DIR") or payload.get("cwd") or os.getcwd())


def disabled(root: Path | None, config: dict[str, Any], env: dict[str, str], session_id: str,
             environ: Mapping[str, str] | None = None) -> str | None:
    """Why Cairn is off for this session (CAIRN_PAUSE in the hook's `env`, the session's pause,
    DISABLE_MARKER at the project's root `root`, hooks.enabled false), or None when it is on."""
    if env.get("CAIRN_PAUSE", "").lower() in ("1", "true", "yes", "on"):
        return "CAIRN_PAUSE is set"
    if session_id and paused_marker(session_id, environ).exists():
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
    Kept in <data root>/sessions/<session id>.json, written atomically; a missing or unreadable file
    is a fresh session."""

    def __init__(self, session_id: str, environ: Mapping[str, str] | None = None):
        self.environ = environ
        self.path = (data_root(env=environ) / "sessions" / f"{_safe(session_id)}.json") if session_id else None
        self.brief: str | None = None
        self.injected: list[str] = []
        self.uncounted: list[str] = []
        # What Claude Code loads by itself, cached (claude_memory.already_loaded's `cache`).
        self.loaded: dict[str, Any] = {}
        self.tool_chars = 0  # characters injected at tool time since the context was last cleared
        self.agents: list[dict[str, str]] = []  # Agent calls' tasks waiting for their SubagentStart
        self.held: list[list[str]] = []  # [target, action] touched while the project had no store
        self.awaiting_task = False  # a subagent whose start could not tell its task (work.subagent_start)
        if self.path is not None:
            try:
                data = json.loads(self.path.read_text())
                self.brief = data.get("brief")
                self.loaded = data.get("loaded") if isinstance(data.get("loaded"), dict) else {}
                self.injected = [str(i) for i in data.get("injected", [])]
                self.uncounted = [str(i) for i in data.get("uncounted", [])]
                self.tool_chars = int(data.get("tool_chars") or 0)
                self.agents = [a for a in data.get("agents", []) if isinstance(a, dict)]
                self.held = [list(t) for t in data.get("held", []) if isinstance(t, list) and len(t) == 2]
                self.awaiting_task = data.get("awaiting_task") is True
            except (OSError, ValueError, AttributeError, TypeError):
                pass

    def record_injection(self, text: str | None) -> None:
        """The memories `text` cites are now in the context: never injected again, counted at capture."""
        ids = cited_ids(text)
        self.injected += [i for i in ids if i not in self.injected]
        self.uncounted += ids

    def save(self) -> None:
        if self.path is None:
            return
        write_private(self.path, json.dumps({"brief": self.brief, "injected": self.injected[-500:],
                                             "uncounted": self.uncounted[-2000:], "loaded": self.loaded,
                                             "tool_chars": self.tool_chars, "agents": self.agents,
                                             "held": self.held, "awaiting_task": self.awaiting_task}).encode(),
                      env=self.environ)


def digest(text: str) -> str:
    """The hex SHA-256 of `text`."""
    return hashlib.sha256(text.encode()).hexdigest()

