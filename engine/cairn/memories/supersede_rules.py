"""The rules that find a change from an old text to a new one (supersede.py, rules 4 to 6c): with
a change marker (`_marker_change`), one replaced value (`_value_change`), a flipped state
(`_polarity_change`), a new holder of a role or doer of a relation, one subject in other words; an
old value revived; and what is another predicate or another scope rather than a new value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from ..text import normalise
from .supersede_words import (
    _BARE_MOVE, _CHANGED_OBJECT, _COPULAS, _COUNTS, _DETERMINERS, _DROPPED, _ENVIRONMENTS, _GENERIC, _HEDGE,
    _IDENTIFIER_NOUNS, _LOCATION_VERBS, _LOCATIVE, _MULTI_VALUED, _NEGATIONS, _PREFER_OVER, _PREPOSITIONS,
    _PRESENT_ONLY, _REPLACE, _RETIRE, _ROLE, _TIME_UNITS, _TIME_WORDS, _TOKEN, _VERBS, _WHEN, _WORD_OR_COLON,
    _analyse, _canonical, _clauses, _has_marker, _is_change_statement, _loose, _named, _root, _state, _stem,
    _subject_of, _subject_words, _tokens, _verb_form
)


# Tokens a value change must share before the differing span (its subject): one is not enough. The
# same with and without a model (a longer prefix without one made the two modes disagree on "Office
# moved to Berlin" / "... Munich"); the multi-valued rule now keeps out what 3 used to.
MIN_PREFIX = 2


def _own_relation(text: str, start: int, end: int) -> bool:
    """Whether tokens[start:end] of `text` hold a relation of their own: a copula or a colon between
    their first and last word ("laptop is a ThinkPad", "node pool: e2-standard-4")."""
    raw, at = _analyse(text)
    if end - start < 2 or end > len(at):
        return False
    return any(w == ":" or w in _COPULAS for w in raw[at[start] + 1:at[end - 1]])


def _verb_at(text: str, cased: str | None, index: int, alone: bool = False) -> str | None:
    """The token at `index` of `text` if it reads as a finite verb ("owns", "meets", "exported"):
    a lower-case word ending in -s or -ed (not -ss, -us, -is). `cased`: the text before casefolding,
    so that a name ("Jenkins", "Postgres") is not taken for a verb; without it every word counts.
    alone: the word is the whole span; then -s is no evidence ("Nantes", "Paris" are values)."""
    raw, at = _analyse(text)
    if index >= len(at):
        return None
    word = raw[at[index]]
    if at[index] > 0 and raw[at[index] - 1] in _DETERMINERS:
        return None  # "the docs team", "a release": a noun after its determiner
    if cased is not None:
        cased_raw = _WORD_OR_COLON.findall(cased)
        if len(cased_raw) == len(raw) and not cased_raw[at[index]].islower():
            return None
    if word in _VERBS:
        return word
    if len(word) < 4 or not word.isalpha() or word.endswith(("ss", "us", "is")):
        return None
    return _stem(word) if word.endswith("ed") or (word.endswith("s") and not alone) else None


def _other_predicate(old: str, new: str, i1: int, i2: int, j1: int, j2: int,
                     cased: tuple[str | None, str | None] = (None, None)) -> bool:
    """Whether the replaced spans old[i1:i2] -> new[j1:j2] (token positions) change the predicate
    rather than its value: either span holds a relation of its own ("laptop is a ThinkPad"), or both
    open with different verbs and run to the end ("owns the onboarding flow" / "meets on Mondays"; in
    "needs one approval" / "requires two approvals" the shared "approvals" keeps the attribute)."""
    if _own_relation(old, i1, i2) or _own_relation(new, j1, j2):
        return True
    if min(i2 - i1, j2 - j1) < 1 or (i2 - i1) + (j2 - j1) < 3:
        return False  # a verb needs an object on one side at least: "Redis" / "Memcached" are values
    if i2 < len(_analyse(old)[1]) or j2 < len(_analyse(new)[1]):
        return False
    # A predicate word with a preposition of its own on each side ("is responsible for onboarding" /
    # "is based in Austin"); a span opening with a preposition or "go" only routes ("go through Fly").
    old_span, new_span = _tokens(old)[i1:i2], _tokens(new)[j1:j2]
    before, after = set(old_span) & _PREPOSITIONS, set(new_span) & _PREPOSITIONS
    if before and after and not before & after and old_span[0] not in _GENERIC and new_span[0] not in _GENERIC:
        return True
    old_verb = _verb_at(old, cased[0], i1, i2 - i1 == 1) or _had(old, i1)
    new_verb = _verb_at(new, cased[1], j1, j2 - j1 == 1) or _had(new, j1)
    if not old_verb or not new_verb:
        return False
    return _loose(old_verb) != _loose(new_verb)


def _possession(text: str, index: int, head: str, new_tokens: list[str]) -> str | None:
    """"have" if the value at token `index` of `text` is something the subject has ("has two cats")
    and the new text names another thing ("has a dog"): one can have several. A count of the same
    thing ("two QA engineers" -> "three QA engineers") is a value."""
    counted = all(t[0].isdigit() or t in _COUNTS for t in _tokens(text)[index:index + 1])
    return ("have" if _had(text, index) and head not in new_tokens
            and not (counted and (head in _COUNTS or head[:1].isdigit())) else None)


def _had(text: str, index: int) -> str | None:
    """"have" if the token at `index` of `text` is the object of has/have/had ("the user has a Pixel
    phone"): possession is a predicate of its own beside "lives in Faro"."""
    raw, at = _analyse(text)
    if not 0 < index < len(at):
        return None
    before = at[index] - 1
    while before > 0 and raw[before] in _DETERMINERS:
        before -= 1
    return "have" if raw[before] in ("has", "have", "had") else None


def _multi_valued_before(tokens: list[str], start: int, end: int, text: str) -> str | None:
    """The multi-valued relation whose object is tokens[start:end] of `text` ("maintain" in "maintains
    the Helm charts", "work" in "works on the app"), if any. A value that is only numbers ("pinned to
    1.75.0", "reads at 3.5 GB/s") is a setting's value, not one object among several; a passive verb
    before a preposition ("is hosted on Ghost") says where, which is one place."""
    if start == 0 or all(t[0].isdigit() for t in tokens[start:end]):
        return None
    at = start - 1
    raw, positions = _analyse(text)
    if tokens[at] in ("on", "with", "from", "at") and start >= 2:  # "works on the app", "reads from S3"
        at = start - 2
        if at < len(positions) and positions[at] > 0 and raw[positions[at] - 1] in _COPULAS:
            return None
        if tokens[at] == "work" and tokens[start - 1] in ("at", "from"):
            return None  # "works at Doctolib", "works from the Amsterdam office": one place at a time
        if tokens[start - 1] == "from" and tokens[at] not in _MULTI_VALUED and at >= 1:
            at -= 1  # "pulls data from Salesforce": the verb's object sits between it and the source
    elif at >= 1 and at < len(positions) and raw[positions[at]].endswith("ing"):
        at -= 1  # "enjoys writing Clojure": the relation is the verb before the activity
    word = tokens[at]
    following = raw[positions[at] + 1] if at < len(positions) and positions[at] + 1 < len(raw) else ""
    if following in _COPULAS:
        return None  # "the team lead is Ben": a noun before its copula, not the verb "leads"
    if word.endswith("er") and word[:-2] in _MULTI_VALUED and following == "of":
        return word  # "the owner of the billing repo", "a maintainer of": a holder of one of several
    return word if word in _MULTI_VALUED else None


@dataclass(frozen=True)
class _Marked:
    """An (old, new) pair as the marker rule reads it (`_read_marked`)."""

    old: str
    new: str
    stated: str  # what the old text says holds (`_state` of a change statement)
    stripped: str  # the new text without its markers of change and of retirement
    clauses: list[str]  # the new text's clauses, without its markers of change
    old_tokens: list[str]  # of `stated`
    new_tokens: list[str]  # of `stripped`
    shared: set[str]  # subject words both say
    replace: re.Match[str] | None
    retire: re.Match[str] | None  # a retiring word the old text lacks
    changed: re.Match[str] | None  # "switched/moved/... X to": what the verb changes


def _read_marked(old: str, new: str) -> _Marked | None:
    """The pair as the marker rule reads it, or None when `new` has no marker of change (a retiring
    word the old text has too, "deleted after merge" / "not deleted after merge", is part of what
    both say, not news) or the two share no subject word."""
    replace = _REPLACE.search(new) or _PREFER_OVER.search(new)
    retire = next((m for m in _RETIRE.finditer(new) if m.group() not in old), None)
    if not (replace or retire):
        return None
    stated = _state(old) if _is_change_statement(old) else old
    stripped = _RETIRE.sub(" ", _REPLACE.sub(" ", new))
    old_tokens, new_tokens = _tokens(stated), _tokens(stripped)
    shared = _subject_words(old_tokens) & _subject_words(new_tokens)
    if not shared:
        return None
    return _Marked(old, new, stated, stripped, _clauses(_REPLACE.sub(" ", new)), old_tokens, new_tokens, shared,
                   replace, retire, _CHANGED_OBJECT.search(new))


def _marker_change(old: str, new: str, history: tuple[str, ...]) -> str | None:
    """Reason if `new` states, with an explicit marker, a change of what `old` says; else None.

    An old text that is itself a change statement is compared by what it says holds now (`_state`).
    `history`: texts the old memory retired; a value the new text names as replaced ("from X to Y")
    may be named there instead of in the old text (a chain whose new step names an older value)."""
    m = _read_marked(old, new)
    if m is None:
        return None
    if m.changed and not {_root(t) for t in _tokens(m.changed.group("obj"))} & {_root(t) for t in m.old_tokens}:
        return None  # the verb changes something else ("moved standup"), not what the old text states
    named = _named_value(m)
    if named:
        return _named_change(m, named, history)
    at = [k for k, t in enumerate(m.old_tokens) if t not in _GENERIC]  # token position of each subject word
    old_subject = [m.old_tokens[k] for k in at]
    loose = {_loose(t) for t in m.new_tokens}  # "lives" / "has lived": one verb in another form
    missing = [i for i, t in enumerate(old_subject) if t not in m.new_tokens and _loose(t) not in loose]
    if not missing and not m.retire:
        return None  # old fully restated with "now"/"instead": a duplicate, not a change
    if m.changed and missing:
        missing = _past_changed_object(m, m.changed, old_subject, missing)
    if missing and missing[-1] - missing[0] + 1 != len(missing):
        return None  # old words missing in two places: subject and value both differ
    # A change verb naming its object ("upgraded React to 18.3") says which attribute changes and
    # stands in for the old relation ("the React version is 17"); without one, the words decide.
    if missing and not m.changed and _another_fact(m, at[missing[0]], at[missing[-1]]):
        return None
    if m.retire and _retires_other(m, missing):
        return None
    if missing and _not_a_new_value(m, old_subject, missing, at):
        return None
    gone = " ".join(old_subject[i] for i in missing) or "the old statement"
    marker = m.retire or m.replace
    assert marker is not None  # _read_marked returns a pair with one
    return f"'{marker.group().strip()}': {gone} no longer holds (same subject '{' '.join(sorted(m.shared))}')"


def _named_value(m: _Marked) -> re.Match[str] | None:
    """The old value `m.new` names ("instead of X", "from X to Y", ...: `_named`), unless it is a bare
    one ("..., not X", "replaced X") with other words of the old text missing: "Vite bundles the
    storefront now, not Webpack" after "Webpack bundles the admin app" is decided by the words, as
    if unnamed."""
    named = _named(m.new)
    bare = named and (named.group("e") or (named.group("c") if not re.search(r" (?:with|by|as)$", named.group())
                                           else None))
    if bare and not _subject_words(m.old_tokens) - set(_tokens(bare)) <= set(m.new_tokens):
        return None
    return named


def _named_change(m: _Marked, named: re.Match[str], history: tuple[str, ...]) -> str | None:
    """Reason if the old value `named` names is a word of the old text or of a memory it retired
    (`history`), which the old text does not itself reject, for the old text's scope; else None."""
    value = _tokens(next(g for g in named.groups() if g))
    known = set(_tokens(m.old)).union(*(_tokens(_canonical(normalise(h))) for h in history))
    if not set(value) & known or _rejects(m.old, value):
        return None
    if named.group("b") is not None and "passed from" in m.new and not m.shared - set(value):
        return None  # a transfer's old value is a holder, who may hold other things: "Ines handed the
        # planning doc to Tomasz" says nothing of the release call Ines runs
    old_words = set(m.old_tokens)
    for scope in re.finditer(r"\bfor (?:the )?([^\s,;.]+(?: [^\s,;.]+)?)", m.new):  # two words name it
        if not _subject_words(_tokens(scope.group(1))) & old_words:
            return None  # "MkDocs replaced Sphinx for the API reference": a narrower scope than the old
    return f"new text replaces '{' '.join(value)}' (same subject '{' '.join(sorted(m.shared))}')"


def _past_changed_object(m: _Marked, changed: re.Match[str], old_subject: list[str], missing: list[int]) -> list[int]:
    """The old subject words that go (`missing`, positions in `old_subject`) less those a change verb
    naming its object stands in for."""
    # "We bumped Node to 20" after "The app runs on Node 18": the verb names what it changes, so
    # the old text's own subject ("the app") may go unnamed, when all that is new is a version.
    obj = [t for t in _tokens(changed.group("obj")) if t not in _GENERIC]
    extra = _subject_words(m.new_tokens) - set(m.old_tokens)
    if obj and all(t in old_subject for t in obj) and all(t[0].isdigit() for t in extra):
        missing = [i for i in missing if i > min(old_subject.index(t) for t in obj)]
    if missing and missing[-1] - missing[0] + 1 != len(missing):
        # "We upgraded the cluster to Kubernetes 1.30" after "The cluster runs Kubernetes 1.29": the
        # change verb stands in for the old relation ("runs"), the word right after what it changes.
        moved = {i for i, t in enumerate(old_subject) if t in set(_tokens(changed.group("obj")))}
        if moved and missing[0] == max(moved) + 1:
            missing = missing[1:]
    return missing


def _another_fact(m: _Marked, first: int, last: int) -> bool:
    """Whether the old words that go (tokens first..last of `m.stated`), with no change verb naming
    its object, are another fact of the subject rather than its value: another predicate, an
    attribute with its own "is", or not the place or time a bare move changes."""
    ops = [op for op in SequenceMatcher(None, m.old_tokens, m.new_tokens, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) == 1 and ops[0][0] == "replace" and _other_predicate(m.stated, m.stripped, *ops[0][1:]):
        return True  # "the user works at Doctolib" / "the user now lives in Ghent": another fact
    if _own_relation(m.stated, first, last + 1):
        return True  # the old words that go hold their own "is": another attribute and its value
    move = _BARE_MOVE.search(m.new)
    if move:
        if not _located(m.stated, first):
            return True  # "the office moved to Manchester" changes where it is, not "the office manager"
        words, positions = list(_WORD_OR_COLON.finditer(m.stated)), _analyse(m.stated)[1]
        gone = m.stated[words[positions[first]].start():words[positions[last]].end()]
        if bool(_WHEN.search(gone)) != bool(_WHEN.search(m.new[move.end():])):
            return True  # a place for a time or a time for a place: "standup moved to Zoom"
    return False


def _retires_other(m: _Marked, missing: list[int]) -> bool:
    """Whether the retiring word of `m.new` retires something other than what the old text says, or
    what the old text already says is retired."""
    own = next((c for c in m.clauses if _RETIRE.search(c)), None)
    if own and len(m.clauses) > 1 and not _subject_words(_tokens(_RETIRE.sub(" ", own))) & set(m.old_tokens):
        return True  # "...; USB flashing was removed" retires nothing the old text says
    if m.replace:
        return False
    if _RETIRE.search(m.old):
        return True  # "nightly builds were stopped" / "we no longer run nightly builds": both retire it
    # Judged by the clause that says what stopped ("stopped caching FX rates; it reads them live
    # from the API"): a clause after it says what holds instead, not which value stopped.
    retired = _tokens(_RETIRE.sub(" ", own)) if own else m.new_tokens
    after = next((k for k, t in enumerate(retired) if t in _PREPOSITIONS), len(retired))
    if missing and own and _subject_words(retired[after:]) - set(m.old_tokens):
        return True  # "Mina stepped down from the hiring committee": an object of its own
    if missing and {_loose(t) for t in _subject_words(retired)} - {_loose(t) for t in m.old_tokens}:
        # "The kiosk app dropped Finnish support" after "The kiosk app supports Swedish": the removal
        # names a value (Finnish) the old memory does not, and leaves the old one (Swedish) unsaid.
        # Of a relation that holds several values, that one still holds (issue 31).
        at = [k for k, t in enumerate(m.old_tokens) if t not in _GENERIC]
        if _multi_valued_before(m.old_tokens, at[missing[0]], at[missing[-1]] + 1, m.stated):
            return True
    ops = [op for op in SequenceMatcher(None, m.old_tokens, retired, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    subject = _tokens(_subject_of(m.stated))
    whole = bool(subject) and m.old_tokens[:len(subject)] == subject
    span = retired[ops[0][3]:ops[0][4]] if ops else []
    # "no longer" about another value ("Priya no longer owns billing" vs "... invoicing"); what goes
    # right after the subject is all it did ("the deploy preview job was retired")
    return len(ops) == 1 and ops[0][0] == "replace" and not (whole and ops[0][1] == len(subject)
                                                             and not set(span) & _PREPOSITIONS)


def _not_a_new_value(m: _Marked, old_subject: list[str], missing: list[int], at: list[int]) -> bool:
    """Whether the old subject words that go (`missing`, positions in `old_subject`; `at`: their
    token positions) are no value the marker replaces: the old sentence's subject, one value of a
    relation that holds several, another environment, a state beside what the subject does, or a
    state whose scope changed too."""
    present_only = m.replace is not None and m.replace.group() in _PRESENT_ONLY and not m.retire
    if present_only and not _subject_words(m.new_tokens) - set(m.old_tokens) - {"now"}:
        return True  # "has had a Pixel phone since 2021" after "the phone is a Pixel 8": less said, not changed
    if missing[0] == 0 and (not m.retire or m.replace or _subject_words(m.new_tokens) - set(m.old_tokens)):
        return True  # the differing words open the old sentence: they name its subject, not a value;
        # retired, it may go unnamed ("we no longer use Git LFS"), but not for a scope of its own
        # ("support for Safari 15 was dropped from the iOS app" says nothing of the web client)
    if present_only:
        first = m.old_tokens.index(old_subject[missing[0]])
        last = m.old_tokens.index(old_subject[missing[-1]]) + 1
        relation = _multi_valued_before(m.old_tokens, first, last, m.stated) \
            or _possession(m.stated, first, m.old_tokens[last - 1], m.new_tokens)
        if relation and not _ROLE.search(m.old):
            return True  # "the data team now uses Airflow": maybe beside dbt, not instead of it
    gone_words = {old_subject[i] for i in missing}
    if gone_words & _ENVIRONMENTS and (set(m.new_tokens) - set(m.old_tokens)) & _ENVIRONMENTS:
        return True  # "on in staging" / "off in production": another environment, not a new value
    if not m.changed and _state_beside(m.stated, m.old_tokens, m.new_tokens, at[missing[0]]):
        return True  # "Grace leads the mobile team" / "Grace is now on parental leave": a state of her own
    # "enabled in the editor" -> "disabled in the terminal": the scope changed too
    return _scope_changed(m.old_tokens, m.new_tokens, at[missing[0]], at[missing[-1]] + 1)


# Polarity: a state and its opposite ("disabled" is "not enabled"), so that "is disabled" -> "is
# enabled again" and "has no offline mode" -> "now has an offline mode" read as one fact flipped.
_OPPOSITES = {
    "disabled": "enabled", "disable": "enable", "disables": "enables", "off": "on", "closed": "open",
    "resolved": "open", "shut": "open", "inactive": "active", "unavailable": "available",
    "forbidden": "allowed", "disallowed": "allowed", "blocked": "allowed", "private": "public",
    "hidden": "visible", "optional": "required", "unsupported": "supported", "unlocked": "locked",
    "paused": "running", "stopped": "running", "broken": "working", "blocks": "allows", "block": "allow",
}
# The positive state in other words: "was resumed" is "running", "was fixed" is "working".
_SAME_STATE = {"resumed": "running", "fixed": "working", "reopened": "open", "unblocked": "allowed"}
_STATES = frozenset(_stem(word) for table in (_OPPOSITES, _SAME_STATE) for pair in table.items()
                    for word in pair)  # stemmed, either side
_NEGATING = _NEGATIONS | {"doesn't", "isn't", "aren't", "won't", "can't", "cannot", "without"}
# Words that say a state holds now without being part of it.
_STATE_MARKERS = frozenset("now again anymore more longer since re".split())
# News of a flip: "now", "again", or a verb that only says the state came back ("was fixed").
_STATE_CHANGE = re.compile(r"\b(now|again|any ?more|from now on|re-?enabled|reopened|resumed|restored|fixed"
                           r"|unblocked)\b")
# "switched off", "turned on": a switch is a state, on or off, whatever the verb.
_SWITCH = re.compile(r"\b(?:switch|turn|flipp?|set)(?:ed|s)? (?:on|off)\b")


def _polarity(text: str) -> tuple[list[str], int]:
    """(tokens with negations and state markers left out and each state in its positive form,
    1 if the text negates its state an odd number of times else 0)."""
    words, flips = [], 0
    raw = _TOKEN.findall(_SWITCH.sub(lambda m: " " + m.group().rsplit(" ", 1)[1], text))
    for i, word in enumerate(raw):
        if word in ("on", "off") and i > 0 and raw[i - 1] in _COPULAS:
            word = "enabled" if word == "on" else "disabled"  # "is on" is "is enabled"
        if word in _NEGATING:
            flips += 1
        elif word in _OPPOSITES:
            flips += 1
            words.append(_stem(_OPPOSITES[word]))
        elif word in _SAME_STATE:
            words.append(_stem(_SAME_STATE[word]))
        elif word not in _DROPPED and word not in _STATE_MARKERS and word not in _IDENTIFIER_NOUNS:
            words.append(_stem(word[:-2] if word.endswith("'s") else word))
    return words, flips % 2


def _polarity_change(old: str, new: str) -> str | None:
    """Reason if `new` says the same as `old` with its state flipped and marked as a change ("now",
    "again", "no longer", "was closed"): "the fuzz job is disabled" -> "... is enabled again". A bare
    flip with no marker ("is enabled" / "is not enabled") is a contradiction for review, not a change."""
    (old_words, old_flip), (new_words, new_flip) = _polarity(old), _polarity(new)
    if old_flip == new_flip or old_words != new_words or not old_words:
        return None
    fresh = [m.group() for marker in (_STATE_CHANGE, _RETIRE, _SWITCH) for m in marker.finditer(new)]
    if not any(word not in old for word in fresh):
        return None  # "deleted" in both texts is the state itself, not news of a change
    return f"the state of '{' '.join(new_words)}' flipped"


def _state_beside(old: str, old_tokens: list[str], new_tokens: list[str], start: int) -> bool:
    """Whether the old words that go open with a verb and its object ("leads the mobile team") while
    the new words that come open with a preposition ("on parental leave"): a state of the subject
    beside what it does, not a new value of it. Verbs of place ("lives in Kassel" / "is in Leipzig")
    are the exception: there the preposition restates the place."""
    raw, positions = _analyse(old)
    if start >= len(positions):
        return False
    word = raw[positions[start]]
    if word in _COPULAS or _LOCATION_VERBS.match(word) or not (word in _VERBS or _verb_form(word)):
        return False
    old_set = set(old_tokens)
    first = next((j for j, t in enumerate(new_tokens) if t not in old_set and t not in _GENERIC), None)
    return first is not None and first > 0 and new_tokens[first - 1] in ("on", "in", "at") \
        and new_tokens[first - 1] not in old_set


def _scope_changed(old_tokens: list[str], new_tokens: list[str], start: int, end: int) -> bool:
    """Whether the old value old_tokens[start:end] is a state with a scope of its own that the new
    text changes as well ("closed on Sundays" / "open on Saturdays", "enabled in the editor" /
    "disabled in the terminal"), or the new text names a word of its own right before the first
    shared subject word ("the API is public" / "the admin API is private"): another scope."""
    old_set = set(old_tokens)
    states = _STATES
    for k in range(start + 1, end - 1):
        prep = old_tokens[k]
        if prep not in _PREPOSITIONS or prep not in new_tokens:
            continue
        at = new_tokens.index(prep)
        following, preceding = new_tokens[at + 1:at + 2], new_tokens[at - 1:at] if at else []
        if not following or following[0] in old_set or following[0] in _GENERIC:
            continue
        if old_tokens[k - 1] in states:
            return True
        if prep in ("for", "in") and preceding and preceding[0] not in old_set and preceding[0] not in _GENERIC:
            return True  # "ubuntu-22.04 for CI" -> "ubuntu-24.04 for docs builds": value and scope both new
    shared_at = [j for j, t in enumerate(new_tokens) if t in old_set and t not in _GENERIC]
    if not shared_at or shared_at[0] == 0:
        return False
    modifier = new_tokens[shared_at[0] - 1]
    return modifier not in old_set and modifier not in _GENERIC and not modifier[0].isdigit() \
        and not _HEDGE.search(modifier)


def _located(text: str, index: int) -> bool:
    """Whether the token at `index` of `text` opens a place or a time: it follows a locative
    preposition ("is in Leeds", "is on Tuesday", "to Nantes") or is a verb of place ("lives", "based")."""
    raw, at = _analyse(text)
    word = at[index]
    before = word - 1
    while before >= 0 and raw[before] in _DROPPED - _LOCATIVE:  # "is in the Berlin office", "in us-east-1"
        before -= 1
    return bool(_LOCATION_VERBS.match(raw[word])) or (before >= 0 and raw[before] in _LOCATIVE)


def _rejects(old: str, value: list[str]) -> bool:
    """True if the old text itself negates the named old value ('use pnpm, not npm')."""
    words = _TOKEN.findall(old)
    return any(w in value and i > 0 and words[i - 1] in _NEGATIONS for i, w in enumerate(words))


# Words that change how often ("every other Friday", "twice monthly"), dropped or added on their own.
_SHORT_UNITS = frozenset("day hour minute second".split())  # "every three weeks" -> "every week"
_MULTIPLIERS = frozenset("twice thrice bi fortnightly".split())  # need no "every" ("twice monthly")
_FREQUENCY_MODIFIERS = frozenset("other twice thrice second third alternate bi fortnightly".split())


def _merged_ops(old_tokens: list[str], new_tokens: list[str]) -> list[tuple[str, int, int, int, int]]:
    """The non-equal opcodes of old -> new, with replaced spans that only a preposition or two keep
    apart merged into one ("tuesdays at 15:00" -> "fridays at 10:30", "redis 6 on t3.small" -> "redis
    7 on r6g.large"): two values of one setting changed at once are one new value. Only "at"/"on" join
    them: "tabs in Go" -> "spaces in Python", "Adyen for card" -> "Braintree for PayPal" change a scope."""
    ops = [op for op in SequenceMatcher(None, old_tokens, new_tokens, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    merged: list[tuple[str, int, int, int, int]] = list(ops[:1])
    for op in ops[1:]:
        last = merged[-1]
        gap = old_tokens[last[2]:op[1]]
        if (last[0] == op[0] == "replace" and 0 < len(gap) <= 2 and all(t in ("at", "on") for t in gap)
                and op[3] - last[4] == len(gap)):
            merged[-1] = ("replace", last[1], op[2], last[3], op[4])
        else:
            merged.append(op)
    return merged


def _value_change(old_tokens: list[str], new_tokens: list[str], min_prefix: int, old: str, new: str,
                  cased: tuple[str | None, str | None] = (None, None)) -> tuple[str | None, str | None]:
    """(reason, None) if the texts differ in exactly one replaced span after a shared subject;
    (None, why) if they do but the relation holds several values (an addition); else (None, None).
    old, new: the normalised texts the tokens came from; cased: the same before casefolding, if known."""
    ops = _merged_ops(old_tokens, new_tokens)
    if len(ops) == 1 and ops[0][0] in ("insert", "delete") and ops[0][1] >= min_prefix:
        # "every other Friday" -> "every Friday", "monthly" -> "twice monthly": a frequency modifier
        # added or dropped changes the value of the same setting.
        _, i1, i2, j1, j2 = ops[0]
        span = old_tokens[i1:i2] + new_tokens[j1:j2]
        unit = old_tokens[i2:i2 + 1] if i2 > i1 else new_tokens[j2:j2 + 1]
        counts = all(t in _COUNTS or t.isdigit() for t in span) and set(unit) & (_TIME_UNITS | _SHORT_UNITS)
        frequency = set(span) <= _FREQUENCY_MODIFIERS and (old_tokens[i1 - 1] == "every" or set(span) & _MULTIPLIERS)
        if span and (frequency or counts) and _subject_words(old_tokens[:i1]):
            return f"same subject, frequency {' '.join(old_tokens[i1 - 1:i2 + 1])} -> " \
                   f"{' '.join(new_tokens[j1 - 1:j2 + 1])}", None
    if len(ops) != 1 or ops[0][0] != "replace":
        return None, None
    _, i1, i2, j1, j2 = ops[0]
    prefix = old_tokens[:i1]
    before, after = old_tokens[i1:i2], new_tokens[j1:j2]
    # "Standup is Mondays at 10:00" -> "Thursdays at 09:30": a day and time is a value even after a
    # one-word subject.
    when = i1 == len(old_tokens) - (i2 - i1) and all(_WHEN.search(" ".join(span)) for span in (before, after))
    if len(prefix) < (1 if when else min_prefix) or not _subject_words(prefix):
        return None, None  # the differing words open the sentence: they are its subject, not a value
    counted = prefix[-1][0].isdigit() or prefix[-1] in _COUNTS  # "to one day" -> "to one year"
    if any(t[0].isdigit() for t in old_tokens[i2:]) and not any(t[0].isdigit() for t in before + after):
        return None, None  # "retained for 400 days" / "retention is 400 days": the number, the value, stays
    for span, other in ((after, before), (before, after)):
        scoped = [k for k, t in enumerate(span) if t in ("for", "in") and k > 0 and t not in other]
        if scoped and _subject_words(span[scoped[0] + 1:]):
            return None, None  # "$20" -> "$25 for students": a value for another scope, beside the old
    if len(old_tokens) - i2 >= max(3, 2 * len(prefix)):
        return None, None  # a short prefix and a shared predicate twice as long: the span names *which*
        # subject ("service 0 writes its logs to ..." vs "service 1 ..."), not a new value of one subject
    if prefix[-1] in _IDENTIFIER_NOUNS:
        return None, None  # "memory number 0 says ..." / "number 1 says ...": which one, not a new value
    if prefix[-1] == "for" and not any(t[0].isdigit() or t in _COUNTS for t in before + after + prefix[-2:-1]):
        return None, None  # "used for caching" / "for rate limiting": another purpose or scope, not a value
    scopes = [set(span) & (_PREPOSITIONS | {_stem("during"), "after", "before", "until"}) for span in (before, after)]
    if all(scopes) and scopes[0] != scopes[1]:
        return None, None  # "paused during the freeze" / "resumed after the freeze": another time or place
    if (_TIME_WORDS | _ENVIRONMENTS | _NEGATIONS) & set(before + after):
        return None, None  # another time period or environment, or a flipped polarity: not a new value
    if _TIME_UNITS & set(before + after) and not counted and not any(t[0].isdigit() or t in _COUNTS
                                                                     for t in before + after):
        return None, None  # "weekly" / "next month": an uncounted unit names a period, not a duration
    if _other_predicate(old, new, i1, i2, j1, j2, cased):
        return None, None  # "owns the onboarding flow" / "meets on Mondays": another fact of the subject
    relation = _multi_valued_before(old_tokens, i1, i2, old) or _possession(old, i1, old_tokens[i2 - 1], new_tokens)
    if relation and re.search(rf"\b{relation}\w*\s*:", old):
        relation = None  # "Tech lead: Amara" names a role holder; "leads the platform team" is a relation
    if relation and not _ROLE.search(old):
        return None, f"'{relation}' can hold several values: {' '.join(after)} is an addition beside {' '.join(before)}"
    subject = " ".join(t for t in old_tokens if t not in before)
    return f"same subject '{subject}', value {' '.join(before)} -> {' '.join(after)}", None


# "Kwame is the scrum master for the identity squad": the holder opens the sentence; "the" says the
# role has one holder ("a reviewer for the style guide" has several).
_ROLE_HOLDER = re.compile(r"^(?P<holder>[^,;:]+?) (?:is|are) the (?P<role>[^,;:]+?)[.!]?$")
_PRONOUNS = frozenset("it this that these those they he she there here what who which".split())


# The same statement with the role first: "the accessibility champion is Farah", and as a label:
# "Accessibility champion: Isidora".
_ROLE_FIRST = re.compile(r"^the (?P<role>[^,;:]+?) (?:is|are) (?P<holder>[^,;:]+?)[.!]?$")
_ROLE_LABEL = re.compile(r"^(?:the )?(?P<role>[^,;:]+?): (?P<holder>[^,;:]+?)[.!]?$")


def _role_of(text: str) -> tuple[re.Match[str], bool] | None:
    """The role statement of `text` and whether it is in the plain "the ROLE is HOLDER" form."""
    for pattern in (_ROLE_HOLDER, _ROLE_LABEL, _ROLE_FIRST):
        match = pattern.match(text)
        if match:
            return match, pattern is _ROLE_FIRST
    return None


def _role_holder_change(old: str, new: str) -> str | None:
    """Reason if both texts name a holder of one and the same role ("X is the incident commander for
    the outage drill" / "Y is ...", also as "the incident commander ... is Y" or "Incident commander
    ...: Y"), each holder a name of at most three words; else None. Two plain "the ROLE is HOLDER"
    texts are left to the value rules (_value_change), which read that form already."""
    found = _role_of(old), _role_of(new)
    if not found[0] or not found[1] or (found[0][1] and found[1][1]):
        return None
    a, b = found[0][0], found[1][0]
    if _tokens(a["role"]) != _tokens(b["role"]) or not _subject_words(_tokens(a["role"])):
        return None
    holders = _tokens(a["holder"]), _tokens(b["holder"])
    if holders[0] == holders[1] or any(not h or len(h) > 3 or set(h) & _PRONOUNS for h in holders):
        return None
    role, taker, giver = (" ".join(m.split()) for m in (a["role"], b["holder"], a["holder"]))
    return f"the {role} is now {taker}, not {giver}"


# Words that say the new text holds at present, in place of what held before.
_PRESENT_MARK = re.compile(r"\b(?:from now on|going forward|these days|nowadays|now|again)\b")


def _doer_change(old: str, new: str) -> str | None:
    """Reason if the new text gives one relation another doer and says it holds at present
    ("Typesense powers the storefront search" / "Algolia powers the storefront search now", "Maven
    builds the JVM services again"); else None. The doer is the opening span (at most three words,
    no pronoun); the rest, from a verb that is no copula on, is the same. A relation that holds
    several doers at once (_MULTI_VALUED: "maintains", "uses") is left alone."""
    if not _PRESENT_MARK.search(new) or _PRESENT_MARK.search(old):
        return None
    old_tokens, new_tokens = _tokens(old), _tokens(_PRESENT_MARK.sub(" ", new))
    ops = [op for op in SequenceMatcher(None, old_tokens, new_tokens, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "replace" or ops[0][1] != 0 or ops[0][3] != 0:
        return None
    _, _, i2, _, j2 = ops[0]
    doers, rest = (old_tokens[:i2], new_tokens[:j2]), old_tokens[i2:]
    if any(len(d) > 3 or set(d) & (_PRONOUNS | {"we", "i", "you"}) for d in doers) or len(rest) < 3:
        return None
    verb = rest[0]
    if verb in ("is", "are", "was", "were", "be") or _stem(verb) in _MULTI_VALUED \
            or _loose(_stem(verb)) in _MULTI_VALUED or not _subject_words(rest[1:]):
        return None
    return f"{' '.join(doers[1])} {' '.join(rest)} now, not {' '.join(doers[0])}"


def _restructured_change(old: str, new: str) -> str | None:
    """Reason if the texts name one subject in other words ("the retention for audit logs" / "audit log
    retention": the same words before the first "is") and change its value; else None."""
    halves = [re.split(r"\b(?:is|are)\b", text, maxsplit=1) for text in (old, new)]
    if any(len(h) != 2 for h in halves):
        return None
    subjects = [_tokens(h[0]) for h in halves]
    words = [{t for t in s if t not in _GENERIC} for s in subjects]
    if subjects[0] == subjects[1] or words[0] != words[1] or len(words[0]) < 2:
        return None
    rebuilt = f"{halves[0][0]} is {halves[1][1]}"  # the new value under the old subject's wording
    change, _ = _value_change(_tokens(old), _tokens(rebuilt), MIN_PREFIX, old, rebuilt)
    return change


def _one_slot(old_tokens: list[str], new_tokens: list[str]) -> str | None:
    """'X -> Y' if the token lists differ in exactly one short replaced span (at most 2 tokens a side)
    inside a shared frame that goes on after it with a subject word ("use _ for bugs"); else None.
    A span at the end ("Hannah is the DBA" / "... learning Rust") may be another fact altogether."""
    ops = [op for op in SequenceMatcher(None, old_tokens, new_tokens, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "replace":
        return None
    _, i1, i2, j1, j2 = ops[0]
    if i2 - i1 > 2 or j2 - j1 > 2 or not _subject_words(old_tokens[i2:]):
        return None
    if (_TIME_WORDS | _ENVIRONMENTS) & set(old_tokens[i1:i2] + new_tokens[j1:j2]):
        return None  # "on call this week" / "on vacation next week": another period or environment
    return f"'{' '.join(old_tokens[i1:i2])}' -> '{' '.join(new_tokens[j1:j2])}'"


def _revived(old: str, new: str, new_tokens: list[str]) -> str | None:
    """Why `new` contradicts the change statement `old`, if it does: it states, without a change
    marker of its own, the value `old` says was replaced ("We switched the CI from CircleCI to
    GitHub Actions" / "Our CI runs on CircleCI"), about a subject they share. Never a retirement:
    which of the two is right is for the writer or the user to say."""
    if _has_marker(new):
        return None
    named = _named(old)
    if named is None:
        return None
    value = _subject_words(_tokens(next(g for g in named.groups() if g is not None)))
    if not value or not value <= set(new_tokens):
        return None
    rest = _subject_words(_tokens(_state(old))) - value
    if not rest & (set(new_tokens) - value):
        return None
    return f"states {' '.join(sorted(value))}, which this memory says was replaced"
