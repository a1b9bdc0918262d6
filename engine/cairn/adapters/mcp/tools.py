"""The MCP tools, as a table: one `ToolSpec` per tool, each over an operation of the catalogue.

A row names the tool, its title and annotations, the description the model reads, which of the
operation's arguments it takes (their types, bounds, defaults and meanings come from
cairn.operations), and `run`: the one engine call, its result rendered by cairn.render. The server
(server.py) turns each row into an SDK tool; nothing here knows about sessions or transports.

Adding a tool is adding a row; adding an argument to one is naming it in `args` (declare it in the
catalogue first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
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
    which needs the session rather than the engine)."""

    name: str
    title: str
    op: ops.Operation
    annotations: ToolAnnotations
    description: str = ""
    run: Callable[[Cairn, dict[str, Any]], Any] | None = None
    args: tuple[ops.Arg, ...] = ()
    writes: Callable[[dict[str, Any]], bool] | None = None
    embeds: Callable[[dict[str, Any]], bool] | None = None

    def writes_for(self, arguments: dict[str, Any]) -> bool:
        return self.writes(arguments) if self.writes is not None else self.op.writes

    def embeds_for(self, arguments: dict[str, Any]) -> bool:
        return self.embeds(arguments) if self.embeds is not None else self.op.embeds


READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _writes(*, destructive: bool = False, idempotent: bool = False) -> ToolAnnotations:
    return ToolAnnotations(read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent,
                           open_world_hint=False)


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
    return engine.keep_both(memory_id(a["id"]), [memory_id(o) for o in a["others"]])


def _forget(engine: Cairn, a: dict[str, Any]) -> Any:
    forgotten = engine.forget(memory_id(a["id"]))
    return {"id": forgotten.id, "status": forgotten.status}


def _history(engine: Cairn, a: dict[str, Any]) -> Any:
    return {"chain": [render.history_entry(m) for m in engine.history(memory_id(a["id"]))]}


def _list(engine: Cairn, a: dict[str, Any]) -> Any:
    return {"memories": [render.memory(m) for m in engine.list(**a)]}


def _review_queue(engine: Cairn, a: dict[str, Any]) -> Any:
    groups: dict[str, list[dict[str, Any]]] = {}
    proposals = engine.review_queue(states=[a["state"]], types=a["types"], limit=a["limit"])
    for p in proposals:
        shown = engine.review_show(p.id)
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
        return engine.promote(memory_id(a["memory_id"]))
    if not a["proposal_id"]:
        raise cairn.InvalidInput(f"{verdict} needs proposal_id")
    return engine.review_decide(a["proposal_id"].strip(), verdict, text=a["text"],
                                keep_id=memory_id(a["keep_id"]) if a["keep_id"] else None, tags=a["tags"], by="mcp")


def _maintain(engine: Cairn, a: dict[str, Any]) -> Any:
    report = engine.maintain(**a)
    report["proposals"] = report["proposals"][:20]  # counts has them all
    return report


def _search_sessions(engine: Cairn, a: dict[str, Any]) -> Any:
    return {"results": [_session_result(r) for r in cairn.merge_session_hits(engine.search_sessions(**a))]}


def _list_sessions(engine: Cairn, a: dict[str, Any]) -> Any:
    return {"sessions": [_session_row(s) for s in engine.list_sessions(**a)]}


def _read_session(engine: Cairn, a: dict[str, Any]) -> Any:
    info, turns = engine.read_session(**a)
    return {"session": _session_row(info), "turns": [_turn(t) for t in turns],
            "next_offset": turns[-1].position + 1 if len(turns) == a["limit"] else None}


R, RC, L, RQ, RD = ops.RECALL, ops.REPLACE, ops.LIST, ops.REVIEW_QUEUE, ops.REVIEW_DECIDE
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "memory_remember", "Remember", ops.REMEMBER, _writes(idempotent=True), run=_remember,
        args=ops.REMEMBER.pick(("text", "kind", "tags", "importance", "valid_from", "scope", "applies_when",
                                "paths")),
        writes=lambda a: a["scope"] == "project",  # a global write creates no project store
        description="Store one memory: a decision with its reason, a convention, a user preference or a non-obvious fact, as one self-contained statement. Not what the code or git history already records; never secrets. If it restates a changed fact, use memory_replace instead. valid_from: when it became true (default now). Returns id and status (created, or duplicate: nothing written); a text that says a similar memory changed (\"now\", \"moved from X to Y\", \"no longer\") supersedes it (superseded ids). related: up to 3 current memories about the same subject (id, text, kind, date, why): if the new memory changes one, call memory_replace with its id and this text; if both hold, call memory_keep_both; if you cannot tell, do nothing (the user reviews the pair)."),
    ToolSpec(
        "memory_recall", "Recall", R, READ_ONLY, run=_recall,
        args=R.pick(("query", "k", "as_of", "kinds", "tags", "scope", "include_superseded", "include_cold")),
        description="Search memory by meaning and keywords. Use before answering questions about this project's past decisions, conventions or the user's preferences, and before deciding something that may already be settled. Returns current memories, best first: id, text, kind, date (valid from), status, score, why (which retrievers matched, at which rank). Cite what you use as [mem:ID]."),
    ToolSpec(
        "memory_replace", "Replace a changed memory", RC, _writes(), run=_replace,
        args=RC.pick(("id", "text", "valid_from", "applies_when")),
        description="Supersede a memory whose fact has changed: writes the new text (same kind, tags, importance and applies_when unless given, in the store that holds the old one) and retires the old one, which stays in history (memory_history, as_of) but no longer comes back in recall or list. valid_from: when the change took effect (default now). Use it instead of memory_remember whenever the new statement replaces an old one. Returns status created (new id, superseded: [old id]), or duplicate: the text is already a current memory (its id), the old one is now superseded by it, and nothing new was written. To retire a memory listed in `related` by one you just remembered, pass its id and the same text. related: other current memories this may change, as in memory_remember."),
    ToolSpec(
        "memory_keep_both", "Keep both", ops.KEEP_BOTH, _writes(idempotent=True), run=_keep_both,
        args=ops.KEEP_BOTH.args,
        description="After memory_remember or memory_replace: say that the memory you just wrote changes none of the memories its answer listed in `related` (others: their ids), because both hold (an addition, a second value of a relation). Nothing is retired; the pairs are not queued for the user's review at the session's end. Only for a pair you judged; when you cannot tell, do nothing."),
    ToolSpec(
        "memory_forget", "Forget (irreversible)", ops.FORGET, _writes(destructive=True, idempotent=True),
        run=_forget, args=ops.FORGET.args,
        description="Erase a memory for good: its text, tags and index entries are deleted and cannot be recovered; only a tombstone (id, times) stays in history. IRREVERSIBLE: only when the user asks to forget it. To correct a fact that changed, use memory_replace instead."),
    ToolSpec(
        "memory_history", "Memory history", ops.HISTORY, READ_ONLY, run=_history, args=ops.HISTORY.args,
        description="The supersession chain through a memory, oldest first: each version's text, status, valid time (valid_from, valid_to: when it held in the world) and transaction time (recorded_at, retired_at: when the store believed it)."),
    ToolSpec(
        "memory_list", "List memories", L, READ_ONLY, run=_list,
        args=L.pick(("kinds", "tags", "limit", "include_superseded", "scope", "include_cold")),
        description="List memories, newest first, optionally filtered by kind and tag: for browsing, not searching (use memory_recall to find something)."),
    ToolSpec(
        "memory_status", "Memory status", ops.STATUS, READ_ONLY,  # served by the server: it needs the session
        description="Which store this project uses and why (chosen_by), memory counts, the embedding model and whether it is loaded, and whether recall is keyword-only (and why). Use when memory seems missing or wrong."),
    ToolSpec(
        "memory_review_queue", "Review queue", RQ, READ_ONLY, run=_review_queue,
        # One state at a time: the review skills read the pending queue.
        args=(RQ.arg("types"), dataclasses.replace(RQ.arg("states"), name="state", many=False, default="pending",
                                                   help="pending (default): awaiting the user's verdict."),
              RQ.arg("limit")),
        description="For /cairn:review-memory and /cairn:import-guidance: the review queue, grouped by subject. Each proposal: id, type (duplicate, near_duplicate, summarise, demote, conflict, add), subject, the source memories as they are now (before), the texts and evidence (similarity, reason), a draft (summarise) and what approving would do (after). Changes nothing the user has not decided: memory_review_decide applies the user's verdict."),
    ToolSpec(
        "memory_maintenance_status", "Maintenance status", ops.MAINTENANCE_STATUS, READ_ONLY,
        run=lambda engine, a: engine.maintenance_status(),
        description="When maintenance last ran, whether a run is due, whether one is running (lease), the review queue's counts by state and type, and how many memories are cold."),
    ToolSpec(
        "memory_search_sessions", "Search past sessions", ops.SEARCH_SESSIONS, READ_ONLY, run=_search_sessions,
        args=ops.SEARCH_SESSIONS.args, embeds=lambda a: a["mode"] not in ("exact", "keyword"),
        description="Search the captured turns of past sessions of this project (user prompts and assistant replies, not tool output): what was said, an error message and how it was fixed, a reason given, what was tried. Returns one result per session, best first: its session_id, and its turns in order: the ranked ones (marked \"hit\": true) and the turns just before and after them; turns far less relevant than the best are dropped. since/until: ISO 8601 bounds on the turn's time."),
    ToolSpec(
        "memory_list_sessions", "List past sessions", ops.LIST_SESSIONS, READ_ONLY, run=_list_sessions,
        args=ops.LIST_SESSIONS.args,
        description="The captured sessions of this project, most recent first: id, title (the first prompt), start and end time, turn count, git branch."),
    ToolSpec(
        "memory_read_session", "Read a past session", ops.READ_SESSION, READ_ONLY, run=_read_session,
        args=ops.READ_SESSION.args,
        description="Read a captured session's turns in order, paged by position (offset, limit): to see a whole conversation around a search hit."),
    ToolSpec(
        "memory_review_decide", "Apply a review verdict", RD, _writes(destructive=True), run=_review_decide,
        # One tool for every verdict the user gives in the review, promote (ops.PROMOTE) included.
        args=(dataclasses.replace(RD.arg("verdict"), choices=("approve", "reject", "edit", "promote", "keep"),
                                  help="The verdict the USER gave: approve, reject (nothing changes; keep means the "
                                       "same), edit (approve with text), promote (bring memory_id back from the "
                                       "cold tier)."),
              _optional(RD.arg("proposal_id"), help="The proposal (all verdicts but promote)."),
              RD.arg("text"), RD.arg("keep_id"), RD.arg("tags"),
              _optional(ops.PROMOTE.arg("id"), name="memory_id", help="promote only: the cold memory.")),
        description="ONLY for /cairn:review-memory and /cairn:import-guidance: apply the one verdict the user explicitly gave on one proposal of memory_review_queue. Never choose or infer a verdict yourself. approve: do what the proposal says (keep_id: the memory the user chose to stay; tags: the tags they chose); reject: nothing changes (a pair is not proposed again); edit: approve with `text` as the user agreed it; promote: bring a cold memory back. Refused, changing nothing, when the proposal was decided already, expired, or its memories changed since (stale)."),
    ToolSpec(
        "memory_propose", "Propose a memory for review", ops.PROPOSE, _writes(idempotent=True),
        run=lambda engine, a: engine.propose(**a),
        # The scope in a few words: /cairn:import-guidance says how to read it from each file.
        args=tuple(dataclasses.replace(a, help="Its file's scope: globs from the project root (D/** for D/CLAUDE.md).")
                   if a.name == "paths" else a for a in ops.PROPOSE.args),
        description="For /cairn:import-guidance: queue one atomic memory for the user's approval (an `add` proposal). Nothing is stored until the user approves it in the review. Returns status queued, pending (the same text is already queued) or exists (already a memory)."),
    ToolSpec(
        "memory_maintenance_run", "Run memory maintenance", ops.MAINTAIN, _writes(), run=_maintain,
        args=ops.MAINTAIN.pick(("apply",)), writes=lambda a: a["apply"],
        description="Run memory maintenance on this project's store: exact duplicates, near-duplicates, clusters on one subject, stale never-used memories. Dry run by default (reports, writes nothing). With apply, only exact duplicates are retired (superseded, never deleted); everything else is queued for the user's review (memory_review_queue)."),
)
BY_NAME = {t.name: t for t in TOOLS}
WRITE_TOOLS = frozenset(t.name for t in TOOLS if not t.annotations.read_only_hint)
# The tools a read-only token may call over mcp-http.
READ_ONLY_TOOLS = frozenset(t.name for t in TOOLS if t.annotations.read_only_hint)
