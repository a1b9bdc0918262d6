"""Turn capture: the new part of a session's transcript into the project's store at Stop and
PreCompact, and at SessionEnd the session's unresolved writes into the review queue."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn import CITED_WEIGHT, data_root, private_dir, private_file, resolve

from .session_state import SessionState, digest, disabled, project_dir
from .transcripts import session_writes

if TYPE_CHECKING:
    from cairn import Cairn, Embedder

log = logging.getLogger(__name__)


def _count_usage(memory: Cairn, session_id: str, cited: list[str]) -> int:
    """At capture: count the injections this session's hooks made since the last capture, and the
    citations ([mem:ID] in the new assistant turns) of memories injected into this session.
    Returns how many citations were counted. The state is re-read just before it is written, and
    only the ids counted are taken off it, so a hook saving it meanwhile loses nothing but in
    that narrow window (counts are best effort; the context is what matters)."""
    state = SessionState(session_id, memory.env)
    uncounted = list(state.uncounted)
    if uncounted:
        memory.record_injected(uncounted)
    injected = set(state.injected) | set(uncounted)
    counted = memory.record_cited([i for i in cited if i in injected]) if cited and injected else 0
    if uncounted:
        fresh = SessionState(session_id, memory.env)
        fresh.uncounted = fresh.uncounted[len(uncounted):] if fresh.uncounted[:len(uncounted)] == uncounted \
            else [i for i in fresh.uncounted if i not in set(uncounted)]
        fresh.save()
    return counted


@contextlib.contextmanager
def _capture_lock(session_id: str, env: Mapping[str, str]) -> Iterator[None]:
    """One capture of a session at a time (an exclusive lock on a file per session, waited for):
    Stop hooks fired while a long capture runs then read only what it left, instead of each
    scrubbing and embedding the same turns again (they would be dropped as duplicates)."""
    try:
        import fcntl
    except ImportError:  # not Unix: the uuids still keep captures idempotent
        yield
        return
    folder = private_dir(data_root(env=env) / "capture-locks", env=env)
    with open(private_file(folder / f"{digest(session_id)}.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def capture(payload: dict[str, Any], env: dict[str, str], *, embedder: Embedder | None = None,
            embedder_for: Callable[[dict[str, Any]], Embedder | None] | None = None) -> dict[str, Any] | None:
    """Capture the part of the session's transcript (payload `transcript_path`) not read yet into the
    project's store (Cairn.sessions.ingest), then embed turns still waiting for a vector. Nothing
    when capture is off: the per-session pause, CAIRN_PAUSE, the project's .cairn-disable,
    hooks.enabled or sessions.capture false. The injections this session's hooks made since the
    last capture are counted (Cairn.record_injected), and so are the memories injected into this
    session that the new assistant turns cite as [mem:ID] (Cairn.record_cited). Returns the
    ingestion's counts, or None when nothing was done. The log gets counts, never text. env: the
    environment it runs in, whole (it names the data root): the hook process's, or the warm
    process's under the hook's variables (warm.answering_env). Raises whatever the engine raises;
    the caller fails open."""
    from cairn import Cairn

    session_id = str(payload.get("session_id") or "")
    path = payload.get("transcript_path")
    if not session_id or not isinstance(path, str) or not Path(path).is_file():
        return None
    resolved = resolve(None, cwd=project_dir(payload, env), env=env)
    choice, config = resolved.choice, resolved.config
    reason = disabled(choice.project_root, config, env, session_id, env)
    if reason is None and not config["sessions"]["capture"]:
        reason = "sessions.capture is false"
    if reason:
        log.info("capture: nothing captured (%s)", reason)
        return None
    if embedder_for is not None:
        embedder = embedder_for(config)
    with _capture_lock(session_id, env), Cairn.open(resolved=resolved, embedder=embedder) as memory:
        done = memory.sessions.ingest(path, session_id=session_id)
        cited = _count_usage(memory, session_id, done["cited"])
        if done["cited"]:  # a memory Claude cited while working on files governs them a little
            memory.scopes.learn(done["cited"], session_id, weight=CITED_WEIGHT)
        if embedder is not None:
            while memory.sessions.embed_backlog(256):
                pass
    log.info("capture %s: %d turns added, skipped %s, redacted %s, %d private spans, %d injected memories cited",
             session_id, done["turns_added"], done["skipped"], done["redactions"], done["private_spans"], cited)
    return done


def settle_session(payload: dict[str, Any], env: dict[str, str]) -> dict[str, Any] | None:
    """SessionEnd: queue for review what the session's writes left unresolved (Cairn.review.settle on the
    memories its transcript shows Cairn's MCP tools created: a possible change the model did not
    resolve with memory_replace is the user's to judge). Nothing when the transcript is missing or
    the project has no store. Returns Cairn.review.settle's answer, or None. The log gets counts, never
    text. Raises whatever the engine raises; the caller fails open."""
    from cairn import Cairn

    session_id = str(payload.get("session_id") or "")
    path = payload.get("transcript_path")
    if not session_id or not isinstance(path, str) or not Path(path).is_file():
        return None
    written = session_writes(path)
    if not written:
        return None
    resolved = resolve(None, cwd=project_dir(payload, env), env=env)
    if not resolved.store_exists:
        return None
    with Cairn.open(resolved=resolved, embedder=None) as memory:
        done = memory.review.settle(written)
    log.info("session end %s: %d writes (%d still current), %d proposals queued for review", session_id,
             len(written), done["checked"], len(done["queued"]))
    return done

