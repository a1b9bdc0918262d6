"""Captured sessions, without SQL: reading transcripts into turns, and choosing how to search them.

Readers:
- `parse_lines(data)`: complete lines of a Claude Code transcript (JSON Lines) -> turns. User
  prompts and the assistant's text are kept; tool output is not (a tool's name and the file paths
  it touched become metadata of the turn around it). Anything else (malformed JSON, unknown types,
  binary junk, lone surrogates) is skipped and counted by reason, never raised.
- `read_locomo(path)`: a LoCoMo conversation JSON file -> one session of turns per LoCoMo session.

Sessions (sessions_api.py) scrubs each turn (privacy/scrub.py) and stores it (storage/).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import InvalidImport
from ..models import TurnDraft

MAX_LINE_BYTES = 16 * 1024 * 1024  # a longer transcript line is skipped unread ("oversized")
TITLE_CHARS = 120
# Transcript line types that are not conversation turns: skipped silently (not "unknown type").
OTHER_TYPES = frozenset({"summary", "system", "file-history-snapshot", "attachment", "progress", "queue-operation",
                         "custom-title", "tag", "result"})
# Tool inputs that name a file the tool touched.
FILE_KEYS = ("file_path", "path", "notebook_path")


@dataclass
class Parsed:
    """What `parse_lines` read: the turns in order, skipped lines by reason, the last uuid seen,
    and metadata (tools, files) seen after the last turn of this chunk (for the turn before it)."""

    turns: list[TurnDraft] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    last_uuid: str | None = None
    trailing_meta: dict[str, list[str]] = field(default_factory=dict)


def clean_text(text: str) -> str:
    """Text safe to store: lone surrogates replaced, NUL and other C0 controls (but tab and newline) removed."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "", text)


def _time(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def _merge_meta(into: dict[str, list[str]], extra: dict[str, list[str]]) -> None:
    for key, values in extra.items():
        have = into.setdefault(key, [])
        have += [v for v in values if v not in have]


def _blocks(content: Any) -> tuple[list[str], dict[str, list[str]], int]:
    """(texts, tool metadata, tool results) of a message's content (a string or a list of blocks)."""
    if isinstance(content, str):
        return [content], {}, 0
    texts: list[str] = []
    meta: dict[str, list[str]] = {}
    results = 0
    if not isinstance(content, list):
        return texts, meta, results
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            name = block.get("name")
            extra: dict[str, list[str]] = {"tools": [str(name)]} if name else {}
            given = block.get("input")
            params: dict[str, Any] = given if isinstance(given, dict) else {}
            files = [str(params[k]) for k in FILE_KEYS if isinstance(params.get(k), str)]
            if files:
                extra["files"] = files
            _merge_meta(meta, extra)
        elif kind == "tool_result":
            results += 1  # tool output: not stored
    return texts, meta, results


def parse_lines(data: bytes) -> Parsed:
    """Turns from complete transcript lines (`data` ends at a newline). Never raises."""
    out = Parsed()
    pending: dict[str, list[str]] = {}  # tool metadata not yet attached to a turn
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            out.skipped["oversized"] += 1
            continue
        try:
            obj = json.loads(raw.decode("utf-8", "replace"))
        except ValueError:
            out.skipped["malformed"] += 1
            continue
        if not isinstance(obj, dict):
            out.skipped["malformed"] += 1
            continue
        kind = obj.get("type")
        if kind not in ("user", "assistant"):
            if kind not in OTHER_TYPES:
                out.skipped["unknown type"] += 1
            continue
        if obj.get("isSidechain") or obj.get("isMeta"):
            continue  # a subagent's or the harness's own messages, not this conversation's turns
        message = obj.get("message")
        if not isinstance(message, dict):
            out.skipped["malformed"] += 1
            continue
        texts, meta, _ = _blocks(message.get("content"))
        given_uuid = obj.get("uuid")
        uuid = given_uuid if isinstance(given_uuid, str) else hashlib.sha256(raw).hexdigest()[:32]
        out.last_uuid = uuid
        text = clean_text("\n\n".join(t for t in texts if t.strip())).strip()
        if not text:
            # A tool call alone belongs to the assistant text before it ("Let me fix the test"), or,
            # when this chunk has none yet, to the turn stored before it (the caller attaches it).
            if meta:
                _merge_meta(out.turns[-1].meta if out.turns else pending, meta)
            continue
        role = "user" if kind == "user" else "assistant"
        out.turns.append(TurnDraft(
            uuid=uuid, role=role, text=text, at=_time(obj.get("timestamp")),
            git_branch=obj.get("gitBranch") if isinstance(obj.get("gitBranch"), str) else None,
            cwd=obj.get("cwd") if isinstance(obj.get("cwd"), str) else None, meta=meta))
    out.trailing_meta = pending
    return out


def title_of(turns: list[TurnDraft]) -> str | None:
    """The first user prompt, on one line, shortened to TITLE_CHARS."""
    for turn in turns:
        if turn.role == "user":
            line = " ".join(turn.text.split())
            return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
    return None


# -- LoCoMo ---------------------------------------------------------------------------------------
_LOCOMO_SESSION = re.compile(r"session_(\d+)")


def _locomo_time(text: str) -> int | None:
    """'1:56 pm on 8 May, 2023' -> epoch ms, UTC."""
    try:
        moment = datetime.strptime(" ".join(str(text).split()), "%I:%M %p on %d %B, %Y")
    except ValueError:
        return None
    return int(moment.replace(tzinfo=timezone.utc).timestamp() * 1000)


def read_locomo(path: Path) -> list[tuple[str, list[TurnDraft]]]:
    """The sessions of a LoCoMo conversation file ({speaker_a, speaker_b, session_N,
    session_N_date_time, ...}, optionally nested under "conversation"): [(session id, turns)], the
    session id `<file stem>/session_N`, each turn's uuid its dia_id, role user for speaker_a and
    assistant for speaker_b, its time the session's date (plus one ms per turn, to keep order).
    An image caption is kept as "[shares <caption>]". Raises InvalidImport for a file that is not
    in that layout."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        data = raw.get("conversation", raw)
        sessions = sorted((int(m.group(1)), key) for key in data if (m := _LOCOMO_SESSION.fullmatch(key)))
    except (OSError, ValueError, AttributeError) as exc:
        raise InvalidImport(f"{path}: not a LoCoMo conversation ({exc})") from None
    if not sessions:
        raise InvalidImport(f"{path}: not a LoCoMo conversation (no session_N keys)")
    speaker_a = data.get("speaker_a")
    out = []
    for _, key in sessions:
        start = _locomo_time(data.get(f"{key}_date_time", ""))
        turns = []
        for i, t in enumerate(data[key] if isinstance(data[key], list) else []):
            if not isinstance(t, dict) or not isinstance(t.get("text"), str):
                continue
            text = t["text"].strip()
            caption = (t.get("blip_caption") or "").strip() if isinstance(t.get("blip_caption"), str) else ""
            if caption:
                text = f"{text} [shares {caption}]"
            speaker = str(t.get("speaker") or "")
            turns.append(TurnDraft(uuid=str(t.get("dia_id") or f"{key}:{i}"),
                                   role="user" if speaker == speaker_a else "assistant",
                                   text=clean_text(text), speaker=speaker or None,
                                   at=None if start is None else start + i))
        out.append((f"{Path(path).stem}/{key}", turns))
    return out


KEY_WEIGHT = 0.5  # BM25 weight of the key column (the turn's own text weighs 1.0)
# hybrid: KEYWORD_SHARE x BM25 (over the best BM25 score of the query) + the rest x cosine. On the
# dev conversations this beats Reciprocal Rank Fusion at rank 1 (0.415 against 0.389 at RRF's best
# k) at 0.01 less at rank 10, and stays above BM25 alone at every rank.
KEYWORD_SHARE = 0.6
RRF_K = 10  # fuse()'s default: a small k lets the first few ranks of each list count most


# A turn's vector is its own passage's plus CONTEXT_WEIGHT x the passage's of the turn before it,
# L2-normalised: a short reply ("Yes, exactly!") is found through what it answers. Tuned on the
# six LoCoMo dev conversations (docs/benchmarks.md, "Session search on LoCoMo").
CONTEXT_WEIGHT = 0.5


def in_context(own: Any, before: Any) -> Any:
    """Turn vectors read in context: normalise(own + CONTEXT_WEIGHT x before), row by row.
    own: float32[n, dim] of the turns' passages; before: float32[n, dim] of the passages of the turns
    just before them in their sessions, a row of zeros where a turn has none. Returns float32[n, dim]."""
    import numpy as np

    mixed = np.asarray(own, dtype=np.float32) + CONTEXT_WEIGHT * np.asarray(before, dtype=np.float32)
    norms = np.linalg.norm(mixed, axis=1, keepdims=True)
    return (mixed / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def turn_passage(speaker: str | None, text: str) -> str:
    """What a turn's vector is computed from: its speaker's name (when known) and its text."""
    return f"{speaker}: {text}" if speaker else text


_QUOTED = re.compile(r'^\s*["\u201c\'`](.+?)["\u201d\'`]\s*$', re.DOTALL)
# An identifier-like token: a path, snake_case, CamelCase with an inner capital, dotted or ::
# names, an error code (E1234, ERR_X, 0x1F, HTTP 404 style numbers with letters), a flag.
_IDENTIFIER = re.compile(
    r"(?:^|\s)(?:"
    r"[\w.~-]*/[\w./-]+"                 # a path: src/app.py, ~/x, /usr/bin
    r"|\w+_\w+"                          # snake_case, ERR_CONNECTION
    r"|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*"  # camelCase, CamelCase
    r"|\w+(?:\.\w+)+|\w+::\w+"           # a.b, a.b.c, mod::name
    r"|[A-Z]{1,5}-?\d{2,}"               # error codes: E0425, TS2345, ERR-42
    r"|--?[a-z][\w-]+"                   # a flag: --force
    r"|\w+\.(?:py|js|ts|go|rs|md|json|toml|yaml|yml|sh|c|h|cpp|java|rb|txt)"  # a file name
    r")(?=\s|$|[,.;:!?)])"
)


def choose_mode(query: str) -> tuple[str, str]:
    """The search mode `auto` means for `query`, and the needle: ("exact", the quoted text) for a
    quoted string, ("exact", query) for a query that is an identifier-like token (a path,
    snake_case, an error code ...), else ("hybrid", query)."""
    quoted = _QUOTED.match(query)
    if quoted and quoted.group(1).strip():
        return "exact", quoted.group(1)
    stripped = query.strip()
    if len(stripped.split()) <= 3 and _IDENTIFIER.search(stripped):
        return "exact", stripped
    return "hybrid", query


_VERBATIM_PUNCTUATION = re.compile(r"['\"`:()\[\]{}/\\=<>]")


def looks_verbatim(query: str) -> bool:
    """Whether `query` looks pasted rather than phrased (an error message, a command line: at least
    12 characters with quotes, a colon, brackets or a path): auto mode then looks for it as written
    first, and searches by keyword and meaning only when no turn holds it."""
    return len(query.strip()) >= 12 and bool(_VERBATIM_PUNCTUATION.search(query))


def blend(bm25: list[tuple[int, float]], vector: list[tuple[int, float]], keyword_share: float = KEYWORD_SHARE
          ) -> list[tuple[int, float, dict[str, Any]]]:
    """Score fusion of a BM25 list and a vector list ([(seq, score)], best first): each turn's score
    is keyword_share x its BM25 score / the list's best + (1 - keyword_share) x its cosine (0 where
    a list lacks it). [(seq, score, {retriever: {"rank", "score"}})], best first, ties by seq."""
    fused: dict[int, float] = {}
    why: dict[int, dict[str, Any]] = {}
    best = max((score for _, score in bm25), default=0.0)
    for name, ranked, weight in (("bm25", bm25, keyword_share), ("vector", vector, 1.0 - keyword_share)):
        for rank, (seq, score) in enumerate(ranked, 1):
            value = (score / best if best > 0 else 0.0) if name == "bm25" else score
            fused[seq] = fused.get(seq, 0.0) + weight * value
            why.setdefault(seq, {})[name] = {"rank": rank, "score": round(score, 6)}
    return [(seq, fused[seq], why[seq]) for seq in sorted(fused, key=lambda s: (-fused[s], s))]


def fuse(rankings: dict[str, list[tuple[int, float]]], weights: dict[str, float], rrf_k: int = RRF_K
         ) -> list[tuple[int, float, dict[str, Any]]]:
    """Reciprocal Rank Fusion: [(seq, score, {retriever: {"rank", "score"}})], best first, ties by seq."""
    fused: dict[int, float] = {}
    why: dict[int, dict[str, Any]] = {}
    for name, ranked in rankings.items():
        for rank, (seq, score) in enumerate(ranked, 1):
            fused[seq] = fused.get(seq, 0.0) + weights.get(name, 1.0) / (rrf_k + rank)
            why.setdefault(seq, {})[name] = {"rank": rank, "score": round(score, 6)}
    return [(seq, fused[seq], why[seq]) for seq in sorted(fused, key=lambda s: (-fused[s], s))]


# A hybrid or semantic hit whose fused score is under this share of the best hit's is dropped from
# a merged result: in the hybrid's blend, a turn only one retriever found (at most 0.6 from BM25's
# best, 0.4 x its cosine from the vectors) scores about half of one both put first. Cairn's choice.
RELEVANCE_FLOOR = 0.5


@dataclass(frozen=True)
class SessionResult:
    """One session's part of a search: the session, its best hit's score, the positions of its
    ranked turns (best first), and the turns to show: those hits and their windows, merged, in order."""

    session_id: str
    score: float
    mode: str
    best: tuple[int, ...]
    turns: tuple[Any, ...]  # models.Turn
    time_window: dict[str, Any] | None = None  # TimeWindow.to_json() of the search, or None

    def to_json(self) -> dict[str, Any]:
        """{"session_id", "score", "mode", "best": [positions, best first], "turns": [each turn's
        to_json without its session_id (named once, above), with "hit": whether it was ranked],
        "time_window": the search's date window ({"expression", "since", "until"}) or None}."""
        turns = []
        for turn in self.turns:
            data = turn.to_json()
            del data["session_id"]
            turns.append({**data, "hit": turn.position in self.best})
        return {"session_id": self.session_id, "score": round(self.score, 6), "mode": self.mode,
                "best": list(self.best), "turns": turns, "time_window": self.time_window}


def merge_session_hits(hits: list[Any], *, floor: float = RELEVANCE_FLOOR) -> list[SessionResult]:
    """search_sessions' hits (models.SessionHit, best first) as one result per session, best
    session first: the windows of a session's hits merged into one run of turns (each turn once),
    and hits scoring under `floor` x the best hit's score dropped (not in exact mode, whose order is
    recency, not relevance). Each result carries the hits' time window (models.SessionHits), if any."""
    if not hits:
        return []
    window = getattr(hits, "time_window", None)
    window_json = None if window is None else window.to_json()
    top = hits[0].score
    kept = [h for h in hits if h.mode == "exact" or h.score >= floor * top]
    by_session: dict[str, list[Any]] = {}
    for hit in kept:
        by_session.setdefault(hit.turn.session_id, []).append(hit)
    out = []
    for session_id, group in by_session.items():
        turns = {t.position: t for h in group for t in (*h.before, h.turn, *h.after)}
        out.append(SessionResult(session_id=session_id, score=group[0].score, mode=group[0].mode,
                                 best=tuple(h.turn.position for h in group),
                                 turns=tuple(turns[p] for p in sorted(turns)), time_window=window_json))
    return out
