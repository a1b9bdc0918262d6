"""The write path under `Engine` (engine.py), which alone calls it: drafts scrubbed of `<private>`
spans and secrets before anything is stored, one memory written in its transaction (a duplicate,
a restatement, explicit replacements, the changes `detection.detect` finds), its path scopes, and
the one writer of supersession (`supersede_row`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidMemory, NotCurrent, StoreError
from . import detection
from .records import Draft
from .scope_index import attach, inherit, learn
from .scopes import normalise_patterns
from ..models import Memory, NewMemory, RememberResult
from ..storage.protocol import StoreBackend as Store  # either backend, typed by the storage contract
from ..text import is_blank, lone_surrogate

if TYPE_CHECKING:
    import numpy as np


def scrub_drafts(drafts: list[Draft]) -> tuple[list[Draft], list[list[dict[str, Any]]]]:
    """The drafts as they may be stored, and per draft what was redacted (RememberResult.redacted):
    `<private>` spans removed and secrets replaced by `[REDACTED:<type>]` (privacy.scrub, as for
    captured turns) in the text and in each applies-when phrase, and a tag holding either refused
    (InvalidMemory), before validation, embedding, duplicate detection or any write, on every
    backend: what a person marks private or a key pasted into a memory never reaches a store, a
    shared one least of all. Raises InvalidMemory for a text that was nothing but private spans (it
    is not stored, and not silently dropped either)."""
    def scrubbable(value: object) -> bool:
        return isinstance(value, str) and not is_blank(value) and lone_surrogate(value) is None

    # (draft index, field, phrase index (-1 for the text), string): the text, each applies-when phrase
    # and each tag, scrubbed in one batch.
    found: list[tuple[int, str, int, str]] = []
    for i, d in enumerate(drafts):
        if scrubbable(d.text):
            found.append((i, "text", -1, d.text))
        for field in ("applies_when", "tags"):
            values = getattr(d, field)
            if isinstance(values, (list, tuple)):
                found += [(i, field, j, v) for j, v in enumerate(values) if scrubbable(v)]
    redacted: list[list[dict[str, Any]]] = [[] for _ in drafts]
    if not found:
        return drafts, redacted
    out = list(drafts)
    # Imported here: a read never scrubs, and the rule sets cost a cold hook process ~100 ms to load.
    from ..privacy.scrub import PRIVATE_KIND, private_spans, random_token, scrub_many

    for (i, field, j, value), clean in zip(found, scrub_many([v for *_, v in found])):
        if clean.text == value:
            if field == "tags" and random_token(value.strip()):  # no rule saw it; as a tag it has no other reading
                raise InvalidMemory(f"tag {j + 1} looks like a secret (a random string of {len(value.strip())} "
                                    "characters); tags are not redacted, so leave it out")
            continue
        where = field if j < 0 else f"{field}[{j}]"
        redacted[i] += [{"field": where, "kind": kind, "start": a, "end": b} for kind, a, b in clean.places]
        if clean.private_spans:  # removed, not replaced: say so, or the writer thinks the text was kept whole
            redacted[i] += [{"field": where, "kind": PRIVATE_KIND, "start": a, "end": b}
                            for a, b in private_spans(value)]
        if field == "tags":  # a tag is shown in every listing and cannot hold a redaction marker
            kinds = ", ".join(sorted(clean.redactions)) or "<private>"
            raise InvalidMemory(f"tag {j + 1} holds a secret ({kinds}) or private text; tags are not "
                                "redacted, so leave it out")
        if is_blank(clean.text):
            what = "the text" if field == "text" else f"applies_when phrase {j + 1}"
            raise InvalidMemory(f"{what} is all <private> content: nothing of it may be stored")
        if field == "text":
            out[i] = replace(out[i], text=clean.text.strip())
        else:
            phrases = list(out[i].applies_when)
            phrases[j] = clean.text.strip()
            out[i] = replace(out[i], applies_when=tuple(phrases))
    return out, redacted


def require_current(store: Store, memory_id: str, *, lock: bool = False) -> Memory:
    """The memory `memory_id` of `store`, which must be current. lock: read it for update (inside the
    write's transaction). Raises MemoryNotFound, NotCurrent (forgotten or superseded)."""
    memory = store.get_for_update(memory_id) if lock else store.get(memory_id)
    if memory.forgotten_at is not None:
        raise NotCurrent(f"memory {memory_id} was forgotten; there is nothing to replace")
    if memory.superseded_by is not None:
        raise NotCurrent(
            f"memory {memory_id} was already superseded by {memory.superseded_by}; replace that one instead"
        )
    return memory


def write(store: Store, row: NewMemory, vector: np.ndarray | None, *, replaces: tuple[str, ...],
          detect: bool) -> RememberResult:
    """Write the validated memory `row` (vector: float32[dim] or None) in one transaction: retire the
    memories it `replaces` (ids), else, with `detect`, those `detection.detect` finds it changes. The
    text of a current memory (text.duplicate_key) writes nothing: status "duplicate". Raises
    MemoryNotFound, NotCurrent, StoreError."""
    with store.transaction():
        # Re-checked under the write lock (SQLite) or with the rows locked (Postgres).
        olds = [require_current(store, i, lock=True) for i in replaces]
        # One index lookup: text_key is text.duplicate_key, the one definition of the same memory.
        existing = store.current_by_text_key(row.text_key)
        restated: list[str] = []
        if existing is not None and existing.id in replaces and (
                sorted(existing.tags) != sorted(row.tags) or existing.kind != row.kind
                or existing.text != row.text):
            # Its own text with other tags or kind, or other punctuation (a review keeping one
            # memory's text and the tags the user chose; an edit of its punctuation): a new
            # version of it, which retires it like the others. It is retired first (one current
            # memory per key), by a row inserted just below.
            store.defer_references()
            supersede_row(store, existing.id, row.id, at=row.recorded_at, valid_until=row.valid_from)
            restated = [existing.id]
            olds = [o for o in olds if o.id != existing.id]
            existing = None
        if existing is not None:
            # The text is already remembered. Replacing other memories by it still retires them
            # (the review verdict "keep the newer one"): nothing new is written. One clock: each
            # holds until its successor does (no gap between them, nor overlap).
            retired = [o.id for o in olds if o.id != existing.id]
            for o in olds:
                if o.id != existing.id:
                    supersede_row(store, o.id, existing.id, at=row.recorded_at,
                                    valid_until=max(existing.valid_from, o.valid_from))
            # After a replace, what else the text may change; a plain duplicate changes nothing.
            related = detection.detect(store, row, vector, retire=False,
                                   skip={existing.id, *retired}).related if retired else []
            return RememberResult(store.get(existing.id), "duplicate", retired, related=related)
        superseded: list[str] = list(restated)
        targets: list[tuple[int, Memory, str]] = []
        found = detection.Found()
        if olds:
            targets = [(store.seq_of(old.id), old, "replaced explicitly") for old in olds]
            # What else the replacement may change: listed, never retired.
            found = detection.detect(store, row, vector, retire=False, skip={o.id for o in olds})
        elif detect:
            found = detection.detect(store, row, vector, retire=True)
            targets = found.targets
        if store.insert(row, vector) is None:
            # Another machine stored the same text meanwhile (Postgres; SQLite writers are serial).
            duplicate = store.current_by_text_key(row.text_key)
            if duplicate is not None:
                return RememberResult(duplicate, "duplicate", [])
            raise StoreError(f"memory {row.id} could not be stored; try again")
        for old_seq, old, _ in targets:
            if supersede_row(store, old_seq, row.id, at=row.recorded_at, valid_until=row.valid_from):
                superseded.append(old.id)
    return RememberResult(store.get(row.id), "created", superseded, found.conflicts, found.related)


def attach_scopes(store: Store, draft: Draft, result: RememberResult, *, at: int, root: Path | None = None) -> None:
    """A write's path scopes: the ones given (scopes.attach), else those of the memories it
    replaced (scopes.inherit); and, when the draft names its session, what that session touched
    just before (scopes.learn)."""
    memory_id = result.memory.id
    patterns = normalise_patterns(draft.paths, root)
    if patterns:
        attach(store, memory_id, patterns, at=at)
    elif result.superseded and result.status == "created":
        inherit(store, memory_id, result.superseded, at=at)
    if draft.session_id:
        learn(store, [memory_id], draft.session_id, at=at)


def supersede_row(store: Store, old: str | int, by: str | None, *, at: int, valid_until: int) -> bool:
    """The one writer of supersession: retire `old` (an id, or its row number) at transaction time
    `at`, its validity ending at `valid_until`, superseded by the memory `by` (None: retired with
    no successor). Every retirement goes through here (write, Engine.retire, Engine.retire_into). Returns
    False when another writer retired or forgot it first."""
    seq = store.seq_of(old) if isinstance(old, str) else old
    return store.supersede(seq, by, at=at, valid_until=valid_until)
