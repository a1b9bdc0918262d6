"""Rule 8 of supersede.py, the guards on a change the rules found (issue 31): a preference ("use X
instead of Y") that does not restate the old memory with its value swapped is a conflict, and a
change must be of the old memory's subject.
"""

from __future__ import annotations

import re

from ..text import STOPWORDS
from .supersede_words import (
    _CHANGED_TO, _PREFER_OVER, _REPLACE, _RETIRE, _SELF, _is_change_statement, _loose, _named, _state,
    _subject_words, _tokens
)


# Rule 8. The most old subject words a change may leave out: what goes is the old value, and a value
# is short. Across every supersede verdict of the truth sets (tests/data/supersession_*.yaml) at most
# 5 went when this was set (then "Courier app builds run on Bitrise, signing keys live in Infisical"
# -> "... moved to Codemagic", since a conflict: a comma clause of its own); the false retirements
# found by bench/guidance_retirement.py leave out 11 to 15 (a rule about something else that happens
# to share a word or two).
MAX_VALUE_WORDS = 6
# A preference states a convention, not a change: "use X instead of Y", "X rather than Y", "prefer X
# over Y", "in favour of Y". Its words, removed to see whether any other wording of change is left.
_PREFERENCE = re.compile(r"\b(?:instead of|rather than|in favou?r of|instead)\b")
_PREFERENCE_WORDS = re.compile(r"\b(?:instead of|rather than|in favou?r of|instead|prefer\w*|over)\b")
# Words every text shares without sharing a subject; "I" and "my" name the user, who is one.
_COMMON = (STOPWORDS - _SELF) | {"every", "each"}


def _preference_only(new: str) -> bool:
    """Whether the only wording of change in `new` (canonical) is a preference: "Use stretchr/testify
    assertions rather than hand-rolled if checks", "Liquibase runs our database migrations instead
    of Flyway"; not "we now use X instead of Y", "we dropped X in favour of Y"."""
    if not (_PREFERENCE.search(new) or _PREFER_OVER.search(new)):
        return False
    rest = _PREFERENCE_WORDS.sub(" ", new)
    return not (_REPLACE.search(rest) or _RETIRE.search(rest) or _CHANGED_TO.search(rest) or _named(rest))


def _frame_swap(old: str, new: str) -> bool:
    """Whether `new` restates all of `old` but the value it names as what it prefers against, which
    `old` holds: "Load tests are written in JMeter" / "Load tests are written in k6 instead of
    JMeter", "Database migrations are run by Flyway" / "Liquibase runs our database migrations
    instead of Flyway". The whole old memory restated is the same subject; naming its value as the
    one not to use is the wording of change."""
    named = _named(new)
    if named is None:
        return False
    value = _subject_words(_tokens(next(g for g in named.groups() if g is not None)))
    stated = _subject_words(_tokens(_state(old) if _is_change_statement(old) else old))
    kept = stated - value
    said = {_loose(t) for t in _subject_words(_tokens(new[:named.start()] + " " + new[named.end():]))}
    return bool(value) and value <= stated and bool(kept - _COMMON) \
        and all(_loose(t) in said for t in kept) and not all(_loose(t) in said for t in value)


def _other_subject(old: str, new: str) -> str | None:
    """Why `new` (canonical) is about another subject than `old` although the rules found a change:
    they share only common words (stopwords), or `old` loses more than MAX_VALUE_WORDS subject words
    (more than a value goes); else None."""
    stated = _state(old) if _is_change_statement(old) else old
    old_words = _subject_words(_tokens(stated))
    new_words = _subject_words(_tokens(_RETIRE.sub(" ", _REPLACE.sub(" ", new))))
    if not (old_words & new_words) - _COMMON:
        return "the texts share no subject word beyond common ones"
    if len(old_words - new_words) > MAX_VALUE_WORDS:
        return f"more of the old memory goes than a value ({len(old_words - new_words)} words): another subject"
    return None
