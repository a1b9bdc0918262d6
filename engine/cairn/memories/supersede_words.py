"""The words the supersession rules read (supersede.py states the method): tokens and stems, the
lexicon (grammar words, people, environments, verbs), the markers of a change ("now", "moved to",
"no longer", "instead of X") and of a hedge, an approximation or an addition, the canonical forms a
text is read in (transfers, dates, units, voice), clauses and joined predicates, and the subject
words two texts share. Public: `states_change`, `names_old_value`, `subject_overlap`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..text import normalise


# What privacy.scrub puts where a secret stood: an unknown value, not words two texts can share.
_REDACTED = re.compile(r"\[REDACTED:[^\]\n]{1,80}\]", re.IGNORECASE)


def _plain(text: str) -> str:
    return normalise(_REDACTED.sub(" ", text))


# Versions first so `3.11` and `1.75.0` stay one token; words keep an inner apostrophe (don't, user's).
_TOKEN = re.compile(r"\d+(?:\.\d+)+|[^\W_]+(?:'[^\W_]+)?|\w+")
_DROPPED = frozenset(
    "a an the is are was were be been being am do does did has have had to of and or as its it "
    "that which we our us we're please always just also".split()
)
# Shared only by grammar, never a subject on its own: prepositions and all-purpose verbs.
_GENERIC = frozenset(
    "for in on at with from by after before through via into inside outside over under per "
    "use run go get make need not no never don't".split()
)
_NEGATIONS = frozenset("not no never don't doesn't isn't aren't".split())
_SELF = frozenset("i me my mine myself user user's".split())
_POSSESSIVES = frozenset("my our their his her user's".split())
_RELATIONS = frozenset(
    "sister brother wife husband partner parents parent mother mom father dad son daughter "
    "colleague coworker friend boss manager mentor cousin family".split()
)
# Deployment environments name a scope ("4 workers in production" vs "in staging"), never a value.
# "stag" is what _stem leaves of "staging".
_ENVIRONMENTS = frozenset(
    "production prod staging stag dev development test local ci qa preview sandbox".split()
)
# A value right after one of these names which thing ("service number 3", "ticket 41"), not a new value.
_IDENTIFIER_NOUNS = frozenset("number nr num id item issue ticket step".split())
# "this week" / "next week": another period, never a value. A unit of time is a value once counted
# ("two weeks" -> "one week", "every two weeks"): only an uncounted unit is a period.
_TIME_WORDS = frozenset("this next last today tomorrow yesterday".split())
_TIME_UNITS = frozenset("week month year quarter".split())
_COUNTS = frozenset("one two three four five six seven eight nine ten eleven twelve every each half couple".split())
# A relation of its own inside a replaced span ("laptop is a ThinkPad", "node pool: e2"): the span
# names another attribute and its value, not a new value of the same one.
_COPULAS = frozenset("is are was were be been being am".split())
# Raw words with a colon that ends a word ("Tech lead: Amara"); a colon inside "9:30" is no relation.
# Verbs that the -s/-ed test misses: base forms after a plural subject ("deploys go through Argo",
# "backend devs own the API") and irregular participles ("is built with Gatsby", "is written in Rust").
_VERBS = frozenset(
    "go need own meet run use get make require take send store write read build deploy ship host serve "
    "handle maintain support live work lead review cover call accept expire start stop finish open close "
    "wait retry fail pass sync block allow sit keep hold give show pay sell tell set put come bring "
    "hire report alert notify publish release merge push pull post cache email record draft upload log "
    "track generate archive rotate sign scan "
    "written built made kept held sent shown known given taken done seen drawn grown hidden driven "
    "chosen spoken begun bound found paid sold told led fed met sat stood brought bought taught spent "
    "gone ran".split()
)
_WORD_OR_COLON = re.compile(r":(?=\s|$)|" + _TOKEN.pattern)
# "The office moved to Manchester": a move with no object of its own changes where the subject is, so
# the old value must be a place or a time ("is in Leeds", "lives in Lyon", "runs on Fly", "is on
# Tuesday"), not another attribute ("the office manager is Dana", "the user speaks Italian").
_BARE_MOVE = re.compile(r"\b(?:moved|relocated|migrated|transferred)(?: back)? to\b")
# A time of day or week: "standup moved to Zoom" does not change "standup is at 9:30".
_WHEN = re.compile(r"\b\d{1,2}:\d{2}\b|\b\d{1,2} ?[ap]\.?m\b|\b(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b"
                   r"|\b(?:noon|midnight|mornings?|afternoons?|evenings?)\b")
_LOCATIVE = frozenset("in at on to near via through inside".split())
_LOCATION_VERBS = re.compile(
    r"^(?:live[sd]?|living|based|located|resides?|resided|stay(?:s|ed)?|sits?|runs?|hosted|hosts?)$"
)

_HEDGE = re.compile(
    r"\?|\b(might|maybe|perhaps|probably|could|would|will|should we|plan(s|ned|ning)? to"
    # "may", but not the month: "since May", "in May 2025", "on 3 May", "May 12".
    r"|(?<!in )(?<!since )(?<!from )(?<!until )(?<!till )(?<!by )(?<!of )(?<!early )(?<!late )(?<!mid-)"
    r"(?<!mid )(?<!last )(?<!this )(?<!next )(?<![0-9] )(?<![0-9]th )may(?!\s*[0-9])"
    r"|consider(ing)?|thinking|i think|propos\w*|soon|going to|upcoming"
    # A change announced for later ("is moving to Valencia next month") has not happened yet.
    r"|next (?:week|month|quarter|year|sprint|release)"
    # Wishes and intentions ("wants to step down", "we intend to stop ...") are not changes either.
    r"|(?:want|intend|hope|aim|expect|wish|plan)(?:s|ed)? to|(?:scheduled|about|due|set) to|evaluat\w*"
    r"|(?:is|are|am) (?:moving|switching|migrating|changing|relocating|replacing|retiring|dropping|handing"
    r"|stepping|removing|stopping|upgrading))\b"
)
# "The office closed early today", "the cache was wiped this morning": an event, not a standing change.
_ONE_OFF = re.compile(r"\b(?:today|tonight|yesterday|this (?:morning|afternoon|evening)|last night|for now"
                      r"|temporarily|for the day|until further notice)\b")
# "The CLI is also distributed via Scoop": an addition next to the old value, never a replacement.
_ADDITIVE = re.compile(r"\b(also|too|as well|in addition|additionally)\b")
# "about 10 minutes" is approximate; "the ticket about the leaked token" is not.
_APPROX = re.compile(r"~|\b(about|around|roughly|approximately|approx)\b(?= ?~?\d| (?:a|an|one|two|three|four|five|"
                     r"six|seven|eight|nine|ten|twelve|twenty|thirty|fifty|a hundred|half|a dozen)\b)")
# Markers whose words are removed from the new text before comparing (they carry no subject).
_REPLACE = re.compile(
    r"\b(now|from now on|going forward|switch(ed|ing)?|mov(e|ed|ing)|relocat(ed|e|ing)|migrat(ed|e|ing)"
    r"|replac(ed|e|ing)|instead|rather than|chang(ed|e)( their mind)?|renamed|upgraded|downgraded|bumped"
    r"|rewritten|rewrote|took over|in favou?r of|passed(?= from)|tak(?:en|es) off|took off|transferred(?= to))\b"
)
# "We moved standup to 9:00": what the verb moves ("standup") must be something the old text is about.
# "now" alone says what holds at present, not that something else stopped holding: on a relation that
# holds several values ("the data team now uses Airflow") it is no replacement.
_PRESENT_ONLY = frozenset({"now", "from now on", "going forward"})
# Relations a subject can hold several values of at once (stems): "the platform team maintains the
# Helm charts" and "... the Terraform modules" are both true. A new value of one is an addition
# unless a change marker says otherwise, or the text names a role the value fills ("uses Vite as its
# bundler", "uses dbt for transformations"): a role is filled by one value.
_MULTI_VALUED = frozenset(
    "use used own owned maintain support speak know like love enjoy work contribute depend include includ "
    "contain manage manag accept integrate read follow play visit attend learn study collect pin host "
    "review mentor teach lead subscribe sponsor talk pull fetch import consume volunteer approve".split()
)
_ROLE = re.compile(r"\b(for|as)\b")
# Clauses of one memory: "Deploys go through blue-green on Fly; never restart the DB in business hours".
_CLAUSE_SPLIT = re.compile(r";|\.\s+|\s[-\u2013\u2014]+\s")
# A clause opening with one of these continues the previous one ("...; they go to Loki").
_ANAPHORA = frozenset("it they this that these those which he she its their there".split())
_CHANGED_OBJECT = re.compile(
    r"\b(?:switched|moved|migrated|changed|bumped|upgraded|downgraded|renamed)"
    r" (?P<obj>.+?) (?:to|from)\b"
)
_PREFER_OVER = re.compile(r"\bprefer\w* .+ over ")  # "prefer pytest-mock over unittest.mock"
# Retiring verbs: what they name has stopped holding ("Luigi was retired", "the account was cancelled",
# "stepped down as chair", "the Jenkins server was shut down").
_RETIRE = re.compile(
    r"\b(no longer|anymore|any more|stopped|dropped|removed|deprecated|(?:is|are|was|were) gone"
    # "are deleted after merge", "is closed on Sundays": a standing rule or state, not an event
    r"|(?<!\bis )(?<!\bare )(?<!\bbe )(?<!\bnot )(?<!\bnever )"
    r"(?:retired|cancell?ed|closed(?: down)?|resolved|deleted|shut down|decommissioned|discontinued|sunset(?:ted)?"
    r"|archived|abandoned|scrapped|disbanded|step(?:s|ped)? down|ditched|phased out|got rid of|killed"
    r"|uninstalled|terminated|revoked|unsubscribed|withdrawn)|(?:switched|turned) off)\b"
)
# "instead of X", "rather than X", "from X to Y", "replaced X with Y", "prefer Y over X": X is the
# old value the new text names explicitly.
_NAMED_OLD = re.compile(
    r"\b(?:instead of|rather than|over) (?P<a>[^,;()]+?)(?=\.?$|[,;()]|\. | for | in | now)"
    r"|\bfrom (?P<b>[^,;]+?) to\b|\breplaced (?:the )?(?P<c>[^,;]+?)(?: (?:with|by|as)\b|(?= for | in | on |[,;]|\.?$))"
    # "Vite bundles the frontend now, not Webpack": what the present holds, then what it no longer does
    r"|\bnow,? not (?P<e>[^,;()]+?)(?=\.?$|[,;()]|\. )"
    # "moved off GCS to BuildBuddy", "was taken off the droplet and now lives on Vercel"
    r"|\b(?:mov|migrat|tak|took|switch)\w* off (?:of )?(?P<d>[^,;]+?)(?= to | onto | and |[,;]|\.?$)"
)


# "Ines handed the release call over to Tomasz": a transfer names the old holder (the giver) and the
# new one, so it reads as "the release call passed from Ines to Tomasz", which the named-old-value
# rule already knows. The giver is one word (a name, "user"); "we"/"I" name no holder.
_TRANSFER = re.compile(
    r"(?:\bthe )?(?P<giver>[^\s,;]+) (?:has |have )?(?:handed|hands|passed|passes|transferred|transfers|gave|gives)"
    r" (?!(?:from|in|out|up|away|back)\b)(?:over |on )?(?P<obj>[^,;]+?) (?:over |on |back )?to"
    r" (?P<taker>[^,;]+?)(?=[,;]|\.?$|\. )"
)
# "Chiara took over the hiring loop from Tobias": a transfer with the new holder first.
_TAKE_OVER = re.compile(
    r"(?:\bthe )?(?P<taker>[^\s,;]+) (?:has |have )?(?:took|takes|taken) over (?P<obj>[^,;]+?) from"
    r" (?P<giver>[^,;]+?)(?=[,;]|\.?$|\. )"
)
# A date that opens a statement says from when it holds: "As of 3 March, requests are triaged in
# Intercom", "Since October the critique happens on Fridays" hold now. A date later in the text
# ("moved to X in September") is left where it is.
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
          r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DATE = (rf"(?:(?:early |mid-?|late )?(?:[0-9]{{1,2}}(?:st|nd|rd|th)? )?{_MONTH}(?: [0-9]{{1,2}}(?:st|nd|rd|th)?)?"
         r"(?:,? [0-9]{4})?|q[1-4](?: [0-9]{4})?|[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{4}"
         r"|(?:this|last) (?:week|month|quarter|sprint|year)|(?:mon|tues|wednes|thurs|fri|satur|sun)day)")
_DATED = re.compile(rf"^(?:as of|since|starting(?: from)?|effective|beginning) {_DATE},? (?P<rest>.+?)(?P<end>\.?)$")
# "The model registry moved again, to Neptune": the comma does not part the verb from its value.
_COMMA_TO = re.compile(r"\b(?P<verb>(?:moved|switched|migrated|changed|went|relocated)(?: again| back)?), to\b")
# "We swapped HAProxy for Caddy": HAProxy went, Caddy came; "Flux replaced Spinnaker for deploys":
# the new value first. Both read as "replaced X with Y", which names the old value.
_SWAPPED = re.compile(r"\bswap(?:ped|s)? (?P<a>[^,;]+?) (?:for|with) (?P<b>[^,;]+?)(?= as | for | in | on |[,;]|\.?$)")
_REPLACED_BY_FIRST = re.compile(r"^(?P<b>[^\s,;]+(?: [^\s,;]+)?) (?:has )?"
                                r"(?<!was )(?<!were )(?<!been )(?<!is )(?<!are )replaced (?!by )"
                                r"(?P<a>[^\s,;]+(?: [^\s,;]+)?)"
                                r" (?P<rest>(?:for|as|in|on) .+)$")
# One spelling per unit, so "120 s" and "120 seconds" state the same value.
_UNIT = re.compile(r"\b(?P<n>[0-9]+(?:\.[0-9]+)?) ?(?P<unit>ms|msecs?|milliseconds?|s|secs?|seconds?|mins?|minutes?"
                   r"|h|hrs?|hours?|d|days?)\b(?!-)")
_UNIT_NAMES = {"ms": "milliseconds", "s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _unit_key(unit: str) -> str:
    return "ms" if unit.startswith(("ms", "milli")) else unit[0]


# "The user has lived in Faro since June", "the files have been in Figma since spring": a perfect
# tense with "since" states what holds now; the start date is no part of the value.
_SINCE = re.compile(r"\b(?:has|have)(?P<been> been)? (?P<rest>[^,;]*?) since [^,;]*?(?=[,;]|\.?$|\. )")


# "Payroll is handled by Leo now": a passive names the doer last; "Kim handles payroll" is the same
# relation with the doer first. The old text is put in the new one's voice (`_in_voice_of`).
_PASSIVE = re.compile(r"^(?:the )?(?P<obj>[^,;]+?) (?:is|are|was|were|has been|have been) "
                      r"(?P<verb>[a-z]+ed|run|led|kept|held|"
                      r"done|taken|written|built|made|paid|sent) by (?P<agent>[^,;.]+?)(?P<rest>(?: now)?[.!]?)$")
_ACTIVE = re.compile(r"^(?P<agent>[^\s,;]+(?: [^\s,;]+)?) (?P<verb>[a-z]+) (?:the )?(?P<obj>[^,;]+?)[.!]?$")


def _in_voice_of(old: str, new: str) -> str:
    """`old` ("kim handles payroll") in the passive of `new` ("payroll is handled by leo now") when
    both name the same relation and object: "payroll is handled by kim". A relation that holds several
    values ("owns", "reviews") is left as it is: another doer may be one more, not instead."""
    passive, active = _PASSIVE.match(new), _ACTIVE.match(old)
    if not passive or not active or _loose(_stem(active["verb"])) != _loose(_stem(passive["verb"])):
        return old
    if _stem(active["verb"]) in _MULTI_VALUED or _loose(_stem(active["verb"])) in _MULTI_VALUED:
        return old
    if _tokens(active["obj"]) != _tokens(passive["obj"]) or _tokens(active["agent"]) == _tokens(passive["agent"]):
        return old
    return f"{passive['obj']} is {passive['verb']} by {active['agent']}"


def _canonical(text: str) -> str:
    """A normalised text with transfers, dated and perfect-tense "since" statements and units rewritten
    into the forms the change rules read: "a handed x over to b" and "b took over x from a" -> "x
    passed from a to b"; "has lived in y since june" and "since june, they live in y" -> "now ...";
    "as of 3 march, x is y" -> "x is y now"; "moved again, to y" -> "moved again to y"; "120 s" ->
    "120 seconds"."""
    text = _TRANSFER.sub(lambda m: f"{m['obj']} passed from {m['giver']} to {m['taker']}", text)
    text = _TAKE_OVER.sub(lambda m: f"{m['obj']} passed from {m['giver']} to {m['taker']}", text)
    text = _DATED.sub(lambda m: f"{m['rest']} now{m['end']}", text)
    text = _SWAPPED.sub(lambda m: f"replaced {m['a']} with {m['b']}", text)
    text = _REPLACED_BY_FIRST.sub(lambda m: f"we replaced {m['a']} with {m['b']} {m['rest']}", text)
    text = _COMMA_TO.sub(r"\g<verb> to", text)
    text = _UNIT.sub(lambda m: f"{m['n']} {_UNIT_NAMES[_unit_key(m['unit'])]}", text)
    return _SINCE.sub(lambda m: f"now{m['been'] or ''} {m['rest']}", text)


def _loose(token: str) -> str:
    """A token without the inflection the stemmer keeps: "live"/"lived", "own"/"owned" compare equal."""
    return re.sub(r"(?:es|ed|e|d|s)$", "", token) if len(token) > 3 and token.isalpha() else token


def _root(token: str) -> str:
    """A token without a noun suffix -ment(s) and loose inflection: "moved deployment" changes what
    "we deploy with Heroku" states."""
    return _loose(re.sub(r"ments?$", "", token)) if len(token) > 7 and token.isalpha() else _loose(token)


def _named(text: str) -> re.Match[str] | None:
    """The first "instead of X" / "from X to Y" / ... of `text` (see _NAMED_OLD). "over X" counts only
    after "prefer": "flashed over USB" and "over the air" name a channel, not a replaced value."""
    return next((m for m in _NAMED_OLD.finditer(text) if not _plain_over(text, m)), None)


def _plain_over(text: str, match: re.Match[str]) -> bool:
    return match.group().startswith("over ") and not re.search(r"\bprefer", text[:match.start()])


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """Crude suffix stripping so 'deploys'/'deployed'/'deploy' and 'lives'/'live' compare equal."""
    if not word.isalpha() or len(word) < 4:
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) >= 6 and word.endswith(("ing", "ed")):
        word = word[:-3] if word.endswith("ing") else word[:-2]
        return word[:-1] if len(word) > 2 and word[-1] == word[-2] else word
    if word.endswith(("oes", "shes", "ches", "xes", "sses")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _tokens(text: str) -> list[str]:
    # "the user's editor" and "their editor" name the same editor: a possessive 's is no word of its own.
    return [_stem(t[:-2] if t.endswith("'s") else t) for t in _TOKEN.findall(text) if t not in _DROPPED]


def _analyse(text: str) -> tuple[list[str], list[int]]:
    """Raw words of `text` (with ":" where a colon ends a word) and, for each of `_tokens(text)`, the
    index of the raw word it came from."""
    raw = _WORD_OR_COLON.findall(text)
    return raw, [i for i, w in enumerate(raw) if w != ":" and w not in _DROPPED]


_DETERMINERS = frozenset("the a an this that these those its their our my your his her every each".split())


_PREPOSITIONS = frozenset("in at on for from with by via through into".split())


def _possessed_match(old: str, new: str) -> bool:
    """Whether every thing one text names as someone's ("the user's laptop", "the cluster's ingress")
    is named in the other too: "The user moved to Berlin" / "The user's company moved to Munich" are
    about two subjects, "the user's editor" / "their editor" about one."""
    old_words, new_words = set(_tokens(old)), set(_tokens(new))
    for text, other in ((old, new_words), (new, old_words)):
        words = _TOKEN.findall(text)
        for i, word in enumerate(words[:-1]):
            if word.endswith("'s") and words[i + 1] not in _DROPPED and _stem(words[i + 1]) not in other:
                return False
    return True


def _persons(text: str) -> frozenset[str]:
    """Who the text is about: 'self' for I/the user, 'rel:<noun>' for 'my sister', 'their colleague'."""
    words = _TOKEN.findall(text)
    found = set()
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        if word in _POSSESSIVES and following in _RELATIONS:
            found.add("rel:" + following)
        elif word in _SELF:
            found.add("self")
    return frozenset(found)


def _subject_words(tokens: list[str]) -> set[str]:
    return {t for t in tokens if t not in _GENERIC}


def _dice(a: set[str], b: set[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 1.0


def subject_overlap(a: str, b: str) -> float:
    """Dice overlap (0..1) of the subject words of two texts: their tokens (normalised, stemmed)
    without grammar words. How close two texts are when no embedding says it."""
    return _dice(_subject_words(_tokens(_plain(a))), _subject_words(_tokens(_plain(b))))


def names_old_value(text: str) -> bool:
    """Whether `text` names the value it replaces ("from X to Y", "instead of X", "replaced X with")."""
    return bool(_named(_canonical(normalise(text))))


def _has_marker(new: str) -> bool:
    return any(marker.search(new) for marker in (_REPLACE, _PREFER_OVER, _RETIRE))


# Verbs that say a setting was changed ("raised to 300", "pushed to Oct 17", "scaled to 12", "was set
# to 75"): kin of "changed to", explicit enough to retire the old value on their own.
_CHANGED_TO = re.compile(
    r"\b(?:raised|lowered|increased|decreased|reduced|extended|shortened|pushed(?: back)?|brought forward"
    r"|scaled(?: up| down)?|cut|doubled|halved|tightened|relaxed|expanded|grew|shrank|went (?:up|down)"
    r"|(?:was|were|has been|got) set)(?: it)? to\b"
    # A state flipped back or restored ("enabled again", "resumed", "re-enabled", "unblocked"), and a
    # holder who left ("Olu left; the team lead is Ben").
    r"|\b(?:again|resumed|re-?enabled|re-?opened|restored|unblocked|(?:was|were|got|has been) fixed)\b"
    r"|\bleft(?=[;,.]|$)"
)


def states_change(text: str) -> bool:
    """Whether `text` says in words that something changed: "now", "moved from A to B", "switched
    to", "instead of", "no longer", "replaced by", "retired", "took over", "as of March", "raised to"
    and their kin. Automatic retirement needs it: a text that only looks like another value of an old
    memory's template ("The SDK is published to PyPI" after "... to npm") may be an addition, so it
    is left for the writer (or the user) to judge, never retired without this."""
    canonical = _canonical(normalise(text))
    named = _named(canonical)
    # "prefers written docs over meetings" compares two things; it changes nothing.
    named = named if named is not None and not named.group().startswith("over ") else None
    return bool(_REPLACE.search(canonical) or _RETIRE.search(canonical) or named or _CHANGED_TO.search(canonical))


def _is_change_statement(text: str) -> bool:
    return bool(_REPLACE.search(text) or _RETIRE.search(text) or _named(text))


def _state(text: str) -> str:
    """What a change statement says holds now: its markers and the old value it names are left out.

    'we moved ci from travis to circleci' -> 'we ci to circleci'. A chain's next step is compared with
    this, so a memory that records a move can itself be retired by the next move."""
    def drop_named(match: re.Match[str]) -> str:
        if _plain_over(text, match):
            return match.group()
        return " to" if match.group("b") is not None else " "

    # Markers first: "passed" is one only before "from", which the named value's removal takes away.
    text = _REPLACE.sub(lambda m: " " if m.group() != "over" else m.group(), text)
    return _NAMED_OLD.sub(drop_named, text)


def _clauses(text: str) -> list[str]:
    """The clauses of `text`: split at ";", a sentence end or a dash, and at a comma between two
    independent clauses (`_comma_clauses`)."""
    parts = [p for c in _CLAUSE_SPLIT.split(text) for p in _comma_clauses(c)]
    return [c.strip(" .!") for c in parts if c.strip(" .!")]


# Words opening a part of a sentence that is not a clause of its own: a subordinate clause ("when
# the build fails, ..."), a relative one (", which ..."), a coordinated one (", and ...": `_and_split`).
_OBJECTS = frozenset("it them him her me us you up down out".split())  # after an imperative verb
_NOT_INDEPENDENT = frozenset(
    "if when whenever because although though since after before unless until while whereas once as where "
    "so but and or nor then which who whose whom what".split()
)


def _comma_clauses(clause: str) -> list[str]:
    """`clause` split at each comma between two independent clauses, each with its own subject and
    verb ("courier builds run on bitrise, signing keys live in infisical": two facts, issue 31). A
    list ("postgres, redis and kafka"), a subordinate clause ("when the build fails, the bot pings
    #ci"), a relative one and a comma inside parentheses ("requests (laptops, monitors) go to ...")
    stay whole."""
    pieces = clause.split(", ")
    out = [pieces[0]]
    for piece in pieces[1:]:
        if out[-1].count("(") == out[-1].count(")") and _independent(out[-1]) and _independent(piece):
            out.append(piece)
        else:
            out[-1] += ", " + piece
    return out


def _independent(part: str) -> bool:
    """Whether `part` (lower case) reads as a clause of its own: at least three words, opening with a
    subject (not a preposition, a subordinating word or a verb with its object, "deploy the app")
    followed by a verb (`_subject_of`); "release notes live in notion" opens with a noun."""
    words = _TOKEN.findall(part)
    if len(words) < 3 or words[0] in _NOT_INDEPENDENT or words[0] in _PREPOSITIONS or words[0] in _ANAPHORA:
        return False
    if _verb_form(words[0]) and (words[1] in _DETERMINERS or words[1] in _PREPOSITIONS or words[1] in _OBJECTS):
        return False
    return bool(_subject_of(part))



def _subject_of(clause: str) -> str:
    """The words of a clause before its verb: its first copula, else its first verb form ("the
    geocoder" of "the geocoder uses nominatim", "release notes" of "release notes are drafted ...")."""
    raw = _TOKEN.findall(clause)
    free = [i for i in range(1, len(raw)) if raw[i - 1] not in _DETERMINERS]  # "the build" is a noun
    verb = next((i for i in free if raw[i] in _COPULAS or raw[i] in _VERBS), None)
    if verb is None:
        verb = next((i for i in free if _verb_form(raw[i])), None)
    return " ".join(raw[:verb]) if verb else ""


def _and_split(clause: str) -> list[str]:
    """A clause split at each coordinating "and" whose right side opens with a verb of its own
    ("recorded in Loom and posted to #demos", "caches menus and syncs orders"); "Tuesday and
    Thursday", "the pipeline and the ETL jobs" stay whole. The first part holds the shared subject."""
    parts = re.split(r",? and (?:then |also )?", clause)
    out = [parts[0]]
    for part in parts[1:]:
        words = _TOKEN.findall(part)
        if len(words) >= 2 and _verb_form(words[0]):
            out.append(part)
        else:
            out[-1] += " and " + part
    return out


def _verb_form(word: str) -> bool:
    """Whether a lower-case word reads as a finite verb or participle: a known verb, an -ed form, or
    the -s form of a known verb ("syncs", "takes"); "jenkins", "redis", "docs" are not."""
    if word in _VERBS or (len(word) >= 5 and word.endswith("ed")):
        return True
    # Any -s word: a noun read as a verb only splits off a part the new text must then touch, which
    # can turn a change into a conflict for review, never the reverse.
    return len(word) >= 4 and word.isalpha() and word.endswith("s") and not word.endswith(("ss", "us", "is"))


def _news(marker: re.Pattern[str], old: str, new: str) -> str | None:
    """The first marker of the new text that the old one lacks ("we now use X" makes "now" old news)."""
    already = {m.group() for m in marker.finditer(old)}
    return next((m.group() for m in marker.finditer(new) if m.group() not in already), None)
