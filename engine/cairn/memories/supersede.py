"""Automatic supersession: does a new memory retire an older, similar one?

The engine calls `classify(old, new, cosine, history=...)` for each current memory of the same kind
that is a candidate: the nearest by embedding (cosine at least SIMILARITY_THRESHOLD) and the best
keyword matches (cosine=None without a model). The verdict is one of

  supersede  the new text states a change of the same subject: the old memory is retired;
  conflict   same-ish subject but no clear change (duplicate, elaboration, hedge, contradiction, or a
             change of one clause of a multi-clause memory): both stay current and the pair is
             reported for review;
  unrelated  different subjects, or one more value of a relation that holds several.

This module is the classifier (`classify`, the constants, the verdict); what it reads is in
supersede_words.py (tokens, lexicon, markers of change, canonical forms, `states_change`,
`names_old_value`, `subject_overlap`), the rules of 4 to 6c in supersede_rules.py, multi-part
memories (6, 6d) in supersede_parts.py and rule 8's guards in supersede_guards.py.

Precision comes first: a wrong "supersede" silently hides a true memory, a missed one only leaves a
stale memory next to the new one. The embedding alone cannot tell these apart (MiniLM scores
"We deploy with Capistrano" / "We now deploy with Kamal" at 0.48 but "The test suite passes on
Python 3.12" / "... fails on Python 3.13" at 0.83), so the verdict rests on lexical evidence and is
the same with and without a model: the cosine only chooses candidates and marks near-paraphrases as
conflicts; below SIMILARITY_THRESHOLD it is no evidence either way.

1. Tokens: normalised text split into words and version numbers (`3.11`, `1.75.0` stay whole;
   `node:fs`, `GB/s`, `ubuntu-22.04` split at punctuation), lightly stemmed, possessive 's dropped.
   Articles, copulas and "we/our" are dropped; prepositions and negations are kept because they mark
   scope ("for the API") and polarity.
2. Person: the people a text is about ("I"/"the user", "my sister", "their colleague") must be the
   same for a change; when both texts name people and they differ, the pair is unrelated.
3. Hedges ("might", "plan to", "?"), approximations ("about 10 minutes") and additions ("also",
   "as well") are never a change: a change found in such a text is reported as a conflict.
4. With a change marker in the new text ("now", "switched", "moved to", "no longer", "is gone",
   "instead of X", "from X to Y", ...): an old text that is itself a change statement ("We moved CI
   from Travis to CircleCI") is compared by what it says holds now ("CI ... CircleCI"), so each step
   of a chain retires the previous one. The old text's words missing from the new one (ignoring
   generic words) must form one contiguous run, the old value, not at the old sentence's start (that
   is its subject), and the texts must share a subject word; what a transitive change verb changes
   ("moved standup to ...") must occur in the old text. If "instead of X" / "from X to Y" /
   "replaced X" names X, X must be a word of the old text, or of a memory it retired (`history`),
   that the old text does not itself reject ("use pnpm, not npm"). A retiring marker ("no longer")
   must repeat the old value, and a removal naming another value of a multi-valued relation ("dropped
   Finnish support" after "supports Swedish") retires nothing; "now" alone does not retire a value of
   a multi-valued relation. The
   old words that go must be a value, not another fact of the subject: not a span with its own "is"
   ("the user's laptop is a ThinkPad" / "the user now lives in Ghent"), not another verb with its
   object (see 5). A move with no object of its own ("the office moved to Manchester") changes where
   the subject is: the old value must follow a place or time preposition or a verb of place ("is in
   Leeds", "lives in Lyon", "runs on Fly"), and a time is not replaced by a place. A change verb
   naming its object ("we upgraded the cluster to Kubernetes 1.30") stands in for the old relation
   ("the cluster runs Kubernetes 1.29").
5. Without a marker (only then): difflib.SequenceMatcher aligns the token lists; a change is
   exactly one replaced span (the value) after a shared prefix of MIN_PREFIX tokens (the subject).
   An old change statement is compared by what it says holds ("Code freeze lasts three weeks now"
   -> "... lasts three weeks"). Not a value: a span holding time words ("this week" / "next week"),
   an uncounted unit ("weekly" / "every month" is a value, "two weeks" too) or environments
   ("production"), or one right after a non-numeric "for" ("used for caching" / "for rate
   limiting" is another purpose; "valid for 24 hours" is a value). Not a value but another
   predicate: a span with its own "is" ("ingress is nginx" / "node pool is e2-standard-4"), or two
   different verbs with their objects to the end of the text ("owns the onboarding flow" / "meets on
   Mondays"; verbs by -s/-ed form or a short list of base forms and irregular participles). Not a
   change: a new object of a relation that holds several values ("maintains", "owns", "uses",
   "supports", "speaks", "reviews", ...) unless the text names the role it fills ("uses Vite as its
   bundler"): "unrelated".
6. A change of an old text with several clauses ("Deploys go through blue-green on Fly; never
   restart the DB in business hours") retires it only if every clause is addressed; a clause the new
   text shares no subject word with still holds, so the pair is a conflict for the user to split or
   edit. A comma between two independent clauses, each with its own subject and verb, separates
   clauses too ("builds run on Bitrise, signing keys live in Infisical"), and a later clause is
   touched only by words of its own, not by the subject it repeats ("The training tenant is reset
   every Sunday. Never run workshops on the prod tenant."). A change found in one clause only (the
   whole old text shows none) is a conflict too.
6a. Before these rules both texts are put in the forms they read (`_canonical`): a transfer ("Ines
   handed the release call over to Tomasz") reads "the release call passed from Ines to Tomasz", a
   perfect tense with "since" ("has lived in Faro since June") reads "now lived in Faro". Retiring
   verbs ("was retired", "cancelled", "closed", "stepped down", "shut down", "ditched", ...) are
   markers; one that the old text holds too ("deleted after merge") is no news. "moved off X", "X
   replaced Y", "Y now, not X" name the old value. A retirement is judged by its own clause.
6b. Polarity: the same words with the state flipped ("disabled" -> "enabled again", "has no X" ->
   "now has X", "is off" -> "switched on", "open" -> "was closed") are a change when the new text
   says so ("now", "again", a retiring or switching verb); a bare flip is a contradiction (conflict).
   A state with a scope of its own ("closed on Sundays" / "open on Saturdays"), a new word before the
   shared subject ("the API" / "the admin API"), a value and its "for"/"in" scope both new, or a verb
   phrase replaced by a prepositional state ("leads the team" / "is now on leave") is another fact.
6c. Values: two replaced spans joined by "at"/"on" are one value ("Tuesdays at 15:00" -> "Fridays at
   10:30"); a count before the span counts a unit ("one day" -> "one year"); a frequency word added
   or dropped ("every other Friday" -> "every Friday", "monthly" -> "twice monthly") is a new value;
   a subject said in other words before "is" ("the retention for audit logs" / "audit log
   retention") is one subject; a holder opening the sentence of a role with "the" ("X is the scrum
   master for ...") is one holder ("a reviewer" has several); a new value may come in a clause of its
   own ("Olu left; the team lead is Ben"). A relation's verb may sit a preposition or a gerund before
   its value ("reads from", "enjoys writing"); "owner of" holds several like "owns".
6d. "and" joins two predicates when its right side opens with a verb ("recorded in Loom and posted
   to #demos"): the old text then has parts, like clauses; a change of one part is a conflict, of
   every part a change, and a part left over is retired once newer memories (`later`) changed it.
8. Guards on a change found by the rules above (issue 31: real project guidance loaded through
   `remember` retired rules that still held). Rules worded as preferences ("use X instead of Y", "X
   rather than Y", "prefer X over Y") state a convention, not a change: such a text retires nothing
   unless it restates the old memory word for word with only the value it names swapped ("Load tests
   are written in k6 instead of JMeter" after "... in JMeter"); otherwise the pair is a "conflict".
   A change must be of the old memory's subject: texts sharing only common words, or an old memory
   losing more than MAX_VALUE_WORDS subject words (more than a value), are "unrelated".
9. Not a change: "conflict" when the texts share most of their subject words (Dice >=
   CONFLICT_OVERLAP), the cosine says they are near-paraphrases (>= PARAPHRASE_COSINE), or one short
   span is swapped inside a shared frame ("We use Jira for bugs" / "... Linear for bugs": a subject
   too short to call it a change, but a possibly stale memory), otherwise "unrelated".

Constants were calibrated on the dev split of tests/data/supersession_pairs.yaml (146 hand-labelled
pairs written before this module) with bench/supersession_eval.py; `--threshold-sweep` reproduces
the choice. Its first two holdout splits exposed the "for" scope, transitive-verb, marker-decides
and additive rules; the dev8 split (issue 8: chains, multi-valued relations, punctuation, short
subjects, multi-clause memories) the rules of 4-6; the dev9 split (holdout8's errors and their
kinds: another predicate of one subject, moves beside other attributes, time units, bumps) the
value-not-predicate, move and time-unit rules; the dev10 split (holdout9's errors and their kinds:
change verbs, polarity, units and spans, restructured subjects, joined predicates) the rules of 6a-6d.
Figures: docs/benchmarks.md, "Supersession detector".
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Literal

from ..text import normalise, stem_text, swapped_spans
from .supersede_words import (
    _ADDITIVE, _ANAPHORA, _APPROX, _DROPPED, _HEDGE, _ONE_OFF, _PREFER_OVER, _PRESENT_ONLY, _REPLACE, _RETIRE,
    _TOKEN, _and_split, _canonical, _clauses, _dice, _has_marker, _in_voice_of, _is_change_statement, _news,
    _persons, _plain, _possessed_match, _state, _subject_words, _tokens
)
from .supersede_rules import (
    MIN_PREFIX, _doer_change, _marker_change, _one_slot, _polarity, _polarity_change, _restructured_change,
    _revived, _role_holder_change, _value_change
)
from .supersede_guards import _frame_swap, _other_subject, _preference_only
from .supersede_parts import _PARTIAL, _clause_change, _every_part_changed, _partial, _untouched_clause


# Calibrated on tests/data/supersession_pairs.yaml with bench/supersession_eval.py; the sweep figures
# behind each value are in docs/benchmarks.md, "Supersession detector", "Calibration history".
# Cosine gate for vector candidates, and below it a cosine is no evidence (the words alone decide).
SIMILARITY_THRESHOLD = 0.40
# Above this cosine two texts without a detected change are treated as paraphrases ("conflict"); high
# enough to keep most same-template unrelated pairs out of the review queue.
PARAPHRASE_COSINE = 0.80
# Dice overlap of subject words above which a non-change is a possible duplicate ("conflict"). Set
# by hand, not swept: it only moves pairs between conflict and unrelated, never into supersede.
CONFLICT_OVERLAP = 0.6
# The same for a new text with a change marker, whose change the rules could not pin to the old one:
# a lower bar, since a stale memory left unreported is what a chain of moves must never leave. Set by
# hand like CONFLICT_OVERLAP: it moves pairs between conflict and unrelated only.
CHANGE_CONFLICT_OVERLAP = 0.4

Label = Literal["supersede", "conflict", "unrelated"]


_SAME = "the texts state the same thing"
_SIMILAR = "similar texts but no clear statement of change"


@dataclass(frozen=True)
class Verdict:
    label: Label
    reason: str  # one short human-readable sentence


def restates(verdict: Verdict, old_text: str, new_text: str) -> bool:
    """Whether a "conflict" verdict on (old_text, new_text) is a restatement: the two say the same
    thing in other words, neither hedged, approximate, one-off nor an addition ("We might run the
    linter" restates nothing: it doubts it). Restatements are merged in review, not judged as changes."""
    if verdict.label != "conflict" or not verdict.reason.startswith((_SAME, _SIMILAR)):
        return False
    texts = [_canonical(normalise(t)) for t in (old_text, new_text)]
    if any(p.search(t) for t in texts for p in (_HEDGE, _APPROX, _ONE_OFF, _ADDITIVE)):
        return False
    return not (_one_word_swapped(old_text, new_text) or swapped_spans(old_text, new_text)
                or _numbers(old_text) != _numbers(new_text))


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:[.,]\d+)*", text))


def _one_word_swapped(old_text: str, new_text: str) -> bool:
    """Whether the two texts differ in one content word each, the rest the same: "Prefer small PRs"
    and "Prefer large PRs" state two values of one thing (a conflict to judge), where a restatement
    rewords or adds ("Please run the linter before every push")."""
    old, new = stem_text(old_text), stem_text(new_text)
    return len(old - new) == 1 and len(new - old) == 1 and bool(old & new)


def _covered(old: str, new: str, later: Sequence[str]) -> bool:
    """Whether each clause of `old` that `new` leaves untouched is changed by one of `later` (current
    memories newer than `old` that each change a part of it): "drafted in Google Docs and reviewed by
    the PM", then "now drafted in Notion", then "now reviewed by the tech writer": nothing remains."""
    parts = [p for c in _clauses(old) for p in _and_split(c)
             if not (_TOKEN.findall(p)[:1] and _TOKEN.findall(p)[0] in _ANAPHORA) and not _is_change_statement(p)]
    changed = set()
    for text in (new, *(_canonical(normalise(t)) for t in later)):
        part = _clause_change(old, text, ())
        if part and not _HEDGE.search(text) and (text == new or classify(old, text, None).reason.startswith(_PARTIAL)):
            changed.add(part[0])
    return len(parts) > 1 and all(p in changed for p in parts)


# A word with the symbols that make it another name: ".env" is not "env", "C++" and "C#" are not "C".
_SYMBOL_WORD = re.compile(r"\.?[^\W_]+(?:[+#]+)?")


def _symbol_words(text: str) -> list[str]:
    return [w for w in _SYMBOL_WORD.findall(text) if w not in _DROPPED]


def classify(old_text: str, new_text: str, cosine: float | None, *, history: Sequence[str] = (),
             later: Sequence[str] = ()) -> Verdict:
    """Decide whether `new_text` supersedes `old_text`; see the module docstring for the method.

    A "supersede" of the rules below must also pass rule 8's guards: texts about other subjects
    (`_other_subject`) are "unrelated"; a preference that does not restate the old memory with its
    value swapped (`_preference_only`, `_frame_swap`) is a "conflict". Never a retirement.
    """
    verdict = _classify(old_text, new_text, cosine, history=history, later=later)
    if verdict.label != "supersede":
        return verdict
    old, new = _canonical(_plain(old_text)), _canonical(_plain(new_text))
    other = _other_subject(old, new)
    if other:
        return Verdict("unrelated", f"{other}, so no change of it: {verdict.reason}")
    if _preference_only(new) and not _frame_swap(old, new):
        return Verdict("conflict", f"a preference states a rule, not a change: {verdict.reason}")
    return verdict


def _classify(old_text: str, new_text: str, cosine: float | None, *, history: Sequence[str] = (),
              later: Sequence[str] = ()) -> Verdict:
    """classify without rule 8's guards.

    cosine: the embeddings' cosine, or None without a model. Below SIMILARITY_THRESHOLD it is no
    evidence either way and the words alone decide, exactly as without a model. history: texts of the
    memories `old_text` itself retired (its supersession chain), oldest first. later: texts of current
    memories newer than `old_text`; when `new_text` changes one part of a multi-part old text and
    those have changed each other part, nothing of it remains and it is superseded."""
    if cosine is not None and cosine < SIMILARITY_THRESHOLD:
        cosine = None
    old, new = _canonical(_plain(old_text)), _canonical(_plain(new_text))
    old = _in_voice_of(old, new)
    old_tokens, new_tokens = _tokens(old), _tokens(new)
    if old_tokens == new_tokens:
        if _symbol_words(old) != _symbol_words(new):
            # "Use C for the core engine" / "Use C++ ...", ".env" / "env": the words agree, a symbol
            # that names something does not. Not the same memory (text.duplicate_key), nor a change.
            return Verdict("conflict", "the texts differ only in symbols: check whether both hold")
        return Verdict("conflict", _SAME)
    old_people, new_people = _persons(old), _persons(new)
    if old_people and new_people and old_people != new_people:
        return Verdict("unrelated", "the texts are about different people")

    if _polarity(old) == _polarity(new):
        return Verdict("conflict", _SAME)  # "is disabled" / "is turned off"
    change: str | None = None
    addition: str | None = None
    # A person named on one side only may be someone else entirely; a thing of someone's ("the user's
    # laptop") on one side only is another subject than its owner.
    if old_people == new_people and _possessed_match(old, new):
        change, addition = _find_change(old, new, (old_text, new_text), tuple(history))
    if addition:
        return Verdict("unrelated", addition)
    if change is None and old_people == new_people:
        verdict = _part_verdict(old, new, tuple(history), later)
        if verdict:
            return verdict
    if change:
        return _change_verdict(old, new, change, tuple(history), later)
    return _no_change_verdict(old, new, cosine, same_people=old_people == new_people)


def _find_change(old: str, new: str, texts: tuple[str, str],
                 history: tuple[str, ...]) -> tuple[str | None, str | None]:
    """(reason, None) if `new` changes what `old` says (both canonical, about the same people);
    (None, why) if it adds a value beside the old one; else (None, None). texts: the two as written,
    whose case tells names from verbs."""
    change: str | None = None
    addition: str | None = None
    # A marked text is judged by the marker rule alone: its "no" (e.g. "moved standup") is final.
    if _has_marker(new):
        change = _marker_change(old, new, history)
    else:
        # An old change statement ("Code freeze lasts three weeks now") says what holds without its marker.
        stated = _state(old) if _is_change_statement(old) else old
        cased_old = None if stated != old else unicodedata.normalize("NFC", texts[0])
        change, addition = _value_change(_tokens(stated), _tokens(new), MIN_PREFIX, stated, new,
                                         (cased_old, unicodedata.normalize("NFC", texts[1])))
        if change is None and addition is None and len(_clauses(old)) == 1:
            # "Olu left; the team lead is Ben": the new value may be stated in a clause of its own.
            for clause in _clauses(new) if len(_clauses(new)) > 1 else ():
                change, addition = _value_change(_tokens(stated), _tokens(clause), MIN_PREFIX, stated, clause)
                if change or addition:
                    break
    if change is None and not addition:
        # "Tom is the release captain now": "now" says the new holder or value holds at present.
        stated = _state(old) if _is_change_statement(old) else old
        markers = [m.group() for m in _REPLACE.finditer(new)]
        if not _has_marker(new) or (all(m in _PRESENT_ONLY for m in markers) and not _RETIRE.search(new)
                                    and not _PREFER_OVER.search(new)):
            plain = re.sub(r"\s+", " ", _REPLACE.sub(" ", new)).strip(" .")
            change = (_role_holder_change(stated, plain) or _restructured_change(stated, plain)
                      or _doer_change(stated, new))
    if change is None and not addition:
        change = _polarity_change(old, new)
    return change, addition


def _part_verdict(old: str, new: str, history: tuple[str, ...], later: Sequence[str]) -> Verdict | None:
    """The verdict when no rule found a change of the whole `old` but one of its parts changed: every
    part changed, or the rest changed by `later` memories, is a "supersede"; else a "conflict" (the
    rest may still hold). None when no part changed."""
    part = _clause_change(old, new, history)
    if part and not (_HEDGE.search(new) or _news(_ADDITIVE, old, new)) and _every_part_changed(old, new, history):
        return Verdict("supersede", f"every part changed: {part[1]}")
    if part and later and not _HEDGE.search(new) and _covered(old, new, later):
        return Verdict("supersede", f"{part[1]}; later memories changed the rest of it")
    if part:  # the change is in one clause of the old memory: the rest may still hold
        return Verdict("conflict", _partial(f"'{part[0]}' ({part[1]})", _untouched_clause(old, new)))
    return None


def _change_verdict(old: str, new: str, change: str, history: tuple[str, ...], later: Sequence[str]) -> Verdict:
    """The verdict on a change the rules found: a "supersede" unless it is hedged, approximate, one-off
    or an addition, or leaves a clause of the old memory untouched (a "conflict")."""
    tentative = (_HEDGE.search(new) or _HEDGE.search(old) or _APPROX.search(old) or _APPROX.search(new)
                 or _ONE_OFF.search(new))
    additive = _news(_ADDITIVE, old, new)
    if tentative or additive:
        kind = f"an addition ('{additive}')" if additive else "a hedged or approximate change"
        return Verdict("conflict", f"{kind}, not a replacement: {change}")
    untouched = _untouched_clause(old, new)
    if later and _covered(old, new, later):
        return Verdict("supersede", f"{change}; later memories changed the rest of it")
    if untouched:
        part = _clause_change(old, new, history)
        return Verdict("conflict", _partial(f"'{part[0]}' ({part[1]})" if part else f"part of it ({change})",
                                            untouched))
    return Verdict("supersede", change)


def _no_change_verdict(old: str, new: str, cosine: float | None, *, same_people: bool) -> Verdict:
    """The verdict when no rule found a change: a "conflict" for a revived old value, near-paraphrases,
    one short span swapped in a shared frame or an announced change near the old subject; else
    "unrelated"."""
    old_tokens, new_tokens = _tokens(old), _tokens(new)
    revived = _revived(old, new, new_tokens)
    if revived:
        return Verdict("conflict", revived)
    overlap = _dice(_subject_words(old_tokens), _subject_words(new_tokens))
    spans = swapped_spans(old, new)
    if spans > 1:
        # "The redis component is owned by team 1" / "The billing component is owned by team 2": a
        # template filled twice states two facts; neither changes nor restates the other.
        return Verdict("unrelated", f"the same frame with other values in {spans} places: another fact")
    if overlap >= CONFLICT_OVERLAP or (cosine is not None and cosine >= PARAPHRASE_COSINE):
        why = f"{_SIMILAR} (word overlap {overlap:.2f})"
        return Verdict("conflict", why)
    slot = _one_slot(old_tokens, new_tokens)
    if slot and same_people:
        # "We use Jira for bugs" / "We use Linear for bugs": one word swapped in a shared frame, too
        # short a subject to call it a change, but a stale memory must not go unreported.
        return Verdict("conflict", f"the texts differ only in {slot}: check whether both still hold")
    if _has_marker(new):
        # An announced change near the old memory's subject that the rules could not pin to it ("We
        # bumped the project to Python 3.12" after "The project targets Python 3.11"): the old one
        # may be stale, so the pair is reported rather than left silent.
        state = _tokens(_state(old)) if _is_change_statement(old) else old_tokens
        near = _dice(_subject_words(state), _subject_words(_tokens(_RETIRE.sub(" ", _REPLACE.sub(" ", new)))))
        if near >= CHANGE_CONFLICT_OVERLAP:
            return Verdict("conflict", f"the new text announces a change near this subject (word overlap "
                                       f"{near:.2f}) but not clearly of it: check whether it still holds")
    return Verdict("unrelated", f"different subjects (word overlap {overlap:.2f})")
