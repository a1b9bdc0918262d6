"""Reading Cairn's export format: JSON Lines, one memory per line (see Cairn.export)."""

from __future__ import annotations

import json
from typing import IO, Any

from .errors import InvalidImport
from .models import IMPORTANCE_RANGE, KINDS, MAX_TEXT_BYTES, SOURCES, Memory
from .timeutil import END_OF_TIME

_REQUIRED = ("id", "text", "kind", "importance", "source", "valid_from", "recorded_at")


def _int_or_none(record: dict[str, Any], key: str, line: int) -> int | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidImport(f"line {line}: {key} must be epoch milliseconds (an integer) or null")
    return value


def parse_record(record: Any, line: int) -> tuple[Memory, int]:
    """One exported object to (Memory, asserted_valid_to). Raises InvalidImport naming the line."""
    if not isinstance(record, dict):
        raise InvalidImport(f"line {line}: expected a JSON object")
    missing = [k for k in _REQUIRED if k not in record]
    if missing:
        raise InvalidImport(f"line {line}: missing {', '.join(missing)}")
    text = record["text"]
    forgotten_at = _int_or_none(record, "forgotten_at", line)
    if text is None and forgotten_at is None:
        raise InvalidImport(f"line {line}: text is null but the memory is not forgotten")
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise InvalidImport(f"line {line}: text must be a non-empty string")
    if text is not None and len(text.encode("utf-8")) > MAX_TEXT_BYTES:
        raise InvalidImport(f"line {line}: text is over {MAX_TEXT_BYTES} bytes")
    if record["kind"] not in KINDS or record["source"] not in SOURCES:
        raise InvalidImport(f"line {line}: unknown kind or source ({record['kind']!r}, {record['source']!r})")
    importance = record["importance"]
    if isinstance(importance, bool) or not isinstance(importance, int) or not (
        IMPORTANCE_RANGE[0] <= importance <= IMPORTANCE_RANGE[1]
    ):
        raise InvalidImport(f"line {line}: importance must be an integer from 1 to 5")
    tags = record.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidImport(f"line {line}: tags must be a list of strings")
    valid_from = _int_or_none(record, "valid_from", line)
    recorded_at = _int_or_none(record, "recorded_at", line)
    if valid_from is None or recorded_at is None:
        raise InvalidImport(f"line {line}: valid_from and recorded_at are required")
    valid_to = _int_or_none(record, "valid_to", line)
    if valid_to is not None and valid_to <= valid_from:
        raise InvalidImport(f"line {line}: valid_to must be later than valid_from")
    asserted = _int_or_none(record, "asserted_valid_to", line)
    memory = Memory(
        id=str(record["id"]), text=text, kind=record["kind"], tags=tuple(tags), importance=importance,
        source=record["source"], session_id=record.get("session_id"), valid_from=valid_from, valid_to=valid_to,
        recorded_at=recorded_at, retired_at=_int_or_none(record, "retired_at", line),
        superseded_by=record.get("superseded_by"), forgotten_at=forgotten_at,
    )
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
