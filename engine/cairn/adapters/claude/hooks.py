"""Claude Code hook events, handled with the engine: what to inject at SessionStart and on each prompt.

The same `handle` runs in the warm process (with the embedding model, for hybrid recall) and, when
that is not ready, in the hook process itself (keyword-only; see cairn.adapters.claude.hook_process),
each through its HookRuntime (the warm process's: warm.runtime.WarmRuntime; the hook process's:
InProcessRuntime). It never raises for a missing store: a project with no memories gets nothing
injected.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cairn import (
    BROKEN_STORE_ERRORS, CairnError, ConfigError, Resolved, StoreBusy, cited_ids, is_trivial, process_env,
    prompt_context, required_extra, resolve, session_brief,
)

from .request import HookRequest
from .session_state import SessionState, digest, disabled
from .work import (NESTED, POST_TOOL_USE, PRE_TOOL_USE, SUBAGENT_START, hold_touches, session_focus, subagent_start,
                   tool_event)

if TYPE_CHECKING:
    from cairn import Cairn, Embedder

log = logging.getLogger(__name__)

COMPACT_SHARE = 2  # after compaction, a brief of 1/2 the budget: the summary kept the gist
# A hook's whole budget (hooks/hooks.json: 5 s for a prompt, 10 s at session start) must hold even
# when another process keeps the store locked: wait this long for a lock, then fail open.
HOOK_BUSY_TIMEOUT_MS = 1000
SESSION_START = "SessionStart"
# The second SessionStart hook (hooks/hooks.json): the part of a brief over one hook output.
SESSION_START_REST = "SessionStart:rest"
HOOK_OUTPUT_CHARS = 9500  # Claude Code replaces a hook output over 10,000 characters by a file path
CONTINUED = "Cairn project memory, continued:"
BRIEF_LINE_CHARS = 100  # a listed memory's line, about: what decides whether a store fits the brief whole
BRIEF_CACHE_S = 30.0  # a brief computed for one of a session start's two hooks serves the other
# "store:session:source" -> (monotonic time, brief, inject, the event that computed it)
_BRIEFS: dict[str, tuple[float, str | None, bool, str]] = {}
STORE_BROKEN = ("Cairn memory: this project's memory store cannot be used, so nothing was recalled. "
                "Tell the user to run `cairn doctor` in a terminal to check and repair it.")
CONFIG_BROKEN = "Cairn memory is off in this project until its configuration is fixed: {error}"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
CAPTURE_EVENTS = ("Stop", "PreCompact")  # events that capture the new part of the session's transcript
SESSION_END = "SessionEnd"  # the session's unresolved writes are queued for review (capture.settle_session)
TOOL_EVENTS = (PRE_TOOL_USE, POST_TOOL_USE)  # work.py: what the work touches, and its memories
NO_MODEL_EVENTS = (*TOOL_EVENTS, SESSION_START_REST)  # answered without the embedding model
HOOK_EVENTS = (SESSION_START, USER_PROMPT_SUBMIT, *TOOL_EVENTS, SUBAGENT_START, *CAPTURE_EVENTS,
               SESSION_END)  # what hooks/hooks.json registers


class HookRuntime(Protocol):
    """What a hook asks of the process that runs it: one interface, implemented by the hook process
    itself (InProcessRuntime: keyword-only, each store opened for the request and closed after) and
    by the warm process (warm.runtime.WarmRuntime: models loaded, stores kept open, resolutions
    cached). tests/adapters/test_hook_runtime.py holds both to the same contract.

    environ: the environment of the process (its composition root's), which the processes a hook
    starts inherit (a runtime install, a maintenance run)."""

    environ: Mapping[str, str]

    def resolve(self, store: str | None = None, *, cwd: Path | None = None,
                env: Mapping[str, str] | None = None) -> Resolved:
        """cairn.resolve's answer for this store name (None: the project's), folder and hook environment."""
        ...

    def embedder_for(self, config: dict[str, Any]) -> Embedder | None:
        """The loaded embedder for this project's config, for hybrid recall; None for keyword-only
        (no model here, embedding disabled, or the model not loaded yet)."""
        ...

    def memory(self, resolved: Resolved, embedder: Embedder | None) -> AbstractContextManager[Cairn]:
        """The open engine a hook answers from, for the time of the `with` block, waiting at most
        HOOK_BUSY_TIMEOUT_MS for another process's lock."""
        ...


class InProcessRuntime:
    """HookRuntime in the calling process (the hook process when the warm process is not ready;
    a library caller, a benchmark): cairn.resolve at each request, `embedder` for every config that
    enables embedding (None, the default: keyword-only; the hook process loads no model), and the
    store opened for each request and closed after. environ: the calling process's environment
    (default: cairn.process_env())."""

    def __init__(self, embedder: Embedder | None = None, environ: Mapping[str, str] | None = None):
        self._embedder = embedder
        self.environ = process_env() if environ is None else environ

    def resolve(self, store: str | None = None, *, cwd: Path | None = None,
                env: Mapping[str, str] | None = None) -> Resolved:
        from ..warm.client import answering_env  # the hook's variables over this process's environment

        return resolve(store, cwd=cwd, env=self.environ if env is None else answering_env(self.environ, env))

    def embedder_for(self, config: dict[str, Any]) -> Embedder | None:
        return self._embedder if config["embedding"]["enabled"] else None

    @contextmanager
    def memory(self, resolved: Resolved, embedder: Embedder | None) -> Iterator[Cairn]:
        from cairn import Cairn

        with Cairn.open(resolved=resolved, embedder=embedder, busy_timeout_ms=HOOK_BUSY_TIMEOUT_MS) as memory:
            yield memory


def handle(event: str, payload: dict[str, Any], env: dict[str, str], runtime: HookRuntime | None = None, *,
           timings: dict[str, float] | None = None) -> dict[str, Any] | None:
    """The hook's JSON output for `event`, or None to inject nothing.

    payload: the hook's stdin JSON. env: the hook's environment (CLAUDE_PROJECT_DIR, CAIRN_STORE,
    CAIRN_PAUSE ...). runtime: the process serving the hook (HookRuntime; default: InProcessRuntime(),
    keyword-only). The store and config are resolved once here, by the runtime, into the request
    (request.HookRequest) every path of the event reads. timings: filled with the milliseconds each
    step took (resolve, open, embed, recall ...), when given.
    Raises whatever the engine raises; the caller fails open.
    """
    runtime = runtime or InProcessRuntime()
    clock = _Clock(timings)
    request = HookRequest(event, payload, env, runtime.environ)
    try:
        resolved = request.resolved = runtime.resolve(None, cwd=request.project, env=env)
    except ConfigError as exc:
        # A bad config turns memory off: say so once, at session start, to the user (a prompt fails
        # open silently; the caller logs it), as for a broken store.
        if event != SESSION_START:
            raise
        log.error("%s: %s", event, exc)
        return {"systemMessage": CONFIG_BROKEN.format(error=exc)}
    choice, config = resolved.choice, resolved.config
    reason = disabled(choice.project_root, config, env, request.session_id, resolved.env)
    clock.lap("resolve")
    if reason:
        log.info("%s: nothing injected (%s)", event, reason)
        return None
    notice = _runtime_notice(config, env, runtime.environ) if event == SESSION_START else None
    global_only = False
    if not resolved.store_exists:
        glob = _without_store(request, resolved)
        if glob is None:
            return {"systemMessage": notice} if notice else None
        resolved, global_only = glob, True  # a brief needs no model
    if event in TOOL_EVENTS and not config["hooks"]["tools"]:
        return None
    embedder = None if global_only or event in NO_MODEL_EVENTS else runtime.embedder_for(config)
    try:
        with runtime.memory(resolved, embedder) as memory:
            clock.lap("open")
            text = _respond(memory, request, config, embedder, clock, global_only=global_only)
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
    return _output(event, text, notice)


def _without_store(request: HookRequest, resolved: Resolved) -> Resolved | None:
    """For a project with no store yet: the global store to brief instead at session start, or None
    when there is nothing to answer from. Raises StoreNotFound when CAIRN_STORE names a store that
    does not exist (said in the log)."""
    missing = resolved.missing()
    if missing is not None:
        raise missing
    if request.event == PRE_TOOL_USE:  # no store to record in yet: the session keeps what it touched
        hold_touches(request.payload, request.root, request.state)
        return None
    # No memories yet; do not create a store just by starting a session. The user's global
    # store (preferences for every project) is still briefed, when there is one.
    choice = resolved.choice
    if request.event == SESSION_START and resolved.config["claude_memory"]["sync"]:
        from .auto_memory_sync import sync_at_session_start  # the first sync creates the store
        sync_at_session_start(None, request.project, request.env,
                              store_name=choice.name if choice.explicit else None, native=request.native,
                              environ=request.environ)
    return resolved.global_instead() if request.event == SESSION_START else None


def _output(event: str, text: str | None, notice: str | None) -> dict[str, Any] | None:
    """The hook's JSON output: the notice for the user, the text for the model's context."""
    if not text and not notice:
        return None
    out: dict[str, Any] = {"systemMessage": notice} if notice else {}
    if text:
        name = SESSION_START if event == SESSION_START_REST else event
        out["hookSpecificOutput"] = {"hookEventName": name, "additionalContext": text}
    return out


def _runtime_notice(config: dict[str, Any], env: dict[str, str], environ: Mapping[str, str]) -> str | None:
    """In the plugin, when the project's model needs an optional backend the runtime lacks: start
    its install in the background (hooks/bootstrap.py extra NAME; never inside the hook's budget)
    and say so to the user, once per session start. None otherwise. env: the hook's; environ: this
    process's, which the install inherits."""
    emb = config["embedding"]
    extra = required_extra(emb["model"], emb["backend"]) if emb["enabled"] else None
    root, data = env.get("CLAUDE_PLUGIN_ROOT"), env.get("CLAUDE_PLUGIN_DATA")
    if extra is None or not root or not data:
        return None
    import subprocess
    import sys

    bootstrap = Path(root) / "hooks" / "bootstrap.py"
    out = subprocess.run([sys.executable, str(bootstrap), "extra", extra], capture_output=True, text=True,
                         env={**environ, "CLAUDE_PLUGIN_DATA": data}, timeout=10)
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


def _already_loaded(memory: Cairn, request: HookRequest) -> frozenset[str]:
    """The ids of memories Claude Code itself loads into this session (claude_memory.already_loaded,
    its text matches cached in the session's state); empty when they cannot be found out (a hook
    fails open: injecting twice beats injecting nothing)."""
    from .loaded import already_loaded

    try:
        return frozenset(already_loaded(memory, request.project, request.env, cache=request.state.loaded,
                                        native=request.native))
    except (CairnError, OSError) as exc:
        log.warning("what Claude Code already loaded is unknown: %s", exc)
        return frozenset()


def _respond(memory: Cairn, request: HookRequest, config: dict[str, Any], embedder: Embedder | None,
             clock: _Clock | None = None, *, global_only: bool = False) -> str | None:
    clock = clock or _Clock(None)
    event = request.event
    _ = request.state  # the session's state, read from its file here so that this lap times it
    clock.lap("session state")
    if event in TOOL_EVENTS or event == SUBAGENT_START:
        return _tool_event(memory, request, config["hooks"], embedder, clock)
    if event in (SESSION_START, SESSION_START_REST):
        return _session_start(memory, request, config, clock, global_only=global_only)
    if event == USER_PROMPT_SUBMIT:
        return _prompt(memory, request, config["hooks"], embedder, clock)
    return None


def _tool_event(memory: Cairn, request: HookRequest, hooks: dict[str, Any], embedder: Embedder | None,
                clock: _Clock) -> str | None:
    """What a tool event (work.py) or a subagent's start injects."""
    event, payload = request.event, request.payload
    if event == SUBAGENT_START:
        return subagent_start(memory, payload, request.root, hooks, SessionState(request.session_id, memory.env),
                              embedder=embedder)
    text = tool_event(memory, {**payload, "hook_event_name": event}, request.root, hooks, request.state,
                      embedder=embedder)
    clock.lap("tool")
    return text


def _session_start(memory: Cairn, request: HookRequest, config: dict[str, Any], clock: _Clock, *,
                   global_only: bool) -> str | None:
    """What one of a session start's two hooks injects: the first part of the brief, or the rest."""
    event, state = request.event, request.state
    source = request.payload.get("source", "startup")
    # The two hooks of one session start share one brief: the first to run computes it, the
    # other takes it (once). A later start of the session computes it anew.
    key = f"{memory.name}:{request.session_id}:{source}"
    shared = _BRIEFS.pop(key, None)
    if shared is not None and shared[3] != event and time.monotonic() - shared[0] < BRIEF_CACHE_S:
        text, inject = shared[1], shared[2]
    else:
        text = _brief(memory, request, config, clock, global_only=global_only)
        inject = text is not None and not (source == "resume" and state.brief == digest(text))
        _BRIEFS[key] = (time.monotonic(), text, inject, event)
        for old in [k for k, v in _BRIEFS.items() if time.monotonic() - v[0] > BRIEF_CACHE_S]:
            del _BRIEFS[old]
    if event == SESSION_START_REST:  # the second hook of two: only what the first could not carry
        parts = split_brief(text) if inject and text else []
        return parts[1] if len(parts) > 1 else None
    if config["claude_memory"]["sync"] and not global_only:
        from .auto_memory_sync import sync_at_session_start

        sync_at_session_start(memory, request.project, request.env,
                              store_name=memory.name if memory.choice.explicit else None, native=request.native,
                              environ=request.environ)
        clock.lap("claude memory sync")
    if source == "resume":
        if not inject:
            return None  # the transcript already holds this brief
        state.injected += [i for i in cited_ids(text) if i not in state.injected]
    else:  # startup, clear, compact: the context holds nothing of ours but this brief
        state.injected = cited_ids(text)
        state.tool_chars = 0
        state.loaded.pop(NESTED, None)  # the subfolder CLAUDE.md files left the context with it
    state.brief = digest(text) if text else None
    state.uncounted += cited_ids(text)
    state.save()
    if config["maintenance"]["background"]:
        start_background_maintenance(memory, request.environ)
    return split_brief(text)[0] if text else None


def _prompt(memory: Cairn, request: HookRequest, hooks: dict[str, Any], embedder: Embedder | None,
            clock: _Clock) -> str | None:
    """What a prompt brings: the memories relevant to it that the session's context does not hold."""
    state = request.state
    prompt = str(request.payload.get("prompt") or "")
    if is_trivial(prompt):
        return None
    # A memory already in the session's context (the brief, an earlier prompt) is not injected
    # again; a changed fact has a new id, so it is.
    # Nor is one Claude Code loaded itself (CLAUDE.md, rules, its auto memory's index).
    cached = dict(state.loaded)
    loaded = _already_loaded(memory, request)
    clock.lap("already loaded")
    # The prompt is embedded only if the relevance gate reads cosines for it (context.relevant_hits).
    embed = _embed_prompt(memory, clock) if embedder is not None else None
    text = prompt_context(memory, prompt, k=hooks["prompt_k"], budget=hooks["prompt_chars"],
                          embed=embed, exclude=frozenset(state.injected) | loaded)
    clock.lap("recall")
    if state.loaded != cached and not text:
        state.save()
    if text:
        state.injected += cited_ids(text)
        state.uncounted += cited_ids(text)
        state.save()
        clock.lap("session state")
    return text


def _embed_prompt(memory: Cairn, clock: _Clock) -> Callable[[str], Any]:
    """The prompt's embedding, as context.prompt_context's `embed` asks for it (timed as "embed")."""

    def embed(text: str) -> Any:
        clock.lap("recall")
        vectors = memory.embed([text], query=True)
        clock.lap("embed")
        return None if vectors is None else vectors[0]

    return embed


def _brief(memory: Cairn, request: HookRequest, config: dict[str, Any], clock: _Clock, *,
           global_only: bool) -> str | None:
    """The whole session brief for this session start (both hooks' parts): the budget (halved after
    compaction), what Claude Code loads by itself left out, pointed by the session's focus."""
    source = str(request.payload.get("source", "startup"))
    budget = config["hooks"]["brief_chars"] // (COMPACT_SHARE if source == "compact" else 1)
    loaded = _already_loaded(memory, request)
    clock.lap("already loaded")
    focus = None
    counts = request.counts(memory)
    # The session's signals only matter when the store is larger than the brief can list whole
    # (about BRIEF_LINE_CHARS a line): a small store spends no git call on them.
    if not global_only and counts["current"] * BRIEF_LINE_CHARS > budget:
        focus = session_focus(memory, request.root, request.session_id, source)
        clock.lap("focus")
    text = session_brief(memory, budget=budget, global_only=global_only, exclude=loaded, focus=focus, counts=counts)
    clock.lap("brief")
    return text


def split_brief(text: str, limit: int = HOOK_OUTPUT_CHARS) -> list[str]:
    """The brief in at most two parts of at most `limit` characters each, split between lines (the
    second headed as a continuation): Claude Code replaces a hook output over 10,000 characters by a
    file path and a preview, so a brief larger than one output is delivered by two SessionStart
    hooks (hooks/hooks.json). A brief larger than two parts is cut at the second's end."""
    if len(text) <= limit:
        return [text]
    lines = text.split("\n")
    first: list[str] = []
    used = 0
    while lines and used + len(lines[0]) + 1 <= limit:
        used += len(lines[0]) + 1
        first.append(lines.pop(0))
    rest = [CONTINUED]
    used = len(CONTINUED)
    for line in lines:
        if used + len(line) + 1 > limit:
            break
        rest.append(line)
        used += len(line) + 1
    if lines and lines[-1] not in rest and lines[-1].startswith("Not listed:") and len(rest) > 1:
        # the map of the rest ends the brief: keep it, in place of the last listed line if need be
        while rest and used + len(lines[-1]) + 1 > limit and len(rest) > 1:
            used -= len(rest.pop()) + 1
        rest.append(lines[-1])
    return ["\n".join(first), "\n".join(rest)] if len(rest) > 1 else ["\n".join(first)]


def start_background_maintenance(memory: Cairn, environ: Mapping[str, str]) -> bool:
    """Config maintenance.background (off by default): when the store had no maintenance run within
    maintenance.stale_days, start `cairn maintain --apply --safe-only` for it in a detached process
    (only exact duplicates are retired; nothing else changes without a review), which inherits
    `environ` (the hook's process's). Returns whether one was started. Never raises: a hook fails
    open (errors go to the hook log)."""
    import subprocess
    import sys

    try:
        if not memory.review.status()["stale"]:
            return False
        engine_dir = str(Path(__file__).resolve().parents[3])  # engine/cairn/adapters/claude/hooks.py -> engine
        env = {**environ, "PYTHONPATH": engine_dir, "CAIRN_NO_WARM": "1"}
        subprocess.Popen([sys.executable, "-P", "-m", "cairn", "maintain", "--apply", "--safe-only", "--store",
                          memory.name], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
        log.info("started a background maintenance run of store %s", memory.name)
        return True
    except (CairnError, OSError) as exc:
        log.warning("background maintenance of %s not started: %s", memory.name, exc)
        return False

