"""Cairn's MCP server: the memory tools Claude Code (or any MCP client) calls, over the cairn engine API.

    python mcp/server.py                    # the plugin's launcher: main(), stdio
    cairn serve --transport stdio           # the same main()
    cairn serve --transport mcp-http        # the same tools over streamable HTTP (http_app), at /mcp

stdin/stdout carry JSON-RPC on stdio; logs go to stderr.

Every tool is a thin wrapper: arguments checked against the schema the model sees, one engine API
call, the result rendered by cairn.render. Defaults (k, scope, limit) come from the config.

- initialize is answered at once; the embedding model is loaded by a daemon thread that starts
  after the handshake, and nothing imports sentence-transformers before that.
- The store is the one the engine picks for CLAUDE_PROJECT_DIR (else the working directory):
  explicit > CAIRN_STORE > git toplevel > folder. A store that cannot be opened does not stop the
  server: every tool answers with the reason, and memory_status says what is wrong.
- The process ends with its client: at stdin EOF, SIGINT or SIGTERM it closes the store and exits
  at once, whatever a worker thread is still doing.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

import cairn
from cairn import (
    DEFAULT_IMPORTANCE, IMPORTANCE_RANGE, KINDS, MAX_APPLIES_CHARS, MAX_APPLIES_WHEN, MAX_TEXT_BYTES, PROPOSAL_STATES,
    PROPOSAL_TYPES, CairnError, render,
)

from . import stdio
from .session import Session, Unavailable

log = logging.getLogger("cairn.mcp")

INSTRUCTIONS = """\
Cairn is this project's long-term memory: decisions, conventions, preferences and facts kept \
across sessions in a local store.
- Recall (memory_recall) before answering questions about the project's past decisions, \
conventions or the user's preferences, and before deciding something that may already be settled.
- Remember (memory_remember) a decision with its reason, a convention, a user preference or a \
non-obvious fact: one self-contained statement. Not what the code or git history already records. \
Never secrets (tokens, passwords, keys).
- When a remembered fact has changed, call memory_replace with the old id instead of adding a \
memory beside it.
- Every memory_remember and memory_replace answer lists `related`: up to 3 current memories about \
the same subject. Judge each one: if the new memory changes it, call memory_replace with its id and \
the new text; if both hold, do nothing. For example:
  - change: you remembered "We deploy with Fly.io" and related shows "We deploy with Heroku": call \
memory_replace(id of the Heroku memory, "We deploy with Fly.io").
  - addition: "The SDK is published to PyPI" with related "The SDK is published to npm": both hold, \
do nothing.
  - restatement: "Run tests with pytest -x" with related "Tests run with `pytest -x`": the same \
rule twice; leave it, the user merges restatements in the review queue.
- Cite the memories you rely on as [mem:ID].
- Replaced and forgotten memories never come back in recall or list; history needs \
include_superseded, as_of or memory_history.
- memory_forget erases for good: only when the user asks.
- Past sessions are captured turn by turn: memory_search_sessions finds what was said before (an \
error message and its fix, a reason given, what was tried), each hit with the turns around it; \
quote an exact error or identifier to match it exactly. memory_list_sessions and \
memory_read_session browse them."""

# -- argument types: the JSON schemas the model sees ----------------------------------------------
Kind = Literal[KINDS]  # type: ignore[valid-type]
MemoryId = Annotated[str, Field(min_length=1, max_length=64,
                                description="A memory id as shown in results (also accepted as [mem:ID]).")]
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_BYTES,
                            description="One self-contained statement, understandable without this conversation.")]
Tag = Annotated[str, Field(min_length=1, max_length=64)]
Tags = Annotated[list[Tag], Field(max_length=20, description="Short topic words, no spaces (e.g. deploy, testing).")]
AppliesPhrase = Annotated[str, Field(min_length=1, max_length=MAX_APPLIES_CHARS)]
_APPLIES_HOW = (
    "1-4 short phrases naming the tasks in which this memory matters, as a developer would say the task, "
    "not the memory's own words: the work someone would be doing when they need it (e.g. for \"Run `just "
    "gen-all` after changing a grammar\": \"adding a lint rule\", \"changing the parser grammar\"; for \"Feature "
    "flags are read from flags.yaml\": \"adding or changing a feature flag\"). Per-prompt recall matches prompts "
    "against them.")
AppliesWhen = Annotated[list[AppliesPhrase], Field(max_length=MAX_APPLIES_WHEN, description=_APPLIES_HOW)]
TagFilter = Annotated[list[Tag], Field(max_length=20, description="Only memories with any of these tags.")]
Kinds = Annotated[list[Kind], Field(max_length=len(KINDS), description="Only these kinds (default: all).")]
When = Annotated[str | None, Field(max_length=40, description="ISO 8601 date or time, e.g. 2026-03-01.")]
IncludeSuperseded = Annotated[bool, Field(description="Also replaced and expired memories (history).")]
IncludeCold = Annotated[bool, Field(description="Also memories demoted to the cold tier (rarely needed).")]
ProposalId = Annotated[str, Field(min_length=1, max_length=64, description="A proposal id from memory_review_queue.")]


def _memory_id(raw: str) -> str:
    """Accept an id as cited: "[mem:01J...]" or "mem:01J..." mean "01J..."."""
    text = raw.strip().strip("[]").strip()
    return text[4:].strip() if text.lower().startswith("mem:") else text


def _drop_titles(schema: Any) -> Any:
    """Pydantic titles every property ("Text", "Kind"): tokens the model pays for, saying nothing."""
    if isinstance(schema, dict):
        return {k: _drop_titles(v) for k, v in schema.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(schema, list):
        return [_drop_titles(v) for v in schema]
    return schema


def _describe(name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "arguments"
        given = error.get("input")
        shown = f" (got {given!r})" if isinstance(given, (int, float, str)) and len(repr(given)) <= 40 else ""
        problems.append(f"{field}: {error['msg']}{shown}")
    return f"invalid arguments for {name}: " + "; ".join(problems)


WRITE_TOOLS = {"memory_remember", "memory_replace", "memory_forget", "memory_review_decide", "memory_propose",
               "memory_maintenance_run"}
# The tools a read-only token may call over mcp-http.
READ_ONLY_TOOLS = frozenset({"memory_recall", "memory_history", "memory_list", "memory_status",
                             "memory_review_queue", "memory_maintenance_status", "memory_search_sessions",
                             "memory_list_sessions", "memory_read_session"})
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


class CairnServer(MCPServer):
    """MCPServer whose tool errors read as one plain sentence: the engine's message, or which
    argument is wrong and why, without the SDK's "Error executing tool" prefix and pydantic's URLs.
    A refused write says that nothing was changed (engine writes are all-or-nothing)."""

    on_stdin_eof: Callable[[], None] = staticmethod(lambda: None)

    async def run_stdio_async(self) -> None:
        # The SDK's transport with a checked stdin: every malformed line is answered (stdio.py).
        await stdio.serve(self._lowlevel_server, self.on_stdin_eof)

    async def call_tool(self, name, arguments, context=None):  # type: ignore[override]
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: the SDK keeps its text on the server and logs the traceback
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                message = _describe(name, cause)
            elif isinstance(cause, ToolError):
                message = str(cause)
            else:
                raise
            if name in WRITE_TOOLS:
                message += "; nothing was changed"
            raise ToolError(message) from cause


def _turn(turn: cairn.Turn) -> dict[str, Any]:
    """A captured turn as the model sees it: compact, empty fields left out."""
    data = turn.to_json()
    out = {"session_id": data["session_id"], "position": data["position"], "role": data["role"],
           "speaker": data["speaker"], "at": data["at_iso"], "text": data["text"], "meta": data["meta"] or None}
    return {k: v for k, v in out.items() if v is not None}


def _session_result(result: cairn.SessionResult) -> dict[str, Any]:
    """One session's merged hits as the model sees it: the session id once, its turns in order, the
    ranked ones marked `"hit": true`."""
    turns = [{**{k: v for k, v in _turn(t).items() if k != "session_id"}, **({"hit": True} if t.position in
                                                                             result.best else {})}
             for t in result.turns]
    return {"session_id": result.session_id, "score": round(result.score, 4), "mode": result.mode, "turns": turns}


def _session_row(info: cairn.SessionInfo) -> dict[str, Any]:
    data = info.to_json()
    keep = ("session_id", "title", "started_at_iso", "ended_at_iso", "turn_count", "git_branch")
    return {k.replace("_iso", ""): data[k] for k in keep if data[k] is not None}


def build_server(session: Session) -> MCPServer:
    def run(fn, *, embeds: bool = False, writes: bool = True) -> str:
        try:
            return render.dumps(session.call(fn, embeds=embeds, writes=writes))
        except (Unavailable, CairnError) as exc:
            raise ToolError(str(exc)) from None

    def memory_remember(
        text: Text,
        kind: Annotated[Kind, Field(description="decision (with its reason), convention, preference, fact, "
                                                "task or insight.")] = "fact",
        tags: Tags = [],  # noqa: B006 - never mutated; the schema shows the default
        importance: Annotated[int, Field(ge=IMPORTANCE_RANGE[0], le=IMPORTANCE_RANGE[1],
                                         description="1 trivia .. 3 normal .. 5 critical.")] = DEFAULT_IMPORTANCE,
        valid_from: When = None,
        scope: Annotated[Literal["project", "global"],
                         Field(description="global: a preference of the user's that holds in every project.")] = "project",
        applies_when: AppliesWhen = [],  # noqa: B006
    ) -> str:
        """Store one memory: a decision with its reason, a convention, a user preference or a non-obvious fact, as one self-contained statement. Not what the code or git history already records; never secrets. If it restates a changed fact, use memory_replace instead. valid_from: when it became true (default now). Returns id and status (created, or duplicate: nothing written); a text that says a similar memory changed ("now", "moved from X to Y", "no longer") supersedes it (superseded ids). related: up to 3 current memories about the same subject (id, text, kind, date, why): if the new memory changes one, call memory_replace with its id and this text; if both hold, do nothing."""  # noqa: E501

        def do(engine):
            return render.remembered(engine.remember(text, kind=kind, tags=tags, importance=importance,
                                                     valid_from=valid_from, scope=scope, applies_when=applies_when))

        return run(do, embeds=True, writes=scope == "project")  # a global write creates no project store

    def memory_recall(
        query: Annotated[str, Field(min_length=1, max_length=2000, description="What you want to know, in words.")],
        k: Annotated[int | None, Field(ge=1, le=50, description="How many memories at most (default 10).")] = None,
        as_of: Annotated[str | None, Field(max_length=40, description="ISO 8601: what was true then "
                                                                      "(includes since-replaced memories).")] = None,
        kinds: Kinds = [],  # noqa: B006
        tags: TagFilter = [],  # noqa: B006
        scope: Annotated[Literal["all", "project", "global"] | None,
                         Field(description="all (default): this project's memories and the user's global ones.")] = None,
        include_superseded: IncludeSuperseded = False,
        include_cold: IncludeCold = False,
    ) -> str:
        """Search memory by meaning and keywords. Use before answering questions about this project's past decisions, conventions or the user's preferences, and before deciding something that may already be settled. Returns current memories, best first: id, text, kind, date (valid from), status, score, why (which retrievers matched, at which rank). Cite what you use as [mem:ID]."""  # noqa: E501

        def do(engine):
            hits = engine.recall(query, k=k, as_of=as_of, kinds=kinds, tags=tags, scope=scope,
                                 include_superseded=include_superseded, include_cold=include_cold)
            return render.recalled(hits, engine.name)

        return run(do, embeds=True, writes=False)

    def memory_replace(
        id: MemoryId,  # noqa: A002 - the name the model sees
        text: Text,
        valid_from: When = None,
        applies_when: Annotated[list[AppliesPhrase] | None,
                                Field(max_length=MAX_APPLIES_WHEN,
                                      description=_APPLIES_HOW + " Default: the old memory's.")] = None,
    ) -> str:
        """Supersede a memory whose fact has changed: writes the new text (same kind, tags, importance and applies_when unless given, in the store that holds the old one) and retires the old one, which stays in history (memory_history, as_of) but no longer comes back in recall or list. valid_from: when the change took effect (default now). Use it instead of memory_remember whenever the new statement replaces an old one. Returns status created (new id, superseded: [old id]), or duplicate: the text is already a current memory (its id), the old one is now superseded by it, and nothing new was written. To retire a memory listed in `related` by one you just remembered, pass its id and the same text. related: other current memories this may change, as in memory_remember."""  # noqa: E501

        def do(engine):
            return render.replaced(engine.replace(_memory_id(id), text, valid_from=valid_from,
                                                  applies_when=applies_when))

        return run(do, embeds=True)

    def memory_forget(id: MemoryId) -> str:  # noqa: A002
        """Erase a memory for good: its text, tags and index entries are deleted and cannot be recovered; only a tombstone (id, times) stays in history. IRREVERSIBLE: only when the user asks to forget it. To correct a fact that changed, use memory_replace instead."""  # noqa: E501

        def do(engine):
            forgotten = engine.forget(_memory_id(id))
            return {"id": forgotten.id, "status": forgotten.status}

        return run(do)

    def memory_history(id: MemoryId) -> str:  # noqa: A002
        """The supersession chain through a memory, oldest first: each version's text, status, valid time (valid_from, valid_to: when it held in the world) and transaction time (recorded_at, retired_at: when the store believed it)."""  # noqa: E501

        def do(engine):
            return {"chain": [render.history_entry(m) for m in engine.history(_memory_id(id))]}

        return run(do, writes=False)

    def memory_list(
        kinds: Kinds = [],  # noqa: B006
        tags: TagFilter = [],  # noqa: B006
        limit: Annotated[int | None, Field(ge=1, le=200, description="How many at most (default 50).")] = None,
        include_superseded: IncludeSuperseded = False,
        scope: Annotated[Literal["all", "project", "global"] | None,
                         Field(description="project (default), or all: project memories first, then the user's "
                                           "global ones.")] = None,
        include_cold: IncludeCold = False,
    ) -> str:
        """List memories, newest first, optionally filtered by kind and tag: for browsing, not searching (use memory_recall to find something)."""  # noqa: E501

        def do(engine):
            memories = engine.list(kinds=kinds, tags=tags, limit=limit, include_superseded=include_superseded,
                                   scope=scope, include_cold=include_cold)
            return {"memories": [render.memory(m) for m in memories]}

        return run(do, writes=False)

    def memory_status() -> str:
        """Which store this project uses and why (chosen_by), memory counts, the embedding model and whether it is loaded, and whether recall is keyword-only (and why). Use when memory seems missing or wrong."""  # noqa: E501
        base = {"project_dir": str(session.project_dir) if session.project_dir else None,
                "model_warmup": session.warm_state}
        try:
            status = session.try_call(lambda engine: engine.status().to_json(), timeout=2.0)
        except Unavailable as exc:
            env = {k: os.environ[k] for k in ("CAIRN_STORE", "CAIRN_HOME") if os.environ.get(k)}
            return render.dumps({"ok": False, "error": str(exc), **base, **env})
        if status is None:
            try:
                base["store"] = session.name
            except CairnError:
                pass
            return render.dumps({"ok": True, "busy": "another call holds the store (probably waiting for the "
                                                     "embedding model to load); ask again shortly", **base})
        keep = ("store", "path", "chosen_by", "counts", "vector_backend", "embedding_model", "model_loaded",
                "keyword_only", "keyword_only_reason", "store_embedding_model")
        return render.dumps({"ok": True, **{k: status[k] for k in keep if status.get(k) is not None}, **base})

    def memory_review_queue(
        types: Annotated[list[Literal[PROPOSAL_TYPES]], Field(  # type: ignore[valid-type]
            max_length=len(PROPOSAL_TYPES), description="Only these types (default: all).")] = [],  # noqa: B006
        state: Annotated[Literal[PROPOSAL_STATES], Field(  # type: ignore[valid-type]
            description="pending (default): awaiting the user's verdict.")] = "pending",
        limit: Annotated[int, Field(ge=1, le=200, description="How many at most.")] = 50,
    ) -> str:
        """For /cairn:review-memory and /cairn:import-guidance: the review queue, grouped by subject. Each proposal: id, type (duplicate, near_duplicate, summarise, demote, conflict, add), subject, the source memories as they are now (before), the texts and evidence (similarity, reason), a draft (summarise) and what approving would do (after). Changes nothing the user has not decided: memory_review_decide applies the user's verdict."""  # noqa: E501

        def do(engine):
            groups: dict[str, list[dict[str, Any]]] = {}
            proposals = engine.review_queue(states=[state], types=types, limit=limit)
            for p in proposals:
                shown = engine.review_show(p.id)
                entry: dict[str, Any] = {"id": p.id, "type": p.type, **{k: v for k, v in p.payload.items() if v}}
                entry["before"] = [render.memory(cairn.Memory(**{k: (tuple(v) if k == "tags" else v)
                                                                 for k, v in m.items()
                                                                 if k in cairn.Memory.__dataclass_fields__}))
                                   if not m.get("missing") else {"id": m["id"], "missing": True}
                                   for m in shown["sources"]]
                entry["after"] = shown["after"]
                if shown["stale"]:
                    entry["stale"] = shown["stale"]
                if entry["before"]:
                    entry.pop("texts", None)  # "before" has them, as they are now
                groups.setdefault(p.subject or "", []).append(entry)
            return {"subjects": [{"subject": subject, "proposals": items} for subject, items in groups.items()],
                    "count": len(proposals)}

        return run(do, writes=False)

    def memory_review_decide(
        verdict: Annotated[Literal["approve", "reject", "edit", "promote", "keep"], Field(
            description="The verdict the USER gave: approve, reject (nothing changes; keep means the same), edit "
                        "(approve with text), promote (bring memory_id back from the cold tier).")],
        proposal_id: Annotated[str | None, Field(max_length=64, description="The proposal (all verdicts but "
                                                                             "promote).")] = None,
        text: Annotated[str | None, Field(min_length=1, max_length=MAX_TEXT_BYTES,
                                          description="edit only: the text the user agreed to (a merge, a "
                                                      "summary, an edited addition).")] = None,
        keep_id: Annotated[str | None, Field(max_length=64, description="approve: which of the proposal's memories "
                                                                        "stays, if the user said.")] = None,
        tags: Annotated[list[Tag] | None, Field(max_length=20, description="approve or edit: the tags the user "
                                                                           "chose for the memory that stays.")] = None,
        memory_id: Annotated[str | None, Field(max_length=64, description="promote only: the cold memory.")] = None,
    ) -> str:
        """ONLY for /cairn:review-memory and /cairn:import-guidance: apply the one verdict the user explicitly gave on one proposal of memory_review_queue. Never choose or infer a verdict yourself. approve: do what the proposal says (keep_id: the memory the user chose to stay; tags: the tags they chose); reject: nothing changes (a pair is not proposed again); edit: approve with `text` as the user agreed it; promote: bring a cold memory back. Refused, changing nothing, when the proposal was decided already, expired, or its memories changed since (stale)."""  # noqa: E501

        def do(engine):
            if verdict == "promote":
                if not memory_id:
                    raise cairn.InvalidInput("promote needs memory_id: the cold memory to bring back")
                return engine.promote(_memory_id(memory_id))
            if not proposal_id:
                raise cairn.InvalidInput(f"{verdict} needs proposal_id")
            return engine.review_decide(proposal_id.strip(), verdict, text=text,
                                        keep_id=_memory_id(keep_id) if keep_id else None, tags=tags, by="mcp")

        return run(do, embeds=True)

    def memory_propose(
        text: Text,
        kind: Annotated[Kind, Field(description="decision, convention, preference, fact, task or insight.")] = "fact",
        tags: Tags = [],  # noqa: B006
        applies_when: Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]] | None, Field(
            max_length=10, description="When it applies (e.g. 'editing SQL migrations').")] = None,
        context: Annotated[str | None, Field(max_length=300, description="Where it came from (a heading).")] = None,
        origin: Annotated[str | None, Field(max_length=300, description="The file it came from.")] = None,
    ) -> str:
        """For /cairn:import-guidance: queue one atomic memory for the user's approval (an `add` proposal). Nothing is stored until the user approves it in the review. Returns status queued, pending (the same text is already queued) or exists (already a memory)."""  # noqa: E501

        def do(engine):
            return engine.propose(text, kind=kind, tags=tags, applies_when=applies_when, context=context,
                                  origin=origin)

        return run(do)

    def memory_maintenance_run(
        apply: Annotated[bool, Field(description="false (default): a dry run that writes nothing. true: retire "
                                                 "exact duplicates and queue the rest for review.")] = False,
    ) -> str:
        """Run memory maintenance on this project's store: exact duplicates, near-duplicates, clusters on one subject, stale never-used memories. Dry run by default (reports, writes nothing). With apply, only exact duplicates are retired (superseded, never deleted); everything else is queued for the user's review (memory_review_queue)."""  # noqa: E501

        def do(engine):
            report = engine.maintain(apply=apply)
            report["proposals"] = report["proposals"][:20]  # counts has them all
            return report

        return run(do, writes=apply)

    def memory_maintenance_status() -> str:
        """When maintenance last ran, whether a run is due, whether one is running (lease), the review queue's counts by state and type, and how many memories are cold."""  # noqa: E501
        return run(lambda engine: engine.maintenance_status(), writes=False)

    def memory_search_sessions(
        query: Annotated[str, Field(min_length=1, max_length=2000,
                                    description="Words, or an exact error message / path / identifier (quote it "
                                                "to force an exact match).")],
        mode: Annotated[Literal["auto", "keyword", "semantic", "exact", "hybrid"],
                        Field(description="auto (default): exact for a quoted string or an identifier-like "
                                          "token, else keyword + semantic.")] = "auto",
        k: Annotated[int | None, Field(ge=1, le=50, description="How many turns at most (default 10).")] = None,
        window: Annotated[int | None, Field(ge=0, le=10, description="Turns before and after each hit "
                                                                     "(default 2).")] = None,
        since: When = None,
        until: When = None,
    ) -> str:
        """Search the captured turns of past sessions of this project (user prompts and assistant replies, not tool output): what was said, an error message and how it was fixed, a reason given, what was tried. Returns one result per session, best first: its session_id, and its turns in order: the ranked ones (marked "hit": true) and the turns just before and after them; turns far less relevant than the best are dropped. since/until: ISO 8601 bounds on the turn's time."""  # noqa: E501

        def do(engine):
            hits = engine.search_sessions(query, mode=mode, k=k, window=window, since=since, until=until)
            return {"results": [_session_result(r) for r in cairn.merge_session_hits(hits)]}

        return run(do, embeds=mode != "exact" and mode != "keyword", writes=False)

    def memory_list_sessions(
        limit: Annotated[int, Field(ge=1, le=200, description="How many at most.")] = 20,
        since: When = None,
        until: When = None,
    ) -> str:
        """The captured sessions of this project, most recent first: id, title (the first prompt), start and end time, turn count, git branch."""  # noqa: E501

        def do(engine):
            return {"sessions": [_session_row(s) for s in engine.list_sessions(limit=limit, since=since,
                                                                                until=until)]}

        return run(do, writes=False)

    def memory_read_session(
        session_id: Annotated[str, Field(min_length=1, max_length=200, description="As listed or found.")],
        offset: Annotated[int, Field(ge=0, description="First turn position to return.")] = 0,
        limit: Annotated[int, Field(ge=1, le=200, description="How many turns.")] = 50,
    ) -> str:
        """Read a captured session's turns in order, paged by position (offset, limit): to see a whole conversation around a search hit."""  # noqa: E501

        def do(engine):
            info, turns = engine.read_session(session_id, offset=offset, limit=limit)
            return {"session": _session_row(info), "turns": [_turn(t) for t in turns],
                    "next_offset": turns[-1].position + 1 if len(turns) == limit else None}

        return run(do, writes=False)

    def tool(fn, title: str, annotations: ToolAnnotations) -> Tool:
        made = Tool.from_function(fn, title=title, annotations=annotations, structured_output=False)
        made.parameters = _drop_titles(made.parameters)
        return made

    tools = [
        tool(memory_remember, "Remember", ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                           idempotent_hint=True, open_world_hint=False)),
        tool(memory_recall, "Recall", READ_ONLY),
        tool(memory_replace, "Replace a changed memory", ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)),
        tool(memory_forget, "Forget (irreversible)", ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)),
        tool(memory_history, "Memory history", READ_ONLY),
        tool(memory_list, "List memories", READ_ONLY),
        tool(memory_status, "Memory status", READ_ONLY),
        tool(memory_review_queue, "Review queue", READ_ONLY),
        tool(memory_maintenance_status, "Maintenance status", READ_ONLY),
        tool(memory_search_sessions, "Search past sessions", READ_ONLY),
        tool(memory_list_sessions, "List past sessions", READ_ONLY),
        tool(memory_read_session, "Read a past session", READ_ONLY),
        tool(memory_review_decide, "Apply a review verdict", ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)),
        tool(memory_propose, "Propose a memory for review", ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)),
        tool(memory_maintenance_run, "Run memory maintenance", ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)),
    ]

    async def warm_after_handshake(ctx, call_next):
        result = await call_next(ctx)
        if ctx.method != "initialize":  # the client has its answer: now the model may take the CPU
            session.start_warmup()
        return result

    return CairnServer("cairn", version=cairn.__version__, instructions=INSTRUCTIONS, tools=tools,
                       middleware=[warm_after_handshake], log_level="WARNING")


PLUGIN_ROOT = Path(__file__).resolve().parents[4]  # engine/cairn/adapters/mcp/server.py -> the plugin


def project_dir() -> Path | None:
    """CLAUDE_PROJECT_DIR, else the working directory (an unexpanded "${...}" counts as unset).
    None when neither names the project: the working directory is the plugin's own folder (some
    clients start servers there), whose store would be shared by every project and seen by none of
    their hooks."""
    value = os.environ.get("CLAUDE_PROJECT_DIR", "")
    if value and "${" not in value and Path(value).is_dir():
        return Path(value)
    if value:
        log.warning("CLAUDE_PROJECT_DIR=%r is not a folder; using the working directory", value)
    cwd = Path.cwd().resolve()
    plugin_roots = {PLUGIN_ROOT, *([Path(os.environ["CLAUDE_PLUGIN_ROOT"]).resolve()]
                                   if os.environ.get("CLAUDE_PLUGIN_ROOT") else [])}
    if any(cwd == root or cwd.is_relative_to(root) for root in plugin_roots):
        log.warning("started in the plugin's folder %s without CLAUDE_PROJECT_DIR: the project is unknown", cwd)
        return None
    return cwd


EOF_GRACE_S = 1.0  # after stdin closes, how long running calls may still finish (then exit)
PARENT_POLL_S = 0.25


def _start(target: Callable[[], object], name: str) -> None:
    threading.Thread(target=target, name=name, daemon=True).start()


def _watch_parent(stop: Callable[[int], None]) -> None:
    """Exit when the client that started us dies (even by SIGKILL, when stdin may stay open because
    another process shares the pipe): we are then re-parented, so getppid() changes."""
    parent = os.getppid()
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            log.warning("the client (pid %d) is gone; exiting", parent)
            stop(0)
            return


def _log_to_stderr() -> None:
    level = os.environ.get("CAIRN_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=logging.getLevelNamesMapping().get(level, logging.WARNING),
                        format="cairn-mcp %(levelname)s %(name)s: %(message)s")


def main(store: str | None = None, *, defer_review: bool = False) -> None:
    """Serve over stdio until the client closes stdin: the plugin's launcher (mcp/server.py) and
    `cairn serve --transport stdio` both run this. store: an explicitly chosen store name (None:
    CAIRN_STORE, else the project of CLAUDE_PROJECT_DIR or the working directory). defer_review:
    the plugin's launcher, whose SessionEnd hook queues what the session's writes left unresolved
    (Session)."""
    _log_to_stderr()
    session = Session(project_dir(), store=store, defer_review=defer_review)

    def stop(code: int) -> None:
        # os._exit: a worker thread blocked on stdin or in a model load must not keep the process alive.
        session.close(timeout=0.5)
        logging.shutdown()
        sys.stderr.flush()
        os._exit(code)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop(0))
    server = build_server(session)
    # At stdin EOF the SDK waits for running tool calls (one may wait on the model): give them a
    # moment, then go, so the client never waits for us.
    server.on_stdin_eof = lambda: _start(lambda: (time.sleep(EOF_GRACE_S), stop(0)), "cairn-eof")
    _start(lambda: _watch_parent(stop), "cairn-parent")
    code = 0
    try:
        server.run("stdio")  # returns at stdin EOF
    except Exception:
        log.exception("the MCP server stopped")
        code = 1
    stop(code)


def http_app(store: str | None = None, *, max_body_bytes: int) -> tuple[Any, Session]:
    """The same tools over MCP's streamable HTTP transport, at /mcp: (the ASGI app, its session).
    Host, Origin, token and size checks are the caller's (cairn.adapters.http.Guard wraps this
    app); the SDK's own Host check is off because the guard knows the bound address and tokens."""
    from mcp.server.transport_security import TransportSecuritySettings

    _log_to_stderr()
    session = Session(project_dir(), store=store)
    app = build_server(session).streamable_http_app(
        streamable_http_path="/mcp", max_request_body_size=max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return app, session


if __name__ == "__main__":
    main()
