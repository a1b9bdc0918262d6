"""What a write finds among the current memories (Engine.remember, Engine.possible_changes): the
candidates (the nearest by vector, the best keyword matches, the newest memory naming another value
of each slot the new text names), the ones it retires, those it may contradict (queued for review)
and the most likely related ones (shown to the writer). The verdict on each pair is supersede.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as _field
from typing import TYPE_CHECKING, Any

from . import slots
from .supersede import SIMILARITY_THRESHOLD, classify, restates
from .supersede_words import names_old_value, states_change, subject_overlap
from ..models import MAX_RELATED, Memory, NewMemory
from ..storage.protocol import StoreBackend as Store  # either backend, typed by the storage contract
from ..storage.sql import Filters
from ..text import fts_query
from ..timeutil import format_date

if TYPE_CHECKING:
    import numpy as np

DETECTION_CANDIDATES = 5  # nearest current memories (any kind) checked for supersession and `related`
# Best keyword matches checked as well, with or without a model: a change the words alone show ("We
# now deploy with Kamal" after "Deploys go through blue-green on Fly; ...") can sit below the cosine gate.
KEYWORD_CANDIDATES = 8
# Memories naming another value of a slot the new text names (slots.search_phrases) read to find the
# newest of them: more than the plain keyword candidates, since guidance names tools in passing.
SLOT_CANDIDATES = 64
# A candidate the classifier calls unrelated is still shown as related when it is this close: a
# cosine of the embeddings (all-MiniLM-L6-v2) or, without one, a Dice overlap of subject words.
# Set by hand (the candidate gate, and a third of the words), not swept; their effect is measured by
# bench/supersession_loop.py (docs/benchmarks.md, "Truth maintenance with the writer in the loop").
RELATED_COSINE = 0.40
RELATED_OVERLAP = 0.3


@dataclass
class Found:
    """What detection found for one write (detect)."""

    targets: list[tuple[int, Memory, str]] = _field(default_factory=list)  # (seq, memory, reason) to retire
    conflicts: list[dict[str, Any]] = _field(default_factory=list)  # {"id", "reason", "restatement"?}: queued
    related: list[dict[str, str]] = _field(default_factory=list)  # {"id", "text", "kind", "date", "why"}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    import numpy as np

    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b)) / norms if norms else 0.0


def detect(store: Store, row: NewMemory, vector: np.ndarray | None, *, retire: bool,
           skip: frozenset[str] | set[str] = frozenset()) -> Found:
    """What a new memory `row` does to the current ones: those it retires, those it may
    contradict (`conflicts`, queued for review) and the MAX_RELATED most likely about the same
    subject (`related`, any kind, shown to the writer).

    Candidates, of every kind: the nearest by vector (cosine at least SIMILARITY_THRESHOLD) and
    the best keyword matches, so a model only ever adds candidates to what the words alone
    find; a keyword match is classified with its own stored cosine (None without a vector).
    Retired (only with `retire`): a memory of the same kind that supersede.classify calls
    superseded, when the new text says in words that something changed (supersede_words.states_change).
    A change the text does not state, or across kinds, is a conflict: related and queued."""
    near, slot_of = _candidates(store, row, vector, skip)
    memories = store.by_seqs(list(near))
    _newest_per_slot(slot_of, memories, row.text, skip)  # another version, another holder
    chained = names_old_value(row.text)  # "from X to Y": X may be named only earlier in the chain
    stated = states_change(row.text)
    found = Found()
    ranked: list[tuple[tuple[int, float], Memory, str]] = []
    oldest_first = sorted(near)
    for seq, cosine in near.items():
        old = memories[seq]
        if old.id in skip:
            continue
        history = [store.get(i).text or "" for i in store.chain_ids(old.id)[:-1]] if chained else []
        # Newer candidates may each have changed another part of a multi-part old memory.
        later = [memories[s].text or "" for s in oldest_first if s > seq]
        verdict = classify(old.text or "", row.text, cosine, history=history, later=later)
        same_kind = old.kind == row.kind
        closeness = cosine if cosine is not None else subject_overlap(old.text or "", row.text)
        if verdict.label == "supersede" and retire and same_kind and stated:
            found.targets.append((seq, old, verdict.reason))
            continue
        if verdict.label == "supersede":
            why = (f"a change of this {old.kind}? {verdict.reason}" if not same_kind
                   else f"may be an older value: {verdict.reason}")
            found.conflicts.append({"id": old.id, "reason": why})
            ranked.append(((0, -closeness), old, why))
        elif verdict.label == "conflict":
            found.conflicts.append({"id": old.id, "reason": verdict.reason,
                                    **({"restatement": True} if restates(verdict, old.text or "", row.text)
                                       else {})})
            # A slot's newest other value first among these: the likeliest change.
            ranked.append(((1, -2.0 if seq in slot_of else -closeness), old, verdict.reason))
        elif seq in slot_of:
            ranked.append(((1, -2.0), old, f"may be an older value: {slot_of[seq]}"))
        elif cosine is not None and cosine >= RELATED_COSINE:
            ranked.append(((2, -closeness), old, f"a similar subject (cosine {cosine:.2f})"))
        elif cosine is None and closeness >= RELATED_OVERLAP:
            ranked.append(((2, -closeness), old, f"a similar subject (word overlap {closeness:.2f})"))
    ranked.sort(key=lambda item: item[0])
    found.related = [{"id": m.id, "text": m.text or "", "kind": m.kind, "date": format_date(m.valid_from),
                      "why": why} for _, m, why in ranked[:MAX_RELATED]]
    return found


def _candidates(store: Store, row: NewMemory, vector: np.ndarray | None,
                skip: frozenset[str] | set[str]) -> tuple[dict[int, float | None], dict[int, str]]:
    """The candidates of `detect`: ({row number: cosine, or None without a vector}, {row number of
    the newest memory naming another value of a slot the new text names: reason}). Vector
    candidates first, then the keyword and slot ones."""
    everything = Filters()
    near: dict[int, float | None] = {}
    if vector is not None and store.vector_index is not None:
        near = {s: c for s, c in store.vector_search(vector, everything, DETECTION_CANDIDATES)
                if c >= SIMILARITY_THRESHOLD}
    match = fts_query(row.text)
    keyword = [s for s, _ in store.keyword_search(match, everything, KEYWORD_CANDIDATES)
               if s not in near] if match else []
    # Per slot this text names (CI provider, database, deploy target, ...), the newest current
    # memory naming another value of it: the value that held until now, however little wording
    # the two share. Guidance names tools in passing ("run npm test"), so many are read.
    slot_of: dict[int, str] = {}
    phrases = slots.search_phrases(row.text)
    if phrases:
        query = " OR ".join('"' + " ".join(t.replace('"', '""') for t in p) + '"' for p in phrases)
        hits = [s for s, _ in store.keyword_search(query, everything, SLOT_CANDIDATES)]
        texts = store.by_seqs(hits)
        _newest_per_slot(slot_of, texts, row.text, skip)
        keyword += [s for s in slot_of if s not in near and s not in keyword]
    stored = store.vectors_of(keyword) if keyword and vector is not None else {}
    for seq in keyword:
        near[seq] = _cosine(stored[seq], vector) if seq in stored and vector is not None else None
    return near, slot_of


def _newest_per_slot(slot_of: dict[int, str], memories: dict[int, Memory], text: str,
                     skip: frozenset[str] | set[str]) -> None:
    """Add to `slot_of` ({seq: reason}), newest first, each memory of `memories` that names another
    value of a slot `text` names (slots.changed_slot), one per slot not already in it."""
    taken = {slots.slot_key(r) for r in slot_of.values()}
    for seq in sorted(memories, reverse=True):
        if seq in slot_of or memories[seq].id in skip:
            continue
        change = slots.changed_slot(memories[seq].text or "", text)
        if change is not None and slots.slot_key(change) not in taken:
            slot_of[seq] = change
            taken.add(slots.slot_key(change))
