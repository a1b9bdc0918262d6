"""One hook request: what every path of a hook event (the session brief, a prompt, tool time, a
subagent's start) needs to know about the session and its project, each computed once per request.

`handle` (hooks.py) builds it at the composition root, from the hook's payload and environment and
the store and config `cairn.resolve` chose; the paths read its fields instead of working each fact
out again (before, one session start found the git root three times, read Claude Code's three
settings files twice and counted the store twice).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .session_state import SessionState, project_dir
from .work import project_root as work_root
from .work import state_key

if TYPE_CHECKING:
    from cairn import Cairn, Resolved

    from .auto_memory import NativeMemory


class HookRequest:
    """A hook event with what its handling derives from it, each derived fact computed on first
    use and kept for the rest of the request (a request is handled by one thread).

    event: the hook event (hooks.HOOK_EVENTS, or "SessionStart:rest"). payload: the hook's stdin
    JSON. env: the hook's environment (warm.HOOK_ENV_KEYS). resolved: the store and config chosen
    for the session's project (`cairn.resolve`), set by the composition root once it is known.
    environ: the environment of the process serving the hook (HookRuntime.environ), which the
    processes it starts inherit (a runtime install, a maintenance run).
    """

    def __init__(self, event: str, payload: dict[str, Any], env: dict[str, str], environ: Mapping[str, str]):
        self.event = event
        self.payload = payload
        self.env = env
        self.environ = environ
        self.session_id = str(payload.get("session_id") or "")
        self.resolved: Resolved | None = None
        self._counts: dict[str, int] | None = None

    @cached_property
    def project(self) -> Path:
        """The session's project folder: $CLAUDE_PROJECT_DIR, else the payload's cwd (session.project_dir)."""
        return project_dir(self.payload, self.env)

    @cached_property
    def root(self) -> Path:
        """The folder tool paths are taken relative to: the store's project root (its git
        toplevel, found by `resolve`), else the session's project folder (work.project_root)."""
        choice = self.resolved.choice if self.resolved is not None else None
        return work_root(choice.project_root if choice is not None else None, self.payload, self.env)

    @cached_property
    def state(self) -> SessionState:
        """The state this hook reads and writes: the session's, or a subagent's own (work.state_key),
        read from its file once."""
        return SessionState(state_key(self.payload), self.resolved.env if self.resolved is not None else self.environ)

    @cached_property
    def native(self) -> NativeMemory:
        """Where Claude Code keeps this project's auto memory and whether it is on
        (claude_memory.native_memory: the git root and three settings files, read once)."""
        from .auto_memory import native_memory

        return native_memory(self.project, self.env)

    def counts(self, memory: Cairn) -> dict[str, int]:
        """memory.counts() (Cairn.counts' keys), asked of the store once per request."""
        if self._counts is None:
            self._counts = memory.counts()
        return self._counts
