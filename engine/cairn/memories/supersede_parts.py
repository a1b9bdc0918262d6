"""Memories of several parts (supersede.py, rules 6 and 6d): which clause or joined predicate of a
multi-part old text a new text changes, and which it leaves untouched.
"""

from __future__ import annotations

from collections.abc import Iterator

from .supersede_words import (
    _ANAPHORA, _PREPOSITIONS, _REPLACE, _RETIRE, _TOKEN, _and_split, _clauses, _has_marker, _is_change_statement,
    _subject_of, _subject_words, _tokens
)
from .supersede_rules import MIN_PREFIX, _marker_change, _value_change


def _clause_change(old: str, new: str, history: tuple[str, ...]) -> tuple[str, str] | None:
    """(clause, reason) if `new` changes one clause of a multi-clause `old`; else None."""
    return next(_part_changes(old, new, history), None)


def _every_part_changed(old: str, new: str, history: tuple[str, ...]) -> bool:
    """Whether `new` changes each clause and joined predicate of a multi-part `old` ("Mobile builds run
    on Bitrise and take 20 minutes" / "... now run on Codemagic and take 12 minutes")."""
    parts = [p for c in _clauses(old) for p in _and_split(c)]
    if len(parts) < 2 or next(_untouched_clauses(old, new), None) is not None:
        return False  # a part the new text does not even touch still holds
    return len({part for part, _ in _part_changes(old, new, history)}) == len(set(parts))


def _part_changes(old: str, new: str, history: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(part, reason) for each clause or joined predicate of a multi-part `old` that `new` changes."""
    clauses = _clauses(old)
    parts = [(c, p) for c in clauses for p in _and_split(c)]
    if len(parts) < 2:
        return
    subject = _subject_of(clauses[0])
    new_words = set(_tokens(new))
    for _clause, part in parts:
        # A later clause or joined predicate may leave the memory's subject unsaid ("The geocoder uses
        # Nominatim; cache lookups for 24 hours", "... and reviewed by the PM"): it is read with it.
        said = part
        if subject and part != clauses[0] and set(_tokens(subject)) & new_words \
                and not set(_tokens(subject)) & set(_tokens(part)):
            said = f"{subject} {part}"
        if _has_marker(new):
            change = _marker_change(said, new, history)
        else:
            change, _ = _value_change(_tokens(said), _tokens(new), MIN_PREFIX, said, new)
        if change:
            yield part, change


_PARTIAL = "the new text changes "


def _partial(changed: str, untouched: str | None) -> str:
    rest = f" but not '{untouched}', which the old memory also says" if untouched else ", one part of the old memory"
    return f"{_PARTIAL}{changed}{rest}: split or edit it rather than retire it"


def _untouched_clause(old: str, new: str) -> str | None:
    """A clause of a multi-clause old text that the new text does not touch (no shared subject word),
    or None. Such a clause ("never restart the DB in business hours") still holds after the change."""
    return next(_untouched_clauses(old, new), None)


def _untouched_clauses(old: str, new: str) -> Iterator[str]:
    """Every clause of `old` that `new` does not touch, in order (see _untouched_clause)."""
    clauses = _clauses(old)
    if len(clauses) < 2 and len(_and_split(old)) < 2:
        return
    new_words = _subject_words(_tokens(_RETIRE.sub(" ", _REPLACE.sub(" ", new))))
    # The memory's subject, named in its first clause, may be repeated in a later one ("The training
    # tenant is reset every Sunday. Never run workshops on the prod tenant."): a later clause is
    # touched only by words of its own, not by the subject every clause of the memory shares.
    shared = set(_tokens(_subject_of(clauses[0])))
    for k, clause in enumerate(clauses):
        words = _TOKEN.findall(clause)
        if not words or words[0] in _ANAPHORA or _is_change_statement(clause):
            continue  # a continuation or the old change itself, not a fact of its own
        first, *joined = _and_split(clause)
        said = _subject_words(_tokens(clause))
        if k > 0 and said - shared:
            said -= shared
        if len(clauses) > 1 and not said & new_words:
            yield clause
            continue
        if joined:
            # "The bot triages issues and labels PRs" / "the bot no longer labels PRs": the first
            # predicate ("triages issues"), after the subject, is untouched as well.
            subject = _subject_of(first)
            raw = _TOKEN.findall(first)
            # its verb counts even when generic ("run on Bitrise" / "now run on Codemagic": touched)
            predicate = set(_tokens(" ".join(raw[len(subject.split()):]))) - _PREPOSITIONS if subject else set()
            if predicate and not predicate & (new_words | set(_tokens(new))):
                yield first
        for part in joined:
            # "... recorded in Loom and posted to #demos": the joined predicate shares the subject of
            # the first, so only its own words say whether the new text touches it.
            own = _subject_words(_tokens(part)) - _subject_words(_tokens(first))
            if own and not own & new_words:
                yield part
