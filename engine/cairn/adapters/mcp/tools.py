"""The MCP tools, as a table: one `ToolSpec` per tool, each over an operation of the catalogue.

A row names the tool, its title and annotations, the description the model reads, which of the
operation's arguments it takes (their types, bounds, defaults and meanings come from
cairn.operations), and `run`: the one engine call, its result rendered by cairn.render. The server
(server.py) turns each row into an SDK tool; nothing here knows about sessions or transports.

Adding a tool is adding a row; adding an argument to one is naming it in `args` (declare it in the
catalogue first, with the `brief` the model reads). Two rows offer several operations (`also`), so
that every session reads fewer schemas (bench/mcp_cost.py): memory_review by its `action`,
memory_sessions by whether a session_id is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.types import ToolAnnotations

import cairn
from cairn import Cairn, render
from cairn import operations as ops


def memory_id(raw: str) -> str:
    """Accept an id as cited: "[mem:01J...]" or "mem:01J..." mean "01J..."."""
    text = raw.strip().strip("[]").strip()
    return text[4:].strip() if text.lower().startswith("mem:") else text


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool. args: the parameters, in the order the model sees them (catalogue Args, or
    ones derived from them with dataclasses.replace). run(engine, arguments) -> a JSON-able result.
    writes/embeds(arguments): whether this call writes to the project store / may need the model
    (default: the operation's flags). A row without `run` is served by the server itself (status,
    which needs the session rather than the engine). also: the other operations the tool offers,
    chosen by an `action` argument (memory_review; `op` is the one that writes most)."""

    name: str
    title: str
    op: ops.Operation
    annotations: ToolAnnotations
    description: str = ""
    run: Callable[[Cairn, dict[str, Any]], Any] | None = None
    args: tuple[ops.Arg, ...] = ()
    writes: Callable[[dict[str, Any]], bool] | None = None
    embeds: Callable[[dict[str, Any]], bool] | None = None
    also: tuple[ops.Operation, ...] = ()

    @property
    def ops(self) -> tuple[ops.Operation, ...]:
        return (self.op, *self.also)

    def writes_for(self, arguments: dict[str, Any]) -> bool:
        return self.writes(arguments) if self.writes is not None else self.op.writes

    def embeds_for(self, arguments: dict[str, Any]) -> bool:
        return self.embeds(arguments) if self.embeds is not None else self.op.embeds


# Only the hints that differ from MCP's defaults (readOnlyHint false, destructiveHint true,
# idempotentHint false), which every session pays for, and destructiveHint always on a write (what
# clients ask for); the other two mean nothing for a read-only tool.
READ_ONLY = ToolAnnotations(read_only_hint=True)


def _writes(*, destructive: bool = False, idempotent: bool = False) -> ToolAnnotations:
    return ToolAnnotations(destructive_hint=destructive, idempotent_hint=idempotent or None)


def _optional(arg: ops.Arg, **changes: Any) -> ops.Arg:
    """The argument, not required (its bounds kept): for a tool that needs it only in some cases."""
    return dataclasses.replace(arg, required=False, default=None, **changes)


# -- results as the model sees them: compact, empty fields left out -------------------------------------
def _turn(turn: cairn.Turn) -> dict[str, Any]:
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


# -- the engine calls --------------------------------------------------------------------------------------
def _remember(engine: Cairn, a: dict[str, Any]) -> Any:
    return render.remembered(engine.remember(**a))


def _recall(engine: Cairn, a: dict[str, Any]) -> Any:
    return render.recalled(engine.recall(**a), engine.name)


def _replace(engine: Cairn, a: dict[str, Any]) -> Any:
    return render.replaced(engine.replace(memory_id(a.pop("id")), **a))


def _keep_both(engine: Cairn, a: dict[str, Any]) -> Any:
    return engine.review.keep_both(memory_id(a["id"]), [memory_id(o) for o in a["others"]])


def _forget(engine: Cairn, a: dict[str, Any]) -> Any:
    forgotten = engine.forget(memory_id(a["id"]))
    return {"id": forgotten.id, "status": forgotten.status}


def _history(engine: Cairn, a: dict[str, Any]) -> Any:
    return {"chain": [render.history_entry(m) for m in engine.history(memory_id(a["id"]))]}


def _list(engine: Cairn, a: dict[str, Any]) -> Any:
    return {"memories": [render.memory(m) for m in engine.list(**a)]}


def _review_queue(engine: Cairn, a: dict[str, Any]) -> Any:
    groups: dict[str, list[dict[str, Any]]] = {}
    proposals = engine.review.queue(states=[a["state"]], types=a["types"], limit=a["limit"])
    for p in proposals:
        shown = engine.review.show(p.id)
        entry: dict[str, Any] = {"id": p.id, "type": p.type, **{k: v for k, v in p.payload.items() if v}}
        entry["before"] = [render.memory(cairn.Memory(**{k: (tuple(v) if k == "tags" else v)  # type: ignore[arg-type]
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


def _review_decide(engine: Cairn, a: dict[str, Any]) -> Any:
    verdict = a["verdict"]
    if verdict == "promote":
        if not a["memory_id"]:
            raise cairn.InvalidInput("promote needs memory_id: the cold memory to bring back")
        return engine.review.promote(memory_id(a["memory_id"]))
    if not a["proposal_id"]:
        raise cairn.InvalidInput(f"{verdict} needs proposal_id")
    return engine.review.decide(a["proposal_id"].strip(), verdict, text=a["text"],
                                keep_id=memory_id(a["keep_id"]) if a["keep_id"] else None, tags=a["tags"], by="mcp")


def _maintain(engine: Cairn, a: dict[str, Any]) -> Any:
    report = engine.review.maintain(**a)
    report["proposals"] = report["proposals"][:20]  # counts has them all
    return report


def _search_sessions(engine: Cairn, a: dict[str, Any]) -> Any:
    hits = engine.sessions.search(**a)
    return {"results": [_session_result(r) for r in cairn.merge_session_hits(hits)], "time_window": hits.window_json()}


def _list_sessions(engine: Cairn, a: dict[str, Any]) -> Any:
    return {"sessions": [_session_row(s) for s in engine.sessions.catalog(**a)]}


def _read_session(engine: Cairn, a: dict[str, Any]) -> Any:
    info, turns = engine.sessions.read(**a)
    return {"session": _session_row(info), "turns": [_turn(t) for t in turns],
            "next_offset": turns[-1].position + 1 if len(turns) == a["limit"] else None}


def _sessions(engine: Cairn, a: dict[str, Any]) -> Any:
    """memory_sessions: without session_id the list of sessions (since, until), with it that
    session's turns (offset). Raises InvalidInput for an argument of the other."""
    reading = a["session_id"] is not None
    stray = [k for k in (("since", "until") if reading else ("offset",)) if a[k] is not None]
    if stray:
        raise cairn.InvalidInput(f"{' and '.join(stray)}: only when listing sessions, without session_id" if reading
                                 else "offset: only when reading a session: give its session_id")
    if reading:
        return _read_session(engine, {"session_id": a["session_id"], "offset": a["offset"] or 0,
                                      "limit": a["limit"]})
    return _list_sessions(engine, {"limit": a["limit"], "since": a["since"], "until": a["until"]})


@dataclass(frozen=True)
class Action:
    """One action of memory_review: its operation, which of the tool's arguments it takes, those it
    cannot do without, and its engine call (given the arguments it takes, defaults filled in: the
    catalogue's, or `defaults` for an argument the tool shapes its own way)."""

    op: ops.Operation
    args: tuple[str, ...]
    run: Callable[[Cairn, dict[str, Any]], Any]
    needs: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)


# The review queue and maintenance behind one tool: the model reads one schema in every session for
# what only /cairn:review-memory, /cairn:import-guidance and a user's request for maintenance use.
REVIEW_ACTIONS: dict[str, Action] = {
    # One state at a time: the review reads the pending queue.
    "queue": Action(ops.REVIEW_QUEUE, ("types", "state", "limit"), _review_queue, defaults={"state": "pending"}),
    "decide": Action(ops.REVIEW_DECIDE, ("proposal_id", "verdict", "text", "keep_id", "tags", "memory_id"),
                     _review_decide, needs=("verdict",)),
    "propose": Action(ops.PROPOSE, ("text", "kind", "tags", "applies_when", "context", "origin", "paths"),
                      lambda engine, a: engine.review.propose(**a), needs=("text",)),
    "maintain": Action(ops.MAINTAIN, ("apply",), _maintain),
    "maintenance_status": Action(ops.MAINTENANCE_STATUS, (), lambda engine, a: engine.review.status()),
}


def review_arguments(a: dict[str, Any]) -> tuple[Action, dict[str, Any]]:
    """The action memory_review's arguments ask for, and the arguments it takes, the catalogue's
    defaults filled in for those not given. Raises InvalidInput naming an argument the action does
    not take, or one it needs."""
    name = a["action"]
    action = REVIEW_ACTIONS[name]
    stray = [k for k, v in a.items() if k != "action" and v is not None and k not in action.args]
    if stray:
        takes = ", ".join(action.args) or "no other argument"
        raise cairn.InvalidInput(f"action {name} takes {takes}, not {', '.join(stray)}")
    missing = [k for k in action.needs if a.get(k) is None]
    if missing:
        raise cairn.InvalidInput(f"action {name} needs {', '.join(missing)}")
    given: dict[str, Any] = {}
    for k in action.args:
        declared = action.op.by_name.get(k)
        fallback: Any = action.defaults.get(k)
        if declared is not None and declared.default is not None:
            fallback = list(declared.default) if declared.many else declared.default
        given[k] = a.get(k) if a.get(k) is not None else fallback
    return action, given


def _review(engine: Cairn, a: dict[str, Any]) -> Any:
    action, given = review_arguments(a)
    return action.run(engine, given)


def _review_writes(a: dict[str, Any]) -> bool:
    return a["action"] in ("decide", "propose") or (a["action"] == "maintain" and bool(a.get("apply")))


def reads_only(name: object, arguments: Any) -> bool:
    """Whether a tools/call, its arguments as the client sent them (not yet checked), only reads:
    what a read-only token may call over mcp-http. Anything unclear counts as a write."""
    if name in READ_ONLY_TOOLS:
        return True
    if name != "memory_review" or not isinstance(arguments, dict):
        return False
    action = arguments.get("action")
    return action in ("queue", "maintenance_status") or (action == "maintain" and arguments.get("apply") in
                                                         (None, False))


R, RC, L, RQ, RD = ops.RECALL, ops.REPLACE, ops.LIST, ops.REVIEW_QUEUE, ops.REVIEW_DECIDE
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memory_remember", "Remember", ops.REMEMBER, _writes(idempotent=True), run=_remember,
        args=ops.REMEMBER.pick(("text", "kind", "tags", "importance", "valid_from", "scope", "applies_when",
                                "paths")),
        writes=lambda a: a["scope"] == "project",  # a global write creates no project store
        description="Returns id, status (created; duplicate: nothing written), superseded (ids its text said changed) and related."),
    ToolSpec(
        "memory_recall", "Recall", R, READ_ONLY, run=_recall,
        args=R.pick(("query", "k", "as_of", "kinds", "tags", "scope", "include_superseded", "include_cold")),
        description="Current memories by meaning and keywords, best first, each with why it ranked."),
    ToolSpec(
        "memory_replace", "Replace a memory", RC, _writes(), run=_replace,
        args=RC.pick(("id", "text", "valid_from", "applies_when")),
        description="Supersede a changed memory (kept in history); what is not given carries over. Returns as memory_remember."),
    ToolSpec(
        "memory_keep_both", "Keep both", ops.KEEP_BOTH, _writes(idempotent=True), run=_keep_both,
        args=ops.KEEP_BOTH.args,
        description="The memory written (id) and these of its related (others) both hold."),
    ToolSpec(
        "memory_forget", "Forget (irreversible)", ops.FORGET, _writes(destructive=True, idempotent=True),
        run=_forget, args=ops.FORGET.args,
        description="Irreversible: erase a memory (a tombstone stays), only when the user asks."),
    ToolSpec(
        "memory_history", "Memory history", ops.HISTORY, READ_ONLY, run=_history, args=ops.HISTORY.args,
        description="A memory's versions, oldest first, with valid and transaction times."),
    ToolSpec(
        "memory_list", "List memories", L, READ_ONLY, run=_list,
        args=L.pick(("kinds", "tags", "limit", "include_superseded", "scope", "include_cold")),
        description="Memories, newest first: for browsing, not searching."),
    ToolSpec(
        "memory_status", "Memory status", ops.STATUS, READ_ONLY,  # served by the server: it needs the session
        description="Which store and why, counts, the model, whether recall is keyword-only."),
    ToolSpec(
        "memory_search_sessions", "Search past sessions", ops.SEARCH_SESSIONS, READ_ONLY, run=_search_sessions,
        args=ops.SEARCH_SESSIONS.args, embeds=lambda a: a["mode"] not in ("exact", "keyword"),
        description="Past sessions' prompts and replies: an error and its fix, a reason given. Per session, best first: hits (\"hit\": true) with the turns around them. A time in the query (\"last week\") ranks its window first."),
    ToolSpec(
        "memory_sessions", "Past sessions", ops.READ_SESSION, READ_ONLY, run=_sessions, also=(ops.LIST_SESSIONS,),
        # Listing and reading in one tool: one schema less in every session.
        args=(_optional(ops.READ_SESSION.arg("session_id")), _optional(ops.READ_SESSION.arg("offset")),
              ops.READ_SESSION.arg("limit"), *ops.LIST_SESSIONS.pick(("since", "until"))),
        description="Without session_id: past sessions, most recent first. With it: its turns in order, from offset."),
    ToolSpec(
        "memory_review", "Review and maintenance", RD, _writes(destructive=True), run=_review,
        also=tuple(a.op for a in REVIEW_ACTIONS.values() if a.op is not RD),
        args=(ops.Arg("action", "str", "What to do.", required=True, choices=tuple(REVIEW_ACTIONS), brief=""),
              _optional(RQ.arg("types")),
              _optional(RQ.arg("states"), name="state", many=False, items=None,
                        help="pending (default): awaiting the user's verdict."),
              _optional(RQ.arg("limit")),
              _optional(RD.arg("proposal_id")),
              _optional(RD.arg("verdict"), choices=("approve", "reject", "edit", "promote", "keep"),
                        help="The verdict the USER gave: approve, reject (nothing changes; keep means the same), edit "
                             "(approve with text), promote (bring memory_id back from the cold tier).",
                        brief=""),
              # The commands that decide and propose (commands/*.md) say what each argument holds.
              _optional(RD.arg("text"), brief=""), _optional(RD.arg("keep_id"), brief=""),
              _optional(RD.arg("tags"), brief=""),
              _optional(ops.PROMOTE.arg("id"), name="memory_id", help="promote only: the cold memory."),
              _optional(ops.PROPOSE.arg("kind")),
              _optional(ops.PROPOSE.arg("applies_when")),
              _optional(ops.PROPOSE.arg("context")),
              _optional(ops.PROPOSE.arg("origin")), _optional(ops.PROPOSE.arg("paths"), brief=""),
              _optional(ops.MAINTAIN.arg("apply"))),
        writes=_review_writes, embeds=lambda a: a["action"] == "decide",
        description="ONLY for /cairn:review-memory, /cairn:import-guidance or what the user asks. queue: "
                    "proposals to review. decide: apply the verdict the user gave, never your own. propose: queue a "
                    "memory for the user's approval. maintain: a dry run unless apply. maintenance_status."),
)
BY_NAME = {t.name: t for t in TOOLS}
WRITE_TOOLS = frozenset(t.name for t in TOOLS if not t.annotations.read_only_hint)
# The tools a read-only token may call over mcp-http.
READ_ONLY_TOOLS = frozenset(t.name for t in TOOLS if t.annotations.read_only_hint)
