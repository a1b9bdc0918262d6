"""Text normalisation and the keyword side's tokens: index text and FTS5 queries.

FTS5's `unicode61` tokenizer splits on anything that is not a letter or digit and keeps a run of
Chinese, Japanese or Korean characters as one token, so a two-character word inside a sentence
written without spaces would never match. Runs of those scripts are therefore rewritten, both in
the index and in queries, as overlapping character bigrams (the standard CJK approach of Lucene's
CJKBigramFilter) followed by their unigrams; a query run becomes the OR of its bigrams.

A query is never FTS5 syntax: every term is emitted as a double-quoted phrase of its sub-tokens, so
quotes, AND/OR/NOT/NEAR, `*`, `:`, `^` and parentheses are searched as text, and a term with
punctuation inside (`pre-commit`, `GB/s`, `node:fs`) becomes the phrase of its parts, which is
exactly how the indexed text was tokenized.

Query formation for English drops stopwords (function words carry no topic) and, optionally, clitics:
`Melanie's` is searched as `melanie`, `we'll` as `we`, like Lucene's EnglishPossessiveFilter, so a
possessive in a question matches the plain name in a memory. `n't` is kept (`don't` stays a phrase):
its stem is not a word.
"""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher
from functools import lru_cache

# Han, Hiragana, Katakana (and phonetic extensions), Hangul syllables and jamo, CJK compatibility.
CJK_CHARS = _CJK = (
    "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002fa1f"
)
_CJK_RUN = re.compile(f"[{_CJK}]+")
_CJK_SPLIT = re.compile(f"([{_CJK}]+)")
_HIRAGANA_RUN = re.compile("[\u3040-\u309f]+")
# What unicode61 treats as token characters: letters, digits, and marks (remove_diacritics handles
# accents). Everything else separates tokens.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SPACE = re.compile(r"\s+")
# A word with apostrophes inside (don't, O'Brien, rock'n'roll), maybe with punctuation around it.
_APOSTROPHE_WORD = re.compile(r"\W*[^\W_]+(?:['\u2019][^\W_]+)+\W*")
# What separates query terms: whitespace, brackets, quotes and sentence punctuation. Other
# punctuation (- / : . _ + @ # ') joins the parts of one term: `pre-commit`, `node:fs`, `GB/s`.
_TERM_SEP = re.compile(r"[\s()\[\]{}<>\"\u201c\u201d\u00ab\u00bb,;!?]+")
# An English clitic after a letter or digit, at the end of a word: 's, 're, 've, 'll, 'd, 'm.
_CLITIC = re.compile(r"(?<=[^\W_])['\u2019](?:s|re|ve|ll|d|m)(?![^\W_])", re.IGNORECASE)

# Function words that carry no topic; dropped from OR queries (a query of nothing else has no keyword side).
# The list is the common core of the SMART and Lucene English stop lists.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had
    has have having he her here hers herself him himself his how i if in into is it its itself just
    me more most my myself no nor not of off on once only or other our ours ourselves out over own
    same she should so some such than that the their theirs them themselves then there these they
    this those through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves s t d ll m re ve y ok okay hey hi""".split()
)


# Characters that show nothing on their own: whitespace, control and format characters (zero-width
# space, BOM, word joiner, soft hyphen...), lone combining marks, surrogates, and the letters that
# Unicode lists as default-ignorable fillers (Hangul fillers, braille blank).
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp", "Mn", "Me"})
_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def is_blank(text: str) -> bool:
    """Whether `text` has no visible character: only whitespace, format characters (U+200B, U+FEFF,
    U+2060 ...), control characters and the like. Such a text says nothing, so it is empty."""
    return all(c.isspace() or c in _INVISIBLE_LETTERS or unicodedata.category(c) in _INVISIBLE_CATEGORIES
               for c in text)


def lone_surrogate(text: str) -> int | None:
    """The index of the first lone surrogate in `text` (not valid Unicode, cannot be stored as UTF-8:
    what Python makes of undecodable bytes), or None."""
    for index, c in enumerate(text):
        if "\ud800" <= c <= "\udfff":
            return index
    return None


def normalise(text: str) -> str:
    """Unicode NFC, casefold and collapsed whitespace: the key for exact duplicates and subjects."""
    return _SPACE.sub(" ", unicodedata.normalize("NFC", text).casefold()).strip()


# Punctuation that frames or ends words without being part of them: quotes, backticks, brackets and
# emphasis anywhere (an apostrophe only outside a word: don't, O'Brien stay), sentence punctuation
# before a space or the end (3.11, node:fs, e.g. stay), and a dash standing alone between words.
_FRAMING = re.compile(r"[\"`\u201c\u201d\u2018\u00ab\u00bb()\[\]{}*]|(?<![^\W_])['\u2019]|['\u2019](?![^\W_])")
_TRAILING = re.compile(r"[.,;:!?\u2026\u3002\uff01\uff1f\uff0c\u3001]+(?=\s|$)")
_LONE_DASH = re.compile(r"(?<!\S)[-\u2013\u2014]+(?!\S)")


def duplicate_key(text: str) -> str:
    """`normalise(text)` without the punctuation that does not change what it says: "Run the linter
    before pushing." and "run the linter before pushing" have one key; "C++" and "C", "3.11" and
    "311", ".env" and "env" do not. Texts with one key are the same memory."""
    text = _LONE_DASH.sub(" ", _TRAILING.sub("", _FRAMING.sub(" ", normalise(text))))
    return _SPACE.sub(" ", text).strip()


def _cjk_tokens(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    bigrams = [run[i : i + 2] for i in range(len(run) - 1)]
    return bigrams + list(run)


def index_text(text: str) -> str:
    """The text FTS5 indexes: the original, with CJK runs rewritten as bigrams then unigrams."""
    text = unicodedata.normalize("NFC", text)
    return _CJK_RUN.sub(lambda m: " " + " ".join(_cjk_tokens(m.group())) + " ", text)


def _quote(tokens: list[str]) -> str:
    return '"' + " ".join(t.replace('"', '""') for t in tokens) + '"'


def _terms(query: str, strip_clitics: bool) -> list[tuple[list[str], bool]]:
    """query_terms, each with whether it is a compound whose parts are words of their own."""
    terms: list[tuple[list[str], bool]] = []
    for chunk in _TERM_SEP.split(unicodedata.normalize("NFC", query)):
        if strip_clitics:
            chunk = _CLITIC.sub("", chunk)
        pieces: list[str] = []
        for part in _CJK_RUN.split(chunk):
            pieces.extend(_WORD.findall(part))
        # Each bigram of a CJK run is its own term: a question written without spaces then matches
        # a memory that shares any of its words, and BM25 ranks those sharing more of them higher.
        for run in _CJK_RUN.findall(chunk):
            terms.extend(([b], False) for b in _cjk_tokens(run)[: max(1, len(run) - 1)])
        if pieces:
            # `pre-commit`, `node:fs` are compounds; `don't`, `O'Brien` are single words.
            compound = len(pieces) > 1 and not _APOSTROPHE_WORD.fullmatch(chunk)
            terms.append(([p.casefold() for p in pieces], compound))
    return terms


def query_terms(query: str, *, strip_clitics: bool = False) -> list[list[str]]:
    """Split a free-text query into terms, each a list of sub-tokens searched as one phrase.

    `pre-commit` -> [["pre", "commit"]]; `東京に行った` -> [["東京"], ["京に"], ["に行"], ["行っ"], ["った"]].
    strip_clitics: `Melanie's` -> [["melanie"]] instead of [["melanie", "s"]].
    """
    return [tokens for tokens, _ in _terms(query, strip_clitics)]


def fts_query(query: str, *, drop_stopwords: bool = True, strip_clitics: bool = True) -> str | None:
    """An FTS5 MATCH expression: the OR of the query's terms, each a quoted phrase.

    A compound term (`pre-commit`, `node:fs`) is sent as its phrase and as each part of two or more
    characters, so the exact form ranks first and a memory with only some of its parts is still
    found. Stopwords are dropped (drop_stopwords) and clitics stripped. Duplicates are sent once.
    Returns None when no term is left: a query of only stopwords (`the of and`) has no keyword side,
    since matching "the" would return every memory that contains it; recall then relies on the
    vector side alone, under its relevance floor.
    """
    phrases: list[str] = []
    for tokens, compound in _terms(query, strip_clitics):
        parts = [[p] for p in tokens if len(p) > 1] if compound else []
        phrases += [_quote(t) for t in [tokens, *parts]
                    if not (drop_stopwords and len(t) == 1 and t[0] in STOPWORDS)]
    return " OR ".join(dict.fromkeys(phrases)) if phrases else None


# Chinese function words that a question shares with any statement ("how", "should", "can", "this");
# dropped from content words like English stopwords. Only whole bigrams are listed.
CJK_STOPWORDS = frozenset(
    """怎么 怎样 什么 如何 为何 应该 可以 需要 是否 能否 一下 一个 这个 那个 哪个 哪里 我们 你们 他们
    还是 或者 以及 因为 所以 如果 但是 就是 还有 已经 没有 为什""".split()
)


def _cjk_content(run: str) -> list[str]:
    """Content tokens of a CJK run: in Japanese, hiragana are mostly particles and inflections
    (は, の, で, する, ください) and the content words are the kanji/katakana stretches between them,
    so each stretch is bigrammed on its own (a one-character stretch is kept whole: 書く -> 書);
    Chinese (no hiragana) and Korean runs are bigrammed whole."""
    tokens: list[str] = []
    for part in _HIRAGANA_RUN.split(run):
        if part:
            tokens += [part] if len(part) == 1 else [part[i : i + 2] for i in range(len(part) - 1)]
    return [t for t in tokens if t not in CJK_STOPWORDS]


def content_words(text: str) -> list[str]:
    """Lower-cased words of `text` without stopwords, in order; CJK runs give the bigrams of their
    content stretches (`_cjk_content`): `Storybook はどのポートで起動する` -> storybook, ポー, ート, 起動.

    These are what the per-prompt gate counts as shared words (BM25 keeps every bigram: text.index_text)."""
    words: list[str] = []
    # split with a group: even items are the text between CJK runs, odd items the runs
    for i, chunk in enumerate(_CJK_SPLIT.split(unicodedata.normalize("NFC", text))):
        if i % 2:
            words += _cjk_content(chunk)
        else:
            # query_terms' words of a chunk without CJK, in one findall: its separators (_TERM_SEP)
            # are no word characters, so its terms' pieces are _WORD's matches in order. A memory
            # seen for the first time in the warm process is stemmed through here (stem_text).
            words += [w for w in map(str.casefold, _WORD.findall(unicodedata.normalize("NFC", chunk)))
                      if w not in STOPWORDS]
    return words


APPLIES_PREFIX = "Applies when: "


def passage(text: str, applies_when: tuple[str, ...] | list[str] = ()) -> str:
    """A memory as it is embedded and matched by the prompt gate: its text, and on a second line its
    applies-when phrases ("Applies when: fixing a flaky test; changing CI"); the text alone without them."""
    if not applies_when:
        return text
    return f"{text}\n{APPLIES_PREFIX}{'; '.join(applies_when)}"


FORGOTTEN = "[forgotten]"


def without_text(value: object, text: str) -> object:
    """`value` (JSON: str, list, dict, numbers) with every occurrence of `text` replaced by
    FORGOTTEN, at any depth: what a review proposal carries of a memory that was then forgotten."""
    if isinstance(value, str):
        return value.replace(text, FORGOTTEN) if text and text in value else value
    if isinstance(value, list):
        return [without_text(v, text) for v in value]
    if isinstance(value, dict):
        return {k: without_text(v, text) for k, v in value.items()}
    return value


def forgotten_subject(subject: str | None, text: str) -> str | None:
    """A proposal's subject after a source memory's `text` is forgotten: a subject taken from that
    text's words (review.subject_of uses the first words, or shared content words) goes too."""
    if not subject:
        return subject
    words = set(content_words(subject))
    if subject in text or normalise(subject) in normalise(text) or (words and words <= set(content_words(text))):
        return FORGOTTEN
    return subject


def stems(text: str) -> set[str]:
    """Snowball (Porter 2) stems of the content words of `text`: "Deploys" and "deploy" share one."""
    return set(stem_text(text))


@lru_cache(maxsize=32768)
def stem_text(text: str) -> frozenset[str]:
    # Memories recur across prompts in the warm process (every recall candidate is stemmed for its
    # evidence score); a miss costs ~0.2 ms, an entry ~0.5 KB: 32k entries cover a 10k-memory store.
    return frozenset(stem_word(word) for word in content_words(text))


@lru_cache(maxsize=65536)
def stem_word(word: str) -> str:
    # Memories are many and varied but their words are few: cached per word, a text seen for the
    # first time is stemmed from the cache too (measured: stemming was half of a warm prompt's
    # recall at 10,000 memories). A stemmer per call: the stemmer keeps state while it works.
    import snowballstemmer

    return snowballstemmer.stemmer("english").stemWord(word)


def swapped_spans(old_text: str, new_text: str) -> int:
    """How many content words `new_text` swaps one for one in `old_text`'s frame, when nothing else
    differs and at least half of the words are the same, in order: "The redis component is owned by
    team 1" / "The billing component is owned by team 2" -> 2 (another fact in one template), "Prefer
    small PRs" / "Prefer large PRs" -> 1 (another value of one thing); 0 when the texts are not one
    frame filled twice: words added or dropped ("Run the linter before every push" / "Please run the
    linter before pushing") or a phrase reworded ("tests run against a real PostgreSQL, never SQLite"
    / "tests must use a real PostgreSQL instead of SQLite")."""
    old = [stem_word(w) for w in content_words(old_text)]
    new = [stem_word(w) for w in content_words(new_text)]
    ops = SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes()
    if any(tag != "equal" and (tag != "replace" or i2 - i1 != 1 or j2 - j1 != 1) for tag, i1, i2, j1, j2 in ops):
        return 0
    same = sum(i2 - i1 for tag, i1, i2, _j1, _j2 in ops if tag == "equal")
    if 2 * same < max(len(old), len(new)):
        return 0
    return sum(tag == "replace" for tag, *_ in ops)
