"""What a read of memories admits (Engine.recall, Engine.list): a query's checks, the filters made
of a caller's arguments, the relevance floor that keeps a vector retriever's filler out, and the
memory a short id stands for.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..errors import InvalidInput, InvalidMemory, MemoryNotFound
from .records import normalise_tags
from ..models import KINDS, Hit
from ..storage.protocol import StoreBackend
from ..storage.sql import Filters
from ..text import is_blank, lone_surrogate
from ..timeutil import parse_time

VECTOR_FLOOR = 0.15
"""Recall's relevance floor for a hit whose only evidence is the vector retriever.

The vector retriever always returns its `candidates` nearest memories, however unrelated: on a small
store every memory comes back for any query. A hit with no keyword match and a cosine at or below
this floor is filler (for all-MiniLM-L6-v2, unrelated sentences fall around 0.0-0.15; negative
cosines never mean anything), so recall drops it. Kept low on purpose: a memory that shares no word with
the question but is about it scores well above 0.15, and LoCoMo recall@10 (docs/benchmarks.md)
does not move with this floor. Hits with a keyword match are never dropped by it."""
MAX_QUERY_CHARS = 2000
"""The longest query recall takes (the MCP tool's limit; a hook cuts a prompt to this length). Forming
the keyword query of a pasted 10 MB log took 20 s; a question is never that long."""


def known_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """The kinds of a read's filter, each one of KINDS. Raises InvalidMemory."""
    kinds = tuple(kinds)
    for kind in kinds:
        if kind not in KINDS:
            raise InvalidMemory(f"unknown kind {kind!r}; expected one of: {', '.join(KINDS)}")
    return kinds


def check_query(query: object) -> None:
    """Refuse a query recall cannot take: not a string, blank, not valid Unicode, or longer than
    MAX_QUERY_CHARS. Raises InvalidMemory."""
    if not isinstance(query, str):
        raise InvalidMemory("query must be a string")
    if is_blank(query):
        raise InvalidMemory("query is empty" + (" (only invisible characters)" if query else ""))
    if lone_surrogate(query) is not None:
        raise InvalidMemory("query is not valid Unicode (a lone surrogate; undecodable bytes?)")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidMemory(f"query is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")


def read_filters(*, kinds: Iterable[str], tags: Iterable[str], as_of: Any, known_at: Any, since: Any = None,
                 until: Any = None, include_superseded: bool, include_cold: bool) -> Filters:
    """The filters of a read from a caller's arguments: times as ISO 8601 or epoch ms (UTC), kinds
    each one of KINDS. Raises InvalidMemory (an unknown kind), InvalidTime."""
    kinds = known_kinds(kinds)
    return Filters(
        as_of=parse_time(as_of, field="as_of"), known_at=parse_time(known_at, field="known_at"),
        kinds=kinds, tags=normalise_tags(tags), since=parse_time(since, field="since"),
        until=parse_time(until, field="until"), include_superseded=include_superseded,
        include_cold=bool(include_cold),
    )


def relevant(hit: Hit) -> bool:
    """Whether a hit has evidence beyond a vector retriever's filler (see VECTOR_FLOOR)."""
    if "bm25" in hit.reasons:
        return True
    cosine = hit.reasons.get("vector", {}).get("cosine")
    return cosine is None or cosine > VECTOR_FLOOR


ULID_CHARS = 26  # a memory id: a ULID in Crockford base32 (github.com/ulid/spec)
MIN_ID_PREFIX = 6  # the first 10 characters are the millisecond: 6 narrow it to about nine hours


def id_by_prefix(stores: Iterable[StoreBackend], prefix: str) -> str:
    """The one memory id of `stores` that starts with `prefix` (case-insensitive; MIN_ID_PREFIX to
    ULID_CHARS - 1 characters), as git takes a short commit id. Raises MemoryNotFound when none
    does, InvalidInput when several do (naming up to five)."""
    wanted = prefix.strip().upper()
    if not MIN_ID_PREFIX <= len(wanted) < ULID_CHARS:
        raise MemoryNotFound(f"no memory {prefix!r} (a short id needs {MIN_ID_PREFIX} characters or more)")
    found = list(dict.fromkeys(i for store in stores for i in store.ids_starting(wanted, 6)))
    if not found:
        raise MemoryNotFound(f"no memory whose id starts with {prefix!r}")
    if len(found) > 1:
        many = "more than five" if len(found) > 5 else str(len(found))
        raise InvalidInput(f"{prefix!r} starts {many} memories' ids ({', '.join(found[:5])}): give more of it")
    return found[0]
