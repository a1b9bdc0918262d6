"""Render once: every way a memory is shown, in one place.

- full JSON (`full`, `Memory.to_json`): every field, times as epoch ms plus ISO twins; the CLI's
  --json and export (keys documented in docs/cli.md).
- compact JSON (`memory`, `hit`, ...): MCP tool results. The model pays a token for every character,
  so a memory is {id, text, kind, date, status} plus until, tags, importance, superseded_by and
  store only when they say something (set, non-empty, not the default, not the project store).
  `date` is valid_from and `until` valid_to, as YYYY-MM-DD, UTC; `scheduled` is true for a memory
  whose valid_from is still to come (remembered with a future --valid-from: not in effect yet).
- one line (`line`): the CLI's human output; `context_line`: what hooks inject, cited as [mem:ID].
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..models import DEFAULT_IMPORTANCE, RELATED_INSTRUCTION, Hit, Memory, RememberResult
from ..stores.paths import GLOBAL_STORE
from ..timeutil import format_date as day
from ..timeutil import format_time as moment
from ..timeutil import now_ms

CONTEXT_MEMORY_CHARS = 300  # one memory's text in an injection, before the "…"
_CITED = re.compile(r"\[mem:([0-9A-HJKMNP-TV-Z]{26})\]")  # a ULID, not the "[mem:ID]" of a header


def full(m: Memory) -> dict[str, Any]:
    """Every field (docs/cli.md, "JSON keys")."""
    return m.to_json()


def line(m: Memory) -> str:
    """Two lines for a terminal: `ID  [kind] YYYY-MM-DD (status by ID) #tags` then the text."""
    status = "" if m.status == "current" else f" ({m.status}{' by ' + m.superseded_by if m.superseded_by else ''})"
    status += " (cold)" if m.cold_at is not None and m.status == "current" else ""
    status += " (not in effect yet)" if _scheduled(m) else ""
    tags = f" #{' #'.join(m.tags)}" if m.tags else ""
    text = m.text if m.text is not None else "[forgotten]"
    return f"{m.id}  [{m.kind}] {day(m.valid_from)}{status}{tags}\n    {text}"


def shorten(text: str, limit: int) -> str:
    """Whitespace collapsed, cut to at most `limit` characters with "…": after the last whole sentence
    or clause when that keeps half the limit, else at a word boundary (inside a word only when one
    word fills 40% of the limit), without a trailing comma or colon before the "…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    clause = max(head.rfind(". "), head.rfind("; "), head.rfind(": "))
    cut = head.rfind(" ")
    if clause >= 0.5 * limit:  # a whole sentence or clause reads better than most of the next one
        head = head[: clause + 1]
    elif text[limit - 1] != " " and cut >= 0.6 * limit:
        head = head[:cut]
    return head.rstrip(" ,;:-–—(") + "…"


def context_line(m: Memory, *, with_kind: bool = True, limit: int = CONTEXT_MEMORY_CHARS) -> str:
    """`- [mem:ID] YYYY-MM-DD kind: text` (the date is valid_from, UTC), text cut to `limit`; a
    date still to come reads `from YYYY-MM-DD`, so Claude does not act on it as in effect today."""
    kind = f" {m.kind}:" if with_kind else ""
    when = f"from {day(m.valid_from)}" if _scheduled(m) else day(m.valid_from)
    return f"- [mem:{m.id}] {when}{kind} {shorten(m.text or '', limit)}"


def _scheduled(m: Memory) -> bool:
    """Current, with a valid_from still to come."""
    return m.status == "current" and m.valid_from > now_ms()


def cited_ids(text: str | None) -> list[str]:
    """The memory ids a text cites as [mem:ID] (context_line's form), in order."""
    return _CITED.findall(text or "")


def usage(counts: dict[str, Any]) -> str:
    """How a memory was used, for people: "injected 12×, cited 5×"."""
    return f"injected {counts.get('injected') or 0}×, cited {counts.get('cited') or 0}×"


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def memory(m: Memory) -> dict[str, Any]:
    out: dict[str, Any] = {"id": m.id, "text": m.text, "kind": m.kind, "date": day(m.valid_from), "status": m.status}
    if m.valid_to is not None:
        out["until"] = day(m.valid_to)
    if _scheduled(m):
        out["scheduled"] = True
    if m.tags:
        out["tags"] = list(m.tags)
    if m.applies_when:
        out["applies_when"] = list(m.applies_when)
    if m.importance != DEFAULT_IMPORTANCE:
        out["importance"] = m.importance
    if m.superseded_by:
        out["superseded_by"] = m.superseded_by
    if m.cold_at is not None:
        out["cold"] = True
    if m.store == GLOBAL_STORE:
        out["store"] = GLOBAL_STORE
    return out


def recalled(hits: list[Hit], store: str) -> dict[str, Any]:
    """A recall's answer: {"hits": [hit, ...]}; when nothing was found, also the store searched
    ({"hits": [], "store": NAME}), so an empty answer from the wrong store is told from an empty store."""
    return {"hits": [hit(h) for h in hits]} if hits else {"hits": [], "store": store}


def hit(h: Hit) -> dict[str, Any]:
    return {**memory(h.memory), "score": round(h.score, 4), "why": h.why()}


def history_entry(m: Memory) -> dict[str, Any]:
    """A memory with both times: when it held in the world, and when the store believed it."""
    out: dict[str, Any] = {"id": m.id, "text": m.text, "kind": m.kind, "status": m.status,
                           "valid_from": moment(m.valid_from)}
    for key, value in (("valid_to", m.valid_to), ("recorded_at", m.recorded_at), ("retired_at", m.retired_at),
                       ("forgotten_at", m.forgotten_at)):
        if value is not None:
            out[key] = moment(value)
    if m.superseded_by:
        out["superseded_by"] = m.superseded_by
    return out


def _with_related(out: dict[str, Any], result: RememberResult) -> dict[str, Any]:
    """`related` (each {id, text, kind, date, why}) and the one instruction on what to do with them."""
    if result.related:
        out["related"] = result.related
        out["instruction"] = RELATED_INSTRUCTION
    return out


def remembered(result: RememberResult) -> dict[str, Any]:
    """What a write did: {id, status, redacted?, superseded?, related?, instruction?, note?}. `related`
    holds the memories the writer should judge (RememberResult.related); conflicts are not shown
    apart: each is among `related` or queued for the user's review. `redacted` (when a secret or a
    `<private>` span was taken out, so the stored text differs from the one given): each {field,
    kind, start, end}, where it stood; never the value."""
    out: dict[str, Any] = {"id": result.memory.id, "status": result.status}
    if result.status == "duplicate":
        out["note"] = "an identical current memory exists; nothing was written"
    if result.redacted:
        out["redacted"] = result.redacted
    if result.superseded:
        out["superseded"] = result.superseded
    return _with_related(out, result)


def replaced(result: RememberResult) -> dict[str, Any]:
    """What a replace (or merge) did: a new memory superseding the old ones, or, when the text is
    already a current memory, the old ones superseded by that one and nothing new written; with the
    other memories it may change (`related`, as `remembered`)."""
    out: dict[str, Any] = {"id": result.memory.id, "status": result.status}
    if result.superseded:
        out["superseded"] = result.superseded
    if result.status == "duplicate":
        if result.superseded:
            retired = " and ".join(result.superseded)
            verb = "is" if len(result.superseded) == 1 else "are"
            out["note"] = (f"memory {result.memory.id} already states this: {retired} {verb} now superseded "
                           "by it and nothing new was written")
        else:
            out["note"] = f"memory {result.memory.id} already states this; nothing was changed"
    return _with_related(out, result)
