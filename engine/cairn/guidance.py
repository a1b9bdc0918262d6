"""Import of existing guidance: a CLAUDE.md, AGENTS.md or .cursorrules file split deterministically
(markdown-it-py's CommonMark parse: headings, list items, paragraphs) into `add` proposals of the
review queue. Nothing is stored before the user approves each one (`cairn review`,
/cairn:review-memory). /cairn:import-guidance is the other way in: Claude reads the files and
proposes atomic memories with memory_propose.

The split, for the same file, is always the same:
- each list item's own text (not its sub-items) is one item; an item that only introduces its
  sub-items ("Testing:") becomes their context instead;
- a paragraph outside a list is one item, or one per line when every line reads as a rule of its
  own (a .cursorrules file of plain lines);
- headings are not items: the path of headings above an item ("Conventions > Testing") is its
  context (a list item with sub-items also names them: "Pin every dependency > Except in CI");
  code blocks, tables and HTML are left out (they are not statements), and counted (`left_out`).
The kind comes from the wording (KIND_RULES, first match), else from the heading, else "convention".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any

from .errors import InvalidInput, InvalidMemory
from .models import MAX_TEXT_BYTES


MAX_FILE_BYTES = 1024 * 1024
# (pattern over the item's text, or its heading path, lower-cased; kind), first match wins.
KIND_RULES = (
    (re.compile(r"\b(we decided|decided to|decision|we chose|we use .* because|instead of)\b"), "decision"),
    (re.compile(r"\b(i prefer|i like|i want|i'd rather|my preference|preferences?)\b"), "preference"),
    (re.compile(r"\b(always|never|must|should|do not|don't|avoid|prefer|use|run|keep|make sure|ensure)\b"),
     "convention"),
    (re.compile(r"\b(is|are|lives|runs on|located|stored)\b"), "fact"),
)
_RULE_LINE = re.compile(r"^\s*(?:[-*+]\s+|\d+[.)]\s+)?\S.{8,}$")
_SENTENCE_START = re.compile(r"^(?:[-*+]\s+|\d+[.)]\s+)?[A-Z0-9\"'(\[]")
CONTEXT_LABEL_CHARS = 80  # a parent list item named in its sub-items' context, at most


def _short(text: str) -> str:
    return text if len(text) <= CONTEXT_LABEL_CHARS else text[:CONTEXT_LABEL_CHARS - 1].rstrip() + "…"


def left_out(markdown: str) -> dict[str, int]:
    """What the split leaves out of a guidance file, by kind: {"code blocks", "tables", "html"}
    (counts; kinds with none are absent), so an import can say so."""
    from markdown_it import MarkdownIt

    counts: dict[str, int] = {}
    for tok in MarkdownIt("commonmark").enable("table").parse(markdown):
        kind = {"fence": "code blocks", "code_block": "code blocks", "table_open": "tables",
                "html_block": "html"}.get(tok.type)
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    return counts


@dataclass(frozen=True)
class Item:
    """One statement found in a guidance file: its text, its kind and the headings above it."""

    text: str
    kind: str
    context: str | None
    line: int  # 1-based line of the file where it starts


def _kind(text: str, context: str | None) -> str:
    lowered = text.lower()
    for pattern, kind in KIND_RULES:
        if pattern.search(lowered):
            return kind
    heading = (context or "").lower()
    for word, kind in (("decision", "decision"), ("preference", "preference"), ("fact", "fact")):
        if word in heading:
            return kind
    return "convention"


def _clean(text: str) -> str:
    return " ".join(text.split()).strip()


def split(markdown: str) -> list[Item]:
    """The items of a guidance file, in file order (see the module docstring for the rules)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    headings: list[tuple[int, str]] = []   # (level, text) of the headings above
    labels: list[str | None] = []          # per open list item: its text when it only introduces sub-items
    items: list[Item] = []
    in_item: list[bool] = []               # per open list item: whether its own paragraph was taken
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "heading_open":
            level = int(tok.tag[1:])
            text = _clean(tokens[i + 1].content)
            headings = [(lv, t) for lv, t in headings if lv < level] + [(level, text)]
            i += 3
            continue
        if tok.type == "list_item_open":
            in_item.append(False)
            labels.append(None)
        elif tok.type == "list_item_close":
            in_item.pop()
            labels.pop()
        elif tok.type == "paragraph_open":
            inline = tokens[i + 1]
            line = (tok.map[0] + 1) if tok.map else 0
            context_parts = [t for _, t in headings] + [lb for lb in labels[:-1] if lb]
            if in_item and not in_item[-1]:
                in_item[-1] = True
                text = _clean(inline.content)
                nested = i + 3 < len(tokens) and tokens[i + 3].type in ("bullet_list_open", "ordered_list_open")
                if nested:  # the sub-items are read under it: "Testing" or "Pin every dependency"
                    labels[-1] = _short(text.rstrip(":").strip())
                if text and not (nested and text.endswith(":")):  # "Testing:" only introduces them
                    items.append(Item(text, "", " > ".join(context_parts) or None, line))
            elif not in_item:
                lines = [_clean(x) for x in inline.content.splitlines() if x.strip()]
                # One rule per line only when each line reads as one and each starts as a sentence
                # does: a paragraph wrapped mid-sentence ("... log them with" / "`logger.exception`
                # and re-raise.") stays one item.
                own = (len(lines) > 1 and all(_RULE_LINE.match(x) for x in lines)
                       and all(_SENTENCE_START.match(x) for x in lines[1:]))
                pieces = lines if own else [_clean(inline.content)]
                for offset, piece in enumerate(pieces):
                    piece = re.sub(r"^(?:[-*+]\s+|\d+[.)]\s+)", "", piece)
                    if piece:
                        items.append(Item(piece, "", " > ".join(context_parts) or None, line + offset))
            i += 3
            continue
        i += 1
    return [Item(it.text, _kind(it.text, it.context), it.context, it.line) for it in items]


def import_file(propose: Callable[..., dict[str, Any]], path: Path) -> dict[str, Any]:
    """Queue the items of `path` as `add` proposals through `propose` (Review.propose: text, kind,
    context, origin -> {"status", "proposal"}). Returns {"file", "items", "queued", "pending"
    (already queued), "exists" (already memories), "reviewed" (decided by the user before),
    "skipped": [{"line", "reason"}], "left_out": {kind: count} (left_out), "proposals": [ids]}.
    Raises InvalidInput (missing, unreadable, not UTF-8, over 1 MiB)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InvalidInput(f"{path} is {len(raw)} bytes; guidance files over {MAX_FILE_BYTES} bytes are not imported")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    out: dict[str, Any] = {"file": str(path), "items": 0, "queued": 0, "pending": 0, "exists": 0, "reviewed": 0,
                           "skipped": [], "left_out": left_out(text), "proposals": []}
    for item in split(text):
        out["items"] += 1
        if len(item.text.encode("utf-8")) > MAX_TEXT_BYTES:
            out["skipped"].append({"line": item.line, "reason": f"longer than {MAX_TEXT_BYTES} bytes"})
            continue
        try:
            done = propose(item.text, kind=item.kind, context=item.context, origin=f"{path.name}:{item.line}")
        except InvalidMemory as exc:
            out["skipped"].append({"line": item.line, "reason": str(exc)})
            continue
        out[done["status"]] += 1
        if done["proposal"]:
            out["proposals"].append(done["proposal"]["id"])
    return out
