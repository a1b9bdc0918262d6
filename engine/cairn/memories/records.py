"""Parse once: the one validator of a memory's fields, for `remember` and for `import` alike.

Both paths apply the same rules and the same normalisation (tags casefolded, NFC, deduplicated,
sorted), and both report every problem of a record at once, not the first one only.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, Any

from ..errors import InvalidImport, InvalidMemory, InvalidTime
from ..models import (DEFAULT_IMPORTANCE, IMPORTANCE_RANGE, KINDS, MAX_APPLIES_CHARS, MAX_APPLIES_WHEN,
                     MAX_TEXT_BYTES, SOURCES, Memory, NewMemory)
from .scopes import normalise_patterns
from ..text import duplicate_key, is_blank, lone_surrogate, normalise
from ..timeutil import END_OF_TIME, parse_time

MAX_TAG_CHARS = 64


@dataclass(frozen=True)
class Draft:
    """A memory as a caller states it, before validation. Times: epoch ms (UTC) or ISO 8601.

    replaces: one id, or several (a merge). applies_when: up to MAX_APPLIES_WHEN short phrases
    naming the tasks in which the memory matters ("adding a lint rule"). paths: up to
    scopes.MAX_PATHS globs or commands the memory governs ("src/payments/**", "cmd:alembic")."""

    text: str
    kind: str = "fact"
    tags: tuple[str, ...] = ()
    importance: int = DEFAULT_IMPORTANCE
    source: str = "agent"
    session_id: str | None = None
    valid_from: Any = None
    valid_to: Any = None
    replaces: str | tuple[str, ...] | None = None
    applies_when: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()  # path or command scopes (scopes.normalise_pattern); () when none

    @property
    def replaced_ids(self) -> tuple[str, ...]:
        if not self.replaces:
            return ()
        return (self.replaces,) if isinstance(self.replaces, str) else tuple(self.replaces)


def _string_problem(value: Any) -> str | None:
    """Why `value` cannot be stored as a short text field ("is not a string", ...), or None."""
    if not isinstance(value, str):
        return "is not a string"
    if lone_surrogate(value) is not None:
        return "is not valid Unicode (a lone surrogate)"
    if "\x00" in value:  # PostgreSQL's text type cannot hold U+0000 (see field_problems)
        return "contains a NUL byte"
    return None


def _applies_problems(phrases: Any) -> tuple[list[str], tuple[str, ...]]:
    """Problems with applies-when phrases, and the phrases as stored: NFC, whitespace collapsed,
    duplicates (ignoring case) dropped, in the caller's order."""
    if phrases is None:
        return [], ()
    if isinstance(phrases, str) or not isinstance(phrases, Iterable):
        return ["applies_when must be a list of short phrases"], ()
    problems: list[str] = []
    out: list[str] = []
    for i, phrase in enumerate(phrases, start=1):
        if (problem := _string_problem(phrase)) is not None:
            problems.append(f"applies_when phrase {i} {problem}")
            continue
        if is_blank(phrase):
            problems.append(f"applies_when phrase {i} is empty")
            continue
        clean = " ".join(unicodedata.normalize("NFC", phrase).split())
        if len(clean) > MAX_APPLIES_CHARS:
            problems.append(f"applies_when phrase {i} is {len(clean)} characters; at most {MAX_APPLIES_CHARS} "
                            "(a short task, e.g. \"fixing a flaky test\")")
        elif clean.casefold() not in (p.casefold() for p in out):
            out.append(clean)
    if len(out) > MAX_APPLIES_WHEN:
        problems.append(f"applies_when has {len(out)} phrases; at most {MAX_APPLIES_WHEN}")
    return problems, tuple(out)


def _tag_problems(tags: Any) -> tuple[list[str], tuple[str, ...]]:
    if isinstance(tags, str) or not isinstance(tags, Iterable):
        return ["tags must be a list of strings"], ()
    problems: list[str] = []
    out: list[str] = []
    for tag in tags:
        if (problem := _string_problem(tag)) is not None:
            problems.append(f"tag {tag!r} {problem}")
            continue
        key = normalise(tag).strip(",")
        if is_blank(key):
            continue
        if len(key) > MAX_TAG_CHARS or any(c.isspace() or c == "," for c in key):
            problems.append(f"invalid tag {tag!r}: at most {MAX_TAG_CHARS} characters, no spaces or commas")
        elif key not in out:
            out.append(key)
    return problems, tuple(sorted(out))


def normalise_tags(tags: Iterable[str]) -> tuple[str, ...]:
    """Tags as stored: NFC, casefolded, deduplicated, sorted. Raises InvalidMemory."""
    problems, out = _tag_problems(tags)
    if problems:
        raise InvalidMemory("; ".join(problems))
    return out


def field_problems(*, text: Any, kind: Any, source: Any, importance: Any, tags: Any,
                   tombstone: bool = False) -> tuple[list[str], tuple[str, ...]]:
    """Every problem with these fields, and the normalised tags. tombstone: text may be None.
    (applies_when has its own check, _applies_problems.)"""
    problems: list[str] = []
    if text is None and tombstone:
        pass
    elif not isinstance(text, str) or is_blank(text):
        problems.append("memory text is empty" + (" (only invisible characters)" if text else "")
                        if isinstance(text, str) or text is None else "text must be a string")
    elif (at := lone_surrogate(text)) is not None:
        problems.append(f"memory text is not valid Unicode (a lone surrogate at character {at}; "
                        "undecodable bytes?)")
    elif "\x00" in text:
        # PostgreSQL's text type cannot hold U+0000, so neither backend stores one: a memory
        # accepted by one store must be movable to the other (migrate-store, import).
        problems.append(f"memory text contains a NUL byte (U+0000) at character {text.index(chr(0))}; "
                        "binary data is not a memory")
    else:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_TEXT_BYTES:
            problems.append(f"memory text is {size} bytes of UTF-8; the limit is {MAX_TEXT_BYTES}")
    if kind not in KINDS:
        problems.append(f"unknown kind {kind!r}; expected one of: {', '.join(KINDS)}")
    if source not in SOURCES:
        problems.append(f"unknown source {source!r}; expected one of: {', '.join(SOURCES)}")
    low, high = IMPORTANCE_RANGE
    if isinstance(importance, bool) or not isinstance(importance, int) or not low <= importance <= high:
        problems.append(f"importance must be an integer from {low} to {high}, got {importance!r}")
    tag_problems, normalised = _tag_problems(tags)
    return problems + tag_problems, normalised


def validate(draft: Draft, *, recorded_at: int) -> NewMemory:
    """Check a draft and turn it into an insertable row (a new ULID, valid_from defaulting to
    `recorded_at`, epoch ms). Raises InvalidMemory naming every problem, or InvalidTime."""
    problems, tags = field_problems(text=draft.text, kind=draft.kind, source=draft.source,
                                    importance=draft.importance, tags=draft.tags)
    applies_problems, applies_when = _applies_problems(draft.applies_when)
    problems += applies_problems
    try:
        normalise_patterns(draft.paths)
    except InvalidMemory as exc:
        problems.append(str(exc))
    times: dict[str, int | None] = {}
    time_problems: list[str] = []
    for name in ("valid_from", "valid_to"):
        try:
            times[name] = parse_time(getattr(draft, name), field=name)
        except InvalidTime as exc:
            time_problems.append(str(exc))
            times[name] = None
    if time_problems and not problems:  # only the times are wrong: say so by the error's class too
        raise InvalidTime("; ".join(time_problems))
    problems += time_problems
    valid_from = recorded_at if times["valid_from"] is None else times["valid_from"]
    valid_to = times["valid_to"]
    if valid_to is not None and valid_to <= valid_from:
        problems.append("valid_to must be later than valid_from")
    if problems:
        raise InvalidMemory("; ".join(problems))
    from ulid import ULID  # imported on the write path only: it costs ~50 ms

    text = draft.text.strip()
    return NewMemory(
        id=str(ULID()), text=text, text_key=duplicate_key(text), kind=draft.kind, tags=tags,
        importance=draft.importance, source=draft.source, session_id=draft.session_id,
        valid_from=valid_from, valid_to=END_OF_TIME if valid_to is None else valid_to, recorded_at=recorded_at,
        applies_when=applies_when,
    )


# -- import: the export format, JSON Lines, one memory per line (see Cairn.export) -----------------
_REQUIRED = ("id", "text", "kind", "importance", "source", "valid_from", "recorded_at")
_TIMES = ("valid_from", "valid_to", "recorded_at", "retired_at", "forgotten_at", "asserted_valid_to", "cold_at")


def parse_record(record: Any, line: int) -> tuple[Memory, int]:
    """One exported object to (Memory, asserted_valid_to, epoch ms). Raises InvalidImport naming the
    line and every problem of the record."""
    if not isinstance(record, dict):
        raise InvalidImport(f"line {line}: expected a JSON object")
    problems = [f"missing {key}" for key in _REQUIRED if key not in record]
    times: dict[str, int | None] = {}
    for key in _TIMES:
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            problems.append(f"{key} must be epoch milliseconds (an integer) or null")
            value = None
        times[key] = value
    for key in ("valid_from", "recorded_at"):
        if key in record and times[key] is None and not any(p.startswith(key) for p in problems):
            problems.append(f"{key} is required")
    text = record.get("text")
    if "text" in record and text is None and times["forgotten_at"] is None:
        problems.append("text is null but the memory is not forgotten")
    field_issues, tags = field_problems(
        text=text, kind=record.get("kind"), source=record.get("source"), importance=record.get("importance"),
        tags=record.get("tags") or [], tombstone=text is None)
    problems += field_issues
    applies_problems, applies_when = _applies_problems(record.get("applies_when"))
    problems += applies_problems
    if (times["valid_to"] is not None and times["valid_from"] is not None
            and times["valid_to"] <= times["valid_from"]):
        problems.append("valid_to must be later than valid_from")
    valid_from, recorded_at = times["valid_from"], times["recorded_at"]
    if problems or valid_from is None or recorded_at is None:  # both required: a problem above when missing
        raise InvalidImport(f"line {line}: " + "; ".join(problems))
    memory = Memory(
        id=str(record["id"]), text=text.strip() if text is not None else None, kind=record["kind"],
        tags=tags, importance=record["importance"], source=record["source"], session_id=record.get("session_id"),
        valid_from=valid_from, valid_to=times["valid_to"], recorded_at=recorded_at,
        retired_at=times["retired_at"], superseded_by=record.get("superseded_by"), forgotten_at=times["forgotten_at"],
        cold_at=times["cold_at"],
        applies_when=applies_when if text is not None else (),
    )
    asserted = times["asserted_valid_to"]
    return memory, END_OF_TIME if asserted is None else asserted


def parse_export_lines(source: IO[bytes]) -> list[tuple[Memory, int]]:
    """Parse a whole export file (bytes). Raises InvalidImport on invalid UTF-8, invalid JSON or a bad record."""
    out = []
    for number, raw in enumerate(source, start=1):
        try:
            line = raw.decode("utf-8", "strict") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            raise InvalidImport(f"line {number}: invalid UTF-8 ({exc.reason} at byte {exc.start})") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidImport(f"line {number}: invalid JSON ({exc.msg})") from None
        out.append(parse_record(record, number))
    return out
