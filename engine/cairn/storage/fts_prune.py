"""Top-k BM25 over FTS5 without scoring every match: the rarest words first.

FTS5 answers `MATCH '"a" OR "b" ...' ORDER BY bm25(...) LIMIT k` by scoring every row that holds any
of the words: about 1 us a row, so a query whose common words are in 100,000 captured turns takes
over 100 ms whatever k is. BM25 is a sum over the query's phrases, each phrase's IDF computed from the
whole table (FTS5's fts5Bm25Function), so a row's score does not depend on which other phrases the
expression holds, and `(E) AND (R)` scores its rows exactly as `E OR R` would: the phrases of R that a
row lacks add nothing, those it holds add what they add in the OR.

`rare_first` splits the query's phrases into E, the rarest, taken while their document frequencies
add up to at most `budget`, and R, the rest; the rows holding some word of E are then ranked exactly,
and a row holding only common words is not scored. The top k of the rows holding E is the top k of
the union of `E`'s top k (a row lacking R's words scores there what it scores in the OR) and
`(E) AND (R)`'s top k, each row at its higher score: a row above another by its E words alone is
above it in the OR too, so a row of the true top k lacking R's words is within `E`'s top k. `E` alone
also spares FTS5 the IDF of R's common phrases (it counts every row holding each phrase of a query).

A row holding R's words and none of E's scores at most (k1 + 1) x the sum of R's IDFs (k1 = 1.2,
FTS5's), so it can only rank among the k best when the query has few rare words and k is large: on
the year-scale bench's store (bench/year_scale.py, 200,000 turns) the top 10 of 200 queries agree with
FTS5's full ranking at 0.999 and the top 50 at 0.997 (docs/benchmarks.md, issue 33). Phrases held by
more than half the rows are left out of R: FTS5 clamps their IDF to 1e-6, so they only break ties.

Used above `budget` matches only: a query whose words are in at most `budget` rows in all is sent
unchanged, so small stores rank exactly as before. A process that holds the postings
(fts_postings.py, `hold_vectors`: the warm process, the MCP server) scores every match exactly from
them instead; this is the path of a process that searches once (the CLI without the warm process).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PRUNE_POSTINGS = 10_000
"""Document frequencies (summed over the query's phrases) above which the query is split: about
10 ms of FTS5 scoring on the bench machine (docs/benchmarks.md, issue 33)."""

_PHRASE = re.compile(r'"(?:[^"]|"")*"')


def phrases_of(match: str) -> list[str] | None:
    """The quoted phrases of `match` when it is an OR of quoted phrases (as text.fts_query writes
    it: '"a" OR "b c"'), else None (any other FTS5 expression is run as it is)."""
    found = _PHRASE.findall(match)
    return found if found and " OR ".join(found) == match else None


def rare_first(match: str, total: int, counts: Mapping[str, int], limit: int,
               budget: int | None = None) -> list[str]:
    """The MATCH expressions whose rows, each scored by FTS5's bm25 and merged, give the top k for
    `match` (see the module docstring): [match] itself when it is not an OR of phrases, when its
    phrases' document frequencies add up to at most `budget`, or when it has a single phrase; else
    ['E', '(E) AND (R)'] (merge their top k, each row at its best score), or ['E'] when no phrase
    is left for R. total: the rows indexed;
    counts: {phrase: rows holding it} for every phrase of `match` (a missing one counts as 0);
    limit: the k asked for (E takes phrases past the budget until it holds at least that many
    postings; the caller runs `match` itself when the rows found are still fewer). budget: default
    PRUNE_POSTINGS, read at each call (bench/year_scale.py --ab sets it out of reach)."""
    budget = PRUNE_POSTINGS if budget is None else budget
    phrases = phrases_of(match)
    if phrases is None or len(phrases) < 2:
        return [match]
    df = {p: int(counts.get(p, 0)) for p in phrases}
    if sum(df.values()) <= budget:
        return [match]
    held = sorted((p for p in phrases if df[p] > 0), key=lambda p: (df[p], phrases.index(p)))
    if not held:
        return [match]
    rare, postings = [held[0]], df[held[0]]
    for phrase in held[1:]:
        if postings + df[phrase] > budget and postings >= limit:
            break
        rare.append(phrase)
        postings += df[phrase]
    common = [p for p in held[len(rare):] if df[p] <= total / 2]
    e = " OR ".join(rare)
    if not common:
        return [e]
    r = " OR ".join(common)
    return [e, f"({e}) AND ({r})"]
