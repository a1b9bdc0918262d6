"""Claude Code hooks: `cairn hook EVENT`, and what to inject at SessionStart and on each prompt.

`hook_main` is the hook process (hooks/cairn-hook runs `python -m cairn hook EVENT`). Fail open,
fast, bounded: exit 0 always, print valid JSON or nothing, never block the prompt.
1. Ask the warm process (one per user, holding the embedding model) to handle the event with
   hybrid recall. It answers in tens of milliseconds.
2. If it is not there or not ready, start it in the background and answer keyword-only here.
sentence-transformers is never imported in the hook process.

The same `handle` runs in the warm process (with the embedding model) and in the hook process
(keyword-only). It never raises for a missing store: a project with no memories gets nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import Resolved, StoreNotFound, data_root, is_trivial, prompt_context, resolve, session_brief

if TYPE_CHECKING:
    from cairn import Cairn, Embedder

log = logging.getLogger(__name__)

WARM_TIMEOUT_S = {"SessionStart": 2.0, "UserPromptSubmit": 1.0}
DISABLE_MARKER = ".cairn-disable"  # a file at a project's root: no injection in that project
COMPACT_SHARE = 2  # after compaction, a brief of 1/2 the budget: the summary kept the gist
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


def _brief_changed(session_id: str, brief: str) -> bool:
    """Whether `brief` differs from the one last injected into this session (and remember it)."""
    if not session_id:
        return True
    path = data_root() / "sessions" / f"{paused_marker(session_id).name}.json"
    digest = hashlib.sha256(brief.encode()).hexdigest()
    try:
        if json.loads(path.read_text()).get("brief") == digest:
            return False
    except (OSError, ValueError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"brief": digest}))
    return True


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
        with Cairn.open(resolved=resolved, embedder=embedder) as memory:
            text = _respond(memory, event, payload, config, embedder)
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _respond(memory: Cairn, event: str, payload: dict[str, Any], config: dict[str, Any],
             embedder: Embedder | None) -> str | None:
    hooks = config["hooks"]
    session_id = str(payload.get("session_id") or "")
    if event == SESSION_START:
        source = payload.get("source", "startup")
        budget = hooks["brief_chars"] // (COMPACT_SHARE if source == "compact" else 1)
        text = session_brief(memory, budget=budget)
        if text and source == "resume" and not _brief_changed(session_id, text):
            return None  # the transcript already holds this brief
        if text and source != "resume":
            _brief_changed(session_id, text)
        return text
    if event == USER_PROMPT_SUBMIT:
        prompt = str(payload.get("prompt") or "")
        if is_trivial(prompt):
            return None
        vector = None
        if embedder is not None:
            vectors = memory.embed([prompt[:2000]])
            vector = None if vectors is None else vectors[0]
        return prompt_context(memory, prompt, k=hooks["prompt_k"], budget=hooks["prompt_chars"], query_vector=vector)
    return None


# -- the hook process ------------------------------------------------------------------------------
def run(event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
    """Through the warm process if it answers in time, else keyword-only in this process."""
    from . import warm

    env = {k: os.environ[k] for k in warm.HOOK_ENV_KEYS if k in os.environ}
    reply = warm.request({"op": "hook", "event": event, "payload": payload, "env": env},
                         timeout=WARM_TIMEOUT_S.get(event, 1.0))
    if reply is not None:
        return reply.get("output")
    if os.environ.get("CAIRN_NO_WARM") != "1":
        warm.spawn()
    return handle(event, payload, env, embedder=None)


def pause(args: list[str]) -> None:
    """`cairn hook pause SESSION_ID [on|off]`: the per-session pause behind /cairn:pause."""
    session_id, state = (args + ["", "on"])[:2]
    if not session_id:
        sys.stderr.write("cairn: pause needs the session id\n")
        return
    set_paused(session_id, state != "off")
    print(f"Cairn memory injection is {'paused' if state != 'off' else 'back on'} for this session.")


def hook_main(argv: list[str]) -> None:
    """`cairn hook EVENT` (stdin: the hook's JSON). Exits 0 whatever happens."""
    started = time.monotonic()
    event = argv[0] if argv else ""
    try:
        if event == "pause":
            pause(argv[1:])
        else:
            raw = sys.stdin.buffer.read().decode("utf-8", "replace")
            payload = json.loads(raw) if raw.strip() else {}
            output = run(event, payload if isinstance(payload, dict) else {})
            if output:
                sys.stdout.write(json.dumps(output) + "\n")
    except BaseException as exc:  # noqa: BLE001 - the contract is to fail open, whatever happened
        _log_failure(event, exc)
    finally:
        if os.environ.get("CAIRN_HOOK_TIMING"):
            sys.stderr.write(f"cairn hook {event}: {1000 * (time.monotonic() - started):.1f} ms\n")
    sys.stdout.flush()
    sys.exit(0)


def _log_failure(event: str, exc: BaseException) -> None:
    try:
        logs = data_root() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        logging.basicConfig(filename=str(logs / "hooks.log"), level=logging.INFO,
                            format="%(asctime)s %(levelname)s %(message)s")
        logging.getLogger("cairn.hook").error("%s hook failed open", event, exc_info=exc)
    except BaseException:  # noqa: BLE001 - nowhere to log; still never break the prompt
        pass
